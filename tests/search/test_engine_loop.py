"""The search engine's loop: seed, promotion, rejections, duplicates, budgets, stops, events.

Runs in the letters world of `tests/contracts/strategy_contract.py` (deterministic costs and
latencies), with a scripted strategy so every proposal is known.
"""

from __future__ import annotations

import asyncio
import math
import os
import signal
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any, ClassVar

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "contracts"))

from strategy_contract import (  # noqa: E402
    LATENCY_MS,
    PRICES_USD,
    ToyWorld,
    pipeline,
    toy_examples,
    toy_world,
)

from core.errors import BudgetError, DegenerateSeedError, SearchError  # noqa: E402
from core.ir import parse_topology  # noqa: E402
from core.runtime.tracing import record_model_latency  # noqa: E402
from core.search._engine import SearchRun, minibatch_indices  # noqa: E402
from core.search.budget import Budget  # noqa: E402
from core.search.events import CandidateProposed, SearchEvent  # noqa: E402
from core.search.result import CandidateRecord  # noqa: E402
from core.search.strategies.base import (  # noqa: E402
    AskContext,
    Proposal,
    Strategy,
    StrategyConfig,
)
from core.search.subscribers import EventLog, Progress, ProgressReporter  # noqa: E402


class Scripted(Strategy):
    """Proposes what it is told, one list per generation; remembers what it saw."""

    name: ClassVar[str] = "scripted"

    def __init__(self, script: Sequence[Sequence[Proposal]], **config: Any) -> None:
        config.setdefault("n_generations", len(script))
        config.setdefault("minibatch_size", 10)
        super().__init__(StrategyConfig(**config))
        self.script = [list(g) for g in script]
        self.contexts: list[AskContext] = []
        self.told: list[list[CandidateRecord]] = []

    async def ask(self, ctx: AskContext) -> list[Proposal]:
        self.contexts.append(ctx)
        return self.script[ctx.generation] if ctx.generation < len(self.script) else []

    def tell(self, records: Sequence[CandidateRecord]) -> None:
        self.told.append(list(records))


def p(*names: str, parent: int | None = 0, **kw: Any) -> Proposal:
    return Proposal(spec=pipeline(*names), parent_idx=parent, operator=kw.pop("op", "test"), **kw)


def score_of(names: Sequence[str], ids: Sequence[int] | None = None) -> float:
    """The aggregate score of a pipeline of letter steps on examples `ids` (default weights)."""
    exs = toy_examples()
    picked = [exs[i] for i in (ids if ids is not None else range(10))]
    cost = sum(PRICES_USD[n] for n in names if n in PRICES_USD)
    latency = LATENCY_MS * sum(1 for n in names if n in PRICES_USD)
    scores = []
    for ex in picked:
        right = set(str(ex.expected)) <= set(names)
        scores.append((1.0 if right else 0.0) - 10.0 * cost - 0.00002 * latency)
    return math.fsum(scores) / len(scores)


def types(events: list[SearchEvent]) -> list[str]:
    return [e.type for e in events]


def free_step(x: Any) -> Any:
    record_model_latency(0.0)  # model time 0: deterministic latency
    return x


# --- the seed and promotion ---------------------------------------------------------------------


