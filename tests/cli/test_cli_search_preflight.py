"""`search` refuses a database it could never record into before it runs anything.

A search writes its journal beside the database and ingests it at the end, so it used to find
out only then (after the whole search: seconds to hours, and paid) that `--db` was a text file,
a directory or a file it cannot write, and left a journal the message did not name. Now the
store is opened first: such a database is one line on stderr, exit 2, no evaluation, no journal
(the line `runs --db` prints for the same file). A database held by another process (the studio)
is still fine: the search records into its journal and the holder ingests it (tested in
`test_cli_search.py::test_a_search_while_another_process_holds_the_database`).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from core.evaluation.evaluator import CandidateEvaluation, TopologyEvaluator
from core.storage import open_store
from studio.cli import main

REPO = Path(__file__).resolve().parents[2]
DATASETS = os.environ.get("TOPOLOGY_STUDIO_DATASETS") or str(REPO.parent / "shared" / "datasets")

SEARCH = ["search", "gsm8k_replay", "--max-evaluations", "2", "--no-test", "--time-scale", "0"]

_NO_FILE_OVERRIDE = [
    "setpriv",
    "--inh-caps=-dac_override,-dac_read_search",
    "--bounding-set=-dac_override,-dac_read_search",
]
"""Runs a command as root without root's permission to write any file (CAP_DAC_OVERRIDE), so a
read-only file is read-only to it as to any other user."""


@pytest.fixture
def workdir(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    monkeypatch.setenv("TOPOLOGY_STUDIO_DATASETS", DATASETS)
    monkeypatch.setenv("TOPOLOGY_STUDIO_CACHE", str(tmp_path / "cache"))
    monkeypatch.delenv("TOPOLOGY_STUDIO_DB", raising=False)
    monkeypatch.chdir(tmp_path)
    return tmp_path


@pytest.fixture
def evaluated(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """The sizes of the candidate evaluations the command ran (none, when it refused)."""
    calls: list[int] = []
    inner = TopologyEvaluator.evaluate

    async def counting(self: TopologyEvaluator, spec: Any, examples: Any, **kw: Any) -> Any:
        calls.append(len(examples))
        result: CandidateEvaluation = await inner(self, spec, examples, **kw)
        return result

    monkeypatch.setattr(TopologyEvaluator, "evaluate", counting)
    return calls


def _journals(db: Path) -> list[Path]:
    folder = Path(f"{db}.journals")
    return sorted(folder.iterdir()) if folder.exists() else []


def test_a_text_file_as_db_fails_before_the_seed(
    workdir: Path, evaluated: list[int], capsys: pytest.CaptureFixture[str]
) -> None:
    db = workdir / "notdb.duckdb"
    db.write_text("not a database\n")
    code = main([*SEARCH, "--db", str(db)])
    cap = capsys.readouterr()
    assert code == 2
    assert cap.out == ""
    assert cap.err == (
        f"topology-studio: error: cannot open the run store {db}: IO Error: The file "
        f'"{db}" exists, but it is not a valid DuckDB database file!\n'
    )
    assert evaluated == []
    assert _journals(db) == []
    assert db.read_text() == "not a database\n"
    # the same line as `runs` prints for that file
    assert main(["runs", "--db", str(db)]) == 2
    assert capsys.readouterr().err == cap.err


def test_a_directory_as_db_fails_before_the_seed(
    workdir: Path, evaluated: list[int], capsys: pytest.CaptureFixture[str]
) -> None:
    db = workdir / "folder.duckdb"
    db.mkdir()
    code = main([*SEARCH, "--db", str(db)])
    cap = capsys.readouterr()
    assert code == 2
    assert cap.out == ""
    assert cap.err == (
        f"topology-studio: error: cannot open the run store {db}: IO Error: Could not read "
        f'from file "{db}": Is a directory\n'
    )
    assert evaluated == []
    assert _journals(db) == []
    assert list(db.iterdir()) == []


def test_resume_checks_the_database_first_too(
    workdir: Path, evaluated: list[int], capsys: pytest.CaptureFixture[str]
) -> None:
    db = workdir / "notdb.duckdb"
    db.write_text("text\n")
    code = main(["search", "--resume", "20250101-000000-abcdef", "--db", str(db)])
    cap = capsys.readouterr()
    assert code == 2
    assert cap.err == (
        f"topology-studio: error: cannot open the run store {db}: IO Error: The file "
        f'"{db}" exists, but it is not a valid DuckDB database file!\n'
    )


def test_demo_checks_the_database_before_the_data(
    workdir: Path, evaluated: list[int], capsys: pytest.CaptureFixture[str]
) -> None:
    db = workdir / "folder.duckdb"
    db.mkdir()
    code = main(["demo", "--no-ui", "--db", str(db)])
    cap = capsys.readouterr()
    assert code == 2
    assert cap.out == ""
    assert cap.err.splitlines() == [
        f"topology-studio: error: cannot open the run store {db}: IO Error: Could not read "
        f'from file "{db}": Is a directory'
    ]
    assert evaluated == []
    assert _journals(db) == []


def _as_a_user_who_cannot_write(db: Path) -> list[str]:
    """The command prefix under which `db` (mode 0444) cannot be written, or skip."""
    if os.geteuid() != 0:
        return []
    if shutil.which("setpriv") is None:
        pytest.skip("running as root and setpriv is missing: every file is writable")
    probe = subprocess.run(
        [*_NO_FILE_OVERRIDE, sys.executable, "-c", "import sys; open(sys.argv[1], 'ab')", db],
        capture_output=True,
        text=True,
        check=False,
    )
    if "PermissionError" not in probe.stderr:
        pytest.skip(f"cannot drop root's permission to write any file here: {probe.stderr}")
    return _NO_FILE_OVERRIDE


def test_a_read_only_db_fails_before_the_seed(workdir: Path) -> None:
    db = workdir / "readonly.duckdb"
    open_store(db).close()  # a real run store, then read-only
    db.chmod(0o444)
    before = db.read_bytes()
    prefix = _as_a_user_who_cannot_write(db)
    proc = subprocess.run(
        [*prefix, sys.executable, "-m", "studio.cli", *SEARCH, "--db", str(db)],
        cwd=workdir,
        env={**os.environ, "TOPOLOGY_STUDIO_DATASETS": DATASETS},
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert proc.returncode == 2, proc.stderr
    assert proc.stdout == ""
    assert proc.stderr == (
        f"topology-studio: error: cannot open the run store {db}: IO Error: Cannot open file "
        f'"{db}": Permission denied\n'
    )
    assert _journals(db) == []  # the journal is created only after the check
    assert db.read_bytes() == before


def test_a_missing_db_is_not_created_before_the_run(
    workdir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Nothing is created up front: a search refused later (here: a designer model that is no
    model name) leaves neither a database nor a journal."""
    db = workdir / "new.duckdb"
    argv = [*SEARCH, "--strategy", "meta-agent", "--meta-model", "bogus", "--db", str(db)]
    assert main(argv) == 2
    capsys.readouterr()
    assert not db.exists()
    assert _journals(db) == []
