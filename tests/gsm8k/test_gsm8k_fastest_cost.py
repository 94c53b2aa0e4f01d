"""Deterministic cost of a `fastest` race: one documented rule, every branch that started is
charged in full, so three evaluations give the same cost to the last digit, with or without the
call cache."""

from __future__ import annotations

import asyncio
import math
import os
from pathlib import Path
from typing import Any

import pytest

import core
from core.agents.call_cache import InMemoryCallCache
from core.problems import DATASETS_ENV, Problem, load_problem

REPO = Path(core.__file__).resolve().parents[1]
DATASETS = os.environ.get(DATASETS_ENV) or str(REPO.parent / "shared" / "datasets")

SPEC: dict[str, Any] = {
    "kind": "pipeline",
    "steps": [
        {
            "operation": {
                "kind": "parallel",
                "merge": "fastest",
                "steps": [
                    {"kind": "agent_step", "agent_name": "6b_finetuning"},
                    {"kind": "agent_step", "agent_name": "175b_finetuning"},
                ],
            }
        }
    ],
}


@pytest.fixture(scope="module")
def problem() -> Problem:
    return load_problem("gsm8k_replay", datasets_dir=DATASETS, overrides={"models.time_scale": 0})


def expected_cost(problem: Problem, question: str) -> float:
    """Both branches in full: ceil(chars / 4) tokens in and out, $0.006 / 1K for 6B and
    $0.06 / 1K for 175B (problem.toml)."""
    data = problem.module.replay.load_replay_data(  # pyright: ignore[reportAttributeAccessIssue]
        Path(DATASETS) / "gsm8k" / "test.jsonl",
        Path(DATASETS) / "gsm8k" / "example_model_solutions.jsonl",
    )
    item = data.by_question[question]
    total = 0.0
    for run, per_1k in (("6b_finetuning", 0.006), ("175b_finetuning", 0.06)):
        tokens = math.ceil(len(question) / 4) + math.ceil(len(item.recordings[run].solution) / 4)
        total += tokens * per_1k / 1000
    return total


def test_three_evaluations_cost_the_same_and_charge_both_branches(problem: Problem) -> None:
    examples = problem.splits["validation"][:40]
    costs = []
    for _ in range(3):
        ev = asyncio.run(problem.evaluator().evaluate(SPEC, examples))
        assert ev.status == "ok"
        costs.append((ev.cost_usd, [r.cost_usd for r in ev.results]))
    assert costs[0] == costs[1] == costs[2]
    per_example = costs[0][1]
    for example, cost in zip(examples, per_example, strict=True):
        question = example.input if isinstance(example.input, str) else example.input.question
        assert cost == pytest.approx(expected_cost(problem, question), rel=1e-12, abs=0)
    assert round(costs[0][0], 8) == round(sum(per_example) / 40, 8)


def test_call_cache_hits_are_charged_exactly_like_misses(problem: Problem) -> None:
    examples = problem.splits["validation"][:40]
    plain = asyncio.run(problem.evaluator().evaluate(SPEC, examples))
    cache = InMemoryCallCache()
    evaluator = problem.evaluator(call_cache=cache)
    cold = asyncio.run(evaluator.evaluate(SPEC, examples))
    warm = asyncio.run(evaluator.evaluate(SPEC, examples))
    # calls inside a fastest race always run: 80 new model calls in the first evaluation; the
    # second is answered whole by the example memo (a race of replayed calls at time scale 0
    # ends the same way every run), which counts each run's 2 calls as hits
    assert (cache.stats().hits, cache.stats().misses) == (80, 80)
    for ev in (cold, warm):
        assert ev.cost_usd == plain.cost_usd
        assert ev.latency_ms == plain.latency_ms
        assert ev.accuracy == plain.accuracy
        assert [r.output_summary for r in ev.results] == [r.output_summary for r in plain.results]


def test_a_stored_call_in_a_race_runs_again_and_the_race_is_unchanged(problem: Problem) -> None:
    examples = problem.splits["validation"][:40]
    plain = asyncio.run(problem.evaluator().evaluate(SPEC, examples))
    cache = InMemoryCallCache()
    evaluator = problem.evaluator(call_cache=cache)
    alone: dict[str, Any] = {
        "kind": "pipeline",
        "steps": [{"operation": {"kind": "agent_step", "agent_name": "175b_finetuning"}}],
    }
    asyncio.run(evaluator.evaluate(alone, examples))  # stores every 175B call
    raced = asyncio.run(evaluator.evaluate(SPEC, examples))
    # inside a fastest race a replayed call always runs (a hit would skip pydantic-ai's own
    # event-loop turns and could win a race it loses afresh), so no hit: 40 + 80 misses
    assert (cache.stats().hits, cache.stats().misses) == (0, 120)
    assert raced.cost_usd == plain.cost_usd
    assert [r.cost_usd for r in raced.results] == [r.cost_usd for r in plain.results]
    assert raced.latency_ms == plain.latency_ms
    assert raced.accuracy == plain.accuracy
