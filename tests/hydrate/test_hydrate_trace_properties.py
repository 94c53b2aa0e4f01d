"""Property: any valid spec, hydrated and run with tracing on, gives a trace whose span tree is
the spec's tree (concurrent parallel branches, loop iterations in their own task, router
classifiers and loop evaluators included), and every span is closed when the run returns."""

from __future__ import annotations

import asyncio
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pydantic_ai import Agent, models
from pydantic_ai.messages import ModelMessage, ModelResponse, TextPart
from pydantic_ai.models.function import AgentInfo, FunctionModel

from core.hydrate import AgentRegistry, CallableRegistry, topology_from_spec
from core.ir import AnyNode, iter_nodes
from core.ir.models import child_slots
from core.ir.testing import DEFAULT_AGENT_NAMES, DEFAULT_CALLABLE_NAMES, topology_specs
from core.runtime import Trace, capture_trace

models.ALLOW_MODEL_REQUESTS = False


class Anything:
    """One value that works in every role a registered callable can have: step output,
    classifier answer (`.route`), verdict (`.passed`, `.score`), condition, merge, update."""

    passed = True
    route = "math"
    score = 1.0
    feedback = ""

    def __str__(self) -> str:
        return "anything"


def sync_callable(*args: Any) -> Anything:
    return Anything()


async def async_callable(*args: Any) -> Anything:
    await asyncio.sleep(0)  # a real suspension point, so branches interleave
    return Anything()


def agent(name: str) -> Agent[None, str]:
    def answer(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        return ModelResponse(parts=[TextPart("math")])

    return Agent(FunctionModel(answer, model_name=name), name=name)


def spec_parents(spec: AnyNode) -> dict[str | None, str | None]:
    parents: dict[str | None, str | None] = {spec.id: None}
    for _, node in iter_nodes(spec):
        for _, child in child_slots(node):
            parents[child.id] = node.id
    return parents


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(topology_specs(ids="all", max_depth=4), st.booleans())
def test_the_trace_tree_is_the_spec_tree(spec: AnyNode, use_async: bool) -> None:
    calls = CallableRegistry()
    for name in DEFAULT_CALLABLE_NAMES:
        calls.register(name, async_callable if use_async else sync_callable)
    agents = AgentRegistry()
    for name in DEFAULT_AGENT_NAMES:
        agents.register(name, lambda name=name: agent(name))
    built = topology_from_spec(spec, callable_registry=calls, agent_registry=agents)

    async def go() -> Trace:
        with capture_trace() as trace:
            try:
                await built.execute("q")
            except Exception:  # e.g. a router whose agent classifier names no route
                pass
        return trace

    trace = asyncio.run(go())
    parents = spec_parents(spec)
    by_id = {s.span_id: s for s in trace.spans}
    assert trace.spans and trace.spans[0].node_id == spec.id
    for span in trace.spans:
        assert span.end_ns is not None
        if span.node_id is None:  # a classifier or evaluator: a child of its router / loop
            assert span.parent_id is not None
            assert by_id[span.parent_id].kind in ("router", "refinement_loop")
            continue
        parent = None if span.parent_id is None else by_id[span.parent_id]
        assert (None if parent is None else parent.node_id) == parents[span.node_id]
        if parent is not None:
            assert parent.start_ns <= span.start_ns
            assert parent.end_ns is not None and span.end_ns <= parent.end_ns
