"""`apply --yes` to a registry that refuses the write: one error line, exit 2, and nothing
recorded in the run store (the store records a proposal and its approval only once the registry
holds the version). Also the registry's own errors: `ApplyError`, never a bare `OSError`."""

from __future__ import annotations

import errno
import logging
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

from core.errors import ApplyError
from core.ir import parse_topology, spec_hash
from core.search import registry as registry_mod
from core.search.events import CandidateProposed, RunFinished, RunStarted, SearchEvent
from core.search.registry import TopologyRegistry
from core.storage import DuckDBRunStore
from studio.cli import main
from studio.cli import runs as cli_runs

RUN = "20250101-120000-abc123"
SEED_JSON = (
    '{"kind": "pipeline", "id": "seed", "steps": [{"operation": {"kind": "agent_step", '
    '"id": "solve", "agent_name": "small"}}]}'
)
BETTER_JSON = (
    '{"kind": "pipeline", "id": "seed", "steps": [{"operation": {"kind": "agent_step", '
    '"id": "solve", "agent_name": "large"}}]}'
)
BETTER = parse_topology(BETTER_JSON)


def _events() -> list[SearchEvent]:
    t0 = 1_735_732_800.0
    ev: list[SearchEvent] = [
        RunStarted(run_id=RUN, seq=0, ts=t0, problem="letters", strategy="random", seed=1)
    ]
    for idx, text in enumerate((SEED_JSON, BETTER_JSON)):
        ev.append(
            CandidateProposed(
                run_id=RUN,
                seq=len(ev),
                ts=t0 + len(ev),
                candidate_idx=idx,
                generation=-1 if idx == 0 else 0,
                spec_hash=spec_hash(parse_topology(text)),
                spec_json=text,
                parent_idx=None if idx == 0 else 0,
                operator="seed" if idx == 0 else "mutate",
            )
        )
    ev.append(RunFinished(run_id=RUN, seq=len(ev), ts=t0 + 9, status="completed"))
    return ev


@pytest.fixture
def db(tmp_path: Path) -> Path:
    path = tmp_path / "runs.duckdb"
    with DuckDBRunStore(path) as store:
        store.record_events(_events())
    return path


def _apply(db: Path, to: Path | str, capsys: pytest.CaptureFixture[str]) -> tuple[int, str]:
    """Run `apply RUN 1 --to TO --yes`; the exit code and stderr."""
    code = main(["apply", RUN, "1", "--db", str(db), "--to", str(to), "--yes", "--by", "ann"])
    return code, capsys.readouterr().err


def _proposals(db: Path) -> list[dict[str, Any]]:
    with DuckDBRunStore(db) as store:
        return store.list_proposals().to_dict("records")


