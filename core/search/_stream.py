"""The run's event stream: run id, `seq` and time on every event; what a resume recorded is
not emitted again.

Replayable events carry a key (what identifies them across a resumed run):

- `("p", candidate_idx)`: `CandidateProposed`;
- `("e", spec_hash, example_id, trial)`: `ExampleEvaluated` (each result once per run);
- `("c", candidate_idx, split)`: `CandidateEvaluated`;
- `("s", n)`: the n-th `ArchiveSnapshot` (1-based; the loop is deterministic).

An event whose key was recorded is skipped; `LogMessage`s are skipped while the run is still
replaying recorded work (until the first event that was not recorded). `replay_pending` is True
until every recorded proposal and result has come round again (snapshots are not waited for: a
stopped run's last one comes after its stop); the engine leaves wall time out of its stop checks
until then, so a resumed run reaches the point its recorded run stopped at.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from core.search.events import LogMessage, SearchEvent

__all__ = ["EventKey", "EventStream", "Subscriber"]

Subscriber = Callable[[SearchEvent], None]
"""Receives every event a run emits, in order, on the run's thread. An exception it raises
fails the run (the journal must not silently miss events)."""

EventKey = tuple[Any, ...]
"""Identifies a replayable event (see the module docstring)."""


class EventStream:
    """Stamps events and hands them to the subscribers (a live handle of one run).

    Args:
        run_id: the run.
        subscribers: called with every event, in order.
        clock: Unix time for `ts`.
        next_seq: the first event's `seq` (a resumed run continues its journal).
        recorded: keys of events a resumed run already recorded.
    """

    def __init__(
        self,
        run_id: str,
        subscribers: Sequence[Subscriber],
        clock: Callable[[], float],
        *,
        next_seq: int = 0,
        recorded: frozenset[EventKey] = frozenset(),
    ) -> None:
        self.run_id = run_id
        self._subscribers = list(subscribers)
        self._clock = clock
        self._seq = next_seq
        self._recorded = recorded
        self._replaying = bool(recorded)
        self._pending = {k for k in recorded if k[0] != "s"}

    def emit(self, cls: type[Any], /, key: EventKey | None = None, **fields: Any) -> None:
        """Emit an event of type `cls` with `fields`, unless a resume recorded it already."""
        if key is not None and key in self._recorded:
            self._pending.discard(key)
            return
        if key is None and self._replaying and cls is LogMessage:
            return
        if key is not None:
            self._replaying = False
        event: SearchEvent = cls(run_id=self.run_id, seq=self._seq, ts=self._clock(), **fields)
        self._seq += 1
        for subscriber in self._subscribers:
            subscriber(event)

    @property
    def replay_pending(self) -> bool:
        """True while some recorded proposal or result has not come round again in this run."""
        return bool(self._pending)

    def log(self, message: str, level: str = "info") -> None:
        """Emit a `LogMessage`."""
        self.emit(LogMessage, level=level, message=message)
