"""Reproduce experiments/15-attention-perf (seed 001) through the inferlab package.

Usage: python perf.py [OUT] [--force]      (OUT defaults to experiments/15-attention-perf)
The timed forward is inferlab.attention_perf.attention_forward_timed(x, mha): the engine's five ops
(inferlab.model.attention), each bracketed by time.perf_counter_ns.
"""
import sys
from pathlib import Path

from inferlab.attention_perf import SweepConfig
from inferlab.errors import InferlabError
from inferlab.labs.attention import AttentionLabConfig, run_attention

config = AttentionLabConfig(
    sweep=SweepConfig(T_sweep=(64, 128, 256, 512), d_model=64, n_heads=4,
                      n_kv_heads=None, qkv_bias=False,
                      samples=100, min_sample_s=0.05, seed=0),
    threads=1, all_threads=2, roofline_dir=Path('experiments/01-roofline'),
    quick=False, flash_T=(256, 512, 1024, 2048, 4096), flash_block=64,
    flash_samples=20, budget_s=30.0, model=None,
)
args = [a for a in sys.argv[1:] if a != "--force"]
out = Path(args[0]) if args else Path("experiments/15-attention-perf")
try:
    run_attention(config, out, force="--force" in sys.argv)
except InferlabError as exc:
    print(f"perf.py: error: {exc}", file=sys.stderr)
    sys.exit(2)
print(f"wrote {out}/")
