"""`topology-studio sweep`: 2 strategies x 2 seeds are 4 runs in the store
and in one named group whose overlay link names all 4; a line as each search starts and ends,
then a table; Ctrl-C as `search`; a local sweep's searches split the rate budget (the Ray one
shares an actor: tests/distributed)."""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from core.storage import DuckDBRunStore
from core.storage.journal import journal_path
from studio.cli._common import CliUsageError
from studio.cli.sweep import parse_seeds, sweep_dir, sweep_groups

SLEEPY = Path(__file__).resolve().parents[1] / "fixtures" / "sleepy"


def _sweep_argv(problem: Path, db: Path, name: str, *options: str) -> list[str]:
    """`topology-studio sweep PROBLEM --db DB --strategies evolutionary,random --name NAME
    --no-test OPTIONS...` as a child process's argv."""
    argv = [sys.executable, "-m", "studio.cli", "sweep", str(problem), "--db", str(db)]
    return [*argv, "--strategies", "evolutionary,random", "--name", name, "--no-test", *options]


def _wait_for_a_scored_candidate(db: Path, run_id: str, timeout_s: float = 120.0) -> None:
    """Until run `run_id`'s journal records a scored candidate: the child search is past its
    start-up (imports and set-up take seconds on a loaded machine, and a Ctrl-C then is no
    Ctrl-C during a search)."""
    journal = journal_path(db, run_id)
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if journal.is_file() and '"type":"candidate_evaluated"' in journal.read_text(
            encoding="utf-8"
        ):
            return
        time.sleep(0.05)
    raise AssertionError(f"no candidate scored in {journal} within {timeout_s:g} s")


def _sweep(problem: Path, db: Path, name: str, *options: str) -> subprocess.CompletedProcess[str]:
    """Run `_sweep_argv(...)` to its end (280 s at most); it must exit 0."""
    argv = _sweep_argv(problem, db, name, *options)
    done = subprocess.run(argv, capture_output=True, text=True, env=os.environ, timeout=280)
    assert done.returncode == 0, done.stderr
    return done


def test_parse_seeds() -> None:
    assert parse_seeds("1-5") == [1, 2, 3, 4, 5]
    assert parse_seeds("1,3,7") == [1, 3, 7]
    assert parse_seeds("2-3,3,9") == [2, 3, 9]
    with pytest.raises(CliUsageError, match="empty range"):
        parse_seeds("5-1")
    with pytest.raises(CliUsageError, match="expected e.g."):
        parse_seeds("one")


@pytest.mark.slow
def test_sweep_of_two_strategies_by_two_seeds_is_four_runs_in_one_group(tmp_path: Path) -> None:
    db = tmp_path / "runs.duckdb"
    done = _sweep(SLEEPY, db, "g1", "--seeds", "1-2", "--max-evaluations", "4")
    group = json.loads((sweep_dir(db) / "g1.json").read_text())
    assert group["strategies"] == ["evolutionary", "random"]
    assert group["seeds"] == [1, 2]
    assert len(group["runs"]) == 4 == len(set(group["runs"]))
    assert [g["runs"] for g in sweep_groups(db)] == [group["runs"]]
    store = DuckDBRunStore(db)
    try:
        runs = store.list_runs()
    finally:
        store.close()
    recorded = runs.set_index("run_id")
    assert set(group["runs"]) <= set(recorded.index)
    pairs = sorted(
        (recorded.loc[r, "strategy"], int(recorded.loc[r, "seed"])) for r in group["runs"]
    )
    assert pairs == [("evolutionary", 1), ("evolutionary", 2), ("random", 1), ("random", 2)]
    assert f"/overlay?runs={','.join(group['runs'])}" in done.stdout


def _copy_sleepy(tmp_path: Path, params: str = "", tables: str = "") -> Path:
    """A copy of the sleepy problem with `[params]` lines replaced and tables appended."""
    problem = tmp_path / "sleepy"
    shutil.copytree(SLEEPY, problem)
    toml = (problem / "problem.toml").read_text()
    for line in params.splitlines():
        key = line.split("=")[0].strip()
        toml = re.sub(rf"(?m)^{key} = .*$", line.replace("\\", "\\\\"), toml)
    (problem / "problem.toml").write_text(toml + tables)
    return problem


def _masked(text: str) -> list[str]:
    """The lines with run ids as RUN, wall times as W, and a table's padding as two spaces."""
    text = re.sub(r"\d{8}-\d{6}-[0-9a-f]{6}", "RUN", text)
    text = re.sub(r"wall \d+\.\d s", "wall W s", text)
    lines = [re.sub(r"  \d+\.\d$", "  W", line) for line in text.splitlines()]
    return [re.sub(r" {2,}", "  ", line) for line in lines]


