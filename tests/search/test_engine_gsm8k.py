"""End to end on the GSM8K replay problem (real recorded model outputs, offline, time scale 0):
a small evolutionary search is deterministic, and the meta agent with a scripted designer
proposes, evaluates and reports an ensemble."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest
from pydantic_ai import models
from pydantic_ai.messages import ModelMessage, ModelResponse, ToolCallPart
from pydantic_ai.models.function import AgentInfo, FunctionModel
from pydantic_ai.usage import RequestUsage

from core.problems import Problem, load_problem
from core.search.budget import Budget
from core.search.engine import build_search, run_search
from core.search.result import OptimizationResult
from core.search.subscribers import EventLog

models.ALLOW_MODEL_REQUESTS = False

pytestmark = pytest.mark.slow


def gsm8k(validation_size: int = 30) -> Problem:
    # the data comes from tests/conftest.py's fallback rule: missing data fails, never skips
    return load_problem(
        "gsm8k_replay",
        overrides={"models.time_scale": 0, "gold.validation_size": validation_size},
    )


def search(problem: Problem, **options: Any) -> OptimizationResult:
    options.setdefault("handle_sigint", False)
    return asyncio.run(run_search(problem, **options))


def archive_fingerprint(result: OptimizationResult) -> list[tuple[Any, ...]]:
    """Every archive entry's spec, split, score and per-example metrics (latency is model
    time: the problem sets `latency_source = "model"`, so it is deterministic)."""
    return [
        (
            e.spec_hash,
            e.generation,
            e.split,
            e.aggregate_score,
            e.parent_idx,
            tuple((b.accuracy, b.cost_usd, b.latency_ms, b.status) for b in e.bundles),
        )
        for e in result.raw["archive"].entries
    ]


def test_evolutionary_search_on_gsm8k_is_deterministic() -> None:
    options: dict[str, Any] = {
        "strategy": "evolutionary",
        "config": {"n_generations": 2, "population_size": 3, "minibatch_size": 8},
        "budget": Budget(max_evaluations=12),
        "use_test_split": False,
        "seed": 11,
    }
    first = search(gsm8k(), **options)
    second = search(gsm8k(), **options)
    assert archive_fingerprint(first) == archive_fingerprint(second)
    assert [r.model_dump() for r in first.history] == [r.model_dump() for r in second.history]
    assert first.raw["best_idx"] == second.raw["best_idx"]
    assert first.raw["pareto_idx"] == second.raw["pareto_idx"]
    assert first.best_candidate == second.best_candidate
    seed = first.history[0]
    assert seed.operator == "seed" and seed.split == "validation" and seed.valid
    assert 0.0 < (seed.accuracy or 0.0) < 1.0
    assert len(first.history) > 1


def test_meta_agent_on_gsm8k_proposes_and_reports_an_ensemble() -> None:
    ensemble = {
        "thought": "three runs vote",
        "spec": {
            "kind": "pipeline",
            "steps": [
                {
                    "operation": {
                        "kind": "parallel",
                        "merge": "merge_candidates",
                        "steps": [
                            {"kind": "agent_step", "agent_name": "6b_finetuning"},
                            {"kind": "agent_step", "agent_name": "175b_finetuning"},
                            {"kind": "agent_step", "agent_name": "6b_verification"},
                        ],
                    }
                },
                {"operation": {"kind": "function_step", "callable_name": "majority_vote"}},
            ],
        },
    }
    prompts: list[str] = []

    def designer(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        prompts.append(str(messages[-1].parts[-1]))
        return ModelResponse(
            parts=[ToolCallPart(info.output_tools[0].name, json.dumps(ensemble))],
            usage=RequestUsage(input_tokens=2000, output_tokens=300),
        )

    problem = gsm8k()
    log = EventLog()
    result = search(
        problem,
        strategy="meta_agent",
        model=FunctionModel(designer, model_name="designer"),
        config={"n_generations": 1, "reflexion_passes": 1, "minibatch_size": 8},
        budget=Budget(max_evaluations=5),
        subscribers=[log],
        use_test_split=False,
    )
    assert len(prompts) == 2  # design and one reflexion (unchanged), no debug retry
    seed, candidate = result.history
    assert candidate.status == "evaluated" and candidate.operator == "meta_agent"
    assert candidate.thought == "three runs vote"
    assert candidate.design_requests == 2 and candidate.design_cost_usd == 0.0
    assert candidate.n_agents == 3 and candidate.depth == 2
    assert candidate.minibatch_score is not None
    assert candidate.parent_minibatch_score is not None
    assert candidate.promoted is (candidate.minibatch_score > candidate.parent_minibatch_score)
    # on the full split when promoted or re-scored for the report, else on its minibatch
    full = candidate.promoted or candidate.rescored
    assert candidate.split == ("validation" if full else "minibatch")
    assert (candidate.cost_usd or 0.0) > (seed.cost_usd or 0.0)
    finished = log.events[-1]
    assert finished.type == "run_finished" and finished.status == "completed"
    assert finished.best_idx == result.raw["best_idx"]


def test_test_size_scores_the_held_out_test_on_the_first_examples_of_the_split() -> None:
    problem = gsm8k(10)
    test = problem.splits["test"]
    run = build_search(problem, test_size=7, handle_sigint=False)
    assert run.test == list(test[:7])
    assert build_search(problem, handle_sigint=False).test == list(test)
    assert (
        build_search(problem, use_test_split=False, test_size=7, handle_sigint=False).test is None
    )
    with pytest.raises(ValueError, match="test_size must be at least 1, got 0"):
        build_search(problem, test_size=0, handle_sigint=False)
