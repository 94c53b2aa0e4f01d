"""`search --strategy exhaustive --max-nodes N`: the count is said before the run, and the
default budget is that count + 1 (the seed is one evaluation)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from core.problems import load_problem
from core.search.budget import Budget
from studio.cli import main
from studio.cli._setup import _exhaustive_budget

REPO = Path(__file__).resolve().parents[2]
DATASETS = os.environ.get("TOPOLOGY_STUDIO_DATASETS") or str(REPO.parent / "shared" / "datasets")


@pytest.fixture
def workdir(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    monkeypatch.setenv("TOPOLOGY_STUDIO_DATASETS", DATASETS)
    monkeypatch.setenv("TOPOLOGY_STUDIO_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv("TOPOLOGY_STUDIO_DB", str(tmp_path / "runs.duckdb"))
    monkeypatch.chdir(tmp_path)
    return tmp_path


def test_default_budget_is_the_count_plus_one(workdir: Path) -> None:
    problem = load_problem("gsm8k_replay")
    # 2 nodes on the replay registries: pipeline[agent] (4) and router(c -> agent) with no
    # fallback (4 x 6 = 24) for the six conditions readable before any candidate (the
    # question's length, many numbers, fraction, percent, money, decimal)
    budget, line = _exhaustive_budget(
        problem, {"max_nodes": 2}, Budget(max_evaluations=48, max_usd=20000.0), given=False
    )
    assert (budget.max_evaluations, budget.max_usd) == (29, 20000.0)
    assert line.startswith(
        "exhaustive: 28 topologies of at most 2 nodes (by size 0, 28; generated 28, rejected 0, "
        "duplicates 0; enumerated in "
    )
    kept, _ = _exhaustive_budget(problem, {"max_nodes": 2}, Budget(max_evaluations=5), given=True)
    assert kept.max_evaluations == 5


def test_max_nodes_belongs_to_exhaustive_only(
    workdir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code = main(["search", "gsm8k_replay", "--strategy", "random", "--max-nodes", "3"])
    err = capsys.readouterr().err
    assert code == 2
    assert "--max-nodes is an option of --strategy exhaustive only" in err
    journals = workdir / "runs.duckdb.journals"
    assert not journals.exists() or list(journals.iterdir()) == []
