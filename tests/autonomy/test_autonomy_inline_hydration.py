"""An IR topology's inline AgentSpec is hydrated by the AgentFactory (the IR's inline agent is
the reference docs' `AgentSpec`, and the factory spawns agents from specs): `factory.spawn` is the
hydrator's inline agent factory, and the spawned agent's usage is recorded in the trace like any
agent's."""

from __future__ import annotations

import asyncio

from pydantic_ai.messages import ModelMessage, ModelResponse, TextPart
from pydantic_ai.models.function import AgentInfo, FunctionModel

from core import AgentFactory, capture_trace, parse_topology, topology_from_spec


def test_an_inline_agent_spec_runs_through_the_factory() -> None:
    def fn(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        return ModelResponse(parts=[TextPart(f"{info.instructions}|answer")])

    spec = parse_topology(
        {
            "kind": "pipeline",
            "steps": [
                {
                    "operation": {
                        "kind": "agent_step",
                        "inline_spec": {
                            "name": "brief",
                            "system_prompt": "Be brief.",
                            "output_schema": {"type": "string"},
                            "constraints": ["one line"],
                        },
                    }
                }
            ],
        }
    )
    factory = AgentFactory(default_model=FunctionModel(fn, model_name="inline"))
    topology = topology_from_spec(
        spec,
        callable_registry={},
        agent_registry={},
        agent_factory=factory.spawn,
        allow_inline_agents=True,
    )
    with capture_trace() as trace:
        out = asyncio.run(topology.run("q"))
    assert out == "Be brief.\n\nConstraints (you MUST follow these):\n- one line|answer"
    assert trace.usage_by_model()["function:inline"].requests == 1
