"""Ready-made subscribers of a search's event stream: a collector, the journal, progress.

A subscriber is any callable taking one `SearchEvent` (`core.search.engine.Subscriber`); the
engine calls each, in order, on its own thread, for every event it emits.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any, TypeVar, cast

from core.search.events import (
    ArchiveSnapshot,
    CandidateEvaluated,
    CandidateProposed,
    LogMessage,
    RunFinished,
    RunStarted,
    SearchEvent,
)

if TYPE_CHECKING:
    from core.storage.journal import RunJournal

__all__ = ["EventLog", "Progress", "ProgressCallback", "ProgressReporter", "journal_subscriber"]

_E = TypeVar("_E")


class EventLog:
    """Collects every event in memory (tests, the studio's live view of a run it started)."""

    def __init__(self) -> None:
        self.events: list[SearchEvent] = []

    def __call__(self, event: SearchEvent) -> None:
        self.events.append(event)

    def of_type(self, cls: type[_E]) -> list[_E]:
        """The collected events of one type, in order."""
        return [e for e in self.events if isinstance(e, cls)]


def journal_subscriber(journal: RunJournal) -> Callable[[SearchEvent], None]:
    """Writes every event to a run journal (`core.storage.journal.RunJournal.append`).

    For a resumed run, open the journal with `RunJournal.resume(path)` and pass its `recorded`
    events as the run's `resume_from`: the engine continues the journal's `seq`.
    """
    return journal.append


@dataclass(frozen=True, slots=True)
class Progress:
    """A run's progress, for a progress bar.

    Attributes:
        run_id: the run.
        evaluations: candidate evaluations so far (the seed counts one).
        max_evaluations: the budget's limit, if any.
        generation: the last generation completed (-1: the seed), if any.
        best_idx: the best candidate on the full validation split so far.
        best_score: its aggregate score.
        cost_usd: USD used so far (evaluations plus design).
        message: the latest log line, or a short status.
        finished: True once the run has ended.
        status: `"running"`, or the `RunFinished` status.
    """

    run_id: str
    evaluations: int = 0
    max_evaluations: int | None = None
    generation: int | None = None
    best_idx: int | None = None
    best_score: float | None = None
    cost_usd: float = 0.0
    message: str = ""
    finished: bool = False
    status: str = "running"


ProgressCallback = Callable[[Progress], None]
"""Receives a `Progress` after every event that changes it."""


class ProgressReporter:
    """A subscriber that folds events into `Progress` and hands each update to `callback`."""

    def __init__(self, callback: ProgressCallback) -> None:
        self._callback = callback
        self._state: Progress | None = None
        self._evaluated: set[int] = set()

    @property
    def progress(self) -> Progress | None:
        """The latest progress, if the run has started."""
        return self._state

    def __call__(self, event: SearchEvent) -> None:
        state = self._state or Progress(run_id=event.run_id)
        if isinstance(event, RunStarted):
            budget: object = event.config.get("budget")
            limit = (
                cast(dict[str, object], budget).get("max_evaluations")
                if isinstance(budget, dict)
                else None
            )
            state = Progress(
                run_id=event.run_id,
                max_evaluations=limit if isinstance(limit, int) else None,
                message="resumed" if event.resumed else "started",
            )
        elif isinstance(event, CandidateProposed):
            state = _replace(state, message=f"candidate {event.candidate_idx} {event.status}")
        elif isinstance(event, CandidateEvaluated):
            if event.split != "test" and event.candidate_idx not in self._evaluated:
                self._evaluated.add(event.candidate_idx)
                state = _replace(state, evaluations=len(self._evaluated))
        elif isinstance(event, ArchiveSnapshot):
            state = _replace(
                state,
                generation=event.generation,
                best_idx=event.best_idx,
                best_score=event.best_score,
                cost_usd=event.cost_usd_total,
            )
        elif isinstance(event, LogMessage):
            state = _replace(state, message=event.message)
        elif isinstance(event, RunFinished):
            state = _replace(
                state,
                finished=True,
                status=event.status,
                message=event.reason,
                best_idx=event.best_idx if event.best_idx is not None else state.best_idx,
                cost_usd=event.budget_used.get("usd", state.cost_usd),
            )
        else:
            return
        self._state = state
        self._callback(state)


def _replace(state: Progress, **changes: Any) -> Progress:
    return replace(state, **changes)