def test_a_registry_below_a_file_is_one_line_and_records_nothing(
    tmp_path: Path, db: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("not a folder\n")
    for _ in range(4):
        code, err = _apply(db, blocker / "reg", capsys)
        assert code == 2
        assert err.splitlines() == [
            f"topology-studio: error: cannot write registry {blocker}/reg: Not a directory: "
            f"{blocker}/reg/letters"
        ]
    assert _proposals(db) == []  # no dangling proposal after four tries


@pytest.mark.skipif(not Path("/proc/self").is_dir(), reason="needs Linux /proc")
def test_a_registry_under_proc_is_one_line_and_records_nothing(
    db: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, err = _apply(db, "/proc/reg", capsys)
    assert code == 2
    assert err.splitlines() == [
        "topology-studio: error: cannot write registry /proc/reg: No such file or directory: "
        "/proc/reg"
    ]
    assert _proposals(db) == []


_NO_FILE_OVERRIDE = [
    "setpriv",
    "--inh-caps=-dac_override,-dac_read_search",
    "--bounding-set=-dac_override,-dac_read_search",
]
"""Runs a command as root without root's permission to write any file (CAP_DAC_OVERRIDE), so a
read-only folder is read-only to it as to any other user."""


def _apply_as_a_user(db: Path, reg: Path, capsys: pytest.CaptureFixture[str]) -> tuple[int, str]:
    """`_apply`, for a user the read-only folder refuses: in this process unless it is root,
    else in a subprocess without root's file permissions (skipped when that is impossible)."""
    if os.geteuid() != 0:
        return _apply(db, reg, capsys)
    if shutil.which("setpriv") is None:
        pytest.skip("running as root and setpriv is missing: every folder is writable")
    argv = ["apply", RUN, "1", "--db", str(db), "--to", str(reg), "--yes", "--by", "ann"]
    proc = subprocess.run(
        [*_NO_FILE_OVERRIDE, sys.executable, "-m", "studio.cli", *argv],
        capture_output=True,
        text=True,
        check=False,
    )
    if "Operation not permitted" in proc.stderr and proc.returncode != 2:
        pytest.skip(f"cannot drop root's permission to write any file here: {proc.stderr}")
    return proc.returncode, proc.stderr


@pytest.mark.skipif(sys.platform == "win32", reason="POSIX permissions")
def test_a_read_only_registry_is_one_line_and_records_nothing(
    tmp_path: Path, db: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    reg = tmp_path / "reg"
    reg.mkdir()
    reg.chmod(0o555)
    try:
        code, err = _apply_as_a_user(db, reg, capsys)
    finally:
        reg.chmod(0o755)
    assert err.splitlines() == [
        f"topology-studio: error: cannot write registry {reg}: Permission denied: {reg}/letters"
    ]
    assert code == 2
    assert list(reg.iterdir()) == []
    assert _proposals(db) == []


def test_a_full_disk_while_writing_leaves_no_version_and_no_proposal(
    tmp_path: Path, db: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    real = registry_mod._atomic_write_text

    def full_at_the_spec(path: Path, text: str) -> None:
        if path.name == "v000001.json":
            raise OSError(errno.ENOSPC, "No space left on device", str(path))
        real(path, text)

    monkeypatch.setattr(registry_mod, "_atomic_write_text", full_at_the_spec)
    reg = tmp_path / "reg"
    code, err = _apply(db, reg, capsys)
    assert code == 2
    assert err.splitlines() == [
        f"topology-studio: error: cannot write registry {reg}: No space left on device: "
        f"{reg}/letters/v000001.json"
    ]
    assert sorted(p.name for p in (reg / "letters").iterdir()) == [".lock"]  # no stray record
    assert TopologyRegistry(reg).current_version("letters") is None
    assert _proposals(db) == []


def test_a_registry_changed_since_the_diff_records_nothing(
    tmp_path: Path, db: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    reg = tmp_path / "reg"
    real = cli_runs.apply_specs

    def someone_writes_first(*args: Any, **kwargs: Any) -> Any:
        if kwargs.get("dry_run") is False:  # between the diff and the write
            TopologyRegistry(reg).write("letters", parse_topology(SEED_JSON), None)
        return real(*args, **kwargs)

    monkeypatch.setattr(cli_runs, "apply_specs", someone_writes_first)
    code, err = _apply(db, reg, capsys)
    assert code == 2
    assert err.splitlines() == [
        "topology-studio: error: gene 'letters': the target changed since the diff was made; "
        "nothing was written (make the diff again)"
    ]
    assert TopologyRegistry(reg).current_version("letters") == 1
    assert _proposals(db) == []


def test_a_written_apply_records_the_proposal_and_its_approval(
    tmp_path: Path, db: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    reg = tmp_path / "reg"
    code = main(
        ["apply", RUN, "1", "--db", str(db), "--to", str(reg), "--yes", "--by", "ann",
         "--comment", "bigger model"]
    )  # fmt: skip
    out = capsys.readouterr().out.splitlines()
    assert code == 0
    assert out[-1] == f"written: {reg}/letters version 1 (approved by ann)"
    assert TopologyRegistry(reg).current("letters") == (1, BETTER)
    (row,) = _proposals(db)
    picked = {
        k: row[k]
        for k in (
            "proposal_id",
            "target",
            "run_id",
            "candidate_idx",
            "proposed_by",
            "decision",
            "who",
            "comment",
            "applied_version",
        )
    }
    assert picked == {
        "proposal_id": 1,
        "target": f"{reg}/letters",
        "run_id": RUN,
        "candidate_idx": 1,
        "proposed_by": "ann",
        "decision": "approved",
        "who": "ann",
        "comment": "bigger model",
        "applied_version": 1,
    }
    assert pd.isna(row["base_version"])  # a new topology: no base version


# ---- the registry itself ------------------------------------------------------------------


def test_unreadable_registry_folders_are_apply_errors(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    reg = TopologyRegistry(tmp_path / "reg")
    reg.write("letters", BETTER, None)

    def refuse(self: Path) -> Any:
        raise PermissionError(errno.EACCES, "Permission denied", str(self))

    monkeypatch.setattr(Path, "iterdir", refuse)
    msg = f"cannot read registry {reg.root}: Permission denied: {reg.root}"
    with pytest.raises(ApplyError) as names:
        reg.names()
    assert str(names.value) == msg
    with pytest.raises(ApplyError) as current:
        reg.current_version("letters")
    assert str(current.value) == f"{msg}/letters"


def test_unreadable_version_files_are_apply_errors(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    reg = TopologyRegistry(tmp_path / "reg")
    reg.write("letters", BETTER, None)

    def refuse(self: Path, *args: Any, **kwargs: Any) -> Any:
        raise PermissionError(errno.EACCES, "Permission denied", str(self))

    monkeypatch.setattr(Path, "read_text", refuse)
    monkeypatch.setattr(Path, "read_bytes", refuse)
    with pytest.raises(ApplyError) as got:
        reg.get("letters", 1)
    assert str(got.value) == (
        f"cannot read registry {reg.root}: Permission denied: {reg.root}/letters/v000001.json"
    )
    with pytest.raises(ApplyError) as rec:
        reg.record("letters", 1)
    assert str(rec.value) == (
        f"cannot read registry {reg.root}: Permission denied: {reg.root}/letters/v000001.meta.json"
    )


def test_a_lock_the_file_system_refuses_is_an_apply_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    if registry_mod._fcntl is None:
        pytest.skip("no flock on this platform")

    class NoLocks:
        LOCK_EX = 2
        LOCK_UN = 8

        @staticmethod
        def flock(fd: int, op: int) -> None:
            raise OSError(errno.ENOLCK, "No locks available")

    monkeypatch.setattr(registry_mod, "_fcntl", NoLocks)
    reg = TopologyRegistry(tmp_path / "reg")
    with pytest.raises(ApplyError) as got:
        reg.write("letters", BETTER, None)
    assert str(got.value) == f"cannot write registry {reg.root}: No locks available"
    assert reg.current_version("letters") is None


def test_a_stale_current_copy_does_not_undo_a_written_version(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    real = registry_mod._atomic_write_text

    def full_at_the_copy(path: Path, text: str) -> None:
        if path.name == "current.json":
            raise OSError(errno.ENOSPC, "No space left on device", str(path))
        real(path, text)

    monkeypatch.setattr(registry_mod, "_atomic_write_text", full_at_the_copy)
    reg = TopologyRegistry(tmp_path / "reg")
    with caplog.at_level(logging.WARNING, logger="core.search.registry"):
        rec = reg.write("letters", BETTER, None)
    assert rec.version == 1
    assert reg.current("letters") == (1, BETTER)
    assert [r.getMessage() for r in caplog.records] == [
        f"{reg.root}: version 1 of 'letters' written, but its current.json was not refreshed: "
        f"No space left on device: {reg.root}/letters/current.json"
    ]
