"""Lab 01-roofline: this machine's ceilings (seed 001's "Phase 1" roofline, beta_peak and pi_peak).

Composes inferlab.roofline into one experiment folder: bench.py (reproduces the measurement),
results.json, manifest.json, roofline.png, sweep.png and a README.md written from the run's own
numbers. When benchmarks/likwid_compare.py has written its folder next to this one
(LIKWID_EXPERIMENT), the README quotes its ratios.
"""

from __future__ import annotations

from pathlib import Path

from inferlab.labs import Lab, LabOptions, add_report
from inferlab.labs.roofline_report import render
from inferlab.measure import ExperimentWriter, build_manifest
from inferlab.roofline import EXPERIMENT, RooflineConfig, run_roofline


def summary(results: dict) -> dict:
    """results_summary of the manifest: the numbers other labs read first."""
    ridge = results["ridge"]
    t = str(ridge["threads"])
    return {"ridge_point_flop_per_byte": results["ridge_point_flop_per_byte"],
            "ridge_p10_p90": [ridge["p10"], ridge["p90"]],
            "ridge_threads": ridge["threads"],
            "ridge_bound": ridge["bound"],   # "lower": the triad below is an upper bound of DRAM's
            "dram_triad_GBps_median": ridge["bandwidth_GBps"],
            "llc_sweep_bytes": results["llc"]["sweep_bytes"],
            "dram_copy_GBps_median": results["bandwidth_GBps"]["copy"][t]["median"],
            "float32_GEMM_GFLOPS_median": results["peak_GFLOPS"]["float32"][t]["median"],
            "float64_GEMM_GFLOPS_median": results["peak_GFLOPS"]["float64"][t]["median"],
            "cache_roofs_GBps_1_thread": results["cache_roofs_GBps"],
            "wide_ceilings": results["wide_ceilings"]}


def write_roofline(config: RooflineConfig, out: Path, *, force: bool, seed: int = 0) -> dict:
    """Measure and publish experiments/01-roofline; returns the results dict."""
    writer = ExperimentWriter(out, force=force)  # fails fast (exists, unwritable) before measuring
    results = run_roofline(config)
    manifest = build_manifest(experiment=EXPERIMENT, seed=seed, config=results["config"], depends_on=None,
                              results_summary=summary(results), threads=config.threads)
    writer.add_json("results.json", results)
    writer.add_json("manifest.json", manifest)
    add_report(writer, render(results, manifest, Path(out)))
    writer.commit()
    return results


def _run(options: LabOptions) -> dict:
    config = RooflineConfig.for_run(quick=options.quick, threads=options.threads, seed=options.seed,
                                    llc_bytes=options.llc_bytes, max_memory_bytes=options.max_memory_bytes)
    return write_roofline(config, options.out, force=options.force, seed=options.seed)


LAB = Lab(order=1, name=EXPERIMENT, title="machine roofline: STREAM bandwidth, cache roofs, GEMM peak, ridge point",
          run=_run, report=render)
