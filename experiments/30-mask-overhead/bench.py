"""Reproduce this folder's measurements through the package; prints results.json to stdout."""
import json
from pathlib import Path

from inferlab.labs.mask_overhead import MaskLabConfig, measure_all

config = MaskLabConfig(trials=10, max_new_tokens=64, vocabs=('512', 'cl100k', 'qwen'), masks=('naive', 'indexed', 'stack'), peers=True, threads=1, quick=False, seed=0, temperature=1.0, naive_large_vocab_tokens=8, large_vocab=4096, roofline_dir=Path('experiments/01-roofline'), budget_s=120.0, model_dir=None, model_max_new_tokens=16, jump_forward=True, jump_prompts=3, equivalence_margins={'indexed': 0.05, 'stack': 0.05})
print(json.dumps(measure_all(config), indent=2))
