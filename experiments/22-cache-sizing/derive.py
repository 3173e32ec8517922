"""Regenerate this folder through the package (seed 002's derivations): python derive.py"""
from pathlib import Path

from inferlab.cli import main

raise SystemExit(main(["kv", "derivations", "--force", "--out", str(Path(__file__).resolve().parent)]))
