"""A search's progress on stderr: a rich progress bar on a terminal, nothing otherwise.

`SearchProgress` is a search-event subscriber. It counts candidate evaluations (the budget's
unit: the seed's, then one per evaluated proposal) and example runs, and shows the best
validation score so far and the cost. Off a terminal it prints nothing, so a pipe or a test sees
only the results on stdout and errors on stderr.
"""

from __future__ import annotations

from types import TracebackType
from typing import Self

from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    SpinnerColumn,
    TaskID,
    TextColumn,
    TimeElapsedColumn,
)

from core.search.events import ExampleEvaluated, SearchEvent
from core.search.subscribers import Progress as RunProgress
from core.search.subscribers import ProgressReporter
from studio.cli._output import Output

__all__ = ["SearchProgress"]


class SearchProgress:
    """Progress bar over candidate evaluations (a live handle; use as a context manager).

    A search-event subscriber: `core.search.subscribers.ProgressReporter` folds the events into
    figures (evaluations against the budget, best score, cost); this draws them.

    Args:
        out: where to draw (stderr, only when it is a terminal).
        total: the evaluation budget (`max_evaluations`), or None when unbounded.
    """

    def __init__(self, out: Output, total: int | None = None) -> None:
        self.enabled = out.progress_enabled
        self.examples = 0
        self.latest: RunProgress | None = None
        self._reporter = ProgressReporter(self._update)
        self._progress: Progress | None = None
        self._task: TaskID | None = None
        if self.enabled:
            self._progress = Progress(
                SpinnerColumn(),
                TextColumn("[bold]search[/bold]"),
                BarColumn(),
                MofNCompleteColumn(),
                TextColumn("candidates · {task.fields[examples]} example runs"),
                TextColumn("· best {task.fields[best]} · search ${task.fields[cost]}"),
                TimeElapsedColumn(),
                console=Console(file=out.stderr),
                transient=False,
            )
            self._task = self._progress.add_task(
                "search", total=total, examples=0, best="-", cost="0.00"
            )

    def __enter__(self) -> Self:
        if self._progress is not None:
            self._progress.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if self._progress is not None:
            self._progress.stop()

    def __call__(self, event: SearchEvent) -> None:
        """Take one search event (the subscriber interface)."""
        if isinstance(event, ExampleEvaluated) and not event.cached:
            self.examples += 1
            self._draw()
        self._reporter(event)

    def _update(self, state: RunProgress) -> None:
        self.latest = state
        self._draw()

    def _draw(self) -> None:
        if self._progress is None or self._task is None:
            return
        state = self.latest
        fields: dict[str, object] = {"examples": self.examples}
        if state is not None:
            fields["completed"] = state.evaluations
            fields["best"] = "-" if state.best_score is None else f"{state.best_score:.4f}"
            fields["cost"] = f"{state.cost_usd:.2f}"
            if state.max_evaluations is not None:
                fields["total"] = state.max_evaluations
        self._progress.update(self._task, **fields)  # pyright: ignore[reportArgumentType]
