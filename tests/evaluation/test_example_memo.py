"""The example memo (`core.evaluation.example_memo`): a run whose calls the call cache answers is
answered with the result it gave, exactly what running it again gives, counters included."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from pydantic_ai import Agent, models
from pydantic_ai.messages import ModelMessage, ModelResponse, TextPart
from pydantic_ai.models.function import AgentInfo, FunctionModel

from core.agents.call_cache import CallCacheStats, InMemoryCallCache
from core.agents.replay import RecordedCall, TableReplayModel
from core.evaluation import evaluator as evaluator_module
from core.evaluation.evaluator import CandidateEvaluation, TopologyEvaluator
from core.evaluation.example_memo import MEMO_PREFIX
from core.evaluation.metrics import GoldExample
from core.evaluation.pricing import ModelPrice, Pricer
from core.hydrate import AgentRegistry, CallableRegistry

models.ALLOW_MODEL_REQUESTS = False


def _echo(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
    prompt = messages[-1].parts[-1].content  # type: ignore[union-attr]
    return ModelResponse(parts=[TextPart(str(prompt))])


def exact(output: Any, example: GoldExample) -> float:
    return 1.0 if str(output) == str(example.expected) else 0.0


def thirds(x: str) -> str:
    """Right (its own number) unless the number is a multiple of 3."""
    return "wrong" if int(x) % 3 == 0 else x


def fails_on_five(x: str) -> str:
    if x == "5":
        raise RuntimeError("five")
    return x


TWO_CALLS = {
    "kind": "pipeline",
    "steps": [
        {"operation": {"kind": "agent_step", "agent_name": "echo"}},
        {"operation": {"kind": "agent_step", "agent_name": "echo"}},  # (the same call again)
        {"operation": {"kind": "function_step", "callable_name": "thirds"}},
    ],
}


def make() -> TopologyEvaluator:
    agents = AgentRegistry()
    agents.register("echo", lambda: Agent(FunctionModel(_echo, model_name="echo")))
    calls = CallableRegistry()
    calls.register("thirds", thirds)
    calls.register("fails_on_five", fails_on_five)
    return TopologyEvaluator(
        callable_registry=calls,
        agent_registry=agents,
        score_fn=exact,
        workers=1,
        latency_source="model",
    )


def run(
    cache: InMemoryCallCache, spec: Any, n: int = 12, **options: Any
) -> tuple[CandidateEvaluation, CallCacheStats]:
    ev = (make().with_options(**options) if options else make()).with_collaborators(
        call_cache=cache
    )
    exs = [GoldExample(input=i, expected=str(i), id=f"ex{i}") for i in range(n)]
    result = asyncio.run(ev.evaluate(spec, exs))
    return result, cache.stats()


def memo_keys(cache: InMemoryCallCache) -> list[str]:
    return [k for k, _ in cache.records() if k.startswith(MEMO_PREFIX)]


def without_memo(cache: InMemoryCallCache) -> InMemoryCallCache:
    return InMemoryCallCache({k: r for k, r in cache.records() if not k.startswith(MEMO_PREFIX)})


def test_a_run_answered_by_the_memo_equals_the_same_run_made_again(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    cold_cache = InMemoryCallCache()
    cold, cold_stats = run(cold_cache, TWO_CALLS)
    assert cold_stats == CallCacheStats(hits=0, misses=24, uncacheable=0)
    assert len(memo_keys(cold_cache)) == 12  # every run kept, beside its 24 calls
    assert len(cold_cache) == 36
    # the slow path: every call a hit, each run made through the runtime
    slow, slow_stats = run(without_memo(cold_cache), TWO_CALLS)
    assert slow_stats == CallCacheStats(hits=24, misses=0, uncacheable=0)

    async def never(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError("a memo hit ran the topology")

    monkeypatch.setattr(evaluator_module, "run_example", never)
    fast, fast_stats = run(InMemoryCallCache(dict(cold_cache.records())), TWO_CALLS)
    assert fast_stats == slow_stats
    assert fast.model_dump() == slow.model_dump() == cold.model_dump()
    assert fast.accuracy == 8 / 12  # ex0, ex3, ex6, ex9 are wrong
    assert fast.n_cached == 0 and fast.n_model_requests == 24
    assert [r.requests for r in fast.results] == [2] * 12
    assert fast.results[1].output_summary == "1" and fast.results[3].output_summary == "wrong"


def test_runs_a_rerun_could_change_are_not_kept() -> None:
    # wall-clock latency: measured anew on every run
    cache = InMemoryCallCache()
    run(cache, TWO_CALLS, latency_source="wall")
    assert memo_keys(cache) == []
    # no model call at all: nothing the call cache answers
    cache = InMemoryCallCache()
    only_functions = {
        "kind": "pipeline",
        "steps": [{"operation": {"kind": "function_step", "callable_name": "thirds"}}],
    }
    done, _ = run(cache, only_functions)
    assert done.accuracy == 8 / 12 and memo_keys(cache) == []
    # spans kept: the memo has none to give (and is not asked)
    cache = InMemoryCallCache()
    run(cache, TWO_CALLS, capture_traces=True)
    assert memo_keys(cache) == []
    # a run that raised is an error (maybe transient): run again; the other 11 are kept
    cache = InMemoryCallCache()
    failing = {
        "kind": "pipeline",
        "steps": [
            {"operation": {"kind": "agent_step", "agent_name": "echo"}},
            {"operation": {"kind": "function_step", "callable_name": "fails_on_five"}},
        ],
    }
    first, _ = run(cache, failing)
    assert [r.status for r in first.results].count("error") == 1
    assert len(memo_keys(cache)) == 11
    cache.reset_stats()
    again, stats = run(cache, failing)
    assert again.model_dump() == first.model_dump()
    assert stats == CallCacheStats(hits=12, misses=0, uncacheable=0)


def test_a_run_with_an_uncacheable_call_is_not_kept() -> None:
    agents = AgentRegistry()
    # an output validator makes an agent uncacheable (its result may depend on more than its
    # configuration)
    agent = Agent(FunctionModel(_echo, model_name="echo"))
    agent.output_validator(lambda value: value)  # pyright: ignore[reportUnknownLambdaType, reportUnknownArgumentType]
    agents.register("echo", lambda: agent)
    ev = TopologyEvaluator(
        callable_registry=CallableRegistry(),
        agent_registry=agents,
        score_fn=exact,
        workers=1,
        latency_source="model",
        call_cache=(cache := InMemoryCallCache()),
    )
    spec = {
        "kind": "pipeline",
        "steps": [{"operation": {"kind": "agent_step", "agent_name": "echo"}}],
    }
    exs = [GoldExample(input=i, expected=str(i), id=f"ex{i}") for i in range(3)]
    asyncio.run(ev.evaluate(spec, exs))
    assert cache.stats() == CallCacheStats(hits=0, misses=0, uncacheable=3)
    assert len(cache) == 0


def _replayed(name: str, latency_ms: float, time_scale: float = 0.0) -> Agent[None, str]:
    """A replayed agent answering `"<name>:<n>"` for the prompt `n` (0..11) in `latency_ms`."""
    table = {str(i): RecordedCall(f"{name}:{i}", 10, 2, latency_ms) for i in range(12)}
    return Agent(TableReplayModel(name, table, time_scale=time_scale), output_type=str, name=name)


def _race(*steps: dict[str, Any]) -> dict[str, Any]:
    return {"kind": "parallel", "steps": list(steps), "merge": "fastest"}


def _agent(name: str) -> dict[str, Any]:
    return {"kind": "agent_step", "agent_name": name}


def race_evaluator(time_scale: float = 0.0) -> TopologyEvaluator:
    agents = AgentRegistry()
    # 100 ms and 900 ms of model time: 2 and 18 turns of the race clock
    agents.register("quick", _replayed("quick", 100.0, time_scale))
    agents.register("slow", _replayed("slow", 900.0, time_scale))
    return TopologyEvaluator(
        callable_registry=CallableRegistry(),
        agent_registry=agents,
        score_fn=lambda output, ex: float(output == f"quick:{ex.input}"),
        workers=1,
        latency_source="model",
        pricer=Pricer(
            {
                "replay:quick": ModelPrice(input_usd_per_1k=1.0, output_usd_per_1k=2.0),
                "replay:slow": ModelPrice(input_usd_per_1k=10.0, output_usd_per_1k=20.0),
            }
        ),
    )


def run_race(
    cache: InMemoryCallCache, spec: Any, time_scale: float = 0.0
) -> tuple[CandidateEvaluation, CallCacheStats]:
    cache.reset_stats()
    ev = race_evaluator(time_scale).with_collaborators(call_cache=cache)
    exs = [GoldExample(input=i, expected="", id=f"ex{i}") for i in range(12)]
    return asyncio.run(ev.evaluate(spec, exs)), cache.stats()


def test_a_run_with_a_race_of_replayed_calls_is_kept_and_answered_whole(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    spec = _race(_agent("slow"), _agent("quick"))
    cache = InMemoryCallCache()
    cold, cold_stats = run_race(cache, spec)
    # a race's calls always run (misses), the loser's too; the winner's is stored, and every
    # run is kept by the memo
    assert cold_stats == CallCacheStats(hits=0, misses=24, uncacheable=0)
    assert len(memo_keys(cache)) == 12
    assert cold.accuracy == 1.0  # the quick one wins every race
    # both calls charged in full at their start: 2 requests, 2 x 10 input tokens a run
    assert [r.requests for r in cold.results] == [2] * 12
    assert [r.bundle.input_tokens for r in cold.results] == [20] * 12
    # $ (10 x 1 + 2 x 2) / 1000 + (10 x 10 + 2 x 20) / 1000 a run
    assert cold.cost_usd == pytest.approx(0.154) and cold.latency_ms == 100.0

    # the same runs made again through the runtime (no memo): the same result
    again, again_stats = run_race(without_memo(cache), spec)
    assert again.model_dump() == cold.model_dump()
    assert again_stats == CallCacheStats(hits=0, misses=24, uncacheable=0)

    async def never(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError("a memo hit ran the topology")

    monkeypatch.setattr(evaluator_module, "run_example", never)
    fast, fast_stats = run_race(cache, spec)
    assert fast.model_dump() == cold.model_dump()
    # a memo hit replays nothing: the run's 2 calls count as hits
    assert fast_stats == CallCacheStats(hits=24, misses=0, uncacheable=0)


def test_a_race_a_rerun_could_end_otherwise_is_not_kept() -> None:
    # real sleeps (time scale > 0): the wall clock decides the race in part
    cache = InMemoryCallCache()
    run_race(cache, _race(_agent("slow"), _agent("quick")), time_scale=0.001)
    assert memo_keys(cache) == []
    # a race inside a race's branch: its end waits for its losers' unwinding in real time
    cache = InMemoryCallCache()
    nested = _race(_race(_agent("slow"), _agent("quick")), _agent("slow"))
    done, _ = run_race(cache, nested)
    assert done.accuracy == 1.0 and memo_keys(cache) == []
