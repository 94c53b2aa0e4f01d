"""TopologyOrchestrator: a cold run then a cache hit, an exception decaying the entry until the
designer is asked again, the output judge decaying an entry that ran cleanly but answered wrong, and
the result's fields (cost and tokens from the FunctionModels' usage)."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from typing import Any

import pytest
from pydantic import TypeAdapter
from pydantic_ai import Agent, models
from pydantic_ai.messages import ModelMessage, ModelResponse, TextPart, ToolCallPart
from pydantic_ai.models.function import AgentInfo, FunctionModel
from pydantic_ai.usage import RequestUsage

from core.autonomy.events import EventBus
from core.evaluation.pricing import ModelPrice, Pricer
from core.ir.design import TopologyDesign
from core.ir.models import TopologySpec
from core.runtime_design import (
    CacheStats,
    InMemoryLRU,
    LibraryEntry,
    RuntimeDesignError,
    RuntimeTopologyDesigner,
    TopologyExecutionResult,
    TopologyOrchestrator,
)

models.ALLOW_MODEL_REQUESTS = False

ADAPTER: TypeAdapter[Any] = TypeAdapter(TopologySpec)

# USD per 1,000 tokens; the token counts below make every cost a binary fraction (exact floats)
PRICER = Pricer(
    {
        "function:designer": ModelPrice(input_usd_per_1k=1.0, output_usd_per_1k=2.0),
        "function:solver": ModelPrice(input_usd_per_1k=0.5, output_usd_per_1k=1.0),
    }
)
DESIGN_USAGE = RequestUsage(input_tokens=500, output_tokens=125)  # 0.5 + 0.25 = $0.75
SOLVER_USAGE = RequestUsage(input_tokens=250, output_tokens=125)  # 0.125 + 0.125 = $0.25


def spec_of(*agents: str, fn: str | None = None) -> Any:
    steps: list[dict[str, Any]] = [
        {"operation": {"kind": "agent_step", "agent_name": a}} for a in agents
    ]
    if fn is not None:
        steps.append({"operation": {"kind": "function_step", "callable_name": fn}})
    return ADAPTER.validate_python({"kind": "pipeline", "steps": steps})


class Designer:
    """A pydantic-ai designer (`output_type=TopologyDesign`) answering from a script, each call
    reporting `DESIGN_USAGE`."""

    def __init__(self, *specs: Any) -> None:
        self.specs = list(specs)
        self.calls = 0
        self.agent = Agent(FunctionModel(self, model_name="designer"), output_type=TopologyDesign)

    def __call__(self, messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        self.calls += 1
        spec = self.specs.pop(0)
        if isinstance(spec, Exception):
            raise spec
        design = {"thought": "solve it", "spec": ADAPTER.dump_python(spec, mode="json")}
        return ModelResponse(
            parts=[ToolCallPart(info.output_tools[0].name, json.dumps(design))],
            usage=DESIGN_USAGE,
        )


class Solver:
    """The `solver` agent: answers `answer`, or raises when `answer` is an exception; keeps
    every prompt it was given."""

    def __init__(self, answer: Any = "4") -> None:
        self.answer = answer
        self.prompts: list[str] = []

    def __call__(self, messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        self.prompts.append(str(messages[-1].parts[-1].content))  # type: ignore[union-attr]
        if isinstance(self.answer, Exception):
            raise self.answer
        return ModelResponse(parts=[TextPart(self.answer)], usage=SOLVER_USAGE)

    def factory(self) -> Any:
        return Agent(FunctionModel(self, model_name="solver"))


def clock(*seconds: float) -> Any:
    ticks: Iterator[float] = iter(seconds)
    return lambda: next(ticks)


def world(
    designer: Designer, solver: Solver, *, judge: Any = None, **options: Any
) -> tuple[TopologyOrchestrator, InMemoryLRU]:
    cache = InMemoryLRU(8)
    runtime = RuntimeTopologyDesigner(
        designer.agent,
        {"shout": str.upper},
        {"solver": solver.factory},
        cache=cache,
        **options,
    )
    return TopologyOrchestrator(runtime, output_judge=judge, pricer=PRICER), cache


def run(coro: Any) -> Any:
    return asyncio.run(coro)


def test_a_cold_run_then_a_cache_hit_on_the_same_goal() -> None:
    designer, solver = Designer(spec_of("solver")), Solver("4")
    orchestrator, cache = world(designer, solver)
    cold = run(orchestrator.execute("What is 2+2?"))
    assert (cold.cache_hit, cold.source, cold.output, cold.success, cold.error) == (
        False,
        "designer",
        "4",
        True,
        None,
    )
    assert cache.stats == CacheStats(hits=0, misses=1, stores=1, decays=0)
    warm = run(orchestrator.execute("  what is 2+2? "))
    assert (warm.cache_hit, warm.source, warm.output, warm.success) == (True, "cache", "4", True)
    assert warm.spec == spec_of("solver")
    assert warm.design.cache_hit is not None and warm.design.cache_hit.key == "what is 2+2?"
    assert designer.calls == 1  # the hit made no design call
    assert cache.stats == CacheStats(hits=1, misses=1, stores=2, decays=0)
    assert cache.reliability("what is 2+2?") == 1.0  # 0.7 * 1.0 + 0.3: a success keeps it at 1
    assert solver.prompts == ["What is 2+2?", "  what is 2+2? "]  # input None: the goal runs


def test_an_exception_decays_the_entry_until_the_designer_is_asked_again() -> None:
    designer, solver = Designer(spec_of("solver")), Solver(RuntimeError("model down"))
    orchestrator, cache = world(designer, solver)
    run(cache.store("q", spec_of("solver"), True))
    expected = [0.7, 0.49, 0.343, 0.2401]
    for reliability in expected:
        result = run(orchestrator.execute("q"))  # never raises
        assert (result.cache_hit, result.success, result.output) == (True, False, None)
        assert result.error == (
            "PipelineStepError: pipeline 'pipeline': step 0 ('solver') failed after 1 "
            "attempt(s): RuntimeError: model down"
        )
        assert cache.reliability("q") == pytest.approx(reliability, rel=1e-12)
    assert cache.stats == CacheStats(hits=4, misses=0, stores=1, decays=4)
    assert designer.calls == 0
    # 0.2401 < min_reliability 0.3: the entry no longer surfaces, so the designer is asked
    solver.answer = "4"
    fresh = run(orchestrator.execute("q"))
    assert (fresh.cache_hit, fresh.source, fresh.success) == (False, "designer", True)
    assert designer.calls == 1
    # the success is stored under the goal: one step of the moving average up from 0.2401
    assert cache.reliability("q") == pytest.approx(0.2401 * 0.7 + 0.3, rel=1e-12)
    assert cache.stats == CacheStats(hits=4, misses=1, stores=2, decays=4)


@pytest.mark.parametrize("kind", ["sync", "async"])
def test_the_judge_decays_an_entry_that_ran_cleanly_but_answered_wrong(kind: str) -> None:
    verdicts: list[tuple[str, Any]] = []

    def right(goal: str, output: Any) -> bool:
        verdicts.append((goal, output))
        return output == "4"

    async def right_async(goal: str, output: Any) -> bool:
        return right(goal, output)

    solver = Solver("5")
    orchestrator, cache = world(
        Designer(spec_of("solver")), solver, judge=right if kind == "sync" else right_async
    )
    run(cache.store("What is 2+2?", spec_of("solver"), True))
    wrong = run(orchestrator.execute("What is 2+2?"))
    assert (wrong.output, wrong.verdict, wrong.success) == ("5", False, False)
    assert wrong.error == "judged_wrong: the output_judge rejected the output"
    assert verdicts == [("What is 2+2?", "5")]
    assert cache.reliability("What is 2+2?") == pytest.approx(0.7, rel=1e-12)
    assert cache.stats == CacheStats(hits=1, misses=0, stores=1, decays=1)
    solver.answer = "4"
    good = run(orchestrator.execute("What is 2+2?"))
    assert (good.output, good.verdict, good.success, good.error) == ("4", True, True, None)
    assert cache.reliability("What is 2+2?") == pytest.approx(0.7 * 0.7 + 0.3, rel=1e-12)
    assert cache.stats == CacheStats(hits=2, misses=0, stores=2, decays=1)


def test_without_a_judge_a_wrong_answer_is_a_success() -> None:
    orchestrator, cache = world(Designer(spec_of("solver")), Solver("5"))
    run(cache.store("q", spec_of("solver"), True))
    result = run(orchestrator.execute("q"))
    assert (result.output, result.success, result.verdict) == ("5", True, None)
    assert cache.stats.decays == 0


@pytest.mark.parametrize(
    ("judge", "error"),
    [
        (
            lambda goal, output: 1 / 0,
            "output_judge_error: the judge raised ZeroDivisionError: division by zero",
        ),
        (
            lambda goal, output: "yes",
            "output_judge_error: the judge returned str, expected a bool",
        ),
    ],
)
def test_a_failing_judge_fails_the_request_but_leaves_the_cache(judge: Any, error: str) -> None:
    orchestrator, cache = world(Designer(spec_of("solver")), Solver("4"), judge=judge)
    run(cache.store("q", spec_of("solver"), True))
    result = run(orchestrator.execute("q"))
    assert (result.output, result.success, result.verdict, result.error) == (
        "4",
        False,
        None,
        error,
    )
    assert cache.reliability("q") == 1.0
    assert cache.stats == CacheStats(hits=1, misses=0, stores=1, decays=0)


def test_the_result_fields() -> None:
    designer, solver = Designer(spec_of("solver", fn="shout")), Solver("four")
    orchestrator, _ = world(designer, solver)
    orchestrator = TopologyOrchestrator(
        orchestrator.designer,
        pricer=PRICER,
        clock=clock(10.0, 10.5, 12.25, 12.5, 20.0, 20.125, 21.0, 21.0),
    )
    cold: TopologyExecutionResult = run(orchestrator.execute("What is 2+2?", input="2+2"))
    assert solver.prompts == ["2+2"]
    assert (cold.goal, cold.spec, cold.output) == (
        "What is 2+2?",
        spec_of("solver", fn="shout"),
        "FOUR",
    )
    assert (cold.cache_hit, cold.source, cold.success, cold.error, cold.verdict) == (
        False,
        "designer",
        True,
        None,
        None,
    )
    assert (cold.design_ms, cold.run_ms, cold.duration_ms) == (500.0, 1750.0, 2500.0)
    assert cold.model_ms is None  # FunctionModels record no model time
    # design 500 in x $1/1k + 125 out x $2/1k = $0.75; solver 250 x $0.5/1k + 125 x $1/1k = $0.25
    assert (cold.design_cost_usd, cold.cost_usd) == (0.75, 1.0)
    assert (cold.input_tokens, cold.output_tokens, cold.tokens, cold.requests) == (
        750,
        250,
        1000,
        2,
    )
    assert cold.unpriced_models == []
    assert cold.design.thought == "solve it"
    assert [(s["kind"], s["name"], s["parent_id"]) for s in cold.trace] == [
        ("pipeline", "pipeline", None),
        ("agent_step", "solver", 0),
        ("function_step", "shout", 0),
    ]
    assert cold.trace[1]["usage"] == [
        {"model_name": "function:solver", "requests": 1, "input_tokens": 250, "output_tokens": 125}
    ]
    warm = run(orchestrator.execute("what is 2+2?", input="2+2"))
    assert (warm.cache_hit, warm.design_cost_usd, warm.cost_usd, warm.tokens, warm.requests) == (
        True,
        0.0,
        0.25,
        375,
        1,
    )
    assert (warm.design_ms, warm.run_ms, warm.duration_ms) == (125.0, 875.0, 1000.0)
    assert TopologyExecutionResult.model_validate(cold.model_dump()) == cold


def test_a_design_failure_raises_or_runs_the_fallback_without_caching_it() -> None:
    orchestrator, cache = world(Designer(RuntimeError("provider down")), Solver("4"))
    with pytest.raises(RuntimeDesignError, match="the designer agent raised RuntimeError"):
        run(orchestrator.execute("q"))
    orchestrator, cache = world(
        Designer(RuntimeError("provider down")), Solver("4"), fallback_spec=spec_of("solver")
    )
    result = run(orchestrator.execute("q"))
    assert (result.source, result.cache_hit, result.output, result.success) == (
        "fallback",
        False,
        "4",
        True,
    )
    assert result.design.error == "the designer agent raised RuntimeError: provider down"
    assert cache.keys() == []  # a fallback stands in for a failed design: never cached
    assert cache.stats == CacheStats(hits=0, misses=1, stores=0, decays=0)


def test_a_hydration_failure_is_a_failed_run_that_decays() -> None:
    def broken() -> Any:
        raise RuntimeError("cannot build")

    cache = InMemoryLRU(8)
    runtime = RuntimeTopologyDesigner(Designer().agent, {}, {"solver": broken}, cache=cache)
    run(cache.store("q", spec_of("solver"), True))
    result = run(TopologyOrchestrator(runtime).execute("q"))
    assert (result.success, result.cache_hit) == (False, True)
    assert result.error is not None and result.error.startswith("HydrationError: ")
    assert "cannot build" in result.error
    assert cache.reliability("q") == pytest.approx(0.7, rel=1e-12)


def test_bad_arguments_are_refused_with_their_name() -> None:
    with pytest.raises(TypeError, match="designer: expected a RuntimeTopologyDesigner, got dict"):
        TopologyOrchestrator({})  # type: ignore[arg-type]
    orchestrator, _ = world(Designer(), Solver())
    with pytest.raises(TypeError, match="output_judge: expected a callable .* got int"):
        TopologyOrchestrator(orchestrator.designer, output_judge=3)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="empty"):
        run(orchestrator.execute("  "))


def test_concurrent_requests_keep_their_own_traces_and_costs() -> None:
    class Echo:
        """`solver` answering its prompt reversed after a pause, so the runs interleave."""

        async def __call__(self, messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
            prompt = str(messages[-1].parts[-1].content)  # type: ignore[union-attr]
            await asyncio.sleep(0.01 if prompt == "slow" else 0.0)
            return ModelResponse(parts=[TextPart(prompt[::-1])], usage=SOLVER_USAGE)

    echo = Echo()
    cache = InMemoryLRU(8)
    runtime = RuntimeTopologyDesigner(
        Designer().agent,
        {},
        {"solver": lambda: Agent(FunctionModel(echo, model_name="solver"))},
        cache=cache,
    )
    for goal in ("slow", "fast"):
        run(cache.store(goal, spec_of("solver"), True))
    orchestrator = TopologyOrchestrator(runtime, pricer=PRICER)

    async def both() -> list[TopologyExecutionResult]:
        return list(
            await asyncio.gather(orchestrator.execute("slow"), orchestrator.execute("fast"))
        )

    slow, fast = run(both())
    assert (slow.output, fast.output) == ("wols", "tsaf")
    for result, goal in ((slow, "slow"), (fast, "fast")):
        assert [(s["name"], s["input_summary"]) for s in result.trace] == [
            ("pipeline", goal),
            ("solver", goal),
        ]
        assert (result.cost_usd, result.tokens, result.requests) == (0.25, 375, 1)


def test_each_request_publishes_its_events_on_the_bus() -> None:
    bus = EventBus()
    seen: list[str] = []

    async def slow_handler(event: Any) -> None:
        await asyncio.sleep(0)
        seen.append(event.topic)

    bus.subscribe("topology.*", slow_handler)
    solver = Solver("5")
    base, cache = world(Designer(), solver)
    orchestrator = TopologyOrchestrator(
        base.designer, output_judge=lambda goal, out: out == "4", pricer=PRICER, bus=bus
    )
    run(cache.store("q", spec_of("solver"), True))
    run(orchestrator.execute("q"))
    solver.answer = "4"
    run(orchestrator.execute("q"))
    events = [(e.topic, dict(e.payload)) for e in bus.history]
    durations = [p["duration_ms"] for t, p in events if t == "topology.executed"]
    hit = {"goal": "q", "source": "cache", "cache_hit": True, "key": "q", "similarity": 1.0}
    executed = {"goal": "q", "source": "cache", "cost_usd": 0.25, "tokens": 375}
    assert events == [
        ("topology.designed", {**hit, "reliability": 1.0}),
        ("topology.cache_stored", {"goal": "q", "success": False}),
        (
            "topology.executed",
            {
                **executed,
                "success": False,
                "error": "judged_wrong: the output_judge rejected the output",
                "verdict": False,
                "duration_ms": durations[0],
            },
        ),
        ("topology.designed", {**hit, "reliability": pytest.approx(0.7, rel=1e-12)}),
        ("topology.cache_stored", {"goal": "q", "success": True}),
        (
            "topology.executed",
            {
                **executed,
                "success": True,
                "error": None,
                "verdict": True,
                "duration_ms": durations[1],
            },
        ),
    ]
    assert seen == [topic for topic, _ in events]  # execute awaited the async handler


def test_design_options_reach_a_library_designer() -> None:
    from core.runtime_design.library import LibraryDesigner

    cheap = LibraryEntry(spec=spec_of("solver"), accuracy=0.5, cost_usd=0.001, latency_ms=10.0)
    best = LibraryEntry(
        spec=spec_of("solver", fn="shout"), accuracy=0.9, cost_usd=0.01, latency_ms=20.0
    )
    designer = LibraryDesigner([cheap, best], {"shout": str.upper}, {"solver": Solver().factory})
    orchestrator = TopologyOrchestrator(designer, pricer=PRICER)
    unlimited = run(orchestrator.execute("q"))
    assert (unlimited.spec, unlimited.output, unlimited.cost_usd) == (best.spec, "4", 0.25)
    limited = run(orchestrator.execute("q", budget_usd=0.005))
    assert (limited.spec, limited.source, limited.design_cost_usd) == (cheap.spec, "designer", 0.0)
    model = RuntimeTopologyDesigner(
        Designer(spec_of("solver")).agent, {}, {"solver": Solver().factory}
    )
    assert model.design_prompt("q", budget_usd=0.005, latency_ms=1500.0).splitlines()[:2] == [
        "Request: q",
        "Limits for this request: cost at most $0.005000 and latency at most 1500.0 ms.",
    ]
    assert model.design_prompt("q").splitlines()[:2] == ["Request: q", ""]
    designed = run(TopologyOrchestrator(model, pricer=PRICER).execute("q", budget_usd=0.005))
    assert (designed.spec, designed.source) == (spec_of("solver"), "designer")