def test_seed_promotion_rejection_duplicate_exact() -> None:
    world = toy_world()
    ghost = parse_topology(
        {
            "kind": "pipeline",
            "steps": [
                {
                    "operation": {
                        "kind": "router",
                        "routes": [
                            {
                                "name": "r",
                                "step": {"kind": "agent_step", "agent_name": "ghost_agent"},
                                "condition_name": "a",
                            }
                        ],
                    }
                },
                {
                    "operation": {
                        "kind": "refinement_loop",
                        "step": {"kind": "function_step", "callable_name": "ghost_fn"},
                        "evaluator": "a",
                        "state_updater_name": "a",
                    }
                },
            ],
        }
    )
    strategy = Scripted(
        [
            [p("a", "b")],
            [
                p("a"),  # the seed again: duplicate
                Proposal(spec=ghost, parent_idx=1, operator="ghost"),  # F4
                Proposal(text="{not json", operator="raw"),
                p("a", "b", "c", parent=1),
            ],
        ]
    )
    events: list[SearchEvent] = []
    result = world.run(strategy, events=events)

    h = result.history
    assert [r.status for r in h] == [
        "evaluated",
        "evaluated",
        "duplicate",
        "rejected",
        "rejected",
        "evaluated",
    ]
    assert [r.split for r in h] == ["validation", "validation", None, None, None, "validation"]
    assert [r.promoted for r in h] == [False, True, False, False, False, True]
    assert h[2].duplicate_of == 0 and h[2].reason == "duplicate of candidate 0"
    assert h[3].reason is not None and h[3].reason.startswith("unknown_names: ")
    assert "$.steps[0].operation.routes[0].step.agent_name" in h[3].reason
    assert "ghost_agent" in h[3].reason and "ghost_fn" in h[3].reason
    assert h[4].reason is not None and h[4].reason.startswith("invalid_spec: ")
    assert h[4].spec_json == "{not json" and h[4].spec_hash == ""
    for record, names in ((h[0], ["a"]), (h[1], ["a", "b"]), (h[5], ["a", "b", "c"])):
        assert record.score == pytest.approx(score_of(names), rel=1e-12, abs=1e-15)
    assert h[1].minibatch_score == h[1].score  # the minibatch is the whole split here
    assert h[1].parent_minibatch_score == h[0].score
    assert h[5].parent_idx == 1 and h[5].parent_minibatch_score == h[1].score
    assert h[0].accuracy == 0.4 and h[1].accuracy == 0.7 and h[5].accuracy == 1.0
    assert h[5].cost_usd == pytest.approx(0.007, rel=1e-12)

    archive = result.raw["archive"]
    assert len(archive) == 3  # nothing rejected or duplicate ever reaches it (F4)
    assert result.raw["archive_candidates"] == [0, 1, 5]
    assert [e.parent_idx for e in archive.entries] == [None, 0, 1]
    assert [e.split for e in archive.entries] == ["validation"] * 3
    assert result.raw["best_idx"] == 5
    assert result.best_score == h[5].score
    assert result.best_decoded == {"letters": pipeline("a", "b", "c")}
    assert result.raw["pareto_idx"] == [0, 1, 5]  # cost rises with accuracy
    assert result.raw["status"] == "completed"
    assert result.raw["stop_reason"] == "2 generations done"

    # events: contiguous seq, the lifecycle in order, and nothing evaluated for rejections
    assert [e.seq for e in events] == list(range(len(events)))
    assert types(events)[0] == "run_started" and types(events)[-1] == "run_finished"
    proposed = [e for e in events if e.type == "candidate_proposed"]
    assert [(e.candidate_idx, e.status) for e in proposed] == [
        (0, "proposed"),
        (1, "proposed"),
        (2, "duplicate"),
        (3, "rejected"),
        (4, "rejected"),
        (5, "proposed"),
    ]
    evaluated_idx = {e.candidate_idx for e in events if e.type == "example_evaluated"}
    assert evaluated_idx == {0, 1, 5}
    # every example result is reported once per run: 3 candidates x 10 examples
    assert sum(1 for e in events if e.type == "example_evaluated") == 30
    finished = events[-1]
    assert finished.type == "run_finished" and finished.status == "completed"
    assert finished.best_idx == 5
    assert finished.budget_used["evaluations"] == 3.0
    assert finished.budget_used["usd"] == pytest.approx(0.001 * 10 + 0.003 * 10 + 0.007 * 10)
    snapshots = [e for e in events if e.type == "archive_snapshot"]
    assert [s.generation for s in snapshots] == [-1, 0, 1, 1]
    assert snapshots[1].best_idx == 1 and snapshots[-1].best_idx == 5

    # the strategy saw the history and the known hashes, and was told how its proposals ended
    assert strategy.contexts[1].next_candidate_idx == 2
    assert len(strategy.contexts[1].known_hashes) == 2
    assert [[r.status for r in told] for told in strategy.told] == [
        ["evaluated"],
        ["duplicate", "rejected", "rejected", "evaluated"],
    ]


