"""Damaged and read-only database files, at the store's level.

A damaged file (garbage over its blocks) is a `StoreCorruptError` naming the file and the
rebuild, never a raw `duckdb.Error` (nor a `StoreBusyError`: DuckDB's "block" holds "lock");
`rebuild_store` keeps the damaged file aside and restores the same runs from the journals; a
file that cannot be written is read from a read-only copy that the journals keep live.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

from core.errors import StoreCorruptError, StoreError, StoreReadOnlyError
from core.storage import DuckDBRunStore, journal_dir, open_store, rebuild_store

FAKE_SEARCH = Path(__file__).with_name("fake_search.py")
REPO = Path(__file__).resolve().parents[2]

GARBAGE = bytes(range(256)) * 256
"""64 KiB of fixed garbage (the same bytes every run)."""


def _fake_runs(db: Path, runs: dict[str, int]) -> None:
    """Write one fake search's journal per run (run id -> seed) beside `db`."""
    for run_id, seed in runs.items():
        subprocess.run(  # noqa: S603 - our own interpreter and script
            [sys.executable, str(FAKE_SEARCH), str(journal_dir(db) / f"{run_id}.jsonl"),
             "--run-id", run_id, "--seed", str(seed), "--candidates", "12", "--examples", "8"],
            check=True, capture_output=True, env={**os.environ, "PYTHONPATH": str(REPO)},
        )  # fmt: skip


def _snapshot(store: DuckDBRunStore, run_ids: list[str]) -> dict[str, pd.DataFrame]:
    runs = store.list_runs().set_index("run_id").sort_index()
    cols = ["status", "n_candidates", "n_evaluations", "best_idx", "best_score", "n_events"]
    out = {"runs": runs[cols]}
    for r in run_ids:
        out[f"archive {r}"] = store.archive(r)
        out[f"examples {r}"] = store.candidate_examples(r, 3).drop(columns=["seq", "ts"])
    return out


