"""Across processes: a held database file (StoreBusyError and the journal view), a search
watched live from another process (F10), and a search killed and resumed."""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pandas as pd
import pytest

from core.errors import StoreBusyError, StoreError
from core.storage import DuckDBRunStore, journal_path, open_store, read_journal

FAKE_SEARCH = Path(__file__).with_name("fake_search.py")

HOLDER = """
import sys
from core.storage import DuckDBRunStore
store = DuckDBRunStore(sys.argv[1])
print("holding", flush=True)
sys.stdin.read()
store.close()
"""


def start(args: list[str], **kw: object) -> subprocess.Popen[str]:
    return subprocess.Popen(  # noqa: S603 - our own interpreter and scripts
        [sys.executable, *args],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        **kw,  # type: ignore[arg-type]
    )


def finish(proc: subprocess.Popen[str], timeout: float = 60) -> str:
    """Wait for a process, close its pipes, and return its stderr if it failed (else "")."""
    _, err = proc.communicate(timeout=timeout)
    return "" if proc.returncode == 0 else f"exit {proc.returncode}: {err}"


@pytest.fixture
def holder(tmp_path: Path) -> Iterator[tuple[Path, subprocess.Popen[str]]]:
    """Another process (say, the studio) holding the database file."""
    db = tmp_path / "runs.duckdb"
    proc = start(["-c", HOLDER, str(db)])
    assert proc.stdout is not None
    assert proc.stdout.readline().strip() == "holding"
    try:
        yield db, proc
    finally:
        proc.communicate(timeout=30)


def test_a_held_file_raises_store_busy_naming_the_holder(
    holder: tuple[Path, subprocess.Popen[str]],
) -> None:
    db, proc = holder
    with pytest.raises(StoreBusyError) as err:
        DuckDBRunStore(db)
    msg = str(err.value)
    assert f"held by process {proc.pid}" in msg
    assert "on_busy='journals'" in msg
    assert str(db) + ".journals" in msg
    with pytest.raises(StoreBusyError):
        open_store(db)


def test_the_journal_view_answers_while_the_file_is_held(
    holder: tuple[Path, subprocess.Popen[str]],
) -> None:
    db, _ = holder
    search = start(
        [str(FAKE_SEARCH), str(journal_path(db, "cli-run")), "--run-id", "cli-run",
         "--candidates", "3", "--examples", "2"]
    )  # fmt: skip
    assert finish(search) == ""
    with open_store(db, on_busy="journals") as view:
        assert view.read_only
        runs = view.list_runs()
        assert (runs["run_id"].tolist(), runs["status"].tolist()) == (["cli-run"], ["completed"])
        assert len(view.archive("cli-run")) == 3
        with pytest.raises(StoreError, match="read-only view"):
            view.save_topology_version("t", "{}")


def test_a_search_in_another_process_is_watched_live(tmp_path: Path) -> None:
    """F10: a result every 100 ms for 3 s while the studio's store lists runs; then again."""
    db = tmp_path / "runs.duckdb"
    with DuckDBRunStore(db) as studio:  # the studio holds the file all along
        assert len(studio.list_runs()) == 0
        search = start(
            [str(FAKE_SEARCH), str(journal_path(db, "live")), "--run-id", "live",
             "--candidates", "3", "--examples", "10", "--delay", "0.1"]
        )  # fmt: skip
        seen: list[tuple[str, str, int]] = []
        deadline = time.monotonic() + 60
        while search.poll() is None and time.monotonic() < deadline:
            runs = studio.list_runs()  # must never raise
            if len(runs):
                row = runs.iloc[0]
                n = (
                    len(studio.candidate_examples("live", 0))
                    + len(studio.candidate_examples("live", 1))
                    + len(studio.candidate_examples("live", 2))
                )
                seen.append((str(row["status"]), str(row["status_label"]), n))
            time.sleep(0.05)
        assert finish(search) == ""
        running = [s for s in seen if s[0] == "running"]
        assert len(running) >= 3  # about 3 s of polls (fewer on a loaded machine)
        assert all(label.startswith("running, data as of ") for _, label, _ in running)
        counts = [n for _, _, n in seen]
        assert counts == sorted(counts)  # results only ever arrive
        assert len({n for n in counts if 0 < n < 30}) >= 2  # seen growing while it ran
        # after it ends every result is visible without reopening
        row = studio.list_runs().iloc[0]
        assert (row["status"], row["n_evaluations"], row["n_candidates"]) == ("completed", 30, 3)
        assert studio.archive("live")["candidate_idx"].tolist() == [0, 1, 2]


