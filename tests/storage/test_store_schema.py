"""Schema versions: a first-release (v1) database opens and migrates; a newer one is refused."""

from __future__ import annotations

import shutil
from pathlib import Path

import duckdb
import pytest

from core.errors import SchemaVersionError, StoreError
from core.storage import DuckDBRunStore
from core.storage._schema import CURRENT_VERSION, ensure_schema, read_version

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "store_v1.duckdb"
T0 = 1_700_000_000.0


def schema_of(db: Path) -> list[tuple[object, ...]]:
    with duckdb.connect(str(db), read_only=True) as con:
        columns = con.execute(
            "SELECT table_name, ordinal_position, column_name, data_type, is_nullable, "
            "column_default FROM information_schema.columns WHERE table_schema = 'main' "
            "ORDER BY table_name, ordinal_position"
        ).fetchall()
        constraints = con.execute(
            "SELECT table_name, constraint_type, constraint_column_names::VARCHAR "
            "FROM duckdb_constraints() WHERE schema_name = 'main' ORDER BY ALL"
        ).fetchall()
        sequences = con.execute(
            "SELECT sequence_name FROM duckdb_sequences() ORDER BY ALL"
        ).fetchall()
        tables = con.execute(  # the DDL as DuckDB keeps it, column compression included
            "SELECT table_name, sql FROM duckdb_tables() WHERE schema_name = 'main' ORDER BY ALL"
        ).fetchall()
    return [*columns, *constraints, *sequences, *tables]


@pytest.fixture
def v1_copy(tmp_path: Path) -> Path:
    db = tmp_path / "old.duckdb"
    shutil.copy(FIXTURE, db)
    return db


def test_the_fixture_is_a_small_v1_database() -> None:
    assert FIXTURE.stat().st_size < 1_000_000
    with duckdb.connect(str(FIXTURE), read_only=True) as con:
        assert read_version(con) == 1


def test_a_new_database_is_at_the_current_version(tmp_path: Path) -> None:
    with DuckDBRunStore(tmp_path / "new.duckdb") as store:
        assert store.schema_version == CURRENT_VERSION == 6
    with duckdb.connect(str(tmp_path / "new.duckdb")) as con:
        rows = con.execute("SELECT version, note FROM schema_version ORDER BY version").fetchall()
    assert rows == [
        (1, "first release"),
        (2, "migrated to v2"),
        (3, "migrated to v3"),
        (4, "migrated to v4"),
        (5, "migrated to v5"),
        (6, "migrated to v6"),
    ]


def test_a_v1_database_opens_and_migrates_with_its_data(v1_copy: Path) -> None:
    with DuckDBRunStore(v1_copy) as store:
        assert store.schema_version == 6
        runs = store.list_runs()
        assert runs["run_id"].tolist() == ["v1-run"]
        row = runs.iloc[0]
        assert (row["status"], row["problem"], row["n_candidates"], row["n_evaluations"]) == (
            "completed",
            "gsm8k_replay",
            2,
            4,
        )
        # v2's columns were backfilled from the events table
        assert (row["last_event_at"], row["n_events"]) == (T0 + 9, 10)
        arch = store.archive("v1-run")
        assert arch["accuracy"].tolist() == [0.5, 1.0]
        assert arch["is_best"].tolist() == [False, True]
        assert store.example_trace("v1-run", 0, "gsm8k-0001") == [{"span_id": 0, "name": "solver"}]
        assert store.get_spec("spec1") is not None
        assert store.list_proposals()["decision"].tolist() == ["approved"]
        assert store.get_topology_version("gsm8k_replay").note == "initial"
        # writing after the migration continues the v1 sequences
        assert store.record_proposal("gsm8k_replay", "{}") == 2
        assert store.save_topology_version("gsm8k_replay", "{}") == 2
    with DuckDBRunStore(v1_copy) as store:  # reopening does not migrate again
        assert store.schema_version == 6
    with duckdb.connect(str(v1_copy)) as con:
        versions = con.execute("SELECT version FROM schema_version ORDER BY 1").fetchall()
        # v3 rebuilt the per-example table with its rows and zstd traces
        assert con.execute("SELECT count(*) FROM evaluations").fetchone() == (4,)
        ddl = con.execute(
            "SELECT sql FROM duckdb_tables() WHERE table_name = 'evaluations'"
        ).fetchone()
    assert versions == [(1,), (2,), (3,), (4,), (5,), (6,)]
    assert ddl is not None and "trace VARCHAR USING COMPRESSION ZSTD" in str(ddl[0])


def test_a_migrated_database_has_exactly_the_new_schema(v1_copy: Path, tmp_path: Path) -> None:
    DuckDBRunStore(v1_copy).close()
    DuckDBRunStore(tmp_path / "fresh.duckdb").close()
    assert schema_of(v1_copy) == schema_of(tmp_path / "fresh.duckdb")


def test_migrating_step_by_step(tmp_path: Path) -> None:
    with duckdb.connect(str(tmp_path / "x.duckdb")) as con:
        assert ensure_schema(con, target=1) == 1
        assert read_version(con) == 1
        assert ensure_schema(con, target=2) == 2
        assert read_version(con) == 2
        assert ensure_schema(con, target=3) == 3
        assert read_version(con) == 3
        assert ensure_schema(con) == 6
        assert ensure_schema(con) == 6
        assert read_version(con) == 6


def test_a_database_from_a_newer_version_is_refused(tmp_path: Path) -> None:
    db = tmp_path / "future.duckdb"
    DuckDBRunStore(db).close()
    with duckdb.connect(str(db)) as con:
        con.execute("INSERT INTO schema_version VALUES (99, 0, 'from the future')")
    with pytest.raises(SchemaVersionError, match="schema version 99, newer than"):
        DuckDBRunStore(db)
    assert issubclass(SchemaVersionError, StoreError)
    # the refused open released the file
    with duckdb.connect(str(db)) as con:
        assert con.execute("SELECT max(version) FROM schema_version").fetchone() == (99,)


