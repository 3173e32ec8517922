"""A rich progress bar on stderr for long measurements (stdout stays clean for --json)."""

from __future__ import annotations

from contextlib import contextmanager
from typing import Callable, Iterator

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn


@contextmanager
def progress_bar(total: int, title: str) -> Iterator[Callable[[str], None]]:
    """Yields step(description): advance the bar by one unit and show what runs next."""
    columns = (TextColumn("[bold]{task.description}"), BarColumn(), MofNCompleteColumn(),
               TimeElapsedColumn())
    console = Console(stderr=True)
    # Off when stderr is not a terminal: a log gets no bar, and no blank lines before an error.
    with Progress(*columns, console=console, transient=True, disable=not console.is_terminal) as bar:
        task = bar.add_task(title, total=total)

        def step(description: str) -> None:
            bar.update(task, advance=1, description=f"{title}: {description}")

        yield step
