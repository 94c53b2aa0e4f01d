"""Ctrl-C twice during a search: one error line and how to resume, nothing else.

The first Ctrl-C asks the search to stop after the evaluation in flight; a second one used to
raise `KeyboardInterrupt` wherever the event loop happened to be, which left tasks half run and
printed 150 lines of "Task exception was never retrieved" and "coroutine ... was never awaited"
after the error line, without the resume hint. Now the second Ctrl-C cancels the search's task:
it unwinds through its own handlers (the journal ends with the run stopped), the command prints
the error line and the hint a single Ctrl-C prints, exits 130, and the run resumes to the end an
uninterrupted run reaches.
"""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from cli_text import section

from core.search.budget import StopSignal
from core.storage import journal_path, read_journal

REPO = Path(__file__).resolve().parents[2]
DATASETS = os.environ.get("TOPOLOGY_STUDIO_DATASETS") or str(REPO.parent / "shared" / "datasets")

SEARCH = ["search", "gsm8k_replay", "--seed", "1", "--max-evaluations", "3",
          "--minibatch-size", "5", "--no-test"]  # fmt: skip
"""Three evaluations on the 300 validation problems; with `--time-scale 0.05` the seed's
evaluation sleeps its replayed latencies for a few seconds, so both Ctrl-Cs land inside it."""


def _env(tmp_path: Path) -> dict[str, str]:
    env = {**os.environ, "TOPOLOGY_STUDIO_DATASETS": DATASETS}
    env["TOPOLOGY_STUDIO_CACHE"] = str(tmp_path / "cache")
    env.pop("TOPOLOGY_STUDIO_DB", None)
    return env


def _cli(args: list[str], tmp_path: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "studio.cli", *args],
        cwd=tmp_path,
        env=_env(tmp_path),
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )


def _first_journal_line(db: Path, proc: subprocess.Popen[str]) -> Path:
    """Wait until the search has journalled its start (its Ctrl-C handler is installed)."""
    folder = Path(f"{db}.journals")
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        found = sorted(folder.glob("*.jsonl")) if folder.is_dir() else []
        if found and found[0].read_bytes().endswith(b"\n"):
            return found[0]
        assert proc.poll() is None, "the search ended before it started"
        time.sleep(0.02)
    raise AssertionError("the search journalled nothing in 120 s")


@pytest.mark.slow
def test_a_second_ctrl_c_prints_one_line_and_the_resume_hint(tmp_path: Path) -> None:
    db = tmp_path / "runs.duckdb"
    proc = subprocess.Popen(
        [sys.executable, "-m", "studio.cli", *SEARCH, "--time-scale", "0.05", "--db", str(db)],
        cwd=tmp_path,
        env=_env(tmp_path),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        journal = _first_journal_line(db, proc)
        proc.send_signal(signal.SIGINT)
        time.sleep(0.2)
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:  # pragma: no cover - only when an assertion fired above
            proc.kill()
            proc.communicate(timeout=60)
    run_id = journal.stem
    assert proc.returncode == 130, err
    assert out == ""
    assert err.splitlines() == [
        "topology-studio: error: interrupted",
        f"interrupted: continue with 'topology-studio search gsm8k_replay --resume {run_id} --db {db}'",
    ]
    # the journal's per-example lines are compact: read it as the store does
    events = [e.model_dump() for e in read_journal(journal_path(db, run_id))]
    assert events[0]["type"] == "run_started"
    assert [e["seq"] for e in events] == list(range(len(events)))
    assert (events[-1]["type"], events[-1]["status"]) == ("run_finished", "stopped")
    assert events[-1]["reason"] == "SIGINT, then cancelled"
    assert not any(e["type"] == "candidate_evaluated" for e in events)  # stopped in the seed

    # the journal is intact: the run resumes (faster: --time-scale is a speed setting) to the
    # end of the same search run without interruption
    resumed = _cli(
        ["search", "gsm8k_replay", "--resume", run_id, "--time-scale", "0", "--db", str(db)],
        tmp_path,
    )
    assert resumed.returncode == 0, resumed.stderr
    assert resumed.stderr.splitlines() == [f"run {run_id} had ended (stopped); continuing it"]
    whole = _cli([*SEARCH, "--time-scale", "0", "--db", str(tmp_path / "whole.duckdb")], tmp_path)
    assert whole.returncode == 0, whole.stderr
    front = "Pareto front (validation)"
    assert section(resumed.stdout, front) == section(whole.stdout, front)
    status = [x for x in resumed.stdout.splitlines() if x.startswith("status:")]
    assert status == ["status:         stopped (max_evaluations reached (3))"]


# ---- the handler itself (in this process) ---------------------------------------------------


async def _twice(stop: StopSignal, seen: list[str]) -> None:
    """Ctrl-C twice inside the guard, as a search's task sees it."""
    with stop.sigint_handler():
        try:
            os.kill(os.getpid(), signal.SIGINT)  # first: a stop is requested, nothing else
            seen.append(f"reason {stop.reason()}")
            await asyncio.sleep(0)
            os.kill(os.getpid(), signal.SIGINT)  # second: this task is cancelled
            seen.append("went on")  # the handler raised nothing here
            await asyncio.sleep(30)
        except asyncio.CancelledError:
            seen.append("cancelled")
            raise


def test_second_ctrl_c_under_asyncio_run_unwinds_then_interrupts() -> None:
    before = signal.signal(signal.SIGINT, signal.default_int_handler)  # as in a new process
    try:
        seen: list[str] = []
        started = time.monotonic()
        with pytest.raises(KeyboardInterrupt):
            asyncio.run(_twice(StopSignal(), seen))
        assert time.monotonic() - started < 30
        assert seen == ["reason SIGINT", "went on", "cancelled"]
        assert signal.getsignal(signal.SIGINT) is signal.default_int_handler
    finally:
        signal.signal(signal.SIGINT, before)


def test_second_ctrl_c_in_a_loop_run_another_way_cancels_the_task() -> None:
    before = signal.signal(signal.SIGINT, signal.default_int_handler)
    loop = asyncio.new_event_loop()
    try:
        seen: list[str] = []
        with pytest.raises(asyncio.CancelledError):
            loop.run_until_complete(_twice(StopSignal(), seen))
        assert seen == ["reason SIGINT", "went on", "cancelled"]
        assert signal.getsignal(signal.SIGINT) is signal.default_int_handler
    finally:
        loop.close()
        signal.signal(signal.SIGINT, before)