def test_a_failed_migration_leaves_the_file_as_it_was(
    v1_copy: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Every step runs in one transaction: a migration that fails halfway (here a made-up next
    version whose second statement fails) leaves the database at the version it had, with its rows."""
    import core.storage._schema as schema

    monkeypatch.setitem(
        schema._MIGRATIONS,  # noqa: SLF001 - the module's own table of steps
        CURRENT_VERSION + 1,
        ("ALTER TABLE runs ADD COLUMN halfway INTEGER", "SELECT no_such_function()"),
    )
    with duckdb.connect(str(v1_copy)) as con:
        with pytest.raises(duckdb.Error, match="no_such_function"):
            ensure_schema(con, target=CURRENT_VERSION + 1)
        assert read_version(con) == 1  # not even v2 to v4 stayed
        columns = [r[0] for r in con.execute("DESCRIBE runs").fetchall()]
        assert "halfway" not in columns and "last_event_at" not in columns
        assert con.execute("SELECT count(*) FROM evaluations").fetchone() == (4,)


def test_lines_skipped_before_v4_are_listed_with_what_is_known(tmp_path: Path) -> None:
    """v4 numbers skipped journal lines; errors a v3 store recorded keep their byte offset and
    get no line number (the migration cannot read the journals), unless the line is skipped
    again."""
    db = tmp_path / "v3.duckdb"
    with duckdb.connect(str(db)) as con:
        assert ensure_schema(con, target=3) == 3
        con.execute(
            "INSERT INTO ingest_errors VALUES ('run-a.jsonl', 120, 'not json', 'oops', ?)", [T0]
        )
    folder = tmp_path / "journals"
    folder.mkdir()
    (folder / "run-a.jsonl").write_bytes(b"x" * 119 + b"\n" + b"oops\nagain\n")
    with DuckDBRunStore(db, journal_dir=folder) as store:
        assert store.schema_version == 6
        errors = store.list_ingest_errors("run-a")  # the journal is ingested first
    old = errors[1]  # recorded by v3, skipped again now: the first record, numbered
    assert (old.run_id, old.journal, old.line_no, old.byte_offset, old.error, old.line_head) == (
        "run-a",
        str(folder / "run-a.jsonl"),
        2,
        120,
        "not json",
        "oops",
    )
    assert old.recorded_at == T0
    # today's ingest skipped the lines again (no stored offset): numbered; 'oops' listed once,
    # as first recorded
    assert [(e.line_no, e.byte_offset, e.line_head) for e in errors] == [
        (1, 0, "x" * 119),
        (2, 120, "oops"),
        (3, 125, "again"),
    ]

    with duckdb.connect(str(db)) as con:  # the v3 record alone: no line number
        con.execute("DELETE FROM ingest_errors WHERE line_no IS NOT NULL")
    with DuckDBRunStore(db, journal_dir=folder, auto_ingest=False) as store:
        assert [(e.line_no, e.error) for e in store.list_ingest_errors()] == [(None, "not json")]


def test_every_table_keeps_an_event_field_in_the_type_ingest_reads_it_as(tmp_path: Path) -> None:
    """The events' integer ranges (`core.search.events`) are those of `_ingest._COLUMNS`; every
    stored column of the same name has the same type, so an event that validates fits."""
    from core.storage._ingest import _COLUMNS

    DuckDBRunStore(tmp_path / "new.duckdb").close()
    with duckdb.connect(str(tmp_path / "new.duckdb"), read_only=True) as con:
        rows = con.execute(
            "SELECT table_name, column_name, data_type FROM information_schema.columns "
            "WHERE table_schema = 'main'"
        ).fetchall()
    checked = [
        (str(table), str(column), str(kind))
        for table, column, kind in rows
        if column in _COLUMNS and _COLUMNS[str(column)] in ("INTEGER", "BIGINT", "INTEGER[]")
    ]
    assert len(checked) == 29  # v6: candidates.design_input_tokens, design_output_tokens
    assert [c for c in checked if c[2] != _COLUMNS[c[1]]] == []


def test_a_v5_store_keeps_its_design_costs_and_counts_no_design_tokens(tmp_path: Path) -> None:
    """v6 adds the designer's tokens beside its cost and requests: a proposal stored before
    keeps both, with 0 tokens (none were recorded), and the runs list sums them per run."""
    db = tmp_path / "v5.duckdb"
    with duckdb.connect(str(db)) as con:
        assert ensure_schema(con, target=5) == 5
        con.execute(
            "INSERT INTO runs (run_id, status, started_at) VALUES ('old', 'completed', ?)", [T0]
        )
        con.execute(
            "INSERT INTO candidates VALUES ('old', 1, 3, ?, 0, 0, 'meta_agent', 'why', "
            "'proposed', NULL, 'h1', NULL, 0.25, 3)",
            [T0 + 1],
        )
    with DuckDBRunStore(db, auto_ingest=False) as store:
        assert store.schema_version == 6
        row = store.list_runs().iloc[0]
        assert (
            row["design_cost_usd"],
            row["design_requests"],
            row["design_input_tokens"],
            row["design_output_tokens"],
        ) == (0.25, 3, 0, 0)
    with duckdb.connect(str(db), read_only=True) as con:
        assert con.execute(
            "SELECT design_cost_usd, design_requests, design_input_tokens, design_output_tokens "
            "FROM candidates"
        ).fetchall() == [(0.25, 3, 0, 0)]
