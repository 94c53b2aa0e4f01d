"""`OptimizationRunner`: GEPA finds the prompt fix offline, exact figures."""

from __future__ import annotations

import asyncio

import pytest
from pydantic_ai.messages import ModelMessage, ModelResponse, TextPart
from pydantic_ai.models.function import AgentInfo, FunctionModel
from test_prompt_adapter import BATCH, FIX, world

from core.optimization import OptimizationConfig
from core.optimization.runner import OptimizationRunner, PromptCandidate


def _reflect(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
    return ModelResponse(parts=[TextPart(f"```\nSolve it. {FIX}\n```")])


def test_gepa_finds_the_final_answer_line() -> None:
    evaluator, spec, genome = world()
    runner = OptimizationRunner(
        OptimizationConfig(max_metric_calls=8, reflection_minibatch_size=2),
        genome=genome,
        evaluator=evaluator,
        spec=spec,
        reflection_model=FunctionModel(_reflect, model_name="reflect-fn"),
    )
    result = asyncio.run(runner.optimize(trainset=BATCH))
    assert result.best_decoded == {"solver.system_prompt": f"Solve it. {FIX}"}
    assert (result.raw["start_accuracy"], result.raw["end_accuracy"]) == (0.0, 1.0)
    assert result.best_score == 1.0
    assert [r.operator for r in result.history] == ["seed", "gepa_reflection"]
    used = result.raw["budget_used"]
    assert (used["metric_calls"], used["reflection_requests"]) == (8, 1)
    # where each candidate was found, in metric calls (the Live page's phase-2 chart x):
    # the seed before any call; the reflected prompt after the seed's 2 validation calls and
    # the 2 + 2 minibatch calls around the reflection (its own 2 validation calls come after)
    assert result.raw["discovery_metric_calls"] == [0, 6]


def _counted_runner() -> tuple[OptimizationRunner, list[str]]:
    """The runner of `test_gepa_finds_the_final_answer_line`, and a list that grows by one
    entry per reflection call."""
    evaluator, spec, genome = world()
    reflections: list[str] = []

    def reflect(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        reflections.append("r")
        return _reflect(messages, info)

    runner = OptimizationRunner(
        OptimizationConfig(max_metric_calls=8, reflection_minibatch_size=2),
        genome=genome,
        evaluator=evaluator,
        spec=spec,
        reflection_model=FunctionModel(reflect, model_name="reflect-fn"),
    )
    return runner, reflections


def test_each_candidate_is_reported_as_gepa_accepts_it() -> None:
    """`on_candidate` (the Live page shows prompt candidates while phase 2
    runs): the seed comes before GEPA's first reflection, candidate 1 after it, both scored."""
    runner, reflections = _counted_runner()
    seen: list[tuple[int, int, int, dict[str, str], float | None, float | None, float]] = []

    def on_candidate(c: PromptCandidate) -> None:
        r = c.record
        seen.append(
            (r.candidate_idx, len(reflections), c.metric_calls, c.prompts, r.score, r.accuracy,
             c.gepa_accuracy)
        )  # fmt: skip

    result = asyncio.run(runner.optimize(trainset=BATCH, on_candidate=on_candidate))
    assert seen == [
        (0, 0, 0, {"solver.system_prompt": "Solve it."}, 0.0, 0.0, 0.0),
        (1, 1, 6, {"solver.system_prompt": f"Solve it. {FIX}"}, 1.0, 1.0, 1.0),
    ]
    assert [r.operator for r in result.history] == ["seed", "gepa_reflection"]


def test_an_error_in_on_candidate_stops_gepa_and_is_raised() -> None:
    """gepa only logs a callback's exception; the runner stops GEPA and raises it."""
    runner, reflections = _counted_runner()

    def failing(c: PromptCandidate) -> None:
        raise OSError("journal full")

    with pytest.raises(OSError, match="journal full"):
        asyncio.run(runner.optimize(trainset=BATCH, on_candidate=failing))
    assert reflections == []  # stopped before its first iteration reflected
