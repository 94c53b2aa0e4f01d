"""ToolRegistry (register, get, search scoring, list_all, remove), AgentFactory.spawn (schema ->
model, constraints block, tools from the registry, unknown tools listed or skipped with an
event, the model= override) and the EventBus (patterns, a failing handler counted)."""

from __future__ import annotations

import asyncio

import pytest
from pydantic_ai import Tool
from pydantic_ai.messages import ModelMessage, ModelResponse, TextPart, ToolCallPart
from pydantic_ai.models.function import AgentInfo, FunctionModel
from pydantic_ai.models.test import TestModel

from core.agents import DynamicAgent, GlobalState
from core.autonomy import (
    CONSTRAINTS_HEADER,
    AgentFactory,
    BusEvent,
    EventBus,
    ToolRegistry,
    search_score,
)
from core.errors import SpecError, UnknownNamesError
from core.ir import AgentSpec, GeneratedToolSpec, SchemaLimits, ToolSpec


def get_rate_limit_logs() -> list[str]:
    """Fetch recent 429 responses from the gateway logs."""
    return ["429 at 10:00:01", "429 at 10:00:02"]


def compute_p95_latency(values: list[float]) -> float:
    """Compute the p95 latency of a list of values."""
    ordered = sorted(values)
    return ordered[int(0.95 * (len(ordered) - 1))]


def _registry() -> ToolRegistry:
    registry = ToolRegistry()
    registry.register(Tool(get_rate_limit_logs))
    registry.register(compute_p95_latency)
    return registry


def test_registry_register_get_list_remove() -> None:
    registry = _registry()
    assert registry.list_all() == ["get_rate_limit_logs", "compute_p95_latency"]
    tool = registry.get("compute_p95_latency")
    assert tool is not None and tool.function is compute_p95_latency
    assert registry.get("nope") is None
    registry.register(Tool(get_rate_limit_logs), description="Override the description")
    assert registry.description("get_rate_limit_logs") == "Override the description"
    assert registry.list_all() == ["get_rate_limit_logs", "compute_p95_latency"]
    registry.remove("get_rate_limit_logs")
    assert registry.list_all() == ["compute_p95_latency"]
    with pytest.raises(KeyError, match="no tool named 'get_rate_limit_logs'"):
        registry.remove("get_rate_limit_logs")


def test_search_scoring_is_the_documented_keyword_rule() -> None:
    registry = _registry()
    # "rate limit": name tokens rate+limit (3 each) + description "429" none + phrase in name 2
    assert search_score("rate limit", "get_rate_limit_logs", "Fetch recent 429 responses") == 8
    assert search_score("p95 latency", "compute_p95_latency", "Compute the p95 latency") == 10
    assert search_score("gateway", "get_rate_limit_logs", "from the gateway logs") == 1
    assert [t.name for t in registry.search("rate limit", k=5)] == ["get_rate_limit_logs"]
    assert [t.name for t in registry.search("latency logs", k=5)] == [
        "compute_p95_latency",
        "get_rate_limit_logs",
    ]
    assert [t.name for t in registry.search("latency logs", k=1)] == ["compute_p95_latency"]
    assert registry.search("weather", k=5) == []


SPEC = AgentSpec(
    name="rate_limit_analyst",
    system_prompt="You analyze rate-limit errors.",
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
    constraints=["Always cite at least one log entry", "Be brief"],
)


def test_spawn_builds_the_agent_as_documented() -> None:
    factory = AgentFactory(registry=_registry(), default_model="openai:gpt-4.1")
    agent = factory.spawn(SPEC, model=TestModel())
    assert isinstance(agent, DynamicAgent)
    assert agent.agent_name == "rate_limit_analyst"
    assert agent.system_prompt == (
        "You analyze rate-limit errors.\n\n"
        f"{CONSTRAINTS_HEADER}\n- Always cite at least one log entry\n- Be brief"
    )
    assert CONSTRAINTS_HEADER == "Constraints (you MUST follow these):"
    assert [t.name for t in agent.tools] == ["get_rate_limit_logs", "compute_p95_latency"]
    assert agent.skipped_tools == ()
    out = asyncio.run(agent.run(GlobalState(goal="why 429s?")))
    assert type(out).__name__ == "RateLimitAnalystOutput"
    assert sorted(out.model_dump()) == ["confidence", "pattern", "strategy"]


def test_model_choice_override_then_spec_then_default() -> None:
    factory = AgentFactory(registry=_registry(), default_model="test")
    assert factory.spawn(SPEC).model == "openai:gpt-4.1"
    no_model = SPEC.model_copy(update={"model": None})
    assert factory.spawn(no_model).model == "test"
    override = TestModel()
    assert factory.spawn(SPEC, model=override).model is override


def test_api_key_is_handed_to_the_provider_and_not_shown() -> None:
    factory = AgentFactory(registry=_registry(), api_key="sk-secret-123")
    agent = factory.spawn(SPEC)
    model = agent.model
    assert type(model).__name__ == "OpenAIResponsesModel"
    assert getattr(model, "client").api_key == "sk-secret-123"  # noqa: B009
    assert "sk-secret" not in repr(factory)
    assert repr(factory) == "AgentFactory(default_model='openai:gpt-4.1', api_key=set)"