def test_minibatch_promotion_compares_with_the_parent_on_the_same_examples() -> None:
    world = toy_world(extra={"free": free_step})
    strategy = Scripted(
        [[p("b"), p("a", "b"), p("free")]], minibatch_size=4, seed=3, n_generations=1
    )
    events: list[SearchEvent] = []
    result = world.run(strategy, events=events)
    ids = minibatch_indices(10, 4, 3, 0)
    assert len(ids) == 4 and ids == sorted(ids)
    h = result.history
    b, ab, free = h[1], h[2], h[3]
    assert b.minibatch_score == pytest.approx(score_of(["b"], ids), rel=1e-12, abs=1e-15)
    assert b.parent_minibatch_score == pytest.approx(score_of(["a"], ids), rel=1e-12)
    assert ab.minibatch_score == pytest.approx(score_of(["a", "b"], ids), rel=1e-12)
    promote_ab = score_of(["a", "b"], ids) > score_of(["a"], ids)
    assert ab.promoted is promote_ab
    assert b.promoted is False and b.rescored is False  # dominated: never re-scored
    # `free` (no cost, no latency, accuracy 0) is on the front of the minibatch scores, so it
    # is re-scored on the full validation split for the report
    assert free.promoted is False and free.rescored is True and free.split == "validation"
    assert free.score == 0.0
    ex_events = [e for e in events if e.type == "example_evaluated"]
    assert {e.example_id for e in ex_events if e.candidate_idx == 1} == {f"q{i}" for i in ids}
    # the parent's runs on the minibatch came from the cache: nothing new for candidate 0
    assert sum(1 for e in ex_events if e.candidate_idx == 0) == 10
    assert 3 in result.raw["pareto_idx"]
    splits = [(e.candidate_idx, e.split) for e in events if e.type == "candidate_evaluated"]
    assert (1, "minibatch") in splits and (3, "validation") in splits


def test_every_front_candidate_is_evaluated_once_on_the_test_split_winner_first() -> None:
    world = toy_world(n_test=5)
    events: list[SearchEvent] = []
    result = world.run(Scripted([[p("a", "b")]]), events=events)
    test_events = [e for e in events if e.type == "candidate_evaluated" and e.split == "test"]
    assert result.raw["pareto_idx"] == [0, 1]
    assert [e.candidate_idx for e in test_events] == [1, 0]  # the winner, then the rest
    assert [t["candidate_idx"] for t in result.raw["test_front"]] == [1, 0]
    assert result.raw["test_front"][0] == result.raw["test"]
    assert result.raw["test"] == {
        "candidate_idx": 1,
        "n_examples": 5,
        "accuracy": 1.0,  # q10-q14 need "a" four times and "ab" once
        "cost_usd": pytest.approx(0.003),
        "latency_ms": 20.0,
        "aggregate_score": pytest.approx(1.0 - 0.03 - 0.0004),
        "valid": True,
        "reason": None,
    }


# --- F5: a degenerate seed stops the search ------------------------------------------------------


def test_degenerate_seed_stops_the_search_with_a_diagnosis() -> None:
    world = toy_world(seed=pipeline("blank"), extra={"blank": lambda x: ""})
    strategy = Scripted([[p("a")]])
    events: list[SearchEvent] = []
    with pytest.raises(DegenerateSeedError) as info:
        world.run(strategy, events=events)
    assert "blank outputs 100%" in info.value.diagnosis
    assert "degenerate" in info.value.diagnosis
    assert strategy.contexts == []  # nothing was proposed
    assert types(events)[-2:] == ["log", "run_finished"]
    assert events[-1].type == "run_finished" and events[-1].status == "failed"
    assert info.value.diagnosis in events[-1].reason
    assert events[-2].type == "log" and events[-2].level == "error"


def test_a_rejected_seed_is_a_search_error() -> None:
    world = toy_world(seed=pipeline("nowhere"))
    with pytest.raises(SearchError, match="the seed topology is rejected: unknown_names"):
        world.run(Scripted([[p("a")]]))


