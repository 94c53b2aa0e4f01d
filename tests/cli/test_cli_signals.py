"""Hangs and interrupts through the real command line (a per-example timeout, the wall budget
enforced mid-evaluation, one line and exit 130 on Ctrl-C in every phase, the same with SIGINT
ignored as some CI runners start it), on the tiny offline `sleepy` problem (tests/fixtures/sleepy:
FunctionModel agents that sleep `params.delay_s` a call, and never answer an input containing
`params.hang_marker`).

- An agent that sleeps forever, under `--example-timeout-s 1` and `--max-wall-s 5`: the run
  ends, the example is an error "timed out after 1 s", and the run resumes to the same stop.
- Ctrl-C once and twice in each phase (the seed's evaluation, the generations, the re-scoring,
  the held-out test of the front): exit 130, the resume command, no traceback; twice prints only
  the error line and the resume command.
- Started with SIGINT ignored (`nohup`, `&` in a script, some CI runners), a search still stops
  on SIGINT, and the studio stops its Streamlit child on SIGTERM or SIGINT with no orphan left.

Every child is started in its own process group with SIGINT ignored (`_ignoring_sigint`), as
such runners start it; the command takes its SIGINT back itself. The phase is read from the run
journal (its log lines), never guessed from a delay.
"""

from __future__ import annotations

import contextlib
import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from cli_text import kv, section

from core.storage import read_journal

pytestmark = pytest.mark.slow

REPO = Path(__file__).resolve().parents[2]
SLEEPY = REPO / "tests" / "fixtures" / "sleepy"


def _ignoring_sigint() -> None:
    """The child starts as under `nohup` or `cmd &` in a script: SIGINT ignored."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)


def _env(tmp_path: Path) -> dict[str, str]:
    env = {**os.environ, "TOPOLOGY_STUDIO_CACHE": str(tmp_path / "cache")}
    env.pop("TOPOLOGY_STUDIO_DB", None)
    return env


def _start(args: list[str], tmp_path: Path) -> subprocess.Popen[str]:
    return subprocess.Popen(  # noqa: S603 - our own interpreter and module
        [sys.executable, "-m", "studio.cli", *args],
        cwd=tmp_path,
        env=_env(tmp_path),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        process_group=0,
        preexec_fn=_ignoring_sigint,
    )


def _finish(proc: subprocess.Popen[str], timeout: float = 120) -> tuple[str, str]:
    try:
        return proc.communicate(timeout=timeout)
    finally:
        if proc.poll() is None:  # pragma: no cover - only when the command hung
            os.killpg(proc.pid, signal.SIGKILL)
            proc.communicate(timeout=30)


@contextlib.contextmanager
def _running(args: list[str], tmp_path: Path) -> Iterator[subprocess.Popen[str]]:
    """`_start`, and whatever fails meanwhile, the command's group killed and its pipes closed."""
    proc = _start(args, tmp_path)
    try:
        yield proc
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=30)
        for pipe in (proc.stdout, proc.stderr):
            if pipe is not None:
                pipe.close()


def _cli(args: list[str], tmp_path: Path) -> subprocess.CompletedProcess[str]:
    proc = _start(args, tmp_path)
    out, err = _finish(proc, timeout=180)
    return subprocess.CompletedProcess(proc.args, proc.returncode, out, err)


def _journal_text(db: Path) -> tuple[Path | None, str]:
    folder = Path(f"{db}.journals")
    found = sorted(folder.glob("*.jsonl")) if folder.is_dir() else []
    return (found[0], found[0].read_text()) if found else (None, "")


def _wait_for(db: Path, marker: str, proc: subprocess.Popen[str]) -> Path:
    """Wait until the run journal holds `marker` (a JSON fragment of one of its lines)."""
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        path, text = _journal_text(db)
        if path is not None and marker in text:
            return path
        assert proc.poll() is None, f"the search ended (exit {proc.returncode}) before {marker!r}"
        time.sleep(0.02)
    raise AssertionError(f"the journal showed no {marker!r} in 120 s")


def _hint(run_id: str, db: Path) -> re.Pattern[str]:
    return re.compile(
        rf"interrupted: continue with 'topology-studio search (\S+ )?--resume {run_id} "
        rf"--db {re.escape(str(db))}'"
    )


# ---- an agent that hangs ----------------------------------------------------------------------

HANG = ["--set", "params.hang_marker=forever", "--example-timeout-s", "1"]


