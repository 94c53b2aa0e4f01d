"""A run's stored `journal` is followed only into the store's journals folder, and only to a
regular file opened without blocking: stored data never chooses a file to read.

Before: with `journal = '../../secret.txt'` in the database, `topology-studio runs` read that
file (its first line landed in `ingest_errors.line_head`), and with a FIFO there `runs` hung.
Now such a journal is refused without being read, the refusal is recorded in `ingest_errors`
(once), and the run is listed `damaged`.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import duckdb
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "contracts"))

from store_contract import small_run  # noqa: E402

from core.storage import DuckDBRunStore, RunJournal, journal_path  # noqa: E402
from core.storage._journal_files import (  # noqa: E402
    JournalRefusedError,
    journal_refusal,
    open_journal,
)

REPO = Path(__file__).resolve().parents[2]
SECRET = "TOP SECRET: not a journal\n"


def _running(db: Path, run_id: str) -> None:
    """A run whose writer is gone before `run_finished` (it would be listed interrupted)."""
    with RunJournal.create(journal_path(db, run_id)) as j:
        for e in small_run(run_id)[:4]:
            j.append(e)


@pytest.fixture
def tampered(tmp_path: Path) -> tuple[Path, Path]:
    """Four interrupted runs, then their stored journals pointed elsewhere: `run-a` at
    `../../secret.txt`, `run-b` at the secret's absolute path, `run-c`'s file replaced by a
    FIFO, `run-d`'s by a symlink to the secret. Returns `(db, secret)`."""
    db = tmp_path / "a" / "b" / "runs.duckdb"
    db.parent.mkdir(parents=True)
    secret = tmp_path / "a" / "secret.txt"  # = <db>.journals/../../secret.txt
    secret.write_text(SECRET)
    for run_id in ("run-a", "run-b", "run-c", "run-d"):
        _running(db, run_id)
    with DuckDBRunStore(db) as store:
        assert store.list_runs()["status"].tolist() == ["interrupted"] * 4
    with duckdb.connect(str(db)) as con:
        con.execute("UPDATE runs SET journal = '../../secret.txt' WHERE run_id = 'run-a'")
        con.execute("UPDATE runs SET journal = ? WHERE run_id = 'run-b'", [str(secret)])
    fifo = journal_path(db, "run-c")
    fifo.unlink()
    os.mkfifo(fifo)
    link = journal_path(db, "run-d")
    link.unlink()
    link.symlink_to(secret)
    return db, secret


def test_runs_never_follows_a_journal_out_of_its_folder_nor_blocks_on_a_fifo(
    tampered: tuple[Path, Path],
) -> None:
    db, secret = tampered
    folder = journal_path(db, "x").parent
    # a subprocess, so that the old hang fails the test instead of stopping the suite
    proc = subprocess.run(
        [sys.executable, "-m", "studio.cli", "runs", "--db", str(db)],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    rows = {line.split()[0]: line.split()[3] for line in proc.stdout.splitlines()[1:]}
    assert rows == {f"run-{x}": "damaged" for x in "abcd"}

    outside = f"resolves outside the journals folder {folder}"
    why = {
        "run-a": f"journal '../../secret.txt' {outside}",
        "run-b": f"journal '{secret}' {outside}",
        "run-c": "journal 'run-c.jsonl' is a FIFO, not a regular file",
        "run-d": f"journal 'run-d.jsonl' {outside}",
    }
    with DuckDBRunStore(db) as store:
        runs = store.list_runs().sort_values("run_id")
        assert runs["status"].tolist() == ["damaged"] * 4
        assert runs["status_label"].tolist() == [f"damaged: {why[r]}" for r in sorted(why)]
        run = store.get_run("run-a")
        assert run is not None and run.status == "damaged"
        errors = store.list_ingest_errors()
        # recorded once each (every query ingests again), nothing of the secret read
        assert [(e.run_id, e.journal, e.byte_offset, e.error, e.line_head) for e in errors] == [
            (r, str(folder / f"{r}.jsonl"), 0, why[r], "") for r in sorted(why)
        ]
    assert secret.read_text() == SECRET


def test_journal_refusal_names_what_is_wrong(tmp_path: Path) -> None:
    folder = tmp_path / "runs.duckdb.journals"
    folder.mkdir()
    (folder / "ok.jsonl").write_text("")
    (folder / "sub").mkdir()
    os.mkfifo(folder / "pipe.jsonl")
    (folder / "inside-link.jsonl").symlink_to(folder / "ok.jsonl")
    assert journal_refusal(folder, "ok.jsonl") is None
    assert journal_refusal(folder, "missing.jsonl") is None  # a deleted journal: no danger
    assert journal_refusal(folder, "inside-link.jsonl") is None
    assert journal_refusal(folder, folder / "ok.jsonl") is None
    outside = f"resolves outside the journals folder {folder}"
    assert journal_refusal(folder, "..") == f"journal '..' {outside}"
    assert journal_refusal(folder, "sub/../../x.jsonl") == f"journal 'sub/../../x.jsonl' {outside}"
    assert journal_refusal(folder, "/etc/passwd") == f"journal '/etc/passwd' {outside}"
    assert journal_refusal(folder, "sub") == "journal 'sub' is a directory, not a regular file"
    assert journal_refusal(folder, "a\0b") == (
        "journal 'a\\x00b' is not a file name (it holds a NUL byte)"
    )
    assert journal_refusal(folder, "pipe.jsonl") == (
        "journal 'pipe.jsonl' is a FIFO, not a regular file"
    )


def test_open_journal_refuses_a_fifo_without_blocking(tmp_path: Path) -> None:
    fifo = tmp_path / "r.jsonl"
    os.mkfifo(fifo)
    with pytest.raises(JournalRefusedError, match=r"^journal 'r.jsonl' is a FIFO, not a "):
        open_journal(fifo)
    regular = tmp_path / "s.jsonl"
    regular.write_bytes(b"line\n")
    with open_journal(regular) as fh:
        assert fh.read() == b"line\n"
