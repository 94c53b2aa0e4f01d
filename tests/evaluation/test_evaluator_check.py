"""`TopologyEvaluator.check`: the one pre-run check the evaluator, the engine and the meta agent
share (same verdicts and reason texts as `evaluate`'s rejections, nothing run)."""

import asyncio
from typing import Any

from pydantic_ai import Agent, models
from pydantic_ai.models.test import TestModel

from core.evaluation import CheckResult
from core.evaluation.cache import InMemoryEvaluationCache
from core.evaluation.evaluator import TopologyEvaluator
from core.evaluation.metrics import GoldExample, MetricWeights
from core.hydrate import AgentRegistry, CallableRegistry
from core.ir import SpecLimits, parse_topology, spec_hash

models.ALLOW_MODEL_REQUESTS = False

CALLS: list[str] = []


def f(x: Any) -> Any:
    CALLS.append("f")
    return x


def fn(name: str) -> dict[str, Any]:
    return {"operation": {"kind": "function_step", "callable_name": name}}


def pipe(*entries: dict[str, Any]) -> dict[str, Any]:
    return {"kind": "pipeline", "steps": list(entries)}


def nest(n: int) -> dict[str, Any]:
    """`n` pipelines around one function step: depth `n`."""
    node: dict[str, Any] = {"kind": "function_step", "callable_name": "f"}
    for _ in range(n):
        node = {"kind": "pipeline", "steps": [{"operation": node}]}
    return node


def make(**options: Any) -> TopologyEvaluator:
    calls = CallableRegistry()
    calls.register("f", f)
    agents = AgentRegistry()
    agents.register("solver", lambda: Agent(TestModel()))
    return TopologyEvaluator(
        callable_registry=calls,
        agent_registry=agents,
        score_fn=lambda output, example: 1.0,
        **options,
    )


EXAMPLES = [GoldExample(input=1, expected=1, id="a")]

REJECTED = [
    ("not json", {}, "invalid_spec: "),
    (pipe(fn("f"), {"operation": pipe(fn("f"))}), {"max_depth": 1}, "max_depth_exceeded: "),
    (pipe(fn("f"), fn("f")), {"limits": SpecLimits(max_nodes=2)}, "max_nodes_exceeded: "),
    (pipe(fn("f")), {"allowed_step_kinds": ("agent_step",)}, "step_kind_not_allowed: "),
    (
        pipe(
            {
                "operation": {
                    "kind": "agent_step",
                    "inline_spec": {
                        "name": "i",
                        "model": "test",
                        "output_schema": {"type": "string"},
                    },
                }
            }
        ),
        {},
        "inline_agents_disabled: ",
    ),
    (pipe(fn("ghost")), {}, "unknown_names: "),
]


def test_check_gives_exactly_the_rejection_evaluate_gives_and_runs_nothing() -> None:
    for spec, options, code in REJECTED:
        ev = make(**options)
        CALLS.clear()
        checked = ev.check(spec)
        evaluated = asyncio.run(ev.evaluate(spec, EXAMPLES))
        assert isinstance(checked, CheckResult)
        assert checked.reason is not None and checked.reason.startswith(code), checked.reason
        assert not checked.ok
        assert evaluated.status == "rejected"
        assert evaluated.reason == checked.reason
        assert evaluated.spec_hash == checked.spec_hash
        assert (evaluated.n_agents, evaluated.depth) == (checked.n_agents, checked.depth)
        assert CALLS == []


def test_check_of_a_valid_spec_gives_the_parsed_spec_hash_and_structure() -> None:
    ev = make()
    spec = pipe(fn("f"), {"operation": {"kind": "agent_step", "agent_name": "solver"}})
    checked = ev.check(spec)
    parsed = parse_topology(spec)
    assert checked.ok
    assert checked.reason is None
    assert checked.spec == parsed
    assert checked.spec_hash == spec_hash(parsed)
    assert (checked.n_agents, checked.depth) == (1, 1)
    assert checked.unknown_names == ()


def test_unknown_names_come_with_paths_and_the_known_names() -> None:
    checked = make().check(
        pipe(fn("ghost"), {"operation": {"kind": "agent_step", "agent_name": "x"}})
    )
    assert checked.unknown_names == (
        ("$.steps[0].operation.callable_name", "callable", "ghost"),
        ("$.steps[1].operation.agent_name", "agent", "x"),
    )
    assert checked.known_names["agent"] == ("solver",)
    assert "f" in checked.known_names["callable"]


def test_a_spec_max_depth_allows_parses_even_beyond_the_ir_default_depth() -> None:
    ev = make(max_depth=10)
    assert ev.parse_limits == SpecLimits(max_depth=10)
    assert ev.check(nest(10)).ok
    too_deep = ev.check(nest(11))
    assert too_deep.reason is not None
    assert too_deep.reason.startswith("max_depth_exceeded: spec nesting depth exceeds max_depth=10")
    assert make().parse_limits == SpecLimits()
    assert make(max_depth=3).check(nest(4)).reason == "max_depth_exceeded: depth 4 > 3"
    assert make(limits=SpecLimits(max_depth=5), max_depth=10).parse_limits.max_depth == 5


def test_with_options_changes_only_the_given_options_and_shares_the_rest() -> None:
    cache = InMemoryEvaluationCache()
    ev = make(cache=cache, concurrency=3, weights=MetricWeights(cost_usd=-1.0))
    strict = ev.with_options(max_depth=1, allowed_step_kinds=["function_step"])
    assert strict.cache is cache
    assert strict.pricer is ev.pricer
    assert strict.config.model_dump() == {
        **ev.config.model_dump(),
        "max_depth": 1,
        "allowed_step_kinds": ("function_step",),
    }
    assert ev.config.max_depth is None  # the original is unchanged
    assert strict.check(nest(2)).reason == "max_depth_exceeded: depth 2 > 1"
    assert ev.check(nest(2)).ok
