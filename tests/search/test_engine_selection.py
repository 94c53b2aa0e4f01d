"""Selection that compares like with like: one fixed minibatch sized from the seed's variance,
behavioural `same_as`, non-dominated promotion, a stop honoured during the end-of-run re-scoring,
and static rejections before any model call."""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "contracts"))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from strategy_contract import ToyWorld, toy_world  # noqa: E402
from test_engine_loop import Scripted, free_step, p  # noqa: E402

from core.ir import parse_topology  # noqa: E402
from core.ir.dataflow import EffectTable, NameEffect  # noqa: E402
from core.search._engine import SearchRun  # noqa: E402
from core.search._space import minibatch_indices, minibatch_size_for  # noqa: E402
from core.search.events import SearchEvent  # noqa: E402
from core.search.strategies.base import Proposal  # noqa: E402


@pytest.mark.parametrize(
    ("p_seed", "margin", "floor", "n_val", "expected"),
    [
        (0.3267, 0.05, 20, 300, 300),  # ceil(3.8416 * 0.3267 * 0.6733 / 0.0025) = 338 -> split
        (0.3267, 0.10, 20, 300, 85),  # 84.50... -> 85
        (0.0, 0.10, 5, 1000, 19),  # p floored at 0.05: 3.8416 * 0.0475 / 0.01 = 18.25 -> 19
        (0.5, 0.50, 20, 300, 20),  # 3.84 -> 4, but at least the configured minibatch_size
        (0.4, 0.50, 4, 10, 4),  # the toy world below: 3.8416 * 0.24 / 0.25 = 3.69 -> 4
    ],
)
def test_minibatch_size_follows_the_seeds_variance(
    p_seed: float, margin: float, floor: int, n_val: int, expected: int
) -> None:
    assert minibatch_size_for(p_seed, margin, floor, n_val) == expected


def run_world(world: ToyWorld, strategy: Any, events: list[SearchEvent], **kw: Any) -> Any:
    return world.run(strategy, events=events, **kw)


def test_one_fixed_minibatch_serves_every_generation() -> None:
    world = toy_world(extra={"free": free_step})
    strategy = Scripted(
        [[p("b")], [p("a", "b")], [p("c")]], minibatch_size=4, minibatch_margin=0.5, seed=3
    )
    events: list[SearchEvent] = []
    run_world(world, strategy, events)
    ids = {f"q{i}" for i in minibatch_indices(10, 4, 3, -1)}  # seed accuracy 0.4 -> 4 examples
    for idx in (1, 2, 3):
        seen = {
            e.example_id
            for e in events
            if e.type == "example_evaluated" and e.candidate_idx == idx and e.split == "validation"
        }
        mb = [
            e
            for e in events
            if e.type == "candidate_evaluated" and e.candidate_idx == idx and e.split != "test"
        ]
        assert mb[0].n_examples == 4
        assert seen <= {f"q{i}" for i in range(10)}
        assert {x for x in seen if x in ids} == ids
    logs = [e.message for e in events if e.type == "log" and "fixed minibatch" in e.message]
    assert logs == [
        "fixed minibatch: 4 of 10 validation examples for every candidate (seed accuracy 0.400, "
        "95% margin 0.5: ceil(1.96^2 p(1-p) / margin^2), at least 4)"
    ]


def test_a_candidate_that_behaves_like_an_earlier_one_is_same_as_it() -> None:
    world = toy_world()
    # "ba" and "ab" give the same letters (same score), the same cost and the same latency on
    # every example, though their specs differ
    strategy = Scripted([[p("a", "b"), p("b", "a")]], minibatch_size=10, minibatch_margin=0.5)
    events: list[SearchEvent] = []
    result = run_world(world, strategy, events)
    ab, ba = result.history[1], result.history[2]
    assert ab.same_as is None and ab.status == "evaluated"
    assert ba.status == "evaluated" and ba.same_as == 1 and ba.promoted is False
    assert ba.accuracy == ab.accuracy and ba.cost_usd == ab.cost_usd
    assert 2 not in result.raw["archive_candidates"]  # never on the front, never re-scored
    evaluated = [e for e in events if e.type == "candidate_evaluated" and e.candidate_idx == 2]
    assert [(e.split, e.same_as) for e in evaluated] == [("validation", 1)]