# --- budgets ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("budget", [Budget(max_evaluations=0), Budget(max_usd=0.0)])
def test_a_budget_allowing_no_work_fails_before_anything(budget: Budget) -> None:
    world = toy_world()
    events: list[SearchEvent] = []
    with pytest.raises(BudgetError):
        world.run(Scripted([[p("a", "b")]]), budget=budget, events=events)
    assert events == [] and world.calls == []


def test_an_unbounded_run_is_refused() -> None:
    with pytest.raises(BudgetError, match="nothing bounds this run"):
        toy_world().run(Scripted([], n_generations=None))


def test_max_evaluations_is_exact_and_counts_only_evaluations() -> None:
    world = toy_world()
    script = [[p("b"), p("a"), p("c"), p("a", "c"), p("b", "c")]]
    result = world.run(Scripted(script), budget=Budget(max_evaluations=3))
    statuses = [r.status for r in result.history]
    # seed, b, the seed again (duplicate: free), c: three evaluations, then a stop
    assert statuses == ["evaluated", "evaluated", "duplicate", "evaluated"]
    assert result.raw["stop_reason"] == "max_evaluations reached (3)"
    assert result.raw["status"] == "stopped"
    assert result.raw["budget_used"]["evaluations"] == 3.0


def test_patience_counts_evaluations_without_a_new_best() -> None:
    world = toy_world()
    script = [[p("b"), p("a", "b"), p("c"), p("b", "c"), p("a", "c")]]
    result = world.run(Scripted(script), budget=Budget(patience=2))
    # b does not beat the seed (1), a,b is a new best (0), c and b,c do not (2): a stop
    assert [r.candidate_idx for r in result.history] == [0, 1, 2, 3, 4]
    assert result.raw["stop_reason"] == "patience exhausted (2 evaluations without a new best)"


def test_max_wall_s_stops_between_evaluations() -> None:
    now = [0.0]

    def tick(event: SearchEvent) -> None:
        if event.type == "candidate_evaluated":
            now[0] += 5.0

    world = toy_world()
    script = [[p("b"), p("c"), p("b", "c"), p("a", "c")]]
    run = SearchRun(
        Scripted(script),
        gene=world.gene,
        evaluator=world.evaluator,
        validation=world.validation,
        callable_registry=world.callables,
        agent_registry=world.agents,
        budget=Budget(max_wall_s=12.0),
        subscribers=[tick],
        handle_sigint=False,
        timer=lambda: now[0],
    )
    result = asyncio.run(run.run())
    assert len(result.history) == 3  # seed (5 s), b (10 s), c (15 s): then the check stops it
    assert result.raw["stop_reason"] == "max_wall_s reached (12 s)"
    assert result.raw["test"] is None


# --- clean stops -------------------------------------------------------------------------------------


def test_a_stop_file_stops_cleanly_before_the_next_evaluation(tmp_path: Path) -> None:
    stop = tmp_path / "STOP"

    def touch(event: SearchEvent) -> None:
        if event.type == "candidate_evaluated" and event.candidate_idx == 2:
            stop.write_text("")

    world = toy_world(n_test=3)
    events: list[SearchEvent] = []
    script = [[p("b"), p("a", "b"), p("c"), p("a", "b", "c")]]
    result = _run_with(world, Scripted(script), [events.append, touch], str(stop))
    assert [r.candidate_idx for r in result.history] == [0, 1, 2]
    assert result.raw["status"] == "stopped"
    assert result.raw["stop_reason"] == f"stop file {stop}"
    assert result.raw["test"] is None  # a person's stop spends nothing more
    assert events[-1].type == "run_finished" and events[-1].status == "stopped"
    assert result.raw["best_idx"] == 2


def _run_with(world: ToyWorld, strategy: Strategy, subscribers: list[Any], stop: str) -> Any:
    run = SearchRun(
        strategy,
        gene=world.gene,
        evaluator=world.evaluator,
        validation=world.validation,
        test=world.test,
        callable_registry=world.callables,
        agent_registry=world.agents,
        subscribers=subscribers,
        stop_file=stop,
        handle_sigint=False,
    )
    return asyncio.run(run.run())


