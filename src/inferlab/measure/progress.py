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
    stderr is not a terminal (a log), a plain line at most every LOG_EVERY_S instead (LogProgress)."""
    console = Console(stderr=True)
    if not console.is_terminal:  # a log: no bar at all (rich 13.0 writes a blank line even disabled)
        log = LogProgress()
        task = log.add_task(title, total=total)
        yield lambda description: log.update(task, advance=1, step=description)
        return
    columns = (TextColumn("[bold]{task.description}"), BarColumn(), MofNCompleteColumn(),
               TimeElapsedColumn())
    with Progress(*columns, console=console, transient=True) as bar:
        task = bar.add_task(title, total=total)
        yield lambda description: bar.update(task, advance=1, description=f"{title}: {description}")


class LogProgress:
    """What a log gets where a terminal gets rich's Progress (the part of its API `train` uses:
    add_task, update, advance): per task, a plain line at most every LOG_EVERY_S and one when it
    completes, each whole (a bar's columns, cut to 80 characters in a pipe, lost their numbers)."""

    def __init__(self):
        self._tasks: list[dict] = []

    def __enter__(self) -> LogProgress:
        return self

    def __exit__(self, *exc) -> None:
        return None

    def add_task(self, description: str, total: int, **fields) -> int:
        now = _clock()
        self._tasks.append({"description": description, "total": total, "done": 0, "fields": fields,
                            "start": now, "last": now})
        return len(self._tasks) - 1

    def advance(self, task: int, advance: int = 1) -> None:
        self.update(task, advance=advance)

    def update(self, task: int, advance: int = 0, **fields) -> None:
        t = self._tasks[task]
        t["done"] += advance
        t["fields"].update(fields)
        now = _clock()
        if now - t["last"] >= LOG_EVERY_S or (advance and t["done"] == t["total"]):
            t["last"] = now
            info = " ".join(str(v) for v in t["fields"].values() if v)
            print(f"{t['description']}: {t['done']}/{t['total']} after {now - t['start']:.0f} s"
                  + (f" ({info})" if info else ""), file=sys.stderr, flush=True)
