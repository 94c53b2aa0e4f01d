"""autonomy-guide.txt, every code example, with `from core import ...`.

The specs live in the IR, the rest in `core/autonomy/`. Where an example needs a
model it runs offline: `TestModel`, or `core.autonomy.testing`'s scripted planner and specialists
for `MetaOrchestrator` (the docs' `PlannerAgent(...)` is the reader's own). The docs'
`SubprocessSandbox` is `BubblewrapSandbox` here (runtime.md, decision 7). The Docker-sandbox
example needs infrastructure these machines lack and is skipped.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from pydantic import BaseModel, ValidationError
from pydantic_ai import Tool
from pydantic_ai.models.test import TestModel
from reference_fakes import replying

from core import AgentSpec, GeneratedToolSpec, Pipeline, ToolSpec


def get_rate_limit_logs() -> list[str]:
    """Fetch recent 429s."""
    return ["429 at 12:00:01", "429 at 12:00:02"]


def compute_p95_latency() -> float:
    """Compute p95."""
    return 812.5


def analyst_spec() -> AgentSpec:
    return AgentSpec(
        name="rate_limit_analyst",
        system_prompt=(
            "You analyze rate-limit errors. Identify the burst pattern, "
            "propose a backoff strategy, and report confidence."
        ),
        output_schema={
            "type": "object",
            "properties": {
                "pattern": {"type": "string"},
                "strategy": {"type": "string"},
                "confidence": {"type": "number"},
            },
            "required": ["pattern", "strategy"],
        },
        tools=[
            ToolSpec(name="get_rate_limit_logs", description="Fetch recent 429s"),
            ToolSpec(name="compute_p95_latency", description="Compute p95"),
        ],
        model="openai:gpt-4.1",
        constraints=["Always cite at least one log entry"],
    )


def extract_dois_spec() -> GeneratedToolSpec:
    return GeneratedToolSpec(
        name="extract_dois",
        description="Extract DOIs from a text blob.",
        parameters={"text": {"type": "string"}},
        implementation=(
            "import re\n"
            "matches = re.findall(r'10\\.\\d{4,}/[\\w.\\-/]+', args['text'])\n"
            "return {'dois': matches, 'count': len(matches)}\n"
        ),
        allowed_imports={"re"},
        dependencies=[],  # pip specifiers; gated by the sandbox's allowed_packages allowlist
        timeout_s=2.0,
        memory_mb=64,
    )


def test_agent_spec_and_tool_spec() -> None:
    spec = analyst_spec()
    assert spec.name == "rate_limit_analyst"
    assert [t.name for t in spec.tools] == ["get_rate_limit_logs", "compute_p95_latency"]
    assert spec.output_schema is not None and spec.output_schema["required"] == [
        "pattern",
        "strategy",
    ]
    assert (spec.model, spec.constraints) == (
        "openai:gpt-4.1",
        ["Always cite at least one log entry"],
    )
    assert AgentSpec.model_validate_json(spec.model_dump_json()) == spec


def test_agent_factory_spawns_a_dynamic_agent() -> None:
    from core import AgentFactory, GlobalState, ToolRegistry

    registry = ToolRegistry()
    registry.register(Tool(get_rate_limit_logs))  # pydantic_ai.Tool
    registry.register(Tool(compute_p95_latency))
    factory = AgentFactory(registry=registry, default_model="openai:gpt-4.1", api_key="sk-...")
    answer = {"pattern": "burst", "strategy": "exponential backoff", "confidence": 0.75}
    agent = factory.spawn(analyst_spec(), model=TestModel(custom_output_args=answer))
    result = asyncio.run(agent.run(GlobalState()))
    assert (result.pattern, result.strategy, result.confidence) == (
        "burst",
        "exponential backoff",
        0.75,
    )
    assert agent.system_prompt.endswith(
        "Constraints (you MUST follow these):\n- Always cite at least one log entry"
    )


def test_tool_registry_namespace() -> None:
    from core import ToolRegistry

    my_tool = Tool(get_rate_limit_logs, name="my_tool")
    other_tool = Tool(compute_p95_latency, name="other_tool")
    registry = ToolRegistry()
    registry.register(my_tool)  # by tool.name
    registry.register(other_tool, description="Override the description")
    assert registry.get("my_tool") is my_tool  # Tool | None
    hits = registry.search("rate limit", k=5)  # keyword scoring
    assert [t.name for t in hits] == ["my_tool"]
    assert registry.list_all() == ["my_tool", "other_tool"]
    registry.remove("my_tool")
    assert registry.get("my_tool") is None


def test_get_or_discover_is_deny_by_default() -> None:
    from core import AllowList, EventBus, MCPDiscovery, MCPServerManager, ToolRegistry

    registry = ToolRegistry()
    bus = EventBus()
    seen: list[str] = []
    bus.subscribe_all(lambda event: seen.append(event.event_type))
    tool = asyncio.run(
        registry.get_or_discover(
            "compute_p95_latency",
            discovery=MCPDiscovery(),
            manager=MCPServerManager(),
            permission=AllowList([r"compute\.\.*", r"metrics\..*"]),
            audit_bus=bus,
            max_servers=3,
        )
    )
    assert tool is None  # no configured server advertises it
    assert seen[0] == "discovery.requested"


def test_meta_orchestrator_solves_a_goal() -> None:
    from core import (
        AgentFactory,
        BaseAgent,
        EventBus,
        MetacognitionConfig,
        MetaOrchestrator,
        SubTask,
        TaskDecomposition,
        ToolRegistry,
    )
    from core.autonomy.testing import planner_model, specialist_model

    plan = TaskDecomposition(
        subtasks=[
            SubTask(name="investigate", description="Find the regression", requires_agent=True),
            SubTask(name="remediate", description="Propose a fix", requires_agent=True),
        ]
    )
    # the docs' PlannerAgent(...) is the reader's own: offline, a scripted planner (it answers
    # the decomposition, then each specialist's AgentSpec) and scripted specialists stand in
    # for the hosted models
    planner = BaseAgent(output_type=TaskDecomposition, model=planner_model([plan]))
    registry = ToolRegistry()
    factory = AgentFactory(registry=registry, default_model=specialist_model(), api_key="sk-...")
    orchestrator = MetaOrchestrator(
        planner=planner,
        factory=factory,
        registry=registry,
        max_subtasks=10,
        max_spawn_depth=3,
        metacognition=MetacognitionConfig(redecompose_threshold=0.5),
        bus=EventBus(),
    )
    result = asyncio.run(
        orchestrator.solve("Investigate the Q3 latency regression and propose a remediation")
    )
    assert result.success is True
    assert [s.subtask_name for s in result.subtask_results] == ["investigate", "remediate"]
    assert all(s.success for s in result.subtask_results)


def test_confidence_driven_redecomposition_config() -> None:
    from core import MetacognitionConfig

    config = MetacognitionConfig(
        redecompose_threshold=0.5,  # below this, re-decompose
        max_redecompositions=2,  # bounded recursion
    )
    assert (config.redecompose_threshold, config.max_redecompositions) == (0.5, 2)


def test_hand_written_pipeline_of_agents() -> None:
    researcher_agent = replying("findings: latency doubled")
    summariser_agent = replying("summary: latency doubled in Q3")
    fact_checker_agent = replying("checked: summary: latency doubled in Q3")
    # When the decomposition is stable: hand-written pipeline beats meta-orchestration.
    pipeline = Pipeline(
        [
            researcher_agent,
            summariser_agent,
            fact_checker_agent,
        ]
    )
    result = asyncio.run(pipeline.run("What happened to latency?"))
    assert result == "checked: summary: latency doubled in Q3"


def test_generated_tool_spec() -> None:
    extract_dois = extract_dois_spec()
    assert extract_dois.allowed_imports == frozenset({"re"})
    assert (extract_dois.timeout_s, extract_dois.memory_mb) == (2.0, 64)
    assert list(extract_dois.dependencies) == []
    mixed = AgentSpec(
        name="researcher",
        system_prompt="...",
        output_schema={"properties": {"dois": {"type": "array"}}},
        tools=[
            ToolSpec(name="search", description="..."),  # registered → registry lookup
            extract_dois,  # generated  → tool_factory.spawn
        ],
    )
    assert [type(t) for t in mixed.tools] == [ToolSpec, GeneratedToolSpec]


def test_dynamic_tool_factory_spawns_a_sandboxed_tool() -> None:
    from core import BubblewrapSandbox, DynamicToolFactory  # the docs' SubprocessSandbox

    tool_factory = DynamicToolFactory(BubblewrapSandbox())
    doi_tool = asyncio.run(tool_factory.spawn(extract_dois_spec()))  # pydantic_ai.Tool
    assert isinstance(doi_tool, Tool)
    out = asyncio.run(doi_tool.function(args={"text": "see 10.1000/xyz123 and 10.2000/abc"}))
    assert out == {"dois": ["10.1000/xyz123", "10.2000/abc"], "count": 2}


def test_agent_factory_mixes_registered_and_generated_tools() -> None:
    from core import AgentFactory, BubblewrapSandbox, DynamicToolFactory, ToolRegistry

    tool_registry = ToolRegistry()
    tool_registry.register(Tool(get_rate_limit_logs, name="search"))
    tool_factory = DynamicToolFactory(BubblewrapSandbox())
    agent_factory = AgentFactory(registry=tool_registry, tool_factory=tool_factory)
    spec = AgentSpec(
        name="researcher",
        system_prompt="...",
        output_schema={"properties": {"dois": {"type": "array"}}},
        tools=[ToolSpec(name="search", description="..."), extract_dois_spec()],
    )
    agent = agent_factory.spawn(spec, model=TestModel())  # both tools resolve + bind
    assert sorted(t.name for t in agent.tools) == ["extract_dois", "search"]


def test_base_agent_add_tool_at_runtime() -> None:
    from core import BaseAgent

    agent = BaseAgent(model=TestModel())
    doi_tool = Tool(compute_p95_latency, name="doi_tool")
    agent.add_tool(doi_tool)  # appends + invalidates _agent cache
    agent.add_tool(doi_tool)  # idempotent for tools sharing a name (last-write-wins)
    assert [t.name for t in agent.tools] == ["doi_tool"]


def test_per_user_docker_sandbox_is_not_applicable() -> None:
    pytest.skip(
        "not applicable on these machines: Workbench.with_docker_sandbox needs Docker and the "
        "orqest/agent-runtime image (runtime.md 7: the Docker tier is out of scope)"
    )


def test_output_schema_versus_output_type() -> None:
    class CoderOutput(BaseModel):
        reasoning: str
        code: str

    typed = AgentSpec(
        name="coder",
        system_prompt="Write code.",
        output_type=CoderOutput,  # ← single field
    )
    assert typed.output_type is CoderOutput and typed.output_schema is None
    schema = AgentSpec(
        name="coder",
        system_prompt="Write code.",
        output_schema={
            "properties": {
                "reasoning": {"type": "string"},
                "code": {"type": "string"},
            },
            "required": ["reasoning", "code"],
        },
    )
    assert schema.output_type is None
    with pytest.raises(ValidationError):  # both set
        AgentSpec(
            name="c",
            system_prompt="x",
            output_type=CoderOutput,
            output_schema={"properties": {}},
        )
    with pytest.raises(ValidationError):  # neither set
        AgentSpec(name="c", system_prompt="x")


def test_agent_factory_spawns_from_output_type() -> None:
    from core import AgentFactory, GlobalState

    class CoderOutput(BaseModel):
        reasoning: str
        code: str

    spec = AgentSpec(name="coder", system_prompt="Write code.", output_type=CoderOutput)
    answer: dict[str, Any] = {"reasoning": "trivial", "code": "print(1)"}
    agent = AgentFactory().spawn(spec, model=TestModel(custom_output_args=answer))
    out = asyncio.run(agent.run(GlobalState()))
    assert out == CoderOutput(reasoning="trivial", code="print(1)")
