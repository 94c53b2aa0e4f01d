"""The DuckDB run store's proposals, approvals and topology versions (`DuckDBRunStore` inherits
`ProposalsMixin`)."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable
from datetime import datetime
from typing import TYPE_CHECKING, TypeVar

import duckdb

from core.errors import (
    StoreError,
)
from core.storage import queries
from core.storage.records import (
    ProposalRecord,
    TopologyVersion,
)

if TYPE_CHECKING:
    import pandas as pd  # pyright: ignore[reportMissingTypeStubs]
from core.storage._duckdb_files import (
    none_if_na,
    proposal_source,
    timestamp,
    tracked,
)

_T = TypeVar("_T")


class ProposalsMixin:
    """`DuckDBRunStore`'s proposals, approvals and topology versions."""

    _path: str
    _write_lock: threading.RLock

    if TYPE_CHECKING:

        def _enter(self) -> None: ...

        def _leave(self) -> None: ...

        def _cur(self) -> duckdb.DuckDBPyConnection: ...

        def _writable(self) -> duckdb.DuckDBPyConnection: ...

        @staticmethod
        def _in_transaction(cur: duckdb.DuckDBPyConnection, fn: Callable[[], _T]) -> _T: ...

    @tracked
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
        if not target:
            raise StoreError("a proposal needs a target")
        with self._write_lock:
            row = (
                self._writable()
                .execute(
                    "INSERT INTO proposals (target, spec_json, spec_hash, run_id, candidate_idx, "
                    "base_version, diff, proposed_by, created_at) "
                    "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?) RETURNING proposal_id",
                    [
                        target,
                        spec_json,
                        spec_hash,
                        run_id,
                        candidate_idx,
                        base_version,
                        diff,
                        proposed_by,
                        timestamp(when),
                    ],
                )
                .fetchone()
            )
        if row is None:  # pragma: no cover - RETURNING always yields the row
            raise StoreError("recording the proposal returned no id")
        return int(row[0])

    @tracked
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
        if decision not in ("approved", "rejected"):
            raise StoreError(f"decision must be 'approved' or 'rejected', got {decision!r}")
        if not who:
            raise StoreError("an approval needs who made it")
        with self._write_lock:
            cur = self._writable()

            def go() -> int:
                found = cur.execute(
                    "SELECT 1 FROM proposals WHERE proposal_id = ?", [proposal_id]
                ).fetchone()
                if found is None:
                    raise StoreError(f"no proposal {proposal_id}")
                row = cur.execute(
                    "INSERT INTO approvals (proposal_id, decision, who, decided_at, comment, "
                    "base_version, applied_version) VALUES (?, ?, ?, ?, ?, ?, ?) "
                    "RETURNING approval_id",
                    [
                        proposal_id,
                        decision,
                        who,
                        timestamp(when),
                        comment,
                        base_version,
                        applied_version,
                    ],
                ).fetchone()
                return int(row[0]) if row else 0

            return self._in_transaction(cur, go)

    @tracked
    def list_proposals(self, target: str | None = None) -> pd.DataFrame:
        return queries.list_proposals(self._cur(), target)

    @tracked
    def get_proposal(self, run_id: str | None, proposal_id: int) -> ProposalRecord:
        row = queries.proposal(self._cur(), proposal_id)
        if row is None or (run_id is not None and row["run_id"] != run_id):
            of_run = "" if run_id is None else f" of run {run_id!r}"
            have = "" if row is None else f" (proposal {proposal_id} is of {proposal_source(row)})"
            raise StoreError(f"no proposal {proposal_id}{of_run}{have}")
        return ProposalRecord.model_validate(row)

    @tracked
    def save_topology_version(
        self, target: str, spec_json: str, *, spec_hash: str | None = None, note: str = ""
    ) -> int:
        if not target:
            raise StoreError("a topology version needs a target")
        try:
            json.loads(spec_json)
        except ValueError as exc:
            raise StoreError(f"a topology version must be JSON: {exc}") from exc
        with self._write_lock:
            cur = self._writable()

            def go() -> int:
                row = cur.execute(
                    "SELECT coalesce(max(version), 0) + 1 FROM topology_versions WHERE target = ?",
                    [target],
                ).fetchone()
                version = int(row[0]) if row else 1
                cur.execute(
                    "INSERT INTO topology_versions VALUES (?, ?, ?, ?, ?, ?)",
                    [target, version, spec_json, spec_hash, time.time(), note],
                )
                return version

            return self._in_transaction(cur, go)

    @tracked
    def list_topology_versions(self, target: str) -> pd.DataFrame:
        return queries.list_topology_versions(self._cur(), target)

    @tracked
    def get_topology_version(self, target: str, version: int | None = None) -> TopologyVersion:
        cur = self._cur()
        row = cur.execute(
            "SELECT version, spec_json, spec_hash, created_at, note FROM topology_versions "
            "WHERE target = $target AND ($version IS NULL OR version = $version) "
            "ORDER BY version DESC LIMIT 1",
            {"target": target, "version": version},
        ).fetchone()
        if row is None:
            have = [
                int(r[0])
                for r in cur.execute(
                    "SELECT version FROM topology_versions WHERE target = ? ORDER BY version",
                    [target],
                ).fetchall()
            ]
            which = "any version" if version is None else f"version {version}"
            raise StoreError(f"target {target!r} has no {which}; saved versions: {have or 'none'}")
        return TopologyVersion(
            target=target,
            version=int(row[0]),
            spec_json=str(row[1]),
            spec_hash=none_if_na(row[2]),
            created_at=float(row[3]),
            note=str(row[4]),
        )
