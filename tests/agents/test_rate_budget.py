"""The per-provider rate budget (one budget of requests and tokens per minute across every
worker, from the problem or flags): the bucket arithmetic on an explicit clock,
and nested parallels under a budget of one call in flight, which must not deadlock."""

from __future__ import annotations

import asyncio
from typing import Any

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


def test_a_local_search_under_the_problems_rate_limit_is_granted_on_schedule() -> None:
    """`[rate_limits.function]` of the problem: 120 requests a minute with a one-second burst
    (a bucket of 2, refilled one request every 0.5 s). One call at a time on a fake clock that
    a waiting call moves on: the calls are granted at exactly 0, 0, 0.5, 1.0, 1.5, ... s, so
    every window of w seconds holds at most 2 + 2 w of them, and every model call was granted."""
    from pathlib import Path

    from core.agents.rate_budget import ProviderLimit
    from core.problems import load_problem
    from core.search.budget import Budget
    from core.search.engine import build_search
    from core.search.events import RunStarted

    sleepy = Path(__file__).resolve().parents[1] / "fixtures" / "sleepy"
    problem = load_problem(
        sleepy,
        overrides={
            "rate_limits.function.requests_per_minute": 120,
            "rate_limits.function.burst_s": 1.0,
            "search.concurrency": 1,
            # no parallels: a `fastest` merge cancels a granted call before it is recorded
            "search.allowed_step_kinds": ["agent_step", "function_step", "pipeline"],
        },
    )
    limit = ProviderLimit(requests_per_minute=120, burst_s=1.0)
    assert problem.rate_limits == {"function": limit}
    events: list[object] = []
    options: dict[str, Any] = {
        "seed": 7,
        "handle_sigint": False,
        "use_test_split": False,
        "budget": Budget(max_evaluations=6),
    }
    default = build_search(problem, "evolutionary", **options)
    assert default.evaluator.rate_limits == {"function": limit}  # build_search's budget
    assert isinstance(default.evaluator.rate_budget, RateBudget)
    now = [0.0]

    async def fake_sleep(seconds: float) -> None:
        now[0] += seconds
        await asyncio.sleep(0)

    budget = RateBudget(
        problem.rate_limits, clock=lambda: now[0], sleep=fake_sleep, keep_grant_times=True
    )
    search = build_search(
        problem, "evolutionary", subscribers=[events.append], rate_budget=budget, **options
    )
    assert search.evaluator.rate_budget is budget
    made = 0
    evaluate = search.evaluator.evaluate

    async def counting(*args: Any, **kwargs: Any) -> Any:
        nonlocal made
        ev = await evaluate(*args, **kwargs)
        made += ev.n_model_requests
        return ev

    search.evaluator.evaluate = counting  # type: ignore[method-assign]
    asyncio.run(search.run())

    times = budget.buckets.grant_times()["function"]
    assert made == len(times) == budget.buckets.granted()["function"] > 10
    assert times == [0.0, 0.0] + [0.5 * k for k in range(1, len(times) - 1)]
    for i, start in enumerate(times):
        for j in range(i, len(times)):
            assert j - i + 1 <= 2 + 2 * (times[j] - start)
    started = [e for e in events if isinstance(e, RunStarted)]
    assert [e.config["rate_limits"] for e in started] == [
        {
            "function": {
                "requests_per_minute": 120.0,
                "tokens_per_minute": None,
                "max_concurrent": None,
                "burst_s": 1.0,
            }
        }
    ]
