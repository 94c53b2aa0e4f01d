"""The run store's DuckDB schema: the first release (v1) and the migrations after it.

A new database is created by running the v1 DDL and then every migration in order, so a fresh
database and a migrated one have exactly the same schema (a test compares them). The v1 DDL is
frozen: never edit it; add a migration instead and bump `CURRENT_VERSION`.

Times are Unix seconds (`DOUBLE`), as in the search events. Nested values (configs, budgets,
traces) are JSON text, so a big trace is one value, not thousands of rows.

Versions:
- v1: first release.
- v2: `runs.last_event_at` and `runs.n_events`, so the runs list can say "running, data as of
  <last event time>" without scanning the events table (backfilled from `events`).
- v3: `evaluations.trace` stored with zstd compression (the table is rebuilt, rows kept): traces
  are most of a run's bytes, and DuckDB's automatic choice for them cost twice the CPU at commit
  and 2.4 times the disk (100,000 three-span traces: 43 MB, with zstd 18 MB).
- v4: `ingest_errors.line_no`, the skipped line's 1-based number in its journal, so
  `RunStore.list_ingest_errors` can say where to look (NULL for errors recorded before v4,
  whose journals the migration cannot read).
- v5: `candidate_results.same_as`, the earlier candidate whose per-example results this one's
  equal.
- v6: `candidates.design_input_tokens` and `design_output_tokens`, the designer's own tokens
  beside `design_cost_usd` and `design_requests` (0 for rows stored before v6).
"""

from __future__ import annotations

import time
from typing import Final

import duckdb

from core.errors import SchemaVersionError, StoreError

__all__ = ["CURRENT_VERSION", "V1_DDL", "ensure_schema", "read_version"]

