"""End to end: a nested spec (router -> pipeline -> parallel -> loop) hydrated with pydantic-ai
agents on function models, run under a trace: output, spans and per-agent usage."""

from __future__ import annotations

import asyncio
from typing import Any

from pydantic_ai import Agent, models
from pydantic_ai.messages import ModelMessage, ModelRequest, ModelResponse, TextPart, UserPromptPart
from pydantic_ai.models.function import AgentInfo, FunctionModel
from pydantic_ai.usage import RequestUsage

from core.hydrate import AgentRegistry, CallableRegistry, topology_from_spec
from core.ir import parse_topology
from core.runtime import EvalResult, capture_trace

models.ALLOW_MODEL_REQUESTS = False


def last_prompt(messages: list[ModelMessage]) -> str:
    request = messages[-1]
    assert isinstance(request, ModelRequest)
    parts = [p.content for p in request.parts if isinstance(p, UserPromptPart)]
    assert isinstance(parts[-1], str)
    return parts[-1]


def agent_on(name: str, reply: Any, tokens: tuple[int, int]) -> Agent[None, str]:
    """An agent whose function model answers `reply(prompt)` and reports fixed token usage."""

    def respond(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        return ModelResponse(
            parts=[TextPart(reply(last_prompt(messages)))],
            usage=RequestUsage(input_tokens=tokens[0], output_tokens=tokens[1]),
        )

    return Agent(FunctionModel(respond, model_name=name), name=name)


SPEC = {
    "kind": "router",
    "id": "root",
    "classifier": "triage",
    "routes": [
        {
            "name": "math",
            "step": {
                "kind": "pipeline",
                "id": "solve",
                "steps": [
                    {
                        "operation": {
                            "kind": "parallel",
                            "id": "fan",
                            "merge": "join",
                            "steps": [
                                {
                                    "kind": "refinement_loop",
                                    "id": "refine",
                                    "step": {
                                        "kind": "agent_step",
                                        "id": "draft",
                                        "agent_name": "solver",
                                    },
                                    "evaluator": "judge",
                                    "state_updater_name": "next_input",
                                    "max_iterations": 4,
                                },
                                {"kind": "agent_step", "id": "review", "agent_name": "critic"},
                            ],
                        }
                    },
                    {
                        "operation": {
                            "kind": "function_step",
                            "id": "finish",
                            "callable_name": "shout",
                        }
                    },
                ],
            },
        },
        {"name": "chat", "step": {"kind": "agent_step", "id": "chat", "agent_name": "chatter"}},
    ],
}


def build() -> Any:
    agents = AgentRegistry()
    agents.register("triage", lambda: agent_on("triage-model", lambda p: " Math ", (7, 1)))
    agents.register("solver", lambda: agent_on("solver-model", lambda p: p + "+", (10, 2)))
    agents.register("critic", lambda: agent_on("critic-model", lambda p: "looks fine", (5, 3)))
    agents.register("chatter", lambda: agent_on("chat-model", lambda p: "hello", (1, 1)))
    calls = CallableRegistry()
    calls.register(
        "judge", lambda out: EvalResult(passed=out.count("+") >= 2, score=out.count("+"))
    )
    calls.register("next_input", lambda inp, out, ev: out)
    calls.register("join", lambda outs: " | ".join(outs))
    calls.register("shout", str.upper)
    return topology_from_spec(parse_topology(SPEC), callable_registry=calls, agent_registry=agents)


def test_nested_spec_runs_with_trace_and_usage() -> None:
    topology = build()

    async def run() -> Any:
        with capture_trace() as trace:
            out = await topology.execute("q")
        return out, trace

    out, trace = asyncio.run(run())
    assert out == "Q++ | LOOKS FINE"
    spans = trace.spans
    by_id = {s.span_id: s for s in spans}

    def describe(span: Any) -> tuple[str, str, str | None, str | None]:
        """(kind, name, node id, the parent span's kind)."""
        parent = None if span.parent_id is None else by_id[span.parent_id].kind
        return (span.kind, span.name, span.node_id, parent)

    assert sorted(describe(s) for s in spans) == sorted(
        [
            ("router", "router", "root", None),
            ("agent_step", "router.classifier", None, "router"),
            ("pipeline", "pipeline", "solve", "router"),
            ("parallel", "parallel", "fan", "pipeline"),
            ("refinement_loop", "refinement_loop", "refine", "parallel"),
            ("agent_step", "solver", "draft", "refinement_loop"),
            ("function_step", "refinement_loop.evaluator", None, "refinement_loop"),
            ("agent_step", "solver", "draft", "refinement_loop"),
            ("function_step", "refinement_loop.evaluator", None, "refinement_loop"),
            ("agent_step", "critic", "review", "parallel"),
            ("function_step", "shout", "finish", "pipeline"),
        ]
    )
    # parent links point at the spans of the enclosing spec nodes
    node_span = {s.node_id: s for s in spans if s.node_id is not None}
    assert node_span["root"].parent_id is None
    assert node_span["solve"].parent_id == node_span["root"].span_id
    assert node_span["fan"].parent_id == node_span["solve"].span_id
    assert node_span["refine"].parent_id == node_span["fan"].span_id
    assert node_span["review"].parent_id == node_span["fan"].span_id
    assert node_span["finish"].parent_id == node_span["solve"].span_id
    assert {s.parent_id for s in spans if s.node_id == "draft"} == {node_span["refine"].span_id}
    assert "chat" not in node_span  # the other route never ran
    assert all(s.error is None and s.end_ns is not None for s in spans)
    assert node_span["root"].output_summary == "Q++ | LOOKS FINE"
    decision = node_span["root"].attributes
    assert (decision["route"], decision["raw"], decision["fallback"]) == ("math", " Math ", False)

    # usage, per agent (each agent has its own function model)
    usage = {
        name: (u.requests, u.input_tokens, u.output_tokens)
        for name, u in trace.usage_by_model().items()
    }
    assert usage == {
        "function:triage-model": (1, 7, 1),
        "function:solver-model": (2, 20, 4),
        "function:critic-model": (1, 5, 3),
    }
    solver_spans = [s for s in spans if s.node_id == "draft"]
    assert [[u.to_dict() for u in s.usage] for s in solver_spans] == [
        [
            {
                "model_name": "function:solver-model",
                "requests": 1,
                "input_tokens": 10,
                "output_tokens": 2,
            }
        ]
    ] * 2


def test_the_other_route() -> None:
    agents = AgentRegistry()
    agents.register("triage", lambda: agent_on("triage-model", lambda p: "chat", (1, 1)))
    agents.register("chatter", lambda: agent_on("chat-model", lambda p: "hello " + p, (1, 1)))
    for name in ("solver", "critic"):
        agents.register(name, lambda: agent_on("x", lambda p: p, (1, 1)))
    calls = CallableRegistry()
    for name in ("judge", "next_input", "join", "shout"):
        calls.register(name, lambda *a: a[0])
    chat = topology_from_spec(parse_topology(SPEC), callable_registry=calls, agent_registry=agents)
    assert asyncio.run(chat.execute("there")) == "hello there"
