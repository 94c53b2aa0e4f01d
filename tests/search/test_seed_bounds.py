"""A search's random seed is a whole number from 0 to 2**63 - 1 (what a run records: the store's
BIGINT column, `RunStarted.seed`), refused out of that range where it is configured (the
strategy config and the problem's `[search]` table) with a validation error at the field, so the
command line prints one usage line (exit 2) instead of an internal error from the first event.
"""

from __future__ import annotations

import os
import random
import sys
from pathlib import Path
from typing import Any

import pytest
from pydantic import ValidationError

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "contracts"))

from strategy_contract import toy_world  # noqa: E402

from core.problems.config import RANDOM_SEED_MAX, SearchDefaults  # noqa: E402
from core.search._engine import minibatch_indices  # noqa: E402
from core.search.budget import Budget  # noqa: E402
from core.search.events import RunStarted, SearchEvent  # noqa: E402
from core.search.strategies import (  # noqa: E402
    STRATEGY_NAMES,
    get_strategy,
    strategy_config_class,
)
from core.storage import DuckDBRunStore, journal_path  # noqa: E402
from studio.cli import main  # noqa: E402

REPO = Path(__file__).resolve().parents[2]
DATASETS = os.environ.get("TOPOLOGY_STUDIO_DATASETS") or str(REPO.parent / "shared" / "datasets")

MSG = (
    "must be a whole number from 0 to 9223372036854775807 (2**63 - 1, the largest seed a run "
    "can record)"
)
"""The validation message of a seed out of range."""

OUT_OF_RANGE = [-1, 2**63, 2**64, -(2**63)]


def _errors(exc: ValidationError) -> list[tuple[Any, ...]]:
    return [(e["type"], e["loc"], e["msg"], e["input"]) for e in exc.errors()]


def test_the_bound_is_what_a_run_records() -> None:
    assert RANDOM_SEED_MAX == 2**63 - 1 == 9223372036854775807
    RunStarted(run_id="r", seq=0, ts=0.0, problem="p", strategy="random", seed=RANDOM_SEED_MAX)
    with pytest.raises(ValidationError):
        RunStarted(
            run_id="r", seq=0, ts=0.0, problem="p", strategy="random", seed=RANDOM_SEED_MAX + 1
        )


@pytest.mark.parametrize("name", STRATEGY_NAMES)
def test_every_strategy_config_takes_both_ends(name: str) -> None:
    cls = strategy_config_class(name)
    assert cls(seed=0).seed == 0
    assert cls(seed=RANDOM_SEED_MAX).seed == RANDOM_SEED_MAX
    assert cls().seed == 42


@pytest.mark.parametrize("name", STRATEGY_NAMES)
@pytest.mark.parametrize("seed", OUT_OF_RANGE)
def test_every_strategy_config_refuses_a_seed_out_of_range(name: str, seed: int) -> None:
    with pytest.raises(ValidationError) as got:
        strategy_config_class(name)(seed=seed)
    assert _errors(got.value) == [("random_seed_range", ("seed",), MSG, seed)]


@pytest.mark.parametrize("seed", OUT_OF_RANGE)
def test_the_problem_search_table_refuses_a_seed_out_of_range(seed: int) -> None:
    assert SearchDefaults(seed=RANDOM_SEED_MAX).seed == RANDOM_SEED_MAX
    with pytest.raises(ValidationError) as got:
        SearchDefaults(seed=seed)
    assert _errors(got.value) == [("random_seed_range", ("seed",), MSG, seed)]


def test_the_consumers_take_the_largest_seed() -> None:
    """random.Random and the minibatch draws take 2**63 - 1; a search with it records it."""
    assert random.Random(RANDOM_SEED_MAX).random() == random.Random(RANDOM_SEED_MAX).random()
    assert minibatch_indices(10, 3, RANDOM_SEED_MAX, 0) == minibatch_indices(
        10, 3, RANDOM_SEED_MAX, 0
    )
    world = toy_world()
    config = {"seed": RANDOM_SEED_MAX, "n_generations": 1, "minibatch_size": 10}
    events: list[SearchEvent] = []
    world.run(get_strategy("random", config), budget=Budget(max_evaluations=2), events=events)
    started = events[0]
    assert isinstance(started, RunStarted) and started.seed == RANDOM_SEED_MAX
    with DuckDBRunStore() as store:
        store.record_events(events)
        run = store.get_run("toy-run")
        assert run is not None and run.seed == RANDOM_SEED_MAX


# ---- the command line -----------------------------------------------------------------------


@pytest.fixture
def isolated(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    monkeypatch.setenv("TOPOLOGY_STUDIO_DATASETS", DATASETS)
    monkeypatch.setenv("TOPOLOGY_STUDIO_CACHE", str(tmp_path / "cache"))
    monkeypatch.chdir(tmp_path)
    return tmp_path / "runs.duckdb"


@pytest.mark.parametrize("seed", [2**63, -1])
def test_search_with_a_seed_out_of_range_is_one_usage_line(
    isolated: Path, capsys: pytest.CaptureFixture[str], seed: int
) -> None:
    code = main(["search", "gsm8k_replay", "--seed", str(seed), "--db", str(isolated)])
    cap = capsys.readouterr()
    assert code == 2
    assert cap.out == ""
    assert cap.err.splitlines() == [f"topology-studio: error: invalid search option seed: {MSG}"]
    journals = journal_path(isolated, "x").parent
    assert not journals.exists() or list(journals.iterdir()) == []  # no run left behind


def test_a_problem_seed_out_of_range_is_one_usage_line(
    isolated: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = ["search", "gsm8k_replay", "--set", f"search.seed={2**63}", "--db", str(isolated)]
    code = main(argv)
    cap = capsys.readouterr()
    assert code == 2
    toml = REPO / "data" / "problems" / "gsm8k_replay" / "problem.toml"
    assert cap.err.splitlines() == [
        f"topology-studio: error: {toml}: field 'search.seed': {MSG} (got {2**63}) "
        "[value from overrides]"
    ]