V1_DDL: Final[tuple[str, ...]] = (
    """
    CREATE TABLE schema_version (
        version INTEGER NOT NULL,
        applied_at DOUBLE NOT NULL,
        note VARCHAR
    )
    """,
    """
    CREATE TABLE runs (
        run_id VARCHAR PRIMARY KEY,
        problem VARCHAR,
        strategy VARCHAR,
        seed BIGINT,
        config JSON,
        problem_config JSON,
        status VARCHAR NOT NULL,
        reason VARCHAR,
        started_at DOUBLE,
        finished_at DOUBLE,
        n_resumes INTEGER NOT NULL DEFAULT 0,
        best_idx INTEGER,
        budget_used JSON,
        journal VARCHAR
    )
    """,
    """
    CREATE TABLE events (
        run_id VARCHAR NOT NULL,
        seq BIGINT NOT NULL,
        ts DOUBLE NOT NULL,
        type VARCHAR NOT NULL,
        level VARCHAR,
        message VARCHAR,
        PRIMARY KEY (run_id, seq)
    )
    """,
    """
    CREATE TABLE specs (
        spec_hash VARCHAR PRIMARY KEY,
        spec_json VARCHAR NOT NULL,
        first_seen DOUBLE NOT NULL
    )
    """,
    """
    CREATE TABLE candidates (
        run_id VARCHAR NOT NULL,
        candidate_idx INTEGER NOT NULL,
        seq BIGINT NOT NULL,
        ts DOUBLE NOT NULL,
        generation INTEGER NOT NULL,
        parent_idx INTEGER,
        operator VARCHAR NOT NULL,
        thought VARCHAR NOT NULL,
        status VARCHAR NOT NULL,
        reason VARCHAR,
        spec_hash VARCHAR NOT NULL,
        proposal_text VARCHAR,
        design_cost_usd DOUBLE NOT NULL,
        design_requests INTEGER NOT NULL,
        PRIMARY KEY (run_id, candidate_idx)
    )
    """,
    """
    CREATE TABLE evaluations (
        run_id VARCHAR NOT NULL,
        seq BIGINT NOT NULL,
        ts DOUBLE NOT NULL,
        candidate_idx INTEGER NOT NULL,
        spec_hash VARCHAR NOT NULL,
        split VARCHAR NOT NULL,
        example_id VARCHAR NOT NULL,
        trial INTEGER NOT NULL,
        accuracy DOUBLE,
        cost_usd DOUBLE,
        latency_ms DOUBLE,
        input_tokens BIGINT,
        output_tokens BIGINT,
        requests BIGINT,
        status VARCHAR NOT NULL,
        error VARCHAR,
        output_summary VARCHAR,
        cached BOOLEAN NOT NULL,
        trace VARCHAR,
        PRIMARY KEY (run_id, candidate_idx, split, example_id, trial)
    )
    """,
    """
    CREATE TABLE candidate_results (
        run_id VARCHAR NOT NULL,
        seq BIGINT NOT NULL,
        ts DOUBLE NOT NULL,
        candidate_idx INTEGER NOT NULL,
        spec_hash VARCHAR NOT NULL,
        split VARCHAR NOT NULL,
        n_examples INTEGER NOT NULL,
        accuracy DOUBLE,
        cost_usd DOUBLE,
        latency_ms DOUBLE,
        n_agents INTEGER,
        depth INTEGER,
        aggregate_score DOUBLE,
        valid BOOLEAN NOT NULL,
        invalid_reason VARCHAR,
        error_rate DOUBLE,
        blank_rate DOUBLE,
        stdev DOUBLE,
        PRIMARY KEY (run_id, seq)
    )
    """,
    """
    CREATE TABLE snapshots (
        run_id VARCHAR NOT NULL,
        seq BIGINT NOT NULL,
        ts DOUBLE NOT NULL,
        generation INTEGER NOT NULL,
        entries INTEGER[] NOT NULL,
        front INTEGER[] NOT NULL,
        best_idx INTEGER,
        best_score DOUBLE,
        hypervolume DOUBLE,
        n_evaluations BIGINT,
        cost_usd_total DOUBLE,
        PRIMARY KEY (run_id, seq)
    )
    """,
    "CREATE SEQUENCE proposal_ids START 1",
    """
    CREATE TABLE proposals (
        proposal_id BIGINT PRIMARY KEY DEFAULT nextval('proposal_ids'),
        target VARCHAR NOT NULL,
        spec_json VARCHAR NOT NULL,
        spec_hash VARCHAR,
        run_id VARCHAR,
        candidate_idx INTEGER,
        base_version INTEGER,
        diff VARCHAR NOT NULL,
        proposed_by VARCHAR NOT NULL,
        created_at DOUBLE NOT NULL
    )
    """,
    "CREATE SEQUENCE approval_ids START 1",
    """
    CREATE TABLE approvals (
        approval_id BIGINT PRIMARY KEY DEFAULT nextval('approval_ids'),
        proposal_id BIGINT NOT NULL,
        decision VARCHAR NOT NULL,
        who VARCHAR NOT NULL,
        decided_at DOUBLE NOT NULL,
        comment VARCHAR NOT NULL,
        base_version INTEGER,
        applied_version INTEGER
    )
    """,
    """
    CREATE TABLE topology_versions (
        target VARCHAR NOT NULL,
        version INTEGER NOT NULL,
        spec_json VARCHAR NOT NULL,
        spec_hash VARCHAR,
        created_at DOUBLE NOT NULL,
        note VARCHAR NOT NULL,
        PRIMARY KEY (target, version)
    )
    """,
    """
    CREATE TABLE ingest_offsets (
        journal VARCHAR PRIMARY KEY,
        byte_offset BIGINT NOT NULL,
        updated_at DOUBLE NOT NULL
    )
    """,
    """
    CREATE TABLE ingest_errors (
        journal VARCHAR NOT NULL,
        byte_offset BIGINT NOT NULL,
        error VARCHAR NOT NULL,
        line_head VARCHAR NOT NULL,
        recorded_at DOUBLE NOT NULL
    )
    """,
)
"""The first release's schema. Frozen: migrations change it, never an edit here."""

