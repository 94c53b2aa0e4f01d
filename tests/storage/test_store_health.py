"""A run's worker-health snapshot beside its journal (for the Runs page's workers panel): written
whole, the latest only, read back exactly, and never mistaken for a journal or read when it is not a
plain file of that run."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from core.errors import StoreError
from core.storage import DuckDBRunStore
from core.storage.health import health_path, read_health, write_health
from core.vocab.health import HealthSnapshot, WorkerHealth

RUN = "20250101-120000-abc123"


def _snapshot(taken_at: float = 1_735_732_805.0, runs: int = 12) -> HealthSnapshot:
    return HealthSnapshot(
        run_id=RUN,
        executor="ray: 2 workers, local 127.0.0.1",
        taken_at=taken_at,
        workers=(
            WorkerHealth(
                name="worker-0", state="alive", pid=4242, node="127.0.0.1", batches=3,
                runs=runs, restarts=0, in_flight=4, last_seen=1_735_732_804.5,
            ),
            WorkerHealth(
                name="worker-1", state="dead", pid=4243, node="127.0.0.1", batches=1,
                runs=4, restarts=1, in_flight=0, last_seen=None,
            ),
        ),
    )  # fmt: skip


def test_a_snapshot_round_trips_and_the_next_one_replaces_it(tmp_path: Path) -> None:
    db = tmp_path / "runs.duckdb"
    assert read_health(db, RUN) is None  # none recorded yet
    path = write_health(db, _snapshot())
    assert path == tmp_path / "runs.duckdb.journals" / f"{RUN}.health.json"
    assert path == health_path(db, RUN)
    got = read_health(db, RUN)
    assert got == _snapshot()
    assert got is not None
    assert [(w.name, w.state, w.runs, w.in_flight, w.last_seen) for w in got.workers] == [
        ("worker-0", "alive", 12, 4, 1_735_732_804.5),
        ("worker-1", "dead", 4, 0, None),
    ]
    assert got.age_s(1_735_732_809.0) == 4.0
    assert got.age_s(0.0) == 0.0  # a clock that went back
    # bounded: the next snapshot replaces the last, one file per run, no temporary left
    write_health(db, _snapshot(taken_at=1_735_732_808.0, runs=20))
    again = read_health(db, RUN)
    assert again is not None and (again.taken_at, again.workers[0].runs) == (1_735_732_808.0, 20)
    assert sorted(os.listdir(path.parent)) == [f"{RUN}.health.json"]


def test_the_store_takes_a_health_file_for_no_journal(tmp_path: Path) -> None:
    db = tmp_path / "runs.duckdb"
    write_health(db, _snapshot())
    with DuckDBRunStore(db) as store:
        report = store.ingest()
        assert (report.n_events, report.n_journals, report.failed) == (0, 0, [])
        assert store.list_runs().empty
        assert store.list_ingest_errors() == []


def test_what_is_not_a_snapshot_of_that_run_reads_as_none(tmp_path: Path) -> None:
    db = tmp_path / "runs.duckdb"
    path = write_health(db, _snapshot())
    path.write_text("{not json")
    assert read_health(db, RUN) is None
    other = _snapshot().model_copy(update={"run_id": "20250101-000000-other"})
    path.write_text(other.model_dump_json())  # a file renamed to another run's name
    assert read_health(db, RUN) is None
    path.unlink()
    os.mkfifo(path)  # would block a plain open
    assert read_health(db, RUN) is None
    path.unlink()
    path.write_bytes(b" " * 1_000_001)  # over MAX_HEALTH_BYTES
    assert read_health(db, RUN) is None
    with pytest.raises(StoreError, match="invalid run id"):
        read_health(db, "../x")
