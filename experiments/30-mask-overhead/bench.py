"""Reproduce this folder's measurements through the package; prints results.json to stdout."""
import json
from pathlib import PosixPath  # noqa: F401  (the config's repr may name a path)

from inferlab.labs.mask_overhead import MaskLabConfig, measure_all

config = MaskLabConfig(trials=10, max_new_tokens=64, vocabs=None, masks=('naive', 'indexed'), peers=True, threads=1, quick=False, seed=0, temperature=1.0, naive_large_vocab_tokens=8, large_vocab=4096, roofline_dir=PosixPath('experiments/01-roofline'))
print(json.dumps(measure_all(config), indent=2))
