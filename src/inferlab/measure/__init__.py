"""The measurement harness every lab uses: timing, machine description, artifacts, plots."""

from inferlab.measure.artifacts import (
    ExperimentWriter,
    SchemaMismatch,
    atomic_write_bytes,
    atomic_write_json,
    atomic_write_text,
    build_manifest,
    save_figure,
    validate,
)
from inferlab.measure.machine import blas_threads, machine_info, versions
from inferlab.measure.plots import new_figure
from inferlab.measure.timing import Stats, gc_disabled, measure, measure_interleaved, summarize

__all__ = [
    "ExperimentWriter", "SchemaMismatch", "Stats", "atomic_write_bytes", "atomic_write_json",
    "atomic_write_text", "blas_threads", "build_manifest", "gc_disabled", "machine_info",
    "measure", "measure_interleaved", "new_figure", "save_figure", "summarize", "validate", "versions",
]