_MIGRATIONS: Final[dict[int, tuple[str, ...]]] = {
    2: (
        "ALTER TABLE runs ADD COLUMN last_event_at DOUBLE",
        "ALTER TABLE runs ADD COLUMN n_events BIGINT NOT NULL DEFAULT 0",
        """
        UPDATE runs SET last_event_at = e.last_ts, n_events = e.n
        FROM (SELECT run_id, max(ts) AS last_ts, count(*) AS n FROM events GROUP BY run_id) e
        WHERE runs.run_id = e.run_id
        """,
    ),
    3: (
        """
        CREATE TABLE evaluations_v3 (
            run_id VARCHAR NOT NULL,
            seq BIGINT NOT NULL,
            ts DOUBLE NOT NULL,
            candidate_idx INTEGER NOT NULL,
            spec_hash VARCHAR NOT NULL,
            split VARCHAR NOT NULL,
            example_id VARCHAR NOT NULL,
            trial INTEGER NOT NULL,
            accuracy DOUBLE,
            cost_usd DOUBLE,
            latency_ms DOUBLE,
            input_tokens BIGINT,
            output_tokens BIGINT,
            requests BIGINT,
            status VARCHAR NOT NULL,
            error VARCHAR,
            output_summary VARCHAR,
            cached BOOLEAN NOT NULL,
            trace VARCHAR USING COMPRESSION zstd,
            PRIMARY KEY (run_id, candidate_idx, split, example_id, trial)
        )
        """,
        "INSERT INTO evaluations_v3 SELECT * FROM evaluations",
        "DROP TABLE evaluations",
        "ALTER TABLE evaluations_v3 RENAME TO evaluations",
    ),
    4: ("ALTER TABLE ingest_errors ADD COLUMN line_no BIGINT",),
    # a candidate that behaved exactly like an earlier one names it
    5: ("ALTER TABLE candidate_results ADD COLUMN same_as INTEGER",),
    # the designer's own tokens beside its cost and requests (earlier rows: none recorded, 0)
    6: (
        "ALTER TABLE candidates ADD COLUMN design_input_tokens BIGINT NOT NULL DEFAULT 0",
        "ALTER TABLE candidates ADD COLUMN design_output_tokens BIGINT NOT NULL DEFAULT 0",
    ),
}
"""Version -> statements that take a database from version - 1 to it."""

CURRENT_VERSION: Final[int] = max(_MIGRATIONS, default=1)
"""The schema version this code writes."""


def read_version(con: duckdb.DuckDBPyConnection) -> int | None:
    """The database's schema version, or None for an empty database (no tables at all).

    Raises:
        StoreError: the database has tables but no `schema_version` table (not a run store).
    """
    tables = {
        str(row[0])
        for row in con.execute(
            "SELECT table_name FROM information_schema.tables "
            "WHERE table_catalog = current_database() AND table_schema = 'main'"
        ).fetchall()
    }
    if not tables:
        return None
    if "schema_version" not in tables:
        raise StoreError(
            "this DuckDB file is not a Topology Studio run store (no schema_version table); "
            "point the store at another file"
        )
    row = con.execute("SELECT max(version) FROM schema_version").fetchone()
    if row is None or row[0] is None:
        raise StoreError("the run store's schema_version table is empty; the file is damaged")
    return int(row[0])


def ensure_schema(con: duckdb.DuckDBPyConnection, *, target: int = CURRENT_VERSION) -> int:
    """Create the schema in an empty database, or migrate an older one, up to `target`.

    All of it runs in one transaction: a failed migration leaves the file as it was.

    Args:
        con: a connection (not shared with another thread while this runs).
        target: the version to reach; only fixture scripts pass an older one.

    Returns:
        The schema version after the call.

    Raises:
        SchemaVersionError: the database is newer than this code (`CURRENT_VERSION`).
        StoreError: the file is not a run store.
    """
    version = read_version(con)
    if version is not None and version > CURRENT_VERSION:
        raise SchemaVersionError(
            f"the run store has schema version {version}, newer than this Topology Studio "
            f"understands ({CURRENT_VERSION}); upgrade topology-studio to open it"
        )
    if version is not None and version >= target:
        return version
    con.execute("BEGIN TRANSACTION")
    try:
        if version is None:
            for stmt in V1_DDL:
                con.execute(stmt)
            con.execute("INSERT INTO schema_version VALUES (1, ?, 'first release')", [time.time()])
            version = 1
        for v in range(version + 1, target + 1):
            for stmt in _MIGRATIONS[v]:
                con.execute(stmt)
            con.execute(
                "INSERT INTO schema_version VALUES (?, ?, ?)", [v, time.time(), f"migrated to v{v}"]
            )
        con.execute("COMMIT")
    except BaseException:
        con.execute("ROLLBACK")
        raise
    return target
