"""Reproduce this folder's measurements through the package; prints results.json to stdout.

Equivalent to `inferlab roofline --threads 2 --json`, without writing files.
"""
import json

from inferlab.roofline import RooflineConfig, run_roofline

config = RooflineConfig(**{'threads': 2, 'quick': False, 'seed': 0, 'trials': 10, 'llc_multiple': 4, 'sweep_points_per_octave': 4, 'sweep_dram_octaves': 2.0, 'sweep_samples': 7, 'gemm_sizes': (512, 1024, 2048), 'gemm_samples': 10, 'min_sample_s': 0.05, 'budget_s': 30.0, 'max_memory_bytes': 805306368, 'llc_bytes': None})
print(json.dumps(run_roofline(config), indent=2))
