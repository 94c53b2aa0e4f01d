"""The compatibility decisions for code ported from the reference library (only its import line
changed), with exact values: what the reference docs' forms do
here, and where we deliberately differ, the error that names the replacement."""

from __future__ import annotations

import asyncio
import dataclasses
import math
from typing import Any

import pytest
from pydantic import ValidationError
from pydantic_ai.usage import RunUsage
from reference_fakes import answering

from core import (
    AgentSpec,
    AgentStepSpec,
    EvaluationError,
    GoldExample,
    HydrationError,
    MetaAgentConfig,
    MetricBundle,
    MetricWeights,
    Pipeline,
    PipelineSpec,
    PipelineStepEntry,
    TopologyEvaluator,
    UnknownNamesError,
    topology_from_spec,
    validate_names,
)

COT_SEED = PipelineSpec(steps=[PipelineStepEntry(operation=AgentStepSpec(agent_name="cot"))])


def test_item_1_dict_agent_registry_hydrates_and_reports_unknown_names() -> None:
    agents = {"cot": lambda: answering(lambda p: f"cot: {p}")}
    built = topology_from_spec(COT_SEED, callable_registry={}, agent_registry=agents)
    assert isinstance(built, Pipeline) and asyncio.run(built.run("x")) == "cot: x"
    missing = PipelineSpec(steps=[PipelineStepEntry(operation=AgentStepSpec(agent_name="tot"))])
    assert validate_names(missing, callable_registry={}, agent_registry=agents) == [
        ("$.steps[0].operation.agent_name", "agent", "tot")
    ]
    with pytest.raises(UnknownNamesError):
        topology_from_spec(missing, callable_registry={}, agent_registry=agents)
    with pytest.raises(TypeError, match="expected an AgentRegistry or a mapping"):
        topology_from_spec(COT_SEED, callable_registry={}, agent_registry=["cot"])  # type: ignore[arg-type]


def test_item_1_dict_registries_in_the_evaluator() -> None:
    evaluator = TopologyEvaluator(
        score_fn=lambda output, example: 1.0,
        callable_registry={"exclaim": lambda s: s + "!"},
        agent_registry={"cot": lambda: answering(str.upper)},
    )
    missing = PipelineSpec(steps=[PipelineStepEntry(operation=AgentStepSpec(agent_name="tot"))])
    ev = asyncio.run(evaluator.evaluate(missing, [GoldExample(input="a", id="1")]))
    assert (ev.status, ev.unknown_names) == (
        "rejected",
        [("$.steps[0].operation.agent_name", "agent", "tot")],
    )
    assert evaluator.agent_registry.names() == ["cot"]
    assert evaluator.callable_registry.names() == ["exclaim"]


def test_item_3_cost_estimator_is_used_and_recorded_as_an_estimate() -> None:
    seen: list[RunUsage] = []

    def estimate(usage: RunUsage) -> float:
        seen.append(usage)
        return 0.25

    evaluator = TopologyEvaluator(
        score_fn=lambda output, example: 1.0,
        callable_registry={},
        agent_registry={"cot": lambda: answering(str.upper)},
        cost_estimator=estimate,
        timer=lambda: 0.0,
    )
    bundle = asyncio.run(evaluator.evaluate_one({"main": COT_SEED}, GoldExample(input="ab")))
    assert bundle.cost_usd == 0.25
    assert (bundle.raw["cost_source"], bundle.raw["measured_cost_usd"]) == ("estimate", 0.0)
    assert [u.requests for u in seen] == [1]
    failing = TopologyEvaluator(
        score_fn=lambda output, example: 1.0,
        callable_registry={},
        agent_registry={"cot": lambda: answering(str.upper)},
        cost_estimator=lambda usage: math.inf,
    )
    bad = asyncio.run(failing.evaluate_one({"main": COT_SEED}, GoldExample(input="ab")))
    assert (bad.status, bad.error) == ("invalid", "cost_estimator_invalid: inf is not a cost")


def test_item_3_confidence_protocol_is_refused_with_the_reason() -> None:
    with pytest.raises(EvaluationError, match="^confidence_protocol is not supported"):
        TopologyEvaluator(
            score_fn=lambda output, example: 1.0,
            callable_registry={},
            agent_registry={},
            confidence_protocol=object(),
        )


def test_item_6_metric_bundle_methods() -> None:
    bundle = MetricBundle(accuracy=0.5, cost_usd=0.01, latency_ms=100.0, confidence=1.0)
    assert bundle.scalarize(MetricWeights()) == 0.5 - 0.1 - 0.002 + 0.1
    assert bundle.to_per_instance_scores() == {
        "accuracy": 0.5,
        "cost_usd": 0.01,
        "latency_ms": 100.0,
        "confidence": 1.0,
    }
    combined = MetricBundle.aggregate(
        [MetricBundle(accuracy=1.0, cost_usd=0.02), MetricBundle(accuracy=0.0, cost_usd=0.04)]
    )
    assert (combined.accuracy, combined.cost_usd, combined.n_trials) == (0.5, 0.03, 2)
    assert combined.stdev == math.sqrt(0.5)
    with pytest.raises(ValueError, match="at least one bundle"):
        MetricBundle.aggregate([])