@pytest.fixture(scope="module")
def healthy(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A run store with three runs from their journals, and one proposal."""
    db = tmp_path_factory.mktemp("damaged") / "runs.duckdb"
    _fake_runs(db, {"r1": 1, "r2": 2, "r3": 3})
    with DuckDBRunStore(db) as store:
        store.ingest()
        store.record_proposal("reg/fake", "{}", run_id="r1", candidate_idx=2, proposed_by="me")
    return db


def _copy(src: Path, dst_dir: Path) -> Path:
    dst_dir.mkdir(parents=True, exist_ok=True)
    dst = dst_dir / src.name
    dst.write_bytes(src.read_bytes())
    journal_dir(dst).mkdir()
    for j in journal_dir(src).iterdir():
        (journal_dir(dst) / j.name).write_bytes(j.read_bytes())
    return dst


def _damage(db: Path, offset: int) -> None:
    with db.open("r+b") as fh:
        fh.seek(offset)
        fh.write(GARBAGE)


def test_a_damaged_header_block_is_corrupt_not_busy(healthy: Path, tmp_path: Path) -> None:
    """Reproduces the failure: garbage over the database headers gave `StoreBusyError`
    ("block") and garbage over the first data block (the catalog) a raw `duckdb.Error`; both
    are `StoreCorruptError` now."""
    for offset in (4096, 12288):
        db = _copy(healthy, tmp_path / str(offset))
        _damage(db, offset)
        with pytest.raises(StoreCorruptError) as caught:
            DuckDBRunStore(db)
        text = str(caught.value)
        assert caught.value.path == str(db)
        assert text.startswith(f"the run store {db} is damaged (Corrupt database file: ")
        assert text.endswith(
            f"The run journals in {db}.journals are intact: 'topology-studio store rebuild "
            f"--db {db}' keeps the damaged file aside and restores every journaled run from "
            "them. Not restored: proposals, approvals and topology versions saved in the "
            "editor (they lived only in the database; each applied version and its approval "
            "is still in the topology registry's v*.meta.json files)"
        )
        assert "\n" not in text


def test_rebuild_restores_the_same_runs_and_keeps_the_damaged_file(
    healthy: Path, tmp_path: Path
) -> None:
    db = _copy(healthy, tmp_path)
    with DuckDBRunStore(db) as store:
        before = _snapshot(store, ["r1", "r2", "r3"])
    _damage(db, 4096)
    damaged = db.read_bytes()
    report = rebuild_store(db)
    assert report.run_ids == ("r1", "r2", "r3")
    assert (report.n_journals, report.failed, report.skipped_lines) == (3, (), 0)
    assert report.kept_as is not None and report.kept_as.startswith(f"{db}.damaged-")
    assert Path(report.kept_as).read_bytes() == damaged  # kept, never deleted
    with DuckDBRunStore(db) as store:
        after = _snapshot(store, ["r1", "r2", "r3"])
        assert store.list_proposals().empty  # what a rebuild cannot restore
    assert before.keys() == after.keys()
    for key, frame in before.items():
        pd.testing.assert_frame_equal(frame, after[key], obj=key)


def test_rebuild_refuses_a_healthy_store_without_force(healthy: Path, tmp_path: Path) -> None:
    db = _copy(healthy, tmp_path)
    original = db.read_bytes()
    with pytest.raises(StoreError) as caught:
        rebuild_store(db)
    assert str(caught.value) == (
        f"the run store {db} opens and reads fine: a rebuild would drop its proposals, "
        "approvals and topology versions saved in the editor; nothing was changed (add --force "
        "to rebuild it anyway)"
    )
    assert db.read_bytes() == original
    report = rebuild_store(db, force=True)
    assert report.run_ids == ("r1", "r2", "r3")


def test_rebuild_without_journals_changes_nothing(tmp_path: Path) -> None:
    db = tmp_path / "runs.duckdb"
    db.write_bytes(GARBAGE)
    with pytest.raises(StoreError) as caught:
        rebuild_store(db)
    assert str(caught.value) == (
        f"no run journals in {db}.journals to rebuild {db} from; nothing was changed"
    )
    assert db.read_bytes() == GARBAGE


def test_a_query_on_a_late_damaged_block_is_a_store_error(healthy: Path, tmp_path: Path) -> None:
    """Damage only some blocks: whatever call reads one raises `StoreCorruptError` (never a
    raw `duckdb.Error`), and `check` finds it up front."""
    db = _copy(healthy, tmp_path)
    size = db.stat().st_size
    for offset in range(12288, size, 262144):  # every data block's first bytes
        _damage(db, offset + 8)
    try:
        store = DuckDBRunStore(db, auto_ingest=False)
    except StoreCorruptError:
        return  # the schema's own blocks were hit: refused at open, as it must be
    with store, pytest.raises(StoreCorruptError):
        store.check()


def _refuse_writable_opens(monkeypatch: pytest.MonkeyPatch) -> None:
    """The read-only file system, injected: every open for writing fails as DuckDB's does on a
    read-only mount (`IO Error: Cannot open file ...: Read-only file system`)."""
    real = DuckDBRunStore._connect  # pyright: ignore[reportPrivateUsage]

    def connect(path: str, *, read_only: bool = False) -> object:
        if path != ":memory:" and not read_only:
            raise StoreReadOnlyError(
                f'cannot open the run store {path}: IO Error: Cannot open file "{path}": '
                "Read-only file system"
            )
        return real(path, read_only=read_only)

    monkeypatch.setattr(DuckDBRunStore, "_connect", staticmethod(connect))


def test_a_read_only_file_opens_as_a_live_read_only_copy(
    healthy: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    db = _copy(healthy, tmp_path)
    with DuckDBRunStore(db) as store:
        before = _snapshot(store, ["r1", "r2", "r3"])
    _fake_runs(db, {"r4": 4})  # journaled after the file was last written
    original = db.read_bytes()
    _refuse_writable_opens(monkeypatch)
    with pytest.raises(StoreReadOnlyError):
        open_store(db)
    with open_store(db, on_busy="journals") as view:
        assert isinstance(view, DuckDBRunStore)
        assert view.read_only
        assert view.read_only_reason == (
            f'cannot open the run store {db}: IO Error: Cannot open file "{db}": '
            "Read-only file system"
        )
        now = _snapshot(view, ["r1", "r2", "r3"])
        for key, frame in before.items():
            if key != "runs":
                pd.testing.assert_frame_equal(frame, now[key], obj=key)
        assert sorted(view.list_runs()["run_id"]) == ["r1", "r2", "r3", "r4"]
        assert view.list_proposals()["target"].tolist() == ["reg/fake"]  # from the file
        with pytest.raises(StoreError, match="read-only view .*nothing was written"):
            view.record_proposal("t", "{}")
    assert db.read_bytes() == original
