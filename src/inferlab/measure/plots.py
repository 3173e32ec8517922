"""matplotlib helpers shared by labs: figures without pyplot (Agg, never needs a display).

Figures are built from matplotlib.figure.Figure directly, so importing inferlab never switches a
notebook's pyplot backend, and a headless run never looks for a display.
"""

from __future__ import annotations


# a light box under a text label, so that lines and markers under it do not strike through it
LABEL_BOX = {"boxstyle": "square,pad=0.1", "fc": "white", "ec": "none", "alpha": 0.85}


def new_figure(nrows: int = 1, ncols: int = 1, *, figsize: tuple[float, float] = (7.0, 4.5)):
    """(fig, axes) on the Agg canvas; save with artifacts.save_figure or ExperimentWriter.add_figure."""
    # Imported here: matplotlib is slow to import (python -X importtime -c "import matplotlib.figure"),
    # and most CLI paths never draw.
    from matplotlib.figure import Figure

    fig = Figure(figsize=figsize, layout="constrained")
    axes = fig.subplots(nrows, ncols, squeeze=True)
    return fig, axes