def test_item_7_pipeline_event_type() -> None:
    async def step(x: str) -> str:
        return x

    async def first_event() -> tuple[str, str]:
        async for event in Pipeline([step]).run_stream("x"):
            return event.event_type, event.type
        raise AssertionError("no event")

    assert asyncio.run(first_event()) == ("pipeline_start", "pipeline_start")


def test_item_9_unknown_names_error_is_a_key_error_with_the_full_report() -> None:
    spec = PipelineSpec(
        steps=[
            PipelineStepEntry(operation=AgentStepSpec(agent_name="a_x")),
            PipelineStepEntry(operation=AgentStepSpec(agent_name="b_x")),
        ]
    )
    try:
        topology_from_spec(spec, callable_registry={}, agent_registry={})
    except KeyError as exc:  # the reference library's handler
        assert isinstance(exc, UnknownNamesError) and isinstance(exc, HydrationError)
        assert str(exc) == (
            "2 unknown name(s) in spec:\n"
            "  $.steps[0].operation.agent_name: unknown agent 'a_x'\n"
            "  $.steps[1].operation.agent_name: unknown agent 'b_x'\n"
            "known names: agent: (none); callable: (none); "
            "merge: collect_all, fastest, first_wins"
        )
    else:  # pragma: no cover
        raise AssertionError("expected a KeyError")


def test_item_10_generic_gold_example_and_dataclass_config() -> None:
    typed = GoldExample[str, int](input="2+2", expected=4)
    assert (typed.input, typed.expected) == ("2+2", 4)
    assert isinstance(typed, GoldExample)
    with pytest.raises(ValidationError):
        GoldExample[str, int](input="2+2", expected="four")
    config = MetaAgentConfig(n_generations=3)
    assert [f.name for f in dataclasses.fields(config)][:3] == [
        "n_generations",
        "minibatch_size",
        "minibatch_margin",
    ]
    assert dataclasses.asdict(config)["n_generations"] == 3
    assert dataclasses.replace(config, seed=7).seed == 7


def test_inline_agents_need_explicit_permission_naming_the_switch() -> None:
    inline = AgentSpec(name="helper", system_prompt="Help.", output_schema={"type": "string"})
    spec = PipelineSpec(steps=[PipelineStepEntry(operation=AgentStepSpec(inline_spec=inline))])

    def factory(agent_spec: AgentSpec) -> Any:
        return answering(lambda p: f"{agent_spec.name}: {p}")

    # the reference library hydrates an inline spec whenever an agent factory is given
    with pytest.raises(HydrationError, match=r"pass allow_inline_agents=True"):
        topology_from_spec(spec, callable_registry={}, agent_registry={}, agent_factory=factory)
    built = topology_from_spec(
        spec,
        callable_registry={},
        agent_registry={},
        agent_factory=factory,
        allow_inline_agents=True,
    )
    assert asyncio.run(built.run("hi")) == "helper: hi"


def test_an_evaluator_given_an_agent_factory_names_the_inline_switch() -> None:
    inline = AgentSpec(name="helper", system_prompt="Help.", output_schema={"type": "string"})
    spec = PipelineSpec(steps=[PipelineStepEntry(operation=AgentStepSpec(inline_spec=inline))])

    def factory(agent_spec: AgentSpec) -> Any:
        return answering(lambda p: f"{agent_spec.name}: {p}")

    def evaluator(**options: Any) -> TopologyEvaluator:
        return TopologyEvaluator(
            score_fn=lambda output, example: 1.0 if output == "helper: hi" else 0.0,
            callable_registry={},
            agent_registry={},
            agent_factory=factory,
            **options,
        )

    # the reference library's form: an agent_factory alone enables inline specs
    refused = asyncio.run(evaluator().evaluate_one({"main": spec}, GoldExample(input="hi")))
    assert refused.raw["error"] == (
        "inline_agents_disabled: inline AgentSpec at $.steps[0].operation.inline_spec; use a "
        "registered agent name (this evaluator has an agent_factory: pass "
        "allow_inline_agents=True to accept inline agents)"
    )
    allowed = evaluator(allow_inline_agents=True)
    ran = asyncio.run(allowed.evaluate_one({"main": spec}, GoldExample(input="hi")))
    assert (ran.accuracy, ran.status) == (1.0, "ok")


def test_the_autonomy_agent_factory_hydrates_inline_agents() -> None:
    from pydantic_ai.models.test import TestModel

    from core import AgentFactory

    inline = AgentSpec(
        name="helper",
        system_prompt="Help.",
        output_schema={
            "type": "object",
            "properties": {"answer": {"type": "string"}},
            "required": ["answer"],
        },
    )
    spec = PipelineSpec(steps=[PipelineStepEntry(operation=AgentStepSpec(inline_spec=inline))])
    factory = AgentFactory(default_model=TestModel(custom_output_args={"answer": "42"}))
    built = topology_from_spec(
        spec,
        callable_registry={},
        agent_registry={},
        agent_factory=factory,  # an object with spawn(spec), as the reference hydrators take
        allow_inline_agents=True,
    )
    assert asyncio.run(built.run("q")).model_dump() == {"answer": "42"}
