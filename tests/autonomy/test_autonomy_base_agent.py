"""BaseAgent / GlobalState / DynamicAgent: a named agent run on a state, an agent like any other
for the runtime (AgentStep, router classifier, loop evaluator), usage recorded and priced, and
add_tool's last-write-wins rebuild that leaves a run in flight alone."""

from __future__ import annotations

import asyncio

import pytest
from pydantic_ai import Tool
from pydantic_ai.messages import ModelMessage, ModelResponse, TextPart, ToolCallPart
from pydantic_ai.models.function import AgentInfo, FunctionModel

from core.agents import BaseAgent, GlobalState, is_agent
from core.evaluation import ModelPrice, Pricer
from core.runtime import AgentStep, EvalResult, RefinementLoop, Route, Router, capture_trace


def _text(answer: str) -> FunctionModel:
    def fn(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        return ModelResponse(parts=[TextPart(answer)])

    return FunctionModel(fn, model_name="fixed")


def test_run_on_a_state_uses_its_goal_and_keyword_values() -> None:
    seen: list[str] = []

    def fn(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        part = messages[-1].parts[-1]
        seen.append(str(getattr(part, "content", "")))
        return ModelResponse(parts=[TextPart("ok")])

    agent = BaseAgent("echo", system_prompt="Be brief.", model=FunctionModel(fn))
    out = asyncio.run(agent.run(GlobalState(goal="find the bug"), focus="logs"))
    assert out == "ok"
    assert seen == ["find the bug\nfocus: logs"]
    assert agent.agent_name == "echo"
    assert is_agent(agent)


def test_a_base_agent_is_an_agent_step_classifier_and_evaluator_with_usage_priced() -> None:
    def judge_fn(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        tool = info.output_tools[0]
        return ModelResponse(parts=[ToolCallPart(tool.name, {"passed": True, "score": 1.0})])

    solver = BaseAgent("solver", model=_text("42"))
    classifier = BaseAgent("clf", model=_text("math"))
    judge = BaseAgent(
        "judge", model=FunctionModel(judge_fn, model_name="judge"), output_type=EvalResult
    )

    step = AgentStep(solver)
    router = Router([Route("math", AgentStep(solver))], classifier=classifier)
    loop = RefinementLoop(
        AgentStep(solver), evaluator=judge, state_updater=lambda i, o, e: i, max_iterations=2
    )

    async def go() -> tuple[object, object, object]:
        return await step.execute("q"), await router.execute("q"), await loop.execute("q")

    with capture_trace() as trace:
        out_step, out_router, out_loop = asyncio.run(go())
    assert out_step == "42"
    assert out_router == "42"
    assert out_loop == "42"
    usage = trace.usage_by_model()
    assert sorted(usage) == ["function:fixed", "function:judge"]
    assert usage["function:fixed"].requests == 4
    assert usage["function:judge"].requests == 1
    pricer = Pricer({"function:fixed": ModelPrice(input_usd_per_1k=1.0, output_usd_per_1k=2.0)})
    fixed = usage["function:fixed"]
    expected = (fixed.input_tokens * 1.0 + fixed.output_tokens * 2.0) / 1_000
    assert pricer.quote(fixed).cost_usd == pytest.approx(expected, rel=1e-12)


def test_add_tool_last_write_wins_and_rebuilds_but_a_run_in_flight_keeps_its_tools() -> None:
    def one() -> str:
        """First version."""
        return "one"

    def two() -> str:
        """Second version."""
        return "two"

    agent = BaseAgent("t", model=_text("x"), tools=[Tool(one, name="lookup")])
    first = agent.agent
    assert agent.agent is first  # cached
    agent.add_tool(Tool(two, name="lookup"))
    assert [t.name for t in agent.tools] == ["lookup"]
    assert agent.tools[0].function is two
    rebuilt = agent.agent
    assert rebuilt is not first

    # a run captures .agent at its start: add_tool during the run changes only the next run
    started = asyncio.Event()
    release = asyncio.Event()
    tool_names: list[list[str]] = []

    async def fn(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        tool_names.append(sorted(t.name for t in info.function_tools))
        started.set()
        await release.wait()
        return ModelResponse(parts=[TextPart("done")])

    slow = BaseAgent("slow", model=FunctionModel(fn), tools=[Tool(one, name="a")])

    async def go() -> None:
        task = asyncio.create_task(slow.run("q"))
        await started.wait()
        slow.add_tool(Tool(two, name="b"))
        release.set()
        await task
        await slow.run("q")

    asyncio.run(go())
    assert tool_names == [["a"], ["a", "b"]]


def test_blank_name_is_refused() -> None:
    with pytest.raises(ValueError, match="agent_name must not be blank"):
        BaseAgent("  ")


def test_the_default_name_is_the_class_name_in_snake_case() -> None:
    class LatencyAnalyst(BaseAgent[str]):
        pass

    assert BaseAgent().agent_name == "base_agent"
    assert LatencyAnalyst().agent_name == "latency_analyst"
