"""MetaOrchestrator on function models: decompose, spawn, execute, aggregate with cost; the
subtask and depth caps reported; each hook decision; re-decomposition bounded; two concurrent
solves that do not see each other's agents; the roster persisted and found again."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest
from pydantic_ai.messages import ModelMessage, ModelResponse, TextPart, ToolCallPart
from pydantic_ai.models.function import AgentInfo, FunctionModel

from core.agents import BaseAgent
from core.autonomy import (
    Abort,
    AgentFactory,
    Continue,
    EventBus,
    HookContext,
    HookRunner,
    MetacognitionConfig,
    MetaOrchestrator,
    Redirect,
    Skip,
    SubTask,
    TaskDecomposition,
    ToolRegistry,
)
from core.autonomy.testing import planner_model, specialist_model
from core.errors import AutonomyError, HookAbortError, HookError
from core.evaluation import ModelPrice, Pricer
from core.ir import AgentSpec
from core.memory import DuckDBMemoryStore


def _plan(*names: str, **nested: list[SubTask]) -> TaskDecomposition:
    return TaskDecomposition(
        subtasks=[SubTask(name=n, description=f"do {n}", subtasks=nested.get(n, [])) for n in names]
    )


def _orchestrator(*plans: TaskDecomposition, **kw: Any) -> MetaOrchestrator:
    planner = BaseAgent("planner", model=planner_model(plans))
    factory = AgentFactory(ToolRegistry(), default_model="test")
    kw.setdefault("spawn_model", specialist_model())
    return MetaOrchestrator(planner=planner, factory=factory, **kw)


def test_a_solve_runs_every_subtask_and_prices_every_call() -> None:
    pricer = Pricer(
        {
            "function:planner": ModelPrice(input_usd_per_1k=1.0, output_usd_per_1k=2.0),
            "function:specialist": ModelPrice(input_usd_per_1k=0.5, output_usd_per_1k=1.0),
        }
    )
    bus = EventBus()
    orch = _orchestrator(_plan("gather", "analyse"), pricer=pricer, bus=bus)
    result = asyncio.run(orch.solve("Investigate the Q3 latency regression"))
    assert result.success
    assert [(r.subtask_name, r.success, r.agent_source) for r in result.subtask_results] == [
        ("gather", True, "spawned"),
        ("analyse", True, "spawned"),
    ]
    assert [r.output for r in result.subtask_results] == [
        {"answer": "done: gather", "confidence": 0.9},
        {"answer": "done: analyse", "confidence": 0.9},
    ]
    assert result.spawned_agents == ["gather_specialist", "analyse_specialist"]
    assert result.summary == "2/2 subtasks succeeded"
    # 1 decomposition + 2 designs (planner) + 2 specialist runs
    assert result.requests == 5
    assert result.cost_usd > 0
    assert result.cost_usd == pytest.approx(
        sum(r.cost_usd for r in result.subtask_results) + _decomposition_cost(result, pricer)
    )
    assert bus.topics("orchestrator.*") == [
        "orchestrator.solve_started",
        "orchestrator.decomposed",
        "orchestrator.subtask_started",
        "orchestrator.spawned",
        "orchestrator.subtask_finished",
        "orchestrator.subtask_started",
        "orchestrator.spawned",
        "orchestrator.subtask_finished",
        "orchestrator.solve_finished",
    ]
    # the result carries the same events as its trace, with times since the solve started
    assert [e["topic"] for e in result.trace if e["topic"].startswith("orchestrator.")] == (
        bus.topics("orchestrator.*")
    )
    times = [e["ms"] for e in result.trace]
    assert times == sorted(times) and times[-1] <= result.total_duration_ms


def _decomposition_cost(result: Any, pricer: Pricer) -> float:
    return result.cost_usd - sum(r.cost_usd for r in result.subtask_results)


def test_subtasks_over_the_cap_are_listed_as_dropped() -> None:
    orch = _orchestrator(_plan("a", "b", "c", "d"), max_subtasks=2)
    result = asyncio.run(orch.solve("g"))
    assert [r.subtask_name for r in result.subtask_results] == ["a", "b"]
    assert result.dropped_subtasks == ["c", "d"]
    assert not result.success
    assert result.summary == "2/2 subtasks succeeded; 2 dropped over max_subtasks=2"


def test_nested_subtasks_count_against_the_cap_and_the_excess_is_dropped() -> None:
    # the bug this pins (found in review): one subtask with 6 children spawned 6 specialists under
    # max_subtasks=2
    bus = EventBus()
    children = [SubTask(name=f"c{i}", description=f"do c{i}") for i in range(6)]
    orch = _orchestrator(_plan("parent", "after", parent=children), max_subtasks=2, bus=bus)
    result = asyncio.run(orch.solve("g"))
    parent = result.subtask_results[0]
    assert [r.subtask_name for r in result.subtask_results] == ["parent"]
    assert [c.subtask_name for c in parent.children] == ["c0"]
    assert len(result.spawned_agents) == 1
    assert result.dropped_subtasks == ["c1", "c2", "c3", "c4", "c5", "after"]
    assert not result.success
    assert result.summary == "2/2 subtasks succeeded; 6 dropped over max_subtasks=2"
    dropped = [e for e in result.trace if e["topic"] == "orchestrator.dropped"]
    assert [e["subtasks"] for e in dropped] == [["c1", "c2", "c3", "c4", "c5"], ["after"]]


def test_a_solve_waits_for_its_async_event_handlers() -> None:
    # the bug this pins (found in review): async handlers scheduled by the solve's events were
    # cancelled when the solve returned, uncounted; `solve` now drains the bus before returning
    bus = EventBus()
    seen: list[str] = []

    async def audit(event: Any) -> None:
        await asyncio.sleep(0)
        seen.append(event.topic)

    bus.subscribe("*", audit)
    result = asyncio.run(_orchestrator(_plan("a"), bus=bus).solve("g"))
    assert result.success
    assert seen == [e.topic for e in bus.history]
    assert seen[-1] == "orchestrator.solve_finished"
    assert (bus.handler_errors, bus.errors) == (0, [])


def test_a_raising_hook_is_a_hook_error_naming_hook_and_subtask_with_partial_results() -> None:
    # the bug this pins (found in review): the hook's bare exception escaped `solve`
    def guard(subtask: SubTask, ctx: HookContext) -> Any:
        if subtask.name == "b":
            raise RuntimeError("hook boom")
        return Continue()

    orch = _orchestrator(_plan("a", "b", "c"), hooks=[guard])
    with pytest.raises(HookError) as exc:
        asyncio.run(orch.solve("g"))
    err = exc.value
    assert isinstance(err, AutonomyError)
    assert (err.hook, err.subtask) == ("guard", "b")
    assert str(err) == "hook 'guard' raised at subtask 'b': RuntimeError: hook boom"
    assert isinstance(err.__cause__, RuntimeError)
    assert [r.subtask_name for r in err.partial_results] == ["a"]
    assert all(r.success for r in err.partial_results)


def test_a_spawn_past_the_depth_cap_is_an_error_result() -> None:
    deep = [SubTask(name="inner", subtasks=[SubTask(name="innermost", description="x")])]
    orch = _orchestrator(_plan("outer", outer=deep), max_spawn_depth=2)
    result = asyncio.run(orch.solve("g"))
    outer = result.subtask_results[0]
    assert not outer.success
    inner = outer.children[0]
    assert inner.depth == 2
    innermost = inner.children[0]
    assert (innermost.depth, innermost.success, innermost.error) == (
        3,
        False,
        "spawn depth 3 exceeds max_spawn_depth=2",
    )
    assert result.spawned_agents == []


def test_each_hook_decision_is_honoured_and_recorded() -> None:
    def hook(subtask: SubTask, ctx: HookContext) -> Any:
        return {
            "a": Continue(),
            "b": Skip(stub_result={"answer": "cached"}),
            "c": Redirect(new_args={"focus": "p95"}, new_tool="a_specialist"),
        }.get(subtask.name, Continue())

    orch = _orchestrator(_plan("a", "b", "c"), hooks=[hook])
    result = asyncio.run(orch.solve("g"))
    assert [(h.subtask, h.decision, h.detail) for h in result.hook_decisions] == [
        ("a", "continue", {}),
        ("b", "skip", {"stub_result": {"answer": "cached"}}),
        ("c", "redirect", {"new_args": {"focus": "p95"}, "new_tool": "a_specialist"}),
    ]
    a, b, c = result.subtask_results
    assert (b.success, b.output, b.hook_decision, b.agent_name) == (
        True,
        {"answer": "cached"},
        "skip",
        None,
    )
    assert (c.agent_name, c.agent_source, c.hook_decision) == ("a_specialist", "reused", "redirect")
    assert result.spawned_agents == ["a_specialist"]


def test_abort_stops_the_solve_with_hook_abort_error() -> None:
    runner = HookRunner([lambda s, c: Abort(reason="budget") if s.name == "b" else Continue()])
    orch = _orchestrator(_plan("a", "b", "c"), hooks=runner)
    with pytest.raises(HookAbortError) as exc:
        asyncio.run(orch.solve("g"))
    assert (exc.value.reason, exc.value.subtask) == ("budget", "b")
    assert str(exc.value) == "aborted by a hook at subtask 'b': budget"


def test_redecomposition_is_bounded_by_max_redecompositions() -> None:
    bus = EventBus()
    low = specialist_model(lambda name: {"answer": name, "confidence": 0.1})
    orch = _orchestrator(
        _plan("first", "second"),
        _plan("retry"),
        metacognition=MetacognitionConfig(redecompose_threshold=0.5, max_redecompositions=2),
        bus=bus,
        spawn_model=low,
    )
    result = asyncio.run(orch.solve("g"))
    assert result.redecompositions == 2
    assert [r.subtask_name for r in result.subtask_results] == ["first", "retry", "retry"]
    triggered = [e.payload for e in bus.history if e.topic.startswith("metacognition.")]
    assert triggered == [
        {"subtask": "first", "confidence": 0.1, "threshold": 0.5, "count": 1},
        {"subtask": "retry", "confidence": 0.1, "threshold": 0.5, "count": 2},
    ]


def test_two_concurrent_solves_do_not_see_each_others_agents() -> None:
    # each solve designs an "expert" whose prompt names its goal, then reuses it by name; were
    # agents shared across solves, one would run the other's expert
    plan = TaskDecomposition(
        subtasks=[
            SubTask(name="first", description="a", agent_name="expert"),
            SubTask(name="second", description="b", agent_name="expert"),
        ]
    )

    def design(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        tool = info.output_tools[0]
        if "subtasks" in tool.parameters_json_schema.get("properties", {}):
            return ModelResponse(parts=[ToolCallPart(tool.name, plan.model_dump(mode="json"))])
        prompt = str(getattr(messages[-1].parts[-1], "content", ""))
        goal = prompt.split("Goal: ", 1)[1].split("\n", 1)[0]
        spec = AgentSpec(name="expert", system_prompt=goal, output_schema={"type": "string"})
        return ModelResponse(parts=[ToolCallPart(tool.name, spec.model_dump(mode="json"))])

    async def answer(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        await asyncio.sleep(0.01)  # let the two solves interleave
        return ModelResponse(parts=[TextPart(f"expert for {info.instructions}")])

    planner = BaseAgent("planner", model=FunctionModel(design, model_name="planner"))
    orch = MetaOrchestrator(
        planner, AgentFactory(default_model="test"), spawn_model=FunctionModel(answer)
    )

    async def both() -> Any:
        return await asyncio.gather(orch.solve("goal x"), orch.solve("goal y"))

    rx, ry = asyncio.run(both())
    for result, goal in ((rx, "goal x"), (ry, "goal y")):
        assert [(r.output, r.agent_source) for r in result.subtask_results] == [
            (f"expert for {goal}", "spawned"),
            (f"expert for {goal}", "reused"),
        ]
        assert result.spawned_agents == ["expert"]


def test_the_roster_is_persisted_and_found_by_the_next_solve(tmp_path: Path) -> None:
    db = tmp_path / "studio.duckdb"
    with DuckDBMemoryStore(db) as memory:
        first = asyncio.run(_orchestrator(_plan("triage"), memory=memory).solve("incident 1"))
        assert [r.agent_source for r in first.subtask_results] == ["spawned"]
        assert [e.key for e in memory.entries("procedural")] == ["triage"]
        assert [e.key for e in memory.entries("episodic")] == ["incident 1 :: triage"]
    with DuckDBMemoryStore(db) as memory:
        second = asyncio.run(_orchestrator(_plan("triage"), memory=memory).solve("incident 2"))
        assert [r.agent_source for r in second.subtask_results] == ["roster"]
        assert second.requests == 2  # decomposition + the specialist: no design call
        entry = memory.get("procedural", "triage")
        assert entry is not None and (entry.uses, entry.successes) == (1, 1)


def test_a_failing_specialist_is_an_error_result() -> None:
    def boom(name: str) -> dict[str, Any]:
        raise RuntimeError(f"model down for {name}")

    orch = _orchestrator(_plan("a"), spawn_model=specialist_model(boom))
    result = asyncio.run(orch.solve("g"))
    (a,) = result.subtask_results
    assert (a.success, a.error) == (False, "RuntimeError: model down for a")
    assert result.summary == "0/1 subtasks succeeded; failed: a (RuntimeError: model down for a)"
