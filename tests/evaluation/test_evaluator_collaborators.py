"""The evaluator gets every collaborator at construction (call cache, executor, rate budget):
each one given there is the one its evaluations use, copies keep them, and there is no setter."""

import asyncio
from collections.abc import Mapping
from typing import Any

import pytest
from pydantic_ai import Agent, models
from pydantic_ai.models.test import TestModel

from core.agents.call_cache import CallCache, CallCacheStats, InMemoryCallCache
from core.agents.rate_budget import ProviderLimit
from core.evaluation.evaluator import TopologyEvaluator
from core.evaluation.executor import Done, LocalExecutor, RemoteBatch
from core.evaluation.metrics import GoldExample
from core.hydrate import AgentRegistry, CallableRegistry

models.ALLOW_MODEL_REQUESTS = False

SPEC = {"kind": "pipeline", "steps": [{"operation": {"kind": "agent_step", "agent_name": "a"}}]}
EXAMPLES = [GoldExample(input=f"q{i}", expected="x", id=f"e{i}") for i in range(3)]


def make(**collaborators: Any) -> TopologyEvaluator:
    agents = AgentRegistry()
    agents.register("a", lambda: Agent(TestModel(custom_output_text="x"), name="a"))
    return TopologyEvaluator(
        callable_registry=CallableRegistry(),
        agent_registry=agents,
        score_fn=lambda output, example: float(output == example.expected),
        latency_source="model",
        **collaborators,
    )


class CountingBudget:
    """A `RateBudgetLike` that grants everything and counts the grants by provider."""

    def __init__(self) -> None:
        self.acquired: list[str] = []
        self.released: list[str] = []

    async def acquire(self, provider: str) -> None:
        self.acquired.append(provider)

    async def release(self, provider: str, tokens: int) -> None:
        self.released.append(provider)


class Refused(Exception):
    pass


class RecordingExecutor:
    """A `RemoteExecutor` that records the batches it is given and then fails the evaluation."""

    def __init__(self) -> None:
        self.batches: list[RemoteBatch] = []

    def start(self) -> None:
        pass

    def describe(self) -> str:
        return "recording"

    def health(self) -> list[Any]:
        return []

    def close(self) -> None:
        pass

    @property
    def rate_limits(self) -> Mapping[str, ProviderLimit]:
        return {"remote": ProviderLimit(requests_per_minute=60)}

    async def run(self, batch: RemoteBatch, done: Done, call_cache: CallCache | None) -> None:
        self.batches.append(batch)
        raise Refused


def test_the_evaluator_has_no_setters() -> None:
    assert [name for name in dir(TopologyEvaluator) if name.startswith("set_")] == []


def test_a_call_cache_given_at_construction_answers_the_second_evaluation() -> None:
    cache = InMemoryCallCache()
    ev = make(call_cache=cache)
    assert ev.call_cache is cache
    first = asyncio.run(ev.evaluate(SPEC, EXAMPLES))
    assert cache.stats() == CallCacheStats(hits=0, misses=3, uncacheable=0)
    again = asyncio.run(ev.evaluate(SPEC, EXAMPLES))  # no evaluation cache: runs again
    assert cache.stats() == CallCacheStats(hits=3, misses=3, uncacheable=0)
    assert (first.accuracy, again.accuracy) == (1.0, 1.0)
    assert again.cost_usd == first.cost_usd


def test_a_rate_budget_given_at_construction_is_drawn_from_by_every_call() -> None:
    budget = CountingBudget()
    ev = make(rate_budget=budget)
    assert ev.rate_budget is budget
    asyncio.run(ev.evaluate(SPEC, EXAMPLES))
    assert budget.acquired == budget.released == ["test"] * 3
    assert make().rate_budget is None


def test_a_remote_executor_given_at_construction_gets_the_runs() -> None:
    executor = RecordingExecutor()
    ev = make(executor=executor)
    assert ev.executor is executor
    assert ev.rate_limits == {"remote": ProviderLimit(requests_per_minute=60)}
    with pytest.raises(Refused):
        asyncio.run(ev.evaluate(SPEC, EXAMPLES))
    assert sorted(item[1] for b in executor.batches for item in b.items) == ["e0", "e1", "e2"]
    assert isinstance(make().executor, LocalExecutor)


def test_copies_keep_the_collaborators_and_with_collaborators_replaces_only_the_given() -> None:
    cache, budget, executor = InMemoryCallCache(), CountingBudget(), RecordingExecutor()
    ev = make(call_cache=cache, rate_budget=budget, executor=executor)
    deeper = ev.with_options(max_depth=2)
    assert (deeper.call_cache, deeper.rate_budget, deeper.executor) == (cache, budget, executor)
    other = InMemoryCallCache()
    swapped = ev.with_collaborators(call_cache=other)
    assert (swapped.call_cache, swapped.rate_budget, swapped.executor) == (other, budget, executor)
    assert swapped.config == ev.config
    local = ev.with_collaborators(executor=None, rate_budget=None)
    assert isinstance(local.executor, LocalExecutor)
    assert (local.call_cache, local.rate_budget) == (cache, None)
    # the original is unchanged
    assert (ev.call_cache, ev.rate_budget, ev.executor) == (cache, budget, executor)
