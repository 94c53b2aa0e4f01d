"""`Evaluator(agent_factory=..., score_fn=...)` and the runner's reference form (the reference
guide's two-phase example)."""

from __future__ import annotations

import asyncio

import pytest
from pydantic_ai.messages import ModelMessage, ModelResponse, TextPart
from pydantic_ai.models.function import AgentInfo, FunctionModel
from test_prompt_adapter import BATCH, FIX, _score, world

from core.errors import OptimizationError
from core.optimization import Evaluator, OptimizationConfig, OptimizationRunner


def _reflect(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
    return ModelResponse(parts=[TextPart(f"```\nSolve it. {FIX}\n```")])


def _evaluator(factory: object) -> Evaluator:
    inner, _, _ = world()
    return Evaluator(
        factory,  # type: ignore[arg-type]
        _score,
        agent_registry=inner.agent_registry,
        timer=lambda: 0.0,
    )


def test_factory_spec_json_and_data_give_the_same_topology() -> None:
    _, spec, _ = world()
    assert _evaluator(lambda: spec).topology() == spec
    assert _evaluator(lambda: spec.model_dump_json()).topology() == spec
    assert _evaluator(lambda: spec.model_dump()).topology() == spec


def test_bad_factories_are_refused_naming_what_they_gave() -> None:
    with pytest.raises(OptimizationError, match="zero-argument callable .* got a str"):
        _evaluator("not callable")
    with pytest.raises(
        OptimizationError, match=r"returned a dict that is not a TopologySpec: <root>: "
    ):
        _evaluator(lambda: {"kind": "nonsense"}).topology()
    with pytest.raises(OptimizationError, match=r"agent_factory\(\) raised KeyError\('main'\)"):
        _evaluator(lambda: {}["main"]).topology()


def test_runner_takes_the_topology_from_the_evaluator() -> None:
    inner, spec, genome = world()
    runner = OptimizationRunner(
        OptimizationConfig(max_metric_calls=8, reflection_minibatch_size=2),
        genome=genome,
        evaluator=Evaluator(
            lambda: spec, _score, agent_registry=inner.agent_registry, timer=lambda: 0.0
        ),
        reflection_model=FunctionModel(_reflect, model_name="reflect-fn"),
    )
    result = asyncio.run(runner.optimize(trainset=BATCH))
    assert result.best_decoded == {"solver.system_prompt": f"Solve it. {FIX}"}
    assert (result.raw["start_accuracy"], result.raw["end_accuracy"]) == (0.0, 1.0)


def test_the_topology_is_given_once() -> None:
    inner, spec, genome = world()
    model = FunctionModel(_reflect, model_name="reflect-fn")
    with pytest.raises(OptimizationError, match="give the topology once"):
        OptimizationRunner(
            OptimizationConfig(),
            genome=genome,
            evaluator=Evaluator(lambda: spec, _score),
            spec=spec,
            reflection_model=model,
        )
    with pytest.raises(OptimizationError, match=r"needs spec= \(the topology"):
        OptimizationRunner(
            OptimizationConfig(), genome=genome, evaluator=inner, reflection_model=model
        )


def test_default_reflection_model_is_built_with_the_api_key(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    inner, spec, genome = world()
    with pytest.raises(
        OptimizationError,
        match=r"reflection model 'openai:gpt-4.1' cannot be built: .*OPENAI_API_KEY",
    ):
        OptimizationRunner(OptimizationConfig(), genome=genome, evaluator=inner, spec=spec)
    runner = OptimizationRunner(
        OptimizationConfig(), genome=genome, evaluator=inner, spec=spec, api_key="sk-test"
    )
    assert runner._reflector.model.model_name == "gpt-4.1"  # type: ignore[union-attr]
