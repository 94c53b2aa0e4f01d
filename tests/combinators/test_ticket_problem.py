"""The standard library on a problem with only agents and a scorer (`ticket_problem`): exact
accuracy and cost of gates, judges, self-consistency and critique loops, call-cache reuse, and
what the default evolutionary search puts on the front."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest
from ticket_problem import N_EASY, N_VALIDATION, PRICES, write_problem

from core.agents.call_cache import InMemoryCallCache
from core.evaluation.evaluator import TopologyEvaluator
from core.ir import parse_topology
from core.ir.canonical import canonical_dict
from core.problems import Problem, load_problem
from core.search.engine import build_search


def agent(name: str) -> dict[str, Any]:
    return {"kind": "agent_step", "agent_name": name}


def single(name: str) -> dict[str, Any]:
    return {"kind": "pipeline", "steps": [{"operation": agent(name)}]}


def gate(a: str, b: str, then: str) -> dict[str, Any]:
    return {
        "kind": "pipeline",
        "steps": [
            {
                "operation": {
                    "kind": "parallel",
                    "steps": [agent(a), agent(b)],
                    "merge": "collect_candidates",
                }
            },
            {"operation": accept("all_agree", then)},
        ],
    }


def accept(condition: str, then: str) -> dict[str, Any]:
    keep = {"kind": "function_step", "callable_name": "keep_answer"}
    return {
        "kind": "router",
        "routes": [{"name": "accept", "step": keep, "condition_name": condition}],
        "fallback_step": agent(then),
    }


@pytest.fixture
def problem(tmp_path: Path) -> Problem:
    return load_problem(write_problem(tmp_path))


def hard(problem: Problem) -> int:
    """Validation tickets where cheap_a and cheap_b disagree (numbers 12..19)."""
    return sum(N_EASY <= int(ex.id[1:]) < N_VALIDATION for ex in problem.splits["validation"])


def evaluate(ev: TopologyEvaluator, problem: Problem, spec: dict[str, Any]) -> Any:
    return asyncio.run(ev.evaluate(parse_topology(spec), problem.splits["validation"]))


def test_the_split_holds_six_hard_tickets(problem: Problem) -> None:
    # the split is by hash; what the exact figures below are computed from
    assert len(problem.splits["validation"]) == 20
    assert hard(problem) == 6


def test_an_agreement_gate_reuses_the_singles_calls_and_costs_what_it_runs(
    problem: Problem,
) -> None:
    calls = InMemoryCallCache()
    ev = problem.evaluator(call_cache=calls)
    singles = {a: evaluate(ev, problem, single(a)) for a in ("cheap_a", "cheap_b", "dear")}
    assert {a: (r.accuracy, r.cost_usd) for a, r in singles.items()} == {
        "cheap_a": (pytest.approx(0.7), pytest.approx(0.001)),  # 14 easy of 20 right
        "cheap_b": (pytest.approx(0.7), pytest.approx(0.002)),
        "dear": (1.0, pytest.approx(0.1)),
    }
    calls.reset_stats()
    result = evaluate(ev, problem, gate("cheap_a", "cheap_b", "dear"))
    # both cheap agents on every ticket; dear on the 6 where they disagree (and is right)
    n, n_hard = 20, hard(problem)
    assert result.accuracy == 1.0
    assert result.cost_usd == pytest.approx(
        (n * (PRICES["cheap_a"] + PRICES["cheap_b"]) + n_hard * PRICES["dear"]) / n
    )
    assert result.cost_usd == pytest.approx(0.033)
    stats = calls.stats()
    assert (stats.hits, stats.misses) == (2 * n + n_hard, 0)  # every call was a single's call


def test_a_single_agent_scores_the_same_with_and_without_the_library(tmp_path: Path) -> None:
    with_lib = load_problem(write_problem(tmp_path / "a"))
    without = load_problem(
        write_problem(tmp_path / "b"), overrides={"search.standard_library": False}
    )
    assert without.hydration_hooks is None and with_lib.hydration_hooks is not None
    for name in PRICES:
        a = evaluate(with_lib.evaluator(), with_lib, single(name))
        b = evaluate(without.evaluator(), without, single(name))
        assert (a.accuracy, a.cost_usd) == (b.accuracy, b.cost_usd)
        assert [r.output_summary for r in a.results] == [r.output_summary for r in b.results]


def test_a_verifier_cascade_costs_its_judge_calls(problem: Problem) -> None:
    # cheap_a answers, cheap_b judges (it always says no), dear answers every ticket
    spec = {
        "kind": "pipeline",
        "steps": [
            {"operation": agent("cheap_a")},
            {"operation": accept("judge_by_cheap_b", "dear")},
        ],
    }
    result = evaluate(problem.evaluator(), problem, spec)
    assert result.accuracy == 1.0
    assert result.cost_usd == pytest.approx(PRICES["cheap_a"] + PRICES["cheap_b"] + PRICES["dear"])
    assert result.n_model_requests == 3 * 20


def test_self_consistency_makes_k_distinct_cached_calls(problem: Problem) -> None:
    spec = {
        "kind": "pipeline",
        "steps": [
            {
                "operation": {
                    "kind": "parallel",
                    "steps": [agent("cheap_c")] * 3,
                    "merge": "collect_candidates",
                }
            },
            {"operation": {"kind": "function_step", "callable_name": "plurality_vote"}},
        ],
    }
    calls = InMemoryCallCache()
    ev = problem.evaluator(call_cache=calls)
    first = evaluate(ev, problem, spec)
    assert (calls.stats().misses, calls.stats().hits) == (60, 0)  # 3 distinct calls a ticket
    assert first.cost_usd == pytest.approx(3 * PRICES["cheap_c"])
    again = evaluate(ev.with_options(), problem, single("cheap_c"))
    # the single's call is the vote's first repeat (occurrence 0): a hit
    assert (calls.stats().misses, calls.stats().hits) == (60, 20)
    assert again.accuracy == first.accuracy
    # trials are keyed apart too (F12): 2 trials x 3 repeats are 6 distinct calls a ticket
    fresh = InMemoryCallCache()
    trials = problem.evaluator(call_cache=fresh).with_options(n_trials=2)
    evaluate(trials, problem, spec)
    assert (fresh.stats().misses, fresh.stats().hits) == (120, 0)


def test_a_critique_and_revise_loop_from_registered_agents(problem: Problem) -> None:
    spec = {
        "kind": "refinement_loop",
        "step": agent("cheap_a"),
        "evaluator": "critique_by_mid",
        "state_updater_name": "revise_with_critique",
        "max_iterations": 2,
    }
    result = evaluate(problem.evaluator(), problem, spec)
    # mid never says yes: cheap_a answers, mid critiques, cheap_a revises (its own label
    # again: a new prompt, a new call), mid critiques again
    assert result.accuracy == pytest.approx(0.7)
    assert result.cost_usd == pytest.approx(2 * PRICES["cheap_a"] + 2 * PRICES["mid"])


def _front(problem: Problem) -> list[tuple[float, float, dict[str, Any]]]:
    run = build_search(problem, handle_sigint=False, use_test_split=False)
    result = asyncio.run(run.run())
    out: list[tuple[float, float, dict[str, Any]]] = []
    for entry in result.raw.pareto():
        spec = canonical_dict(parse_topology(json.loads(entry.spec_json)))
        out.append((entry.objective("accuracy"), entry.objective("cost_usd"), spec))
    return out


def test_the_default_search_puts_the_agreement_gate_on_the_front(problem: Problem) -> None:
    front = _front(problem)
    target = canonical_dict(parse_topology(gate("cheap_a", "cheap_b", "dear")))
    found = [(acc, cost) for acc, cost, spec in front if spec == target]
    # 1.0 at 0.033 USD a ticket: dear's accuracy at a third of dear's cost (0.1)
    assert found == [(1.0, pytest.approx(0.033))]
    # and nothing on the front reaches 1.0 for less
    assert min(cost for acc, cost, _ in front if acc == 1.0) == pytest.approx(0.033)
