"""The studio reopens its run store when the database file is deleted or replaced under it.

The store refuses every call on a file that is no longer the one it opened (`StoreError`:
"... was deleted or replaced ..."). The manager then closes it, opens the file again and retries
the call once; a second failure is raised as before, and other store errors are never retried.
"""

from __future__ import annotations

import math
import os
import threading
from pathlib import Path

import pytest

from core.errors import StoreError
from core.ir import parse_topology
from core.storage import DuckDBRunStore, RunJournal, RunStore, journal_path
from studio.manager import StudioManager

SPEC = parse_topology(
    '{"kind": "pipeline", "id": "seed", "steps": [{"operation": {"kind": "agent_step", '
    '"id": "solve", "agent_name": "6b_finetuning"}}]}'
)


def other_db(tmp_path: Path, make_events, run_id: str) -> Path:  # noqa: ANN001 (fixture fn)
    """A second, closed run database holding one finished run `run_id`."""
    path = tmp_path / "other" / "runs.duckdb"
    with DuckDBRunStore(path) as store:
        store.record_events(make_events(run_id, t0=1_800_000_000.0))
    return path


def test_a_replaced_database_file_is_reopened_and_read_from_the_new_file(
    tmp_path: Path, small_db: Path, make_events
) -> None:
    m = StudioManager(small_db, registry_root=tmp_path / "reg")
    try:
        assert m.store.list_runs()["run_id"].tolist() == ["20250101-120000-abc123"]
        os.replace(other_db(tmp_path, make_events, "run-b"), small_db)

        runs = m.store.list_runs()  # refused by the old store, answered by a reopened one
        assert runs["run_id"].tolist() == ["run-b"]
        assert runs["n_candidates"].tolist() == [4]
        assert runs["best_idx"].tolist() == [1]
        assert runs["best_score"].tolist() == [0.45]
        assert m.store.get_run("20250101-120000-abc123") is None
        record = m.store.get_run("run-b")
        assert record is not None and record.started_at == 1_800_000_000.0
        archive = m.store.archive("run-b")
        assert archive["candidate_idx"].tolist() == [0, 1, 2, 3]
        assert archive["accuracy"].tolist()[:3] == [0.25, 0.60, 0.20]
        assert math.isnan(archive["accuracy"].tolist()[3])
        assert archive["on_front"].tolist() == [True, True, False, False]

        pid = m.propose("solver", SPEC)  # writes go to the new file too
        assert pid == 1
    finally:
        m.close()
    with DuckDBRunStore(small_db) as direct:
        assert direct.list_runs()["run_id"].tolist() == ["run-b"]
        assert direct.list_proposals()["proposal_id"].tolist() == [1]
        assert direct.list_topology_versions("solver")["version"].tolist() == [1]


def test_a_deleted_database_file_is_recreated_and_refilled_from_the_journals(
    tmp_path: Path, small_db: Path, make_events
) -> None:
    with RunJournal.create(journal_path(small_db, "run-j")) as journal:
        for event in make_events("run-j", t0=1_750_000_000.0):
            journal.append(event)
    m = StudioManager(small_db, registry_root=tmp_path / "reg")
    try:
        assert m.store.list_runs()["run_id"].tolist() == ["run-j", "20250101-120000-abc123"]
        small_db.unlink()

        # the run recorded only in the deleted file is gone; the journal's run comes back
        assert m.store.list_runs()["run_id"].tolist() == ["run-j"]
        assert small_db.is_file()
        assert m.store.archive("run-j")["candidate_idx"].tolist() == [0, 1, 2, 3]
        assert m.refresh() == 0  # everything of the journal is in the new file already
        assert not m.read_only
    finally:
        m.close()


class _Counting:
    """A store factory counting the stores it opened; `fail` makes `list_runs` raise."""

    def __init__(self, fail: str | None) -> None:
        self.fail = fail
        self.opened: list[DuckDBRunStore] = []
        self.calls = 0

    def __call__(self, path: str) -> RunStore:
        factory = self

        class Store(DuckDBRunStore):
            def list_runs(self):  # noqa: ANN202 (the base's DataFrame)
                factory.calls += 1
                if factory.fail is not None:
                    raise StoreError(factory.fail)
                return super().list_runs()

        store = Store(path)
        self.opened.append(store)
        return store


REPLACED = (
    "the run store file x was deleted or replaced while this store had it open: what it wrote "
    "since then went to the old file and would be lost. Close this store and open it again"
)


def test_a_read_failing_again_after_the_reopen_raises_the_error_as_before(
    tmp_path: Path, small_db: Path
) -> None:
    factory = _Counting(REPLACED)
    m = StudioManager(small_db, registry_root=tmp_path / "reg", store_factory=factory)
    try:
        with pytest.raises(StoreError) as info:
            m.store.list_runs()
        assert str(info.value) == REPLACED
        assert factory.calls == 2  # the read and its one retry
        assert len(factory.opened) == 2  # the first store and one reopen
        assert ", closed," in repr(factory.opened[0])  # closed before the file was reopened
        with pytest.raises(StoreError):
            m.store.list_runs()  # a later read tries once more, as a page refresh would
        assert factory.calls == 4
        assert len(factory.opened) == 3
    finally:
        m.close()


def test_other_store_errors_are_not_retried(tmp_path: Path, small_db: Path) -> None:
    factory = _Counting("the run store is closed")
    m = StudioManager(small_db, registry_root=tmp_path / "reg", store_factory=factory)
    try:
        with pytest.raises(StoreError, match="^the run store is closed$"):
            m.store.list_runs()
        assert factory.calls == 1
        assert len(factory.opened) == 1
        with pytest.raises(StoreError) as info:
            m.store.get_topology_version("nothing")
        assert str(info.value).startswith("target 'nothing' has no ")
        assert len(factory.opened) == 1
    finally:
        m.close()


def test_threads_reading_when_the_file_is_replaced_reopen_it_once(
    tmp_path: Path, small_db: Path, make_events
) -> None:
    factory = _Counting(None)
    m = StudioManager(small_db, registry_root=tmp_path / "reg", store_factory=factory)
    try:
        assert m.store.list_runs()["run_id"].tolist() == ["20250101-120000-abc123"]
        os.replace(other_db(tmp_path, make_events, "run-b"), small_db)
        start = threading.Barrier(4)
        seen: list[list[str]] = []
        errors: list[BaseException] = []

        def read() -> None:
            start.wait()
            try:
                seen.append(m.store.list_runs()["run_id"].tolist())
            except BaseException as exc:  # noqa: BLE001 (reported below)
                errors.append(exc)

        threads = [threading.Thread(target=read) for _ in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(timeout=60)
        assert errors == []
        assert seen == [["run-b"]] * 4
        assert len(factory.opened) == 2  # one reopen, whatever the threads' order
    finally:
        m.close()
