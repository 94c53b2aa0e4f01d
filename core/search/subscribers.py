"""Ready-made subscribers of a search's event stream: a collector, the journal, progress, and
the workers' health of a run on a remote executor (`HealthRecorder`).

A subscriber is any callable taking one `SearchEvent` (`core.search.engine.Subscriber`); the
engine calls each, in order, on its own thread, for every event it emits.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any, Self, TypeVar, cast

from core.search.events import (
    ArchiveSnapshot,
    CandidateEvaluated,
    CandidateProposed,
    LogMessage,
    RunFinished,
    RunStarted,
    SearchEvent,
)
from core.vocab.health import HealthSnapshot

if TYPE_CHECKING:
    from core.evaluation.executor import Executor
    from core.storage.journal import RunJournal

__all__ = [
    "HEALTH_INTERVAL_S",
    "EventLog",
    "HealthRecorder",
    "Progress",
    "ProgressCallback",
    "ProgressReporter",
    "journal_subscriber",
]

_log = logging.getLogger(__name__)

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


HEALTH_INTERVAL_S = 3.0
"""Seconds between two health snapshots of a running search's workers (the Runs page refreshes
as often)."""

_WAKE_TYPES = frozenset({"run_started", "candidate_evaluated", "run_finished"})
"""Events after which `HealthRecorder` takes a snapshot at once (an evaluation's batches have
come back)."""


class HealthRecorder:
    """A subscriber that keeps a run's worker-health snapshot current while it runs: the
    driver's view of its executor's workers, for the studio's Runs page.

    A daemon thread takes `executor.health()` every `interval_s` and at once after each
    `run_started`, `candidate_evaluated` and `run_finished` event (the event only wakes the
    thread: a ping, up to 2 s on Ray, never holds up the search), and replaces the run's
    health file with it (`core.storage.health.write_health`: one file per run, the latest
    snapshot only). An executor with no workers yet (`health()` is `[]`: local, or Ray
    before it starts) writes nothing. A failed snapshot is logged and the next one tried;
    it never stops the search.

    Use as a context manager around the search (or `start()` ... `close()`), and pass it as
    one of the search's subscribers; close it before closing the executor (`close` takes a
    last snapshot).

    Args:
        executor: the evaluator's executor (`core.evaluation.executor.Executor`).
        db_path: the run database's path (the health file goes beside its journals).
        run_id: the run.
        interval_s: seconds between snapshots when no event comes.
        clock: Unix seconds (tests pass a fixed one).
    """

    def __init__(
        self,
        executor: Executor,
        db_path: str | os.PathLike[str],
        run_id: str,
        *,
        interval_s: float = HEALTH_INTERVAL_S,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self._executor = executor
        self._db_path = db_path
        self._run_id = run_id
        self._interval_s = interval_s
        self._clock = clock
        self._wake = threading.Event()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()
        self.written = 0
        """Snapshots written so far."""

    def __call__(self, event: SearchEvent) -> None:
        if event.type in _WAKE_TYPES:
            self._wake.set()

    def record(self) -> HealthSnapshot | None:
        """Take a snapshot now and write it; returns it (None: no workers, or it failed)."""
        from core.storage.health import write_health

        with self._lock:  # the thread and `close` never write at once
            try:
                workers = tuple(self._executor.health())
                if not workers:
                    return None
                snapshot = HealthSnapshot(
                    run_id=self._run_id,
                    executor=self._executor.describe(),
                    taken_at=self._clock(),
                    workers=workers,
                )
                write_health(self._db_path, snapshot)
            except Exception as exc:  # noqa: BLE001 (health is advisory; the search goes on)
                _log.warning("worker health of run %s not recorded: %s", self._run_id, exc)
                return None
            self.written += 1
            return snapshot

    def _loop(self) -> None:
        while not self._stop.is_set():
            self._wake.wait(self._interval_s)
            self._wake.clear()
            if self._stop.is_set():
                return
            self.record()

    def start(self) -> Self:
        """Start the snapshot thread (idempotent); returns self."""
        if self._thread is None:
            self._thread = threading.Thread(
                target=self._loop, name=f"health-{self._run_id}", daemon=True
            )
            self._thread.start()
        return self

    def close(self) -> None:
        """Stop the thread and take a last snapshot (the workers as the run left them)."""
        thread, self._thread = self._thread, None
        if thread is None:
            return
        self._stop.set()
        self._wake.set()
        thread.join()
        self.record()

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.close()
