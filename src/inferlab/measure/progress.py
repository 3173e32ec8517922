"""A rich progress bar on stderr for long measurements (stdout stays clean for --json)."""

from __future__ import annotations

import sys
import time
from contextlib import contextmanager
from typing import Callable, Iterator

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn


LOG_EVERY_S = 60.0
_clock = time.monotonic


@contextmanager
def progress_bar(total: int, title: str) -> Iterator[Callable[[str], None]]:
    """Yields step(description): advance the bar by one unit and show what runs next. Where
    stderr is not a terminal (a log), a plain line at most every LOG_EVERY_S instead."""
    console = Console(stderr=True)
    if not console.is_terminal:  # a log: no bar at all (rich 13.0 writes a blank line even disabled)
        yield _log_step(total, title)
        return
    columns = (TextColumn("[bold]{task.description}"), BarColumn(), MofNCompleteColumn(),
               TimeElapsedColumn())
    with Progress(*columns, console=console, transient=True) as bar:
        task = bar.add_task(title, total=total)
        yield lambda description: bar.update(task, advance=1, description=f"{title}: {description}")


def _log_step(total: int, title: str) -> Callable[[str], None]:
    """step(description) for a log: a plain line at most every LOG_EVERY_S."""
    start = last = _clock()
    done = 0

    def step(description: str) -> None:
        nonlocal last, done
        done += 1
        now = _clock()
        if now - last >= LOG_EVERY_S:
            last = now
            print(f"{title}: {done}/{total} after {now - start:.0f} s ({description})", file=sys.stderr, flush=True)

    return step