def test_the_journal_view_watches_a_search_live_while_the_file_is_held(
    holder: tuple[Path, subprocess.Popen[str]],
) -> None:
    """F10 when the studio cannot open the file (another process holds it): its read-only
    journal view lists a running search as running, then every result once it ends, without
    reopening; no query ever raises."""
    db, _ = holder
    with open_store(db, on_busy="journals") as view:
        assert view.read_only and len(view.list_runs()) == 0
        search = start(
            [str(FAKE_SEARCH), str(journal_path(db, "live")), "--run-id", "live",
             "--candidates", "3", "--examples", "10", "--delay", "0.1"]
        )  # fmt: skip
        labels: list[str] = []
        deadline = time.monotonic() + 60
        while search.poll() is None and time.monotonic() < deadline:
            runs = view.list_runs()
            if len(runs):
                labels.append(str(runs.iloc[0]["status_label"]))
            time.sleep(0.05)
        assert finish(search) == ""
        assert any(label.startswith("running, data as of ") for label in labels)
        row = view.list_runs().iloc[0]
        assert (row["status"], row["n_evaluations"], row["n_candidates"]) == ("completed", 30, 3)


def test_two_threads_ingest_one_store_while_another_process_writes(tmp_path: Path) -> None:
    """One store, two threads ingesting and querying in a loop while a search process appends
    to its journal: no error, no failed ingest, every event stored once."""
    db = tmp_path / "runs.duckdb"
    errors: list[str] = []
    done = threading.Event()
    with DuckDBRunStore(db, auto_ingest=False) as store:

        def work() -> None:
            try:
                while not done.is_set():
                    errors.extend(f"{j}: {e}" for j, e in store.ingest().failed)
                    store.archive("live")
                    store.list_runs()
            except Exception as exc:  # reported below
                errors.append(f"{type(exc).__name__}: {exc}")

        threads = [threading.Thread(target=work) for _ in range(2)]
        for th in threads:
            th.start()
        search = start(
            [str(FAKE_SEARCH), str(journal_path(db, "live")), "--run-id", "live",
             "--candidates", "6", "--examples", "20", "--delay", "0.005"]
        )  # fmt: skip
        try:
            assert finish(search) == ""
        finally:
            done.set()
            for th in threads:
                th.join()
        store.ingest()
        assert errors == []
        row = store.list_runs().iloc[0]
        n_lines = len(read_journal(journal_path(db, "live")))
        assert (row["status"], row["n_events"], row["n_evaluations"]) == ("completed", n_lines, 120)
        assert n_lines == 1 + 6 + 120 + 6 + 2 + 1  # start, proposals, results, snapshots, end


def run_fake(journal: Path, *extra: str) -> subprocess.Popen[str]:
    return start(
        [str(FAKE_SEARCH), str(journal), "--run-id", journal.stem, "--seed", "5",
         "--candidates", "9", "--examples", "8", *extra]
    )  # fmt: skip


def comparable(store: DuckDBRunStore, run_id: str) -> dict[str, pd.DataFrame]:
    """Everything a run stored, minus when it happened and the event numbering."""
    out = {"archive": store.archive(run_id)}
    for c in range(9):
        ex = store.candidate_examples(run_id, c, with_trace=True)
        out[f"examples{c}"] = ex.drop(columns=["seq", "ts"])
    out["snapshots"] = store.snapshots(run_id).drop(columns=["seq", "ts"])
    return out


def test_a_killed_search_resumes_to_the_same_results(tmp_path: Path) -> None:
    """Killed with SIGKILL at a random point (and a torn last line), resumed: the same
    archive, results and snapshots as an uninterrupted run, each example evaluated once."""
    db = tmp_path / "runs.duckdb"
    whole, crashed = journal_path(db, "whole"), journal_path(db, "crashed")
    assert finish(run_fake(whole)) == ""

    proc = run_fake(crashed, "--delay", "0.02")
    assert proc.stdout is not None and proc.stdout.readline().strip() == "started"
    time.sleep(random.Random(os.getpid()).uniform(0.1, 0.9))
    proc.send_signal(signal.SIGKILL)
    proc.communicate(timeout=30)
    assert proc.returncode == -signal.SIGKILL
    killed_at = read_journal(crashed)
    assert killed_at[-1].type != "run_finished", "the run ended before the kill"
    with crashed.open("ab") as fh:
        fh.write(b'{"run_id": "crashed", "seq": 99999, "ts": 1.0, "type": "exa')  # torn

    with DuckDBRunStore(db) as store:  # the studio sees it interrupted
        assert store.list_runs().set_index("run_id").loc["crashed", "status"] == "interrupted"
        assert finish(run_fake(crashed, "--resume")) == ""
        runs = store.list_runs().set_index("run_id")
        assert runs.loc["crashed", "status"] == "completed"
        assert runs.loc["crashed", "n_resumes"] == 1
        assert runs.loc["crashed", "n_evaluations"] == runs.loc["whole", "n_evaluations"] == 72
        a, b = comparable(store, "whole"), comparable(store, "crashed")
    for key in a:
        pd.testing.assert_frame_equal(a[key], b[key], obj=key)
    events = read_journal(crashed)
    assert [e.seq for e in events] == list(range(len(events)))
    done = [(e.candidate_idx, e.example_id) for e in events if e.type == "example_evaluated"]
    assert len(done) == len(set(done)) == 72  # nothing evaluated twice
