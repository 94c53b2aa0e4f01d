"""The per-provider rate budget (issue 18, item 2): the bucket arithmetic on an explicit clock,
and nested parallels under a budget of one call in flight, which must not deadlock."""

from __future__ import annotations

import asyncio

from pydantic_ai import Agent
from pydantic_ai.messages import ModelMessage, ModelResponse, TextPart
from pydantic_ai.models.function import AgentInfo, FunctionModel
from pydantic_ai.usage import RequestUsage

from core.agents.rate_budget import ProviderLimit, RateBudget, TokenBuckets, use_rate_budget
from core.runtime import AgentStep, Parallel
from core.runtime.tracing import capture_trace


def test_requests_bucket_grants_burst_then_waits_for_refill() -> None:
    buckets = TokenBuckets({"p": ProviderLimit(requests_per_minute=120, burst_s=1.0)})
    assert buckets.try_acquire("p", 0.0) == 0.0
    assert buckets.try_acquire("p", 0.0) == 0.0
    assert buckets.try_acquire("p", 0.0) == 0.5  # empty: one request refills in 0.5 s
    assert buckets.try_acquire("p", 0.5) == 0.0
    assert buckets.granted() == {"p": 3}


def test_tokens_are_charged_after_the_call_and_make_later_calls_wait() -> None:
    buckets = TokenBuckets({"*": ProviderLimit(tokens_per_minute=60, burst_s=10.0)})
    assert buckets.try_acquire("x", 0.0) == 0.0
    buckets.release("x", 25, 0.0)  # capacity 10 tokens: 15 in debt
    assert buckets.try_acquire("x", 0.0) == 15.0
    assert buckets.try_acquire("x", 15.0) == 0.0


def test_concurrency_slot_is_held_only_between_acquire_and_release() -> None:
    buckets = TokenBuckets({"p": ProviderLimit(max_concurrent=1)})
    assert buckets.try_acquire("p", 0.0) == 0.0
    assert buckets.try_acquire("p", 0.0) > 0.0
    buckets.release("p", 0, 0.0)
    assert buckets.try_acquire("p", 0.0) == 0.0
    assert buckets.in_flight() == {"p": 1}


def test_unlimited_provider_is_never_held_back() -> None:
    buckets = TokenBuckets({"p": ProviderLimit(max_concurrent=1)})
    assert [buckets.try_acquire("q", 0.0) for _ in range(3)] == [0.0, 0.0, 0.0]


def test_nested_parallels_under_a_budget_of_one_do_not_deadlock() -> None:
    active = 0
    peak = 0

    async def respond(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        nonlocal active, peak
        active += 1
        peak = max(peak, active)
        await asyncio.sleep(0)
        active -= 1
        return ModelResponse(parts=[TextPart("a")], usage=RequestUsage(input_tokens=3))

    def leaf(i: int) -> AgentStep:
        return AgentStep(Agent(FunctionModel(respond, model_name="m"), name=f"a{i}"))

    inner = [Parallel([leaf(2 * i), leaf(2 * i + 1)], merge="collect_all") for i in range(3)]
    outer = Parallel(inner, merge="collect_all")
    budget = RateBudget({"function": ProviderLimit(max_concurrent=1)})

    async def main() -> object:
        with use_rate_budget(budget), capture_trace():
            return await asyncio.wait_for(outer.execute("q"), timeout=60)

    out = asyncio.run(main())
    assert out == [["a", "a"], ["a", "a"], ["a", "a"]]
    assert peak == 1
    assert budget.buckets.granted() == {"function": 6}
    assert budget.buckets.in_flight() == {"function": 0}
