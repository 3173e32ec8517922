"""Peak memory of loading a bf16 Llama-family folder as float32, against one float32 copy (issue 12).

Writes a random-weight folder of the Qwen2.5-0.5B shape in bf16 (model.random_folder, one file or
--shard-mb shards) to a temporary folder, then loads it with inferlab.model.checkpoints.load_model
in a fresh Python process and reports, for that process:
  tracemalloc peak   bytes Python and numpy allocated at the worst moment of the load
  peak_rss           the process's peak resident set, VmHWM of /proc/self/status (ru_maxrss would
                     carry over the parent's peak across fork and exec); it includes the
                     interpreter and numpy, measured alone the same way as `baseline_rss`
both divided by the float32 weights' bytes (the one copy the model must hold).

    python benchmarks/load_llama_memory.py --out benchmarks/results/load_llama_memory [--force] [--shard-mb 300]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

from inferlab.cli.common import add_lab_arguments, parse_out_args, positive_int, print_json
from inferlab.errors import InferlabError
from inferlab.measure.artifacts import ExperimentWriter, build_manifest
from inferlab.model.random_folder import QWEN25_05B, write_random_folder

EXPERIMENT = "load-llama-memory"
# Run in a fresh process, so that nothing else this script allocated counts.
_PROBE = """
import json, sys, tracemalloc
import numpy  # imported before measuring, as by any caller of the loader
from inferlab.model.checkpoints import load_model

def peak_rss():
    for line in open("/proc/self/status"):
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) * 1024

if sys.argv[1] == "load":
    tracemalloc.start()
    model = load_model(sys.argv[2], context=256).model
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    weights = model.nbytes
else:
    peak = weights = 0
print(json.dumps({"tracemalloc_peak": peak, "weights_float32": weights, "peak_rss": peak_rss()}))
"""


def probe(*args: str) -> dict:
    done = subprocess.run([sys.executable, "-c", _PROBE, *args], capture_output=True, text=True, check=False)
    if done.returncode:
        raise InferlabError(f"the load probe failed: {done.stderr.strip().splitlines()[-1:]}")
    return json.loads(done.stdout)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_lab_arguments(p, default_out="benchmarks/results/load_llama_memory")
    p.add_argument("--shard-mb", type=positive_int, help="write shards of at most this many MB (default: one file)")
    args = parse_out_args(p, argv)
    try:
        writer = ExperimentWriter(args.out, force=args.force)
        with tempfile.TemporaryDirectory() as tmp:
            folder = write_random_folder(Path(tmp) / "qwen2.5-0.5b-shape", QWEN25_05B, dtype="bfloat16",
                                         max_shard_bytes=args.shard_mb and args.shard_mb * 1_000_000)
            files = sorted(f.name for f in folder.iterdir())
            file_bytes = sum(f.stat().st_size for f in folder.glob("*.safetensors"))
            base = probe("baseline")
            load = probe("load", str(folder))
        w = load["weights_float32"]
        result = {"files": files, "bf16_file_bytes": file_bytes, **load, "baseline_rss": base["peak_rss"],
                  "tracemalloc_peak_over_weights": load["tracemalloc_peak"] / w,
                  "rss_over_weights": load["peak_rss"] / w,
                  "rss_minus_baseline_over_weights": (load["peak_rss"] - base["peak_rss"]) / w}
        config = {"shape": "Qwen2.5-0.5B", "dtype": "bfloat16", "shard_mb": args.shard_mb}
        results = {"schema_version": 1, "experiment": EXPERIMENT, "config": config, **result}
        writer.add_json("results.json", results)
        writer.add_json("manifest.json", build_manifest(experiment=EXPERIMENT, seed=0, config=config, depends_on=None,
                                                        results_summary=result, threads=args.threads))
        writer.commit()
    except InferlabError as exc:
        print(f"load_llama_memory: error: {exc}", file=sys.stderr)
        return 2
    if args.json:
        print_json(results)
    else:
        n_weight_files = sum(f.endswith(".safetensors") for f in files)
        print(f"float32 weights {w / 1e9:.3f} GB (from {file_bytes / 1e9:.3f} GB of bf16 in {n_weight_files} file(s))")
        print(f"tracemalloc peak {load['tracemalloc_peak'] / 1e9:.3f} GB = {result['tracemalloc_peak_over_weights']:.3f}x; "
              f"peak RSS {load['peak_rss'] / 1e9:.3f} GB = {result['rss_over_weights']:.3f}x "
              f"({result['rss_minus_baseline_over_weights']:.3f}x above a bare interpreter)")
        print(f"wrote {args.out}/")
    return 0


if __name__ == "__main__":
    sys.exit(main())
