"""The wall-clock budget cuts an evaluation in flight (a hanging agent must not hang a search): a
candidate whose examples hang does not hold the run past `max_wall_s`; the run stops as by any
budget, with the candidates scored before, and a resumed run replays to the same stop.

The budget's clock is a fake (`timer`, and `clock` for the events' times), moved to the limit
the moment the hanging candidate is proposed, so the cut lands at once, with no real waiting."""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "contracts"))

from strategy_contract import pipeline, toy_world  # noqa: E402
from test_engine_loop import Scripted, p  # noqa: E402

from core.errors import BudgetError  # noqa: E402
from core.search._engine import SearchRun  # noqa: E402
from core.search.budget import Budget  # noqa: E402
from core.search.events import SearchEvent  # noqa: E402
from core.search.strategies.base import Proposal  # noqa: E402


async def hang(x: Any) -> Any:
    """Never answers (until cancelled)."""
    await asyncio.Event().wait()
    return x


def _run(
    script: list[list[Proposal]],
    *,
    seed: Any = None,
    jump_on: str = "candidate_proposed",
    resume_from: list[SearchEvent] | None = None,
    now: list[float] | None = None,
) -> tuple[SearchRun, list[SearchEvent], Any]:
    """A toy run with max_wall_s 10 on a fake clock that jumps to 10 s at the first `jump_on`
    event of candidate 1 (or of the run, for `run_started`)."""
    world = toy_world(seed=seed, extra={"hang": hang})
    clock = now if now is not None else [0.0]
    events: list[SearchEvent] = []

    def watch(event: SearchEvent) -> None:
        events.append(event)
        if event.type == jump_on and getattr(event, "candidate_idx", 1) == 1:
            clock[0] = 10.0

    run = SearchRun(
        Scripted(script),
        gene=world.gene,
        evaluator=world.evaluator,
        validation=world.validation,
        callable_registry=world.callables,
        agent_registry=world.agents,
        budget=Budget(max_wall_s=10.0),
        subscribers=[watch],
        resume_from=resume_from,
        handle_sigint=False,
        clock=lambda: clock[0],
        timer=lambda: clock[0],
    )
    try:
        result: Any = asyncio.run(run.run())
    except BudgetError as exc:
        result = exc
    return run, events, result


def test_the_wall_budget_cuts_a_hanging_candidate_and_the_run_reports_the_rest() -> None:
    script = [[p("hang"), p("b")], [p("a", "b")]]
    _, events, result = _run(script)
    assert result.raw["status"] == "stopped"
    assert result.raw["stop_reason"] == "max_wall_s reached (10 s)"
    assert [r.candidate_idx for r in result.history] == [0]  # the cut candidate is left out
    proposed = [e.candidate_idx for e in events if e.type == "candidate_proposed"]
    evaluated = [e.candidate_idx for e in events if e.type == "candidate_evaluated"]
    assert (proposed, evaluated) == ([0, 1], [0])  # "b" and generation 1 never came
    assert not any(e.type == "example_evaluated" and e.candidate_idx == 1 for e in events)
    assert (events[-1].type, events[-1].status, events[-1].reason) == (
        "run_finished",
        "stopped",
        "max_wall_s reached (10 s)",
    )


def test_a_resumed_wall_stopped_run_replays_to_the_same_stop() -> None:
    script = [[p("hang"), p("b")], [p("a", "b")]]
    _, recorded, first = _run(script)
    now = [10.0]  # the resumed process starts where the recorded run ended
    run, events, again = _run(script, resume_from=recorded, now=now)
    assert run.resumed
    assert again.raw["stop_reason"] == first.raw["stop_reason"]
    assert [r.candidate_idx for r in again.history] == [0]
    assert again.raw["archive"].entries == first.raw["archive"].entries
    # nothing recorded is emitted again: only the resumed run's own start and end
    assert [e.type for e in events] == ["run_started", "run_finished"]
    assert events[0].seq == recorded[-1].seq + 1
    assert events[-1].reason == "max_wall_s reached (10 s)"


def test_the_wall_budget_running_out_in_the_seed_is_a_budget_error_recorded_as_stopped() -> None:
    _, events, result = _run([[p("b")]], seed=pipeline("hang"), jump_on="run_started")
    assert isinstance(result, BudgetError)
    assert str(result) == (
        "max_wall_s reached (10 s) during the seed's evaluation: nothing was scored to compare; "
        "give the run more wall time (max_wall_s), or its examples a shorter deadline "
        "(example_timeout_s)"
    )
    assert (events[-1].type, events[-1].status, events[-1].reason) == (
        "run_finished",
        "stopped",
        "max_wall_s reached (10 s) during the seed's evaluation",
    )


def test_a_stop_before_the_held_out_test_skips_even_the_winners() -> None:
    world = toy_world(n_test=5)
    holder: dict[str, SearchRun] = {}

    def watch(event: SearchEvent) -> None:
        # the last snapshot of the search, before the report: a first Ctrl-C lands here
        if event.type == "candidate_evaluated" and event.candidate_idx == 1:
            holder["run"].request_stop("SIGINT")

    run = SearchRun(
        Scripted([[p("a", "b")]]),
        gene=world.gene,
        evaluator=world.evaluator,
        validation=world.validation,
        test=world.test,
        callable_registry=world.callables,
        agent_registry=world.agents,
        subscribers=[watch],
        handle_sigint=False,
    )
    holder["run"] = run
    result = asyncio.run(run.run())
    # the stop came after the last evaluation: the search ends "completed", and the report
    # honours the stop before it scores anything on the test split
    assert result.raw["test_front"] == []
    assert result.raw["stop_reason"] == "SIGINT (during the held-out test)"
    assert result.raw["status"] == "stopped"


@pytest.mark.parametrize("left", [0.0, -1.0])
def test_a_fully_cached_evaluation_finishes_even_past_the_limit(left: float) -> None:
    """What a resumed run relies on: recorded results are served before anything can wait."""
    world = toy_world()
    spec = pipeline("a")

    async def main() -> Any:
        await world.evaluator.evaluate(spec, world.validation)  # fills the cache
        async with asyncio.timeout(left):
            return await world.evaluator.evaluate(spec, world.validation)

    ev = asyncio.run(main())
    assert ev.n_cached == len(world.validation)
