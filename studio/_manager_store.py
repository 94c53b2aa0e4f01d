"""The manager's store as pages see it (`StudioManager.store`): each call goes to the store in
use at that moment and is retried once on a reopened store (see `studio.manager`)."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable, Sequence
from datetime import datetime
from typing import Any, Protocol, TypeVar

import pandas as pd

from core.search.events import SearchEvent
from core.search.pareto import DEFAULT_OBJECTIVES, Objective
from core.storage import (
    IngestError,
    IngestReport,
    ProposalRecord,
    RunRecord,
    RunStore,
    TopologyVersion,
)

_T = TypeVar("_T")


class StoreHolder(Protocol):
    """What `ReopeningStore` asks of the manager."""

    _lock: threading.RLock

    def _call(self, fn: Callable[[RunStore], _T]) -> _T: ...

    def _current(self) -> RunStore: ...

    def _forget(self, store: RunStore) -> None: ...


class ReopeningStore(RunStore):
    """The manager's store as pages see it (`StudioManager.store`): every call goes to the
    store in use at that moment, and is retried once on a reopened store when the database file
    was deleted or replaced under it. `close()` closes the store in use; the manager opens the
    file again on the next call."""

    def __init__(self, manager: StoreHolder) -> None:
        self._manager = manager

    def __repr__(self) -> str:
        return f"<the store of {self._manager!r}>"

    @property
    def read_only(self) -> bool:
        return self._manager._call(lambda s: s.read_only)

    def close(self) -> None:
        with self._manager._lock:
            self._manager._forget(self._manager._current())

    def record_events(self, events: Iterable[SearchEvent]) -> int:
        batch = list(events)  # an iterator would be used up by a failed first try
        return self._manager._call(lambda s: s.record_events(batch))

    def ingest(self) -> IngestReport:
        return self._manager._call(lambda s: s.ingest())

    def get_run(self, run_id: str) -> RunRecord | None:
        return self._manager._call(lambda s: s.get_run(run_id))

    def phase_two_run(self, run_id: str) -> str | None:
        return self._manager._call(lambda s: s.phase_two_run(run_id))

    def list_runs(self) -> pd.DataFrame:
        return self._manager._call(lambda s: s.list_runs())

    def put_spec(self, spec_hash: str, spec_json: str) -> bool:
        return self._manager._call(lambda s: s.put_spec(spec_hash, spec_json))

    def get_spec(self, spec_hash: str) -> str | None:
        return self._manager._call(lambda s: s.get_spec(spec_hash))

    def archive(
        self,
        run_id: str,
        *,
        split: str | None = None,
        objectives: Sequence[Objective] = DEFAULT_OBJECTIVES,
        include_unevaluated: bool = False,
    ) -> pd.DataFrame:
        return self._manager._call(
            lambda s: s.archive(
                run_id,
                split=split,
                objectives=objectives,
                include_unevaluated=include_unevaluated,
            )
        )

    def example_accuracies(
        self, run_id: str, candidate_idx: int, *, split: str | None = None
    ) -> list[tuple[str, int, float | None]]:
        return self._manager._call(
            lambda s: s.example_accuracies(run_id, candidate_idx, split=split)
        )

    def candidate_examples(
        self, run_id: str, candidate_idx: int, *, split: str | None = None, with_trace: bool = False
    ) -> pd.DataFrame:
        return self._manager._call(
            lambda s: s.candidate_examples(
                run_id, candidate_idx, split=split, with_trace=with_trace
            )
        )

    def example_trace(
        self, run_id: str, candidate_idx: int, example_id: str, *, trial: int = 0
    ) -> list[dict[str, Any]] | None:
        return self._manager._call(
            lambda s: s.example_trace(run_id, candidate_idx, example_id, trial=trial)
        )

    def compare_candidates(
        self,
        run_id: str,
        a: int,
        b: int,
        *,
        run_id_b: str | None = None,
        threshold: float = 0.5,
    ) -> pd.DataFrame:
        return self._manager._call(
            lambda s: s.compare_candidates(run_id, a, b, run_id_b=run_id_b, threshold=threshold)
        )

    def progress(self, run_id: str) -> pd.DataFrame:
        return self._manager._call(lambda s: s.progress(run_id))

    def snapshots(self, run_id: str) -> pd.DataFrame:
        return self._manager._call(lambda s: s.snapshots(run_id))

    def logs(self, run_id: str) -> pd.DataFrame:
        return self._manager._call(lambda s: s.logs(run_id))

    def record_proposal(
        self,
        target: str,
        spec_json: str,
        *,
        spec_hash: str | None = None,
        run_id: str | None = None,
        candidate_idx: int | None = None,
        base_version: int | None = None,
        diff: str = "",
        proposed_by: str = "",
        when: datetime | float | None = None,
    ) -> int:
        return self._manager._call(
            lambda s: s.record_proposal(
                target,
                spec_json,
                spec_hash=spec_hash,
                run_id=run_id,
                candidate_idx=candidate_idx,
                base_version=base_version,
                diff=diff,
                proposed_by=proposed_by,
                when=when,
            )
        )

    def record_approval(
        self,
        proposal_id: int,
        *,
        who: str,
        when: datetime | float | None = None,
        comment: str = "",
        base_version: int | None = None,
        applied_version: int | None = None,
        decision: str = "approved",
    ) -> int:
        return self._manager._call(
            lambda s: s.record_approval(
                proposal_id,
                who=who,
                when=when,
                comment=comment,
                base_version=base_version,
                applied_version=applied_version,
                decision=decision,
            )
        )

    def list_proposals(self, target: str | None = None) -> pd.DataFrame:
        return self._manager._call(lambda s: s.list_proposals(target))

    def get_proposal(self, run_id: str | None, proposal_id: int) -> ProposalRecord:
        return self._manager._call(lambda s: s.get_proposal(run_id, proposal_id))

    def list_ingest_errors(self, run_id: str | None = None) -> list[IngestError]:
        return self._manager._call(lambda s: s.list_ingest_errors(run_id))

    def save_topology_version(
        self, target: str, spec_json: str, *, spec_hash: str | None = None, note: str = ""
    ) -> int:
        return self._manager._call(
            lambda s: s.save_topology_version(target, spec_json, spec_hash=spec_hash, note=note)
        )

    def list_topology_versions(self, target: str) -> pd.DataFrame:
        return self._manager._call(lambda s: s.list_topology_versions(target))

    def get_topology_version(self, target: str, version: int | None = None) -> TopologyVersion:
        return self._manager._call(lambda s: s.get_topology_version(target, version))
