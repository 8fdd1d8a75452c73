"""Progress bars for long maintenance work (recover, vacuum, compact), drawn on stderr so stdout stays
clean for `--json` and pipes.

The engine reports `progress(stage, done, total)`; each new stage gets its own bar. On a terminal the
bars move; elsewhere (a pipe, a log file) rich prints each bar once, finished, when the work ends.
"""

from __future__ import annotations

from types import TracebackType

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TaskID, TextColumn, TimeElapsedColumn


class ProgressBars:
    """A context manager that is also the `progress(stage, done, total)` callback; disabled, it does nothing."""

    def __init__(self, console: Console, enabled: bool = True) -> None:
        self._progress = Progress(
            TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
            console=console, disable=not enabled, redirect_stdout=False, redirect_stderr=False,
        )
        self._tasks: dict[str, TaskID] = {}

    def __enter__(self) -> ProgressBars:
        self._progress.start()
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self._progress.stop()

    def __call__(self, stage: str, done: int, total: int) -> None:
        task = self._tasks.get(stage)
        if task is None:
            task = self._tasks[stage] = self._progress.add_task(stage, total=max(total, 0))
        self._progress.update(task, completed=max(done, 0), total=max(total, done, 0))
