"""The run store's tables read as stored: the run log, the proposals and approvals, the
journals refused at ingest and the registry's topology versions (`core.storage.queries`
re-exports them; these need none of its candidate and front rules)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

import duckdb

if TYPE_CHECKING:
    import pandas as pd  # pyright: ignore[reportMissingTypeStubs]

__all__ = ["ingest_errors", "list_proposals", "list_topology_versions", "logs", "proposal"]


def _df(
    con: duckdb.DuckDBPyConnection,
    sql: str,
    params: Sequence[object] | Mapping[str, object] = (),
) -> pd.DataFrame:
    args: list[object] | dict[str, object] = (
        dict(params) if isinstance(params, Mapping) else list(params)
    )
    return con.execute(sql, args).df()


def logs(con: duckdb.DuckDBPyConnection, run_id: str) -> pd.DataFrame:
    """The run's log messages in order: `seq, ts, level, message`."""
    return _df(
        con,
        "SELECT seq, ts, level, message FROM events WHERE run_id = ? AND type = 'log' ORDER BY seq",
        [run_id],
    )


def list_proposals(con: duckdb.DuckDBPyConnection, target: str | None = None) -> pd.DataFrame:
    """Proposals with their latest decision (columns: see `RunStore.list_proposals`)."""
    return _df(
        con,
        """
        SELECT p.proposal_id, p.target, p.run_id, p.candidate_idx, p.spec_hash, p.base_version,
               p.proposed_by, p.created_at, a.decision, a.who, a.decided_at, a.comment,
               a.applied_version
        FROM proposals p
        LEFT JOIN (
            SELECT * FROM approvals
            QUALIFY row_number() OVER (PARTITION BY proposal_id ORDER BY approval_id DESC) = 1
        ) a ON a.proposal_id = p.proposal_id
        WHERE $target IS NULL OR p.target = $target
        ORDER BY p.proposal_id DESC
        """,
        {"target": target},
    )


def proposal(con: duckdb.DuckDBPyConnection, proposal_id: int) -> dict[str, Any] | None:
    """One proposal in full (the `list_proposals` columns plus `spec_json` and `diff`), with
    its latest decision, or None when there is no such proposal."""
    cur = con.execute(
        """
        SELECT p.proposal_id, p.target, p.spec_json, p.spec_hash, p.run_id, p.candidate_idx,
               p.base_version, p.diff, p.proposed_by, p.created_at, a.decision, a.who,
               a.decided_at, a.comment, a.applied_version
        FROM proposals p
        LEFT JOIN (
            SELECT * FROM approvals WHERE proposal_id = $id
            QUALIFY row_number() OVER (PARTITION BY proposal_id ORDER BY approval_id DESC) = 1
        ) a ON a.proposal_id = p.proposal_id
        WHERE p.proposal_id = $id
        """,
        {"id": proposal_id},
    )
    row = cur.fetchone()
    if row is None:
        return None
    return dict(zip([d[0] for d in cur.description or []], row, strict=True))


def ingest_errors(
    con: duckdb.DuckDBPyConnection, journal: str | None = None
) -> list[tuple[Any, ...]]:
    """The journal lines ingests skipped, in journal name order, then by position.

    A line skipped again (its journal was read again from the start: same journal, offset and
    text) is listed once, as first recorded, with its line number if any record has it.

    Args:
        con: the connection.
        journal: one journal's file name (e.g. `"run-a.jsonl"`), or None for every journal.

    Returns:
        `(journal, line_no, byte_offset, error, line_head, recorded_at)` rows.
    """
    return con.execute(
        """
        SELECT journal, max(line_no), byte_offset, arg_min(error, recorded_at), line_head,
               min(recorded_at) AS first_at
        FROM ingest_errors
        WHERE $journal IS NULL OR journal = $journal
        GROUP BY journal, byte_offset, line_head
        ORDER BY journal, byte_offset, first_at
        """,
        {"journal": journal},
    ).fetchall()


def list_topology_versions(con: duckdb.DuckDBPyConnection, target: str) -> pd.DataFrame:
    """A target's versions, oldest first: `version, spec_hash, created_at, note`."""
    return _df(
        con,
        "SELECT version, spec_hash, created_at, note FROM topology_versions WHERE target = ? "
        "ORDER BY version",
        [target],
    )