def test_first_sigint_stops_cleanly_and_the_handler_is_restored() -> None:
    sent: list[int] = []

    def interrupting(x: Any) -> Any:
        if not sent:
            sent.append(1)
            os.kill(os.getpid(), signal.SIGINT)
        return f"{x}z"

    world = toy_world(extra={"z": interrupting})
    before = signal.getsignal(signal.SIGINT)
    run = SearchRun(
        Scripted([[p("z"), p("a", "b")]]),
        gene=world.gene,
        evaluator=world.evaluator,
        validation=world.validation,
        callable_registry=world.callables,
        agent_registry=world.agents,
        handle_sigint=True,
    )
    result = asyncio.run(run.run())
    assert signal.getsignal(signal.SIGINT) is before
    assert [r.candidate_idx for r in result.history] == [0, 1]
    assert result.raw["stop_reason"] == "SIGINT"
    assert result.raw["status"] == "stopped"


def test_request_stop_from_another_thread_is_clean() -> None:
    world = toy_world()
    holder: list[SearchRun] = []

    def stop_after_seed(event: SearchEvent) -> None:
        if event.type == "archive_snapshot" and event.generation == -1:
            holder[0].request_stop("studio stop button")

    run = SearchRun(
        Scripted([[p("b")]]),
        gene=world.gene,
        evaluator=world.evaluator,
        validation=world.validation,
        callable_registry=world.callables,
        agent_registry=world.agents,
        subscribers=[stop_after_seed],
        handle_sigint=False,
    )
    holder.append(run)
    result = asyncio.run(run.run())
    assert len(result.history) == 1
    assert result.raw["stop_reason"] == "studio stop button"


# --- subscribers ------------------------------------------------------------------------------------


def test_event_log_and_progress_reporter() -> None:
    log = EventLog()
    updates: list[Progress] = []
    reporter = ProgressReporter(updates.append)
    world = toy_world()
    run = SearchRun(
        Scripted([[p("a", "b"), p("b")]]),
        gene=world.gene,
        evaluator=world.evaluator,
        validation=world.validation,
        callable_registry=world.callables,
        agent_registry=world.agents,
        budget=Budget(max_evaluations=10),
        subscribers=[log, reporter],
        handle_sigint=False,
        run_id="progress-run",
    )
    asyncio.run(run.run())
    assert [e.candidate_idx for e in log.of_type(CandidateProposed)] == [0, 1, 2]
    assert updates[0].message == "started" and updates[0].max_evaluations == 10
    last = updates[-1]
    assert reporter.progress == last
    assert (last.run_id, last.finished, last.status) == ("progress-run", True, "completed")
    assert (last.evaluations, last.best_idx, last.generation) == (3, 1, 0)
    assert last.cost_usd == pytest.approx(0.001 * 10 + 0.003 * 10 + 0.002 * 10)


def test_cancelling_the_run_records_a_stop_and_a_run_runs_once() -> None:
    async def slow(x: Any) -> Any:
        await asyncio.sleep(30)
        return x

    world = toy_world(extra={"slow": slow})
    events: list[SearchEvent] = []

    async def main() -> SearchRun:
        proposed = asyncio.Event()

        def watch(event: SearchEvent) -> None:
            events.append(event)
            if event.type == "candidate_proposed" and event.candidate_idx == 1:
                proposed.set()

        run = SearchRun(
            Scripted([[p("slow")]]),
            gene=world.gene,
            evaluator=world.evaluator,
            validation=world.validation,
            callable_registry=world.callables,
            agent_registry=world.agents,
            subscribers=[watch],
            handle_sigint=False,
        )
        task = asyncio.create_task(run.run())
        await proposed.wait()
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        return run

    run = asyncio.run(main())
    assert events[-1].type == "run_finished"
    assert (events[-1].status, events[-1].reason) == ("stopped", "cancelled")
    with pytest.raises(SearchError, match="a SearchRun runs once"):
        asyncio.run(run.run())
