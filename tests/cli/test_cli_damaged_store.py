"""Damaged, read-only and full stores from the command line: clean errors that name the file and the
way to recover.

- A read-only database (a real read-only bind mount when `unshare -m` works here, and always
  the same condition injected): `runs` and `show` answer from a read-only copy and say so.
- A damaged database (garbage over its blocks): one error line naming the file and `store
  rebuild`; `search` refuses it before it runs; `store rebuild` restores the same runs.
- A full disk (`ENOSPC` injected into the journal's write): one line naming the journal and
  the resume command, exit 1; resuming once there is space ends with the same front as an
  uninterrupted run.
"""

from __future__ import annotations

import errno
import os
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

from core.errors import StoreReadOnlyError
from core.storage import DuckDBRunStore, journal
from studio.cli import main
from studio.manager import StudioManager

REPO = Path(__file__).resolve().parents[2]
DATASETS = os.environ.get("TOPOLOGY_STUDIO_DATASETS") or str(REPO.parent / "shared" / "datasets")
SEARCH = ["search", "gsm8k_replay", "--seed", "1", "--max-evaluations", "4", "--no-test",
          "--time-scale", "0", "--no-call-cache"]  # fmt: skip
GARBAGE = bytes(range(256)) * 256


@pytest.fixture(scope="module")
def searched(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    """A store with one real (replayed) search: `(database, run id)`."""
    work = tmp_path_factory.mktemp("searched")
    db = work / "runs.duckdb"
    mp = pytest.MonkeyPatch()
    mp.setenv("TOPOLOGY_STUDIO_DATASETS", DATASETS)
    try:
        assert main([*SEARCH, "--db", str(db)]) == 0
    finally:
        mp.undo()
    (path,) = (work / "runs.duckdb.journals").glob("*.jsonl")
    return db, path.stem


@pytest.fixture
def workdir(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    monkeypatch.setenv("TOPOLOGY_STUDIO_DATASETS", DATASETS)
    monkeypatch.delenv("TOPOLOGY_STUDIO_DB", raising=False)
    monkeypatch.chdir(tmp_path)
    return tmp_path


def _copy(searched: tuple[Path, str], to: Path) -> Path:
    db, _ = searched
    to.mkdir(parents=True, exist_ok=True)
    shutil.copy(db, to / db.name)
    shutil.copytree(f"{db}.journals", to / f"{db.name}.journals")
    return to / db.name


def _cli(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    cap = capsys.readouterr()
    return code, cap.out, cap.err


def _run_state(db: Path, run_id: str) -> dict[str, pd.DataFrame]:
    """What the store says of a run: summary figures, archive (front membership included)."""
    with DuckDBRunStore(db) as store:
        runs = store.list_runs().set_index("run_id")
        cols = ["status", "n_candidates", "n_evaluations", "best_idx", "best_score"]
        return {
            "run": runs.loc[[run_id], cols].reset_index(drop=True),
            "archive": store.archive(run_id),
        }


def _assert_same(a: dict[str, pd.DataFrame], b: dict[str, pd.DataFrame]) -> None:
    assert a.keys() == b.keys()
    for key, frame in a.items():
        pd.testing.assert_frame_equal(frame, b[key], obj=key)


# ---- a read-only database ------------------------------------------------------------------


def _ro_note(db: Path) -> str:
    return (
        f"note: {db} is read-only here (cannot open the run store {db}: IO Error: Cannot open "
        f'file "{db}": Read-only file system); answering from a read-only copy of it and the '
        f"run journals in {db}.journals (nothing is written)"
    )


def _can_mount_read_only(where: Path) -> str | None:
    """None if a private read-only bind mount works here, else why not."""
    if shutil.which("unshare") is None:
        return "no unshare"
    probe = subprocess.run(
        ["unshare", "-m", "sh", "-c",
         f"mount --bind {where} {where} && mount -o remount,bind,ro {where} && "
         f"! touch {where}/probe 2>/dev/null"],
        capture_output=True, text=True, check=False,
    )  # fmt: skip
    return None if probe.returncode == 0 else f"no read-only bind mount: {probe.stderr.strip()}"


def test_runs_and_show_on_a_read_only_mount(
    searched: tuple[Path, str], workdir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Reproduces the failure on a real read-only file system: 'cannot open the run store ...:
    Read-only file system'. Now both commands answer, from a read-only copy, and say so."""
    _, run_id = searched
    ro = workdir / "ro"
    db = _copy(searched, ro)
    expected = {c: _cli(capsys, c, *a, "--db", str(db))[1] for c, a in
                (("runs", ()), ("show", (run_id,)))}  # fmt: skip
    why = _can_mount_read_only(ro)
    if why is not None:
        pytest.skip(f"{why} (test_runs_and_show_when_writes_are_refused injects it instead)")
    before = db.read_bytes()
    for command, extra in (("runs", []), ("show", [run_id])):
        cmd = shlex.join([sys.executable, "-m", "studio.cli", command, *extra, "--db", str(db)])
        done = subprocess.run(
            ["unshare", "-m", "sh", "-c",
             f"mount --bind {ro} {ro} && mount -o remount,bind,ro {ro} && exec {cmd}"],
            cwd=REPO, capture_output=True, text=True, timeout=120, check=False,
        )  # fmt: skip
        assert done.returncode == 0, done.stderr
        assert done.stderr.splitlines() == [_ro_note(db)]
        assert done.stdout == expected[command]
    assert db.read_bytes() == before


def _refuse_writable_opens(monkeypatch: pytest.MonkeyPatch) -> None:
    """A read-only file system, injected: every open for writing fails as DuckDB's open does
    on a read-only mount."""
    real = DuckDBRunStore._connect  # pyright: ignore[reportPrivateUsage]

    def connect(path: str, *, read_only: bool = False) -> object:
        if path != ":memory:" and not read_only:
            raise StoreReadOnlyError(
                f'cannot open the run store {path}: IO Error: Cannot open file "{path}": '
                "Read-only file system"
            )
        return real(path, read_only=read_only)

    monkeypatch.setattr(DuckDBRunStore, "_connect", staticmethod(connect))


def test_runs_and_show_when_writes_are_refused(
    searched: tuple[Path, str],
    workdir: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    _, run_id = searched
    db = _copy(searched, workdir / "ro")
    expected = {c: _cli(capsys, c, *a, "--db", str(db))[1] for c, a in
                (("runs", ()), ("show", (run_id,)))}  # fmt: skip
    before = db.read_bytes()
    _refuse_writable_opens(monkeypatch)
    for command, extra in (("runs", []), ("show", [run_id])):
        code, out, err = _cli(capsys, command, *extra, "--db", str(db))
        assert code == 0
        assert err.splitlines() == [_ro_note(db)]
        assert out == expected[command]
    # the studio too: a read-only copy, and a note saying why
    manager = StudioManager(db)
    try:
        assert manager.store.list_runs()["run_id"].tolist() == [run_id]
        assert manager.read_only
        assert manager.store_note.startswith(
            "The database cannot be written, so this is a read-only copy of it, kept live from "
            "the run journals (retrying every "
        )
    finally:
        manager.close()
    assert db.read_bytes() == before


# ---- a damaged database --------------------------------------------------------------------


def _damaged_line(db: Path) -> tuple[str, str]:
    """The start and end of the one error line for a damaged `db` (DuckDB's checksums in
    between depend on the file's bytes)."""
    return (
        f"topology-studio: error: the run store {db} is damaged (Corrupt database file: ",
        f"The run journals in {db}.journals are intact: 'topology-studio store rebuild --db "
        f"{db}' keeps the damaged file aside and restores every journaled run from them. Not "
        "restored: proposals, approvals and topology versions saved in the editor (they lived "
        "only in the database; each applied version and its approval is still in the topology "
        "registry's v*.meta.json files)",
    )


def test_a_damaged_store_is_refused_then_rebuilt_from_the_journals(
    searched: tuple[Path, str], workdir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Reproduces the failure: 'internal error: Error: Corrupt database file ...' from `runs`,
    and a `search` that ran to its end, then 'no run ... in the database'."""
    _, run_id = searched
    db = _copy(searched, workdir / "store")
    before = _run_state(db, run_id)
    runs_before = _cli(capsys, "runs", "--db", str(db))[1]
    with db.open("r+b") as fh:
        fh.seek(4096)
        fh.write(GARBAGE)
    head, tail = _damaged_line(db)
    for argv in (["runs"], ["show", run_id], SEARCH):
        code, out, err = _cli(capsys, *argv, "--db", str(db))
        assert (code, out) == (2, ""), err
        (line,) = err.splitlines()
        assert line.startswith(head) and line.endswith(tail), line
    assert len(list(Path(f"{db}.journals").glob("*.jsonl"))) == 1  # search never started
    damaged = db.read_bytes()

    code, out, err = _cli(capsys, "store", "rebuild", "--db", str(db))
    assert (code, err) == (0, "")
    (kept,) = sorted(db.parent.glob("runs.duckdb.damaged-*"))
    assert kept.read_bytes() == damaged
    assert out.splitlines() == [
        f"== Rebuilt {db} from 1 run journal(s) ==",
        f"runs restored:        1: {run_id}",
        out.splitlines()[2],  # the event count
        f"damaged file kept as: {kept}",
        "not restored:         proposals, approvals and topology versions saved in the editor "
        "(they lived only in the database; each applied version and its approval is still in "
        "the topology registry's v*.meta.json files)",
    ]
    _assert_same(before, _run_state(db, run_id))
    assert _cli(capsys, "runs", "--db", str(db))[1] == runs_before


def test_rebuild_refuses_a_healthy_store(
    searched: tuple[Path, str], workdir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db = _copy(searched, workdir / "store")
    original = db.read_bytes()
    code, out, err = _cli(capsys, "store", "rebuild", "--db", str(db))
    assert (code, out) == (2, "")
    assert err == (
        f"topology-studio: error: the run store {db} opens and reads fine: a rebuild would drop "
        "its proposals, approvals and topology versions saved in the editor; nothing was "
        "changed (add --force to rebuild it anyway)\n"
    )
    assert db.read_bytes() == original


# ---- a full disk ---------------------------------------------------------------------------


def test_a_full_disk_stops_the_search_resumably_with_the_same_front(
    searched: tuple[Path, str],
    workdir: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Reproduces the failure: 'internal error: OSError: [Errno 28] No space left on device',
    no resume hint. The disk fills after 300 journal lines (a few candidates in), the first
    write of that line reaching the file only in part."""
    _, uninterrupted_id = searched
    db = workdir / "full" / "runs.duckdb"
    real = journal._write_all  # pyright: ignore[reportPrivateUsage]
    lines = 0

    def fills_up(fd: int, data: bytes) -> None:
        nonlocal lines
        lines += 1
        if lines >= 300:
            os.write(fd, data[: len(data) // 2])  # part of the line lands, then no space
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        real(fd, data)

    monkeypatch.setattr(journal, "_write_all", fills_up)
    code, out, err = _cli(capsys, *SEARCH, "--db", str(db))
    (path,) = Path(f"{db}.journals").glob("*.jsonl")
    run_id = path.stem
    assert code == 1
    (line,) = err.splitlines()
    prefix = (
        f"topology-studio: error: cannot write the run journal {path}: No space left on device "
        "(everything journaled before is kept): free space, then continue with '"
    )
    assert line.startswith(prefix) and line.endswith("'"), line
    resume = shlex.split(line.removeprefix(prefix).removesuffix("'"))
    assert resume[:2] == ["topology-studio", "search"]
    assert resume[-4:] == ["--resume", run_id, "--db", str(db)]
    data = path.read_bytes()
    assert data.endswith(b"\n") and data.count(b"\n") == 299  # the torn half line was cut

    monkeypatch.setattr(journal, "_write_all", real)  # space freed
    code, out, err = _cli(capsys, *resume[1:], *SEARCH[2:])
    assert code == 0, err
    a = _run_state(searched[0], uninterrupted_id)
    b = _run_state(db, run_id)
    _assert_same(a, b)
