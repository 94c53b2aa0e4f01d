"""The example memo and `fastest` races: a run whose race is decided on the replayed models'
simulated clock alone is kept and answered whole, equal to the same run made again; a run in
which anything else could decide (a wall-clock deadline, a model that is not replayed, an async
function, a provider's concurrency limit) is never kept."""

from __future__ import annotations

import asyncio
import sys
import time
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "contracts"))

from memo_races import (  # noqa: E402
    InMemoryCallCache,
    agent,
    echo_agent,
    evaluate,
    fn,
    make_evaluator,
    memo_keys,
    outputs,
    pipe,
    race,
    replayed,
    without_memo,
)

from core.agents.rate_budget import ProviderLimit, RateBudget  # noqa: E402


def boom(x: object) -> object:
    raise RuntimeError("boom")


def is_even(x: object) -> bool:
    return int(str(x)) % 2 == 0


AGENTS = {
    "quick": lambda: replayed("quick", 100.0),
    "slow": lambda: replayed("slow", 900.0),
    "mid": lambda: replayed("mid", 1000.0),
}
ROUTER = {
    "kind": "router",
    "routes": [
        {"name": "a", "condition_name": "is_even", "step": race(agent("quick"), agent("slow"))}
    ],
    "fallback_step": agent("mid"),
}
KEPT: dict[str, tuple[Any, int]] = {
    # a race in a router in a race: kept only where the inner race did not run (odd inputs)
    "router_race_in_race": (race(ROUTER, agent("slow")), 2),
    "a_branch_raises": (race(pipe(fn("boom")), pipe(agent("slow"))), 4),
    "every_branch_raises": (
        race(pipe(agent("quick"), fn("boom")), pipe(agent("slow"), fn("boom"))),
        4,
    ),
    "two_races_side_by_side": (
        {
            "kind": "parallel",
            "steps": [
                race(agent("quick"), agent("slow")),
                race(pipe(agent("quick"), agent("quick")), agent("mid")),
            ],
            "merge": "collect_all",
        },
        4,
    ),
    "race_then_agent": (pipe(race(agent("slow"), agent("quick")), agent("mid")), 4),
    "loser_raises_after_the_win": (race(pipe(agent("slow"), fn("boom")), agent("quick")), 4),
}


@pytest.mark.parametrize("case", sorted(KEPT))
def test_a_race_on_the_simulated_clock_is_answered_as_a_rerun_gives(case: str) -> None:
    spec, kept = KEPT[case]
    ev = make_evaluator(AGENTS, {"boom": boom, "is_even": is_even})
    cache = InMemoryCallCache()
    cold, _ = evaluate(ev, cache, spec, n=4)
    assert len(memo_keys(cache)) == kept
    again, _ = evaluate(ev, without_memo(cache), spec, n=4)
    memo, _ = evaluate(ev, cache, spec, n=4)
    assert cold.model_dump() == again.model_dump() == memo.model_dump()


def test_a_model_off_the_simulated_clock_in_a_race_is_never_kept() -> None:
    # a plain FunctionModel agent's call is cached like any call: a rerun answers it from the
    # cache without pydantic-ai's turns, and the other branch wins ('quick' then 'mid')
    agents = {**AGENTS, "echo": echo_agent}
    spec = race(pipe(agent("echo"), agent("quick")), agent("mid"))
    ev = make_evaluator(agents)
    cache = InMemoryCallCache()
    cold, _ = evaluate(ev, cache, spec, n=2)
    assert outputs(cold) == ["mid", "mid"] and memo_keys(cache) == []
    again, _ = evaluate(ev, cache, spec, n=2)
    assert outputs(again) == ["quick", "quick"] and memo_keys(cache) == []


def test_a_run_a_deadline_cut_is_never_kept() -> None:
    state = {"stall": True}

    def hiccup(x: object) -> object:
        if state["stall"]:
            time.sleep(0.06)  # (a loaded machine)
        return x

    spec = race(pipe(fn("hiccup"), agent("quick")), agent("slow"), timeout=0.05)
    ev = make_evaluator(AGENTS, {"hiccup": hiccup})
    cache = InMemoryCallCache()
    cold, _ = evaluate(ev, cache, spec, n=2)
    assert cold.accuracy == 0.0 and memo_keys(cache) == []  # cut by the 50 ms timeout
    state["stall"] = False
    again, _ = evaluate(ev, cache, spec, n=2)
    assert again.accuracy == 1.0 and len(memo_keys(cache)) == 2  # a clean run is kept


def test_a_race_under_a_concurrency_limit_is_never_kept() -> None:
    # one slot: the first-listed branch takes it and the other waits, so 'slow' wins
    limited = make_evaluator(AGENTS).with_collaborators(
        rate_budget=RateBudget({"*": ProviderLimit(max_concurrent=1)})
    )
    spec = race(agent("slow"), agent("quick"))
    cache = InMemoryCallCache()
    cold, _ = evaluate(limited, cache, spec, n=2)
    assert outputs(cold) == ["slow", "slow"] and memo_keys(cache) == []
    free, _ = evaluate(make_evaluator(AGENTS), cache, spec, n=2)
    assert outputs(free) == ["quick", "quick"] and len(memo_keys(cache)) == 2


def test_a_race_against_an_async_function_is_never_kept() -> None:
    state = {"slow": True}

    async def lookup(x: object) -> str:
        await asyncio.sleep(0.05 if state["slow"] else 0.0)
        return "quick"

    spec = race(pipe(fn("lookup")), agent("slow"))
    ev = make_evaluator(AGENTS, {"lookup": lookup})
    cache = InMemoryCallCache()
    cold, _ = evaluate(ev, cache, spec, n=2)
    assert outputs(cold) == ["slow", "slow"] and memo_keys(cache) == []
    state["slow"] = False
    again, _ = evaluate(ev, cache, spec, n=2)
    assert outputs(again) == ["quick", "quick"] and memo_keys(cache) == []


def test_a_race_kept_at_time_scale_0_answers_the_run_at_any_time_scale() -> None:
    # documented: the memo's key leaves the time scale out (it changes only how long a run
    # sleeps), so at time scale 0.2, where the wall clock would decide this race in part
    # (two quick calls against one 1,000 ms call: 'quick' made afresh), the memo gives the
    # simulated clock's outcome, 'mid', and a run at 0.2 is never kept itself
    def agents(ts: float) -> dict[str, Any]:
        return {
            "quick": lambda: replayed("quick", 100.0, ts),
            "mid": lambda: replayed("mid", 1000.0, ts),
        }

    spec = race(pipe(agent("quick"), agent("quick")), agent("mid"))
    cache = InMemoryCallCache()
    at_0, _ = evaluate(make_evaluator(agents(0.0)), cache, spec, n=2)
    assert outputs(at_0) == ["mid", "mid"] and len(memo_keys(cache)) == 2
    fresh = InMemoryCallCache()
    afresh, _ = evaluate(make_evaluator(agents(0.2)), fresh, spec, n=2)
    assert outputs(afresh) == ["quick", "quick"] and memo_keys(fresh) == []
    answered, stats = evaluate(make_evaluator(agents(0.2)), cache, spec, n=2)
    assert outputs(answered) == ["mid", "mid"] and stats.hits == 6 and stats.misses == 0