def test_evaluate_reports_a_hanging_example_as_timed_out(tmp_path: Path) -> None:
    done = _cli(["evaluate", str(SLEEPY), str(SLEEPY / "seed.json"), *HANG], tmp_path)
    assert done.returncode == 0, done.stderr
    rows = {line.split()[0]: line for line in section(done.stdout, "validation: 8 examples")[1:]}
    assert rows["s01"].split()[5:] == [
        "error",
        "example_timeout:",
        "timed",
        "out",
        "after",
        "1",
        "s",
    ]
    assert kv(done.stdout, "error_rate") == "0.1250"


def test_a_hanging_agent_under_a_wall_budget_ends_the_run_resumably(tmp_path: Path) -> None:
    db = tmp_path / "runs.duckdb"
    argv = ["search", str(SLEEPY), *HANG, "--max-wall-s", "5", "--max-evaluations", "200"]
    first = _cli([*argv, "--db", str(db)], tmp_path)
    assert first.returncode == 0, first.stderr
    assert first.stderr == ""
    assert kv(first.stdout, "status") == "stopped (max_wall_s reached (5 s))"
    run_id = kv(first.stdout, "run")
    journal = Path(f"{db}.journals") / f"{run_id}.jsonl"
    events = read_journal(journal)
    # the seed's agent hangs on s01 ("q1 forever"); a candidate without an agent answers it
    (seed_s01,) = [
        e
        for e in events
        if e.type == "example_evaluated" and e.candidate_idx == 0 and e.example_id == "s01"
    ]
    assert (seed_s01.status, seed_s01.error) == ("error", "example_timeout: timed out after 1 s")
    finished = events[-1]
    assert (finished.type, finished.status, finished.reason) == (
        "run_finished",
        "stopped",
        "max_wall_s reached (5 s)",
    )

    again = _cli(["search", str(SLEEPY), "--resume", run_id, "--db", str(db)], tmp_path)
    assert again.returncode == 0, again.stderr
    assert again.stderr.splitlines() == [f"run {run_id} had ended (stopped); continuing it"]
    assert kv(again.stdout, "status") == "stopped (max_wall_s reached (5 s))"
    front = "Pareto front (validation)"
    assert section(again.stdout, front) == section(first.stdout, front)
    # another deadline would not continue the same run: refused, naming the recorded one
    other = _cli(
        ["search", str(SLEEPY), "--resume", run_id, "--example-timeout-s", "2", "--db", str(db)],
        tmp_path,
    )
    assert other.returncode == 2
    assert "--example-timeout-s 2 (recorded: 1)" in other.stderr
    # nothing recorded ran again: the resumed run added only its own start and end
    assert [e.type for e in read_journal(journal)[len(events) :]] == ["run_started", "run_finished"]


# ---- Ctrl-C once and twice in every phase ------------------------------------------------------

SLOW = ["--set", "params.delay_s=0.4", "--no-call-cache"]
"""Each agent call sleeps 0.4 s: a whole run takes about 10 s, each phase at least a second."""

PHASES = {
    # the seed: one example at a time, 8 x 0.4 s
    "seed": ('"type":"run_started"', ["--concurrency", "1"], "stopped (SIGINT)"),
    "generations": ('"type":"archive_snapshot"', [], "stopped (SIGINT)"),
    "re-scoring": ('"message":"re-scoring ', [], "stopped (SIGINT (during the re-scoring))"),
    "test": (
        ' front candidate(s) on the held-out test split"',  # "scoring N front candidate(s)..."
        [],
        "stopped (SIGINT (during the held-out test))",
    ),
}


@pytest.mark.parametrize("phase", list(PHASES))
def test_ctrl_c_once_stops_cleanly_in_every_phase(tmp_path: Path, phase: str) -> None:
    marker, extra, status = PHASES[phase]
    db = tmp_path / "runs.duckdb"
    with _running(["search", str(SLEEPY), *SLOW, *extra, "--db", str(db)], tmp_path) as proc:
        journal = _wait_for(db, marker, proc)
        proc.send_signal(signal.SIGINT)
        out, err = _finish(proc)
    assert proc.returncode == 130, err
    assert "Traceback" not in err
    assert kv(out, "status") == status
    assert _hint(journal.stem, db).fullmatch(err.splitlines()[-1]), err


