"""`RunStore.test_front` / `queries.test_front`: the held-out test scores of the validation
front's candidates (each scored once on the test split, never used to choose), with one test score
(older runs: the winner) or many."""

from __future__ import annotations

import json
import math
import sys
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "contracts"))

from store_contract import RunBuilder  # noqa: E402

from core.search.events import SearchEvent  # noqa: E402
from core.storage import DuckDBRunStore  # noqa: E402
from core.storage.queries import TEST_FRONT_COLUMNS  # noqa: E402


def _spec(idx: int) -> str:
    step = {"operation": {"kind": "function_step", "callable_name": f"f{idx}"}}
    return json.dumps({"kind": "pipeline", "steps": [step], "name": f"c{idx}"})


def _run(test_of: list[int]) -> list[SearchEvent]:
    """Four candidates on validation (front: 0, 1, 3; 2 is dominated by 0), and test results
    of the candidates `test_of`."""
    b = RunBuilder()
    events: list[SearchEvent] = [b.started()]
    validation = {0: (0.5, 0.01, 0.49), 1: (0.8, 0.05, 0.75), 2: (0.4, 0.02, 0.38)}
    validation[3] = (0.9, 0.20, 0.70)
    test = {0: (0.55, 0.011, 0.54), 1: (0.5, 0.06, 0.49), 2: (0.6, 0.02, 0.58)}
    test[3] = (0.92, 0.21, 0.71)
    for idx, (acc, cost, score) in validation.items():
        events += [
            b.proposed(idx, spec_json=_spec(idx)),
            b.result(idx, acc, cost, score, n_examples=300),
        ]
    for idx in test_of:
        acc, cost, score = test[idx]
        events.append(b.result(idx, acc, cost, score, split="test", n_examples=1019))
    events.append(b.finished(best_idx=1))
    return events


@pytest.fixture
def store(tmp_path: Path) -> Any:
    with DuckDBRunStore(tmp_path / "runs.duckdb", auto_ingest=False) as s:
        yield s


def _nan(v: Any) -> Any:
    return "nan" if isinstance(v, float) and math.isnan(v) else v


def test_every_front_candidate_with_its_test_score(store: DuckDBRunStore) -> None:
    store.record_events(_run([0, 1, 2, 3]))
    tf = store.test_front("run-a")
    assert list(tf.columns) == list(TEST_FRONT_COLUMNS)
    assert tf["candidate_idx"].tolist() == [0, 1, 3]  # by validation cost; 2 is not on the front
    assert tf["accuracy"].tolist() == [0.5, 0.8, 0.9]
    assert tf["test_accuracy"].tolist() == [0.55, 0.5, 0.92]
    assert tf["test_cost_usd"].tolist() == [0.011, 0.06, 0.21]
    assert tf["test_aggregate_score"].tolist() == [0.54, 0.49, 0.71]
    assert tf["test_n_examples"].tolist() == [1019, 1019, 1019]
    assert tf["test_valid"].tolist() == [True, True, True]
    assert tf["on_test_front"].tolist() == [True, False, True]  # 1 is beaten by 0 on test


def test_a_run_that_scored_only_its_winner_on_test(store: DuckDBRunStore) -> None:
    store.record_events(_run([1]))
    tf = store.test_front("run-a")
    assert tf["candidate_idx"].tolist() == [0, 1, 3]
    assert [_nan(v) for v in tf["test_accuracy"].tolist()] == ["nan", 0.5, "nan"]
    assert tf["test_n_examples"].tolist() == [0, 1019, 0]
    assert tf["test_valid"].tolist() == [False, True, False]
    assert tf["on_test_front"].tolist() == [False, True, False]


def test_no_test_scores_and_an_unknown_run(store: DuckDBRunStore) -> None:
    store.record_events(_run([]))
    tf = store.test_front("run-a")
    assert tf["candidate_idx"].tolist() == [0, 1, 3]
    assert tf["on_test_front"].tolist() == [False, False, False]
    nope = store.test_front("nope")
    assert list(nope.columns) == list(TEST_FRONT_COLUMNS)
    assert len(nope) == 0