def test_without_a_margin_there_is_no_behavioural_same_as() -> None:
    result = run_world(toy_world(), Scripted([[p("a", "b"), p("b", "a")]], minibatch_size=10), [])
    assert result.history[2].same_as is None


def test_promotion_on_a_fixed_minibatch_is_non_dominance_not_beating_the_parent() -> None:
    world = toy_world(extra={"free": free_step})
    # on a fixed 4-example minibatch: "free" costs nothing (accuracy 0): non-dominated, so it is
    # scored on the full split at once although it is worse than its parent
    strategy = Scripted([[p("free"), p("b")]], minibatch_size=4, minibatch_margin=0.5, seed=3)
    result = run_world(world, strategy, [])
    free, b = result.history[1], result.history[2]
    assert free.promoted is True and free.split == "validation" and free.rescored is False
    assert b.promoted is False and b.split == "minibatch"  # "a" is as good and cheaper


def test_a_stop_during_the_re_scoring_is_honoured() -> None:
    world = toy_world(extra={"free": free_step}, n_test=5)
    strategy = Scripted([[p("b"), p("a", "b"), p("free")]], minibatch_size=4, seed=3)
    events: list[SearchEvent] = []
    holder: dict[str, SearchRun] = {}

    def on_event(event: SearchEvent) -> None:
        events.append(event)
        if event.type == "archive_snapshot" and event.generation == 0:
            holder["run"].request_stop("SIGINT")  # after the last generation, before the report

    run = SearchRun(
        strategy,
        gene=world.gene,
        evaluator=world.evaluator,
        validation=world.validation,
        test=world.test,
        callable_registry=world.callables,
        agent_registry=world.agents,
        roles=world.roles,
        problem="letters",
        subscribers=[on_event],
        handle_sigint=False,
        run_id="toy-run",
    )
    holder["run"] = run
    result = asyncio.run(run.run())
    finished = [e for e in events if e.type == "run_finished"][0]
    assert finished.status == "stopped"
    assert finished.reason == "SIGINT (during the re-scoring)"
    assert not any(e.type == "candidate_evaluated" and e.split == "test" for e in events)
    assert result.history[3].rescored is False  # "free" would have been re-scored
    assert result.raw["test"] is None and result.raw["test_front"] == []


def is_done(x: Any) -> bool:
    return str(x).endswith("a")


def test_static_rejections_are_named_before_any_model_call_and_counted() -> None:
    world = toy_world(extra={"is_done": is_done})
    effects = EffectTable(names={"is_done": NameEffect(needs_candidates=1, verdict="accept")})
    router = {
        "kind": "router",
        "routes": [
            {
                "name": "done",
                "step": {"kind": "function_step", "callable_name": "b"},
                "condition_name": "is_done",
            }
        ],
    }
    bad = Proposal(spec=parse_topology({"kind": "pipeline", "steps": [{"operation": router}]}))
    events: list[SearchEvent] = []
    result = run_world(world, Scripted([[bad]], minibatch_size=10), events, effects=effects)
    record = result.history[1]
    assert record.status == "rejected"
    assert record.reason == (
        "condition_before_input: condition 'is_done' reads 1 candidate(s), but its input holds "
        "no candidate (it is constant there) (at $.steps[0].operation.routes[0].condition_name)"
    )
    assert not any(e.type == "example_evaluated" and e.candidate_idx == 1 for e in events)
    finished = [e for e in events if e.type == "run_finished"][0]
    assert {k: v for k, v in finished.budget_used.items() if k.startswith("static")} == {
        "static_rejected:condition_before_input": 1.0
    }