def test_unknown_tools_are_listed_in_one_error() -> None:
    spec = SPEC.model_copy(
        update={
            "tools": [
                ToolSpec(name="get_rate_limit_logs"),
                ToolSpec(name="fetch_dashboards"),
                GeneratedToolSpec(name="extract", implementation="return 1"),
                ToolSpec(name="page_oncall"),
            ]
        }
    )
    with pytest.raises(UnknownNamesError) as exc:
        AgentFactory(registry=_registry()).spawn(spec, model=TestModel())
    assert exc.value.unknown == [
        ("$.tools[1]", "tool", "fetch_dashboards"),
        ("$.tools[2]", "generated_tool", "extract"),
        ("$.tools[3]", "tool", "page_oncall"),
    ]
    assert exc.value.known == {"tool": ["compute_p95_latency", "get_rate_limit_logs"]}


def test_skip_mode_records_each_skipped_tool_and_emits_an_event() -> None:
    bus = EventBus()
    spec = SPEC.model_copy(
        update={"tools": [ToolSpec(name="get_rate_limit_logs"), ToolSpec(name="fetch_dashboards")]}
    )
    factory = AgentFactory(registry=_registry(), missing_tools="skip", bus=bus)
    agent = factory.spawn(spec, model=TestModel())
    assert [t.name for t in agent.tools] == ["get_rate_limit_logs"]
    assert agent.skipped_tools == ("fetch_dashboards",)
    skipped = [e.payload for e in bus.history if e.topic == "factory.tool_skipped"]
    assert skipped == [
        {
            "agent": "rate_limit_analyst",
            "tool": "fetch_dashboards",
            "kind": "tool",
            "path": "$.tools[1]",
        }
    ]


def test_the_factory_schema_limits_apply_at_spawn() -> None:
    factory = AgentFactory(registry=_registry(), schema_limits=SchemaLimits(max_properties=2))
    with pytest.raises(SpecError) as exc:
        factory.spawn(SPEC, model=TestModel())
    assert exc.value.errors == [
        ("$.output_schema.properties", "3 properties, more than max_properties=2")
    ]


def test_a_spawned_agent_calls_its_registered_tool() -> None:
    calls: list[str] = []

    def fn(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        if len(messages) == 1:
            return ModelResponse(parts=[ToolCallPart("get_rate_limit_logs", {})])
        calls.append(str(messages[-1].parts[0]))
        return ModelResponse(parts=[TextPart("burst")])

    spec = AgentSpec(
        name="t",
        output_schema={"type": "string"},
        tools=[ToolSpec(name="get_rate_limit_logs")],
    )
    agent = AgentFactory(registry=_registry()).spawn(spec, model=FunctionModel(fn))
    assert asyncio.run(agent.run("go")) == "burst"
    assert len(calls) == 1 and "429 at 10:00:01" in calls[0]


def test_bus_patterns_and_a_failing_handler_is_counted() -> None:
    bus = EventBus()
    seen: list[str] = []

    def record(event: BusEvent) -> None:
        seen.append(event.topic)

    async def record_async(event: BusEvent) -> None:
        seen.append("async:" + event.topic)

    def broken(event: BusEvent) -> None:
        raise RuntimeError("handler bug")

    bus.subscribe("discovery.*", record)
    bus.subscribe("*.denied", record_async)
    bus.subscribe("discovery.denied", broken)

    async def go() -> tuple[int, int]:
        a = await bus.publish("discovery.requested", {"tool": "x"})
        b = await bus.publish("discovery.denied", {"tool": "x"})
        await bus.publish("factory.spawned")
        return a, b

    assert asyncio.run(go()) == (1, 2)
    assert seen == ["discovery.requested", "discovery.denied", "async:discovery.denied"]
    assert bus.handler_errors == 1
    assert bus.errors == [("discovery.denied", "RuntimeError: handler bug")]
    assert bus.topics() == ["discovery.requested", "discovery.denied", "factory.spawned"]
    bus.emit("discovery.denied")
    assert bus.handler_errors == 2


def test_subscribe_all_and_event_type() -> None:
    bus = EventBus()
    seen: list[str] = []
    bus.subscribe_all(lambda event: seen.append(event.event_type))
    bus.emit("a.b")
    bus.emit("c")
    assert seen == ["a.b", "c"]


def test_a_cancelled_async_handler_is_counted() -> None:
    # the bug this pins (found in review): a coroutine handler `emit` scheduled and the loop
    # cancelled at its end vanished without trace (contract 8)
    bus = EventBus()

    async def never_done(event: BusEvent) -> None:
        await asyncio.Event().wait()

    bus.subscribe("audit.*", never_done)

    async def go() -> None:
        bus.emit("audit.write", {"n": 1})  # no drain: asyncio.run cancels the handler

    asyncio.run(go())
    assert bus.handler_errors == 1
    assert bus.errors == [
        ("audit.write", "CancelledError: the handler was cancelled before it finished")
    ]
