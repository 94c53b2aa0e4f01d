"""`topology-studio sweep` (issue 18, item 5): 2 strategies x 2 seeds are 4 runs in the store
and in one named group whose overlay link names all 4."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from core.storage import DuckDBRunStore
from studio._cli_common import CliUsageError
from studio._cli_sweep import parse_seeds, sweep_dir, sweep_groups

SLEEPY = Path(__file__).resolve().parents[1] / "fixtures" / "sleepy"


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
    argv = [sys.executable, "-m", "studio.cli", "sweep", str(SLEEPY), "--db", str(db)]
    argv += ["--strategies", "evolutionary,random", "--seeds", "1-2", "--name", "g1"]
    argv += ["--max-evaluations", "4", "--no-test"]
    done = subprocess.run(argv, capture_output=True, text=True, env=os.environ, timeout=280)
    assert done.returncode == 0, done.stderr
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
