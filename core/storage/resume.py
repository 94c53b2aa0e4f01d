"""What a resumed search needs from an interrupted run's journal.

`topology-studio search PROBLEM --resume RUN` continues a killed run without re-running what was
recorded. The search engine does it like this (its side lives in `core/search/`):

```python
journal = RunJournal.resume(journal_path(db_path, run_id))   # cuts a torn line; locks
state = ResumeState.from_events(journal.recorded)
# re-run the search from the start with the recorded seed and config (state.started), serving
#  - every example evaluation from state.evaluations (no model call; do not emit it again),
#  - every proposal from state.proposals (no designer call), by candidate index,
# and append only the events after state.next_seq - 1 to the journal, first a
# RunStarted(resumed=True, seq=journal.next_seq).
```

Because the search is deterministic given its seed and the recorded results, it ends with the
same archive as an uninterrupted run. The store tolerates a search that re-emits recorded
events anyway: rows are keyed so that a replayed copy never duplicates one (first one wins).
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field

from core.storage.journal import read_journal
from core.vocab.events import (
    ArchiveSnapshot,
    CandidateEvaluated,
    CandidateProposed,
    ExampleEvaluated,
    RunFinished,
    RunStarted,
    SearchEvent,
)

__all__ = ["EvaluationKey", "ResumeState", "load_resume_state"]

EvaluationKey = tuple[str, str, int]
"""`(spec_hash, example_id, trial)`: the evaluation cache key of one recorded example result."""


@dataclass(frozen=True, slots=True)
class ResumeState:
    """A run's recorded progress, read from its journal (a frozen record).

    Attributes:
        run_id: the run, or None when nothing was recorded.
        started: the first `RunStarted` (problem, strategy, seed and config to resume with).
        finished: the last `RunFinished` when the run's last lifecycle event is one (a run that
            already ended; resuming it is allowed, e.g. a run stopped by a budget).
        next_seq: the `seq` the next event must carry.
        proposals: the first `CandidateProposed` per candidate index.
        evaluations: the first recorded `ExampleEvaluated` per `(spec_hash, example_id, trial)`.
        results: the last `CandidateEvaluated` per `(candidate_idx, split)`.
        last_snapshot: the last `ArchiveSnapshot`, if any.
        n_events: how many events were recorded.
    """

    run_id: str | None
    started: RunStarted | None
    finished: RunFinished | None
    next_seq: int
    proposals: dict[int, CandidateProposed] = field(default_factory=dict[int, CandidateProposed])
    evaluations: dict[EvaluationKey, ExampleEvaluated] = field(
        default_factory=dict[EvaluationKey, ExampleEvaluated]
    )
    results: dict[tuple[int, str], CandidateEvaluated] = field(
        default_factory=dict[tuple[int, str], CandidateEvaluated]
    )
    last_snapshot: ArchiveSnapshot | None = None
    n_events: int = 0

    @property
    def last_generation(self) -> int | None:
        """The last generation whose archive snapshot was recorded (-1: the seed), else None."""
        return None if self.last_snapshot is None else self.last_snapshot.generation

    @classmethod
    def from_events(cls, events: list[SearchEvent] | tuple[SearchEvent, ...]) -> ResumeState:
        """Fold recorded events (in journal order) into a resume state."""
        started: RunStarted | None = None
        finished: RunFinished | None = None
        proposals: dict[int, CandidateProposed] = {}
        evaluations: dict[EvaluationKey, ExampleEvaluated] = {}
        results: dict[tuple[int, str], CandidateEvaluated] = {}
        snapshot: ArchiveSnapshot | None = None
        for ev in events:
            if isinstance(ev, RunStarted):
                started = started or ev
                finished = None
            elif isinstance(ev, RunFinished):
                finished = ev
            elif isinstance(ev, CandidateProposed):
                proposals.setdefault(ev.candidate_idx, ev)
            elif isinstance(ev, ExampleEvaluated):
                evaluations.setdefault((ev.spec_hash, ev.example_id, ev.trial), ev)
            elif isinstance(ev, CandidateEvaluated):
                results[(ev.candidate_idx, ev.split)] = ev
            elif isinstance(ev, ArchiveSnapshot):
                snapshot = ev
        return cls(
            run_id=events[0].run_id if events else None,
            started=started,
            finished=finished,
            next_seq=events[-1].seq + 1 if events else 0,
            proposals=proposals,
            evaluations=evaluations,
            results=results,
            last_snapshot=snapshot,
            n_events=len(events),
        )


def load_resume_state(path: str | os.PathLike[str]) -> ResumeState:
    """Read a journal (a torn last line is dropped) into a `ResumeState`.

    Raises:
        FileNotFoundError: there is no such journal.
        StoreError: the journal is damaged before its last line.
    """
    return ResumeState.from_events(read_journal(path))