@pytest.mark.parametrize("phase", list(PHASES))
def test_ctrl_c_twice_prints_one_line_and_the_resume_command_in_every_phase(
    tmp_path: Path, phase: str
) -> None:
    marker, extra, _ = PHASES[phase]
    db = tmp_path / "runs.duckdb"
    with _running(["search", str(SLEEPY), *SLOW, *extra, "--db", str(db)], tmp_path) as proc:
        journal = _wait_for(db, marker, proc)
        proc.send_signal(signal.SIGINT)
        time.sleep(0.2)
        proc.send_signal(signal.SIGINT)
        out, err = _finish(proc)
    assert proc.returncode == 130, err
    lines = err.splitlines()
    assert len(lines) == 2, err
    assert lines[0] == "topology-studio: error: interrupted"
    assert _hint(journal.stem, db).fullmatch(lines[1]), err
    finished = read_journal(journal)[-1]
    # The second Ctrl-C comes 0.2 s after the first. Usually the run is still unwinding and
    # records both, and no report is printed. When the first stop is already recorded (a fast
    # unwind, or a loaded machine), the second lands while the report is being printed: the
    # report is cut short where it was (CI once saw it stop after "== Best topology"), with
    # exit 130 and the same two lines.
    assert (finished.type, finished.status) == ("run_finished", "stopped")
    assert finished.reason in ("SIGINT, then cancelled", "SIGINT"), finished.reason
    if finished.reason == "SIGINT, then cancelled":
        assert out == ""
    else:
        assert out == "" or out.startswith(f"== Run {journal.stem} ==\n"), out
    if phase in ("re-scoring", "test"):  # the journal is intact: the run resumes to its end
        again = _cli(["search", str(SLEEPY), "--resume", journal.stem, "--db", str(db)], tmp_path)
        assert again.returncode == 0, again.stderr
        assert kv(again.stdout, "status") == "stopped (max_evaluations reached (12))"


# ---- started with SIGINT ignored; the studio's child --------------------------------------------


def _children(pid: int) -> list[int]:
    path = Path(f"/proc/{pid}/task/{pid}/children")
    return [int(x) for x in path.read_text().split()] if path.exists() else []


def _alive(pid: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"  # a zombie is gone but for its parent


@pytest.mark.skipif(not Path("/proc/self/task").is_dir(), reason="reads /proc (Linux)")
@pytest.mark.parametrize("sig", ["SIGTERM", "SIGINT"])
def test_the_studio_stops_its_streamlit_child_and_leaves_no_orphan(
    tmp_path: Path, sig: str
) -> None:
    import urllib.request

    from studio.cli.studio import free_port

    port = free_port(None)
    proc = _start(["studio", "--port", str(port), "--db", str(tmp_path / "runs.duckdb")], tmp_path)
    child: list[int] = []
    try:
        deadline = time.monotonic() + 90
        health = ""
        while time.monotonic() < deadline and proc.poll() is None and not health:
            try:
                with urllib.request.urlopen(  # noqa: S310 - loopback
                    f"http://127.0.0.1:{port}/_stcore/health", timeout=2
                ) as r:
                    health = r.read().decode()
            except OSError:
                time.sleep(0.3)
        assert health == "ok"
        child = _children(proc.pid)
        assert len(child) == 1
        assert os.getpgid(child[0]) == child[0] != os.getpgid(proc.pid)  # its own group
        proc.send_signal(getattr(signal, sig))
        out, err = _finish(proc, timeout=30)
    finally:
        for pid in child:  # never leave a server behind, whatever failed above
            if _alive(pid):
                os.kill(pid, signal.SIGKILL)
    assert proc.returncode == 0, err
    assert out.startswith(f"Studio: http://127.0.0.1:{port}")
    assert "Traceback" not in err
    assert not _alive(child[0])


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="prctl(PR_SET_PDEATHSIG)")
def test_the_studio_child_dies_with_a_killed_command(tmp_path: Path) -> None:
    from studio.cli.studio import free_port

    port = free_port(None)
    proc = _start(["studio", "--port", str(port), "--db", str(tmp_path / "runs.duckdb")], tmp_path)
    child: list[int] = []
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and not child:
            child = _children(proc.pid)
            time.sleep(0.1)
        assert len(child) == 1
        time.sleep(1.0)  # let it get past the exec (the death signal is set before it)
        proc.kill()  # SIGKILL: no handler runs; the kernel tells the child
        _finish(proc, timeout=30)
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and _alive(child[0]):
            time.sleep(0.1)
        assert not _alive(child[0])
    finally:
        for pid in child:
            if _alive(pid):
                os.kill(pid, signal.SIGKILL)