@pytest.mark.slow
def test_a_sweep_prints_each_start_and_end_then_a_table(tmp_path: Path) -> None:
    db = tmp_path / "runs.duckdb"
    done = _sweep(SLEEPY, db, "g2", "--seeds", "3", "--max-evaluations", "3", "--parallel", "1")
    runs = json.loads((sweep_dir(db) / "g2.json").read_text())["runs"]
    assert re.findall(r"(?m)^started (\S+)", done.stdout) == runs
    assert _masked(done.stdout) == [
        "started RUN  evolutionary seed 3",
        "ended  RUN  evolutionary seed 3  stopped (max_evaluations reached (3))  best 0.9988  "
        "wall W s",
        "started RUN  random seed 3",
        "ended  RUN  random seed 3  stopped (max_evaluations reached (3))  best 0.9988  wall W s",
        "run  strategy  seed  status  best  wall_s",
        "RUN  evolutionary  3  stopped (max_evaluations reached (3))  0.9988  W",
        "RUN  random  3  stopped (max_evaluations reached (3))  0.9988  W",
        f"sweep g2: 2 runs recorded in {db}",
        "overlay: open the studio's Run overlay page at /overlay?runs=RUN,RUN",
    ]


@pytest.mark.slow
def test_ctrl_c_stops_the_running_search_records_it_and_names_its_resume(tmp_path: Path) -> None:
    # one search at a time, each call 0.3 s: Ctrl-C while the first runs stops it after its
    # evaluation in progress (as `search` does), and the second never starts
    problem = _copy_sleepy(tmp_path, params="delay_s = 0.3")
    db = tmp_path / "runs.duckdb"
    argv = _sweep_argv(problem, db, "g3", "--seeds", "1", "--max-evaluations", "40")
    argv += ["--parallel", "1"]
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert proc.stdout is not None
    first = proc.stdout.readline()
    assert first.startswith("started ")
    run_id = first.split()[1]
    _wait_for_a_scored_candidate(db, run_id)  # the search is under way (its seed: 8 x 0.3 s)
    proc.send_signal(signal.SIGINT)
    rest, err = proc.communicate(timeout=120)
    assert proc.returncode == 130, err
    lines = _masked(first + rest)
    assert lines[0] == "started RUN  evolutionary seed 1"
    assert re.fullmatch(
        r"ended  RUN  evolutionary seed 1  stopped \(SIGINT.*\)  best (\d\.\d{4}|-)  wall W s",
        lines[1],
    ), lines[1]
    assert not any(line.startswith("started RUN  random") for line in lines)
    assert lines[4] == "RUN  random  1  not started  -  -", lines[4]
    assert f"sweep g3: 1 runs recorded in {db}" in lines
    assert "interrupted: each running search stops after its evaluation in progress" in err
    assert err.strip().splitlines()[-1] == (
        f"interrupted: continue with 'topology-studio search {problem} --resume {run_id} --db {db}'"
    )
    group = json.loads((sweep_dir(db) / "g3.json").read_text())
    assert group["runs"] == [run_id]


@pytest.mark.slow
def test_a_local_sweeps_searches_split_the_rate_budget(tmp_path: Path) -> None:
    """Two local searches at once under 600 requests a minute with a 0.2 s burst (10 a second,
    2 at once): each gets half (5 a second, 1 at once), and together they never make more than
    2 + 10 (w + 0.05) calls in w seconds (counted by the model)."""
    log = tmp_path / "calls.log"
    problem = _copy_sleepy(
        tmp_path,
        params=f'call_log = "{log}"',
        tables="\n[rate_limits.function]\nrequests_per_minute = 600\nburst_s = 0.2\n",
    )
    db = tmp_path / "runs.duckdb"
    _sweep(problem, db, "g4", "--seeds", "1", "--max-evaluations", "6", "--parallel", "2")
    group = json.loads((sweep_dir(db) / "g4.json").read_text())
    assert group["rate_budget"] == "split 2 ways"
    times = sorted(float(t) for t in log.read_text().split())
    assert len(times) >= 30
    for i, start in enumerate(times):
        for j in range(i, len(times)):
            assert j - i + 1 <= 2 + 10 * (times[j] - start + 0.05)


def test_a_rate_limit_is_split_into_equal_parts() -> None:
    from core.agents.rate_budget import ProviderLimit
    from studio.cli._executor import share_rate_limits

    limits = {
        "openai": ProviderLimit(
            requests_per_minute=600, tokens_per_minute=90000, max_concurrent=5, burst_s=2
        ),
        "*": ProviderLimit(requests_per_minute=30),
    }
    assert share_rate_limits(limits, 2) == {
        "openai": ProviderLimit(
            requests_per_minute=300, tokens_per_minute=45000, max_concurrent=2, burst_s=2
        ),
        "*": ProviderLimit(requests_per_minute=15),
    }
    assert share_rate_limits(limits, 1) == limits
    with pytest.raises(CliUsageError, match="allows 5 call\\(s\\) in flight, fewer than the 6"):
        share_rate_limits(limits, 6)
