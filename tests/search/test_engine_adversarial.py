"""The engine at its edges: budgets at their limits, strategies that propose nothing usable,
NaN and infinite metrics mid-search (F7), determinism whatever the concurrency."""

from __future__ import annotations

import math
import sys
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any, ClassVar

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "contracts"))

from strategy_contract import (  # noqa: E402
    PRICES_USD,
    archive_fingerprint,
    history_fingerprint,
    pipeline,
    score_letters,
    toy_world,
)

from core.evaluation.cache import InMemoryEvaluationCache  # noqa: E402
from core.evaluation.evaluator import TopologyEvaluator  # noqa: E402
from core.evaluation.pricing import CostQuote, ModelPrice, Pricer  # noqa: E402
from core.runtime.tracing import ModelUsage, record_model_latency, record_usage  # noqa: E402
from core.search._engine import minibatch_indices  # noqa: E402
from core.search.budget import Budget  # noqa: E402
from core.search.events import SearchEvent  # noqa: E402
from core.search.strategies.base import (  # noqa: E402
    AskContext,
    Proposal,
    Strategy,
    StrategyConfig,
)
from core.search.strategies.evolutionary import EvolutionaryConfig, EvolutionarySearch  # noqa: E402
from core.search.strategies.random_search import RandomConfig, RandomSearch  # noqa: E402

SEED_SCORE = math.fsum([1.0 - 0.01 - 0.0002] * 4 + [0.0 - 0.01 - 0.0002] * 6) / 10
"""The seed `a` on the 10 letters examples (default weights): 4 right, $0.001 and 10 ms each."""


class Scripted(Strategy):
    """Proposes what it is told, one list per generation (the last list forever after)."""

    name: ClassVar[str] = "scripted"

    def __init__(self, script: Sequence[Sequence[Proposal]], **config: Any) -> None:
        config.setdefault("n_generations", None)
        super().__init__(StrategyConfig(**config))
        self.script = [list(g) for g in script]
        self.asked = 0

    async def ask(self, ctx: AskContext) -> list[Proposal]:
        self.asked += 1
        return self.script[min(ctx.generation, len(self.script) - 1)] if self.script else []


# -- budgets at their edges ---------------------------------------------------------------------


def test_max_evaluations_one_evaluates_only_the_seed_and_still_reports() -> None:
    world = toy_world(n_test=3)
    result = world.run(
        EvolutionarySearch(EvolutionaryConfig(seed=1)), budget=Budget(max_evaluations=1)
    )
    assert [(r.candidate_idx, r.status, r.split) for r in result.history] == [
        (0, "evaluated", "validation")
    ]
    assert result.raw["stop_reason"] == "max_evaluations reached (1)"
    assert (result.raw["best_idx"], result.raw["pareto_idx"]) == (0, [0])
    assert result.best_score == SEED_SCORE
    assert result.raw["test"] is not None and result.raw["test"]["n_examples"] == 3
    assert result.raw["budget_used"]["evaluations"] == 1.0


def test_max_usd_below_the_seeds_cost_stops_after_the_seed_and_spends_nothing_more() -> None:
    world = toy_world(n_test=3)
    events: list[SearchEvent] = []
    result = world.run(
        EvolutionarySearch(EvolutionaryConfig(seed=1)), budget=Budget(max_usd=0.001), events=events
    )
    assert [r.candidate_idx for r in result.history] == [0]
    assert result.raw["status"] == "stopped"
    assert result.raw["stop_reason"] == "max_usd reached (0.01 >= 0.001)"
    assert result.raw["test"] is None  # no more money: no test split
    assert result.raw["budget_used"]["usd"] == math.fsum([0.001] * 10)
    assert sum(1 for e in events if e.type == "example_evaluated") == 10
    assert (result.raw["best_idx"], result.best_score) == (0, SEED_SCORE)


def test_patience_one_stops_after_the_first_evaluation_without_a_new_best() -> None:
    world = toy_world()
    strategy = Scripted(
        [[Proposal(spec=pipeline("c"), parent_idx=0), Proposal(spec=pipeline("b"))]]
    )
    result = world.run(strategy, budget=Budget(patience=1))
    assert [(r.candidate_idx, r.status) for r in result.history] == [
        (0, "evaluated"),
        (1, "evaluated"),
    ]
    assert result.raw["stop_reason"] == "patience exhausted (1 evaluations without a new best)"
    assert result.raw["best_idx"] == 0


# -- strategies that propose nothing usable -----------------------------------------------------


def test_a_strategy_proposing_only_duplicates_ends_with_a_clear_reason() -> None:
    strategy = Scripted([[Proposal(spec=pipeline("a"))]])  # the seed, forever
    result = toy_world().run(strategy, budget=Budget(max_usd=100.0))
    assert strategy.asked == 3
    assert [r.status for r in result.history] == ["evaluated"] + ["duplicate"] * 3
    assert result.raw["status"] == "completed"
    assert result.raw["stop_reason"] == (
        "strategy exhausted: nothing new to evaluate for 3 generations "
        "(3 proposals: 3 duplicate, 0 rejected)"
    )


def test_a_strategy_proposing_only_invalid_specs_ends_with_a_clear_reason() -> None:
    strategy = Scripted([[Proposal(text="{not json"), Proposal(spec=pipeline("ghost"))]])
    result = toy_world().run(strategy, budget=Budget(max_evaluations=50))
    assert [r.status for r in result.history] == ["evaluated"] + ["rejected"] * 6
    assert result.raw["stop_reason"] == (
        "strategy exhausted: nothing new to evaluate for 3 generations "
        "(6 proposals: 0 duplicate, 6 rejected, last unknown_names)"
    )


def test_a_strategy_proposing_nothing_ends_with_a_clear_reason() -> None:
    strategy = Scripted([])
    result = toy_world().run(strategy, budget=Budget(max_wall_s=3600.0))
    assert [r.candidate_idx for r in result.history] == [0]
    assert result.raw["stop_reason"] == "strategy exhausted: no proposals for 3 generations"


def test_a_generation_with_a_new_candidate_resets_the_idle_count() -> None:
    strategy = Scripted(
        [
            [Proposal(spec=pipeline("a"))],
            [Proposal(spec=pipeline("a"))],
            [Proposal(spec=pipeline("a", "b"))],
            [Proposal(spec=pipeline("a"))],
        ]
    )
    result = toy_world().run(strategy, budget=Budget(max_evaluations=10))
    assert strategy.asked == 6  # 2 idle, 1 new, then 3 idle
    assert [r.status for r in result.history].count("evaluated") == 2


# -- F7 mid-search: NaN and infinite metrics ------------------------------------------------------

MINIBATCH = {str(i) for i in minibatch_indices(10, 5, 42, 0)}


def nan_off_the_minibatch(x: Any) -> str:
    """Right everywhere, free; marks the output so the score is NaN off the minibatch."""
    record_model_latency(1.0)
    return f"{x}abc" + ("" if str(x) in MINIBATCH else "N")


def infinitely_priced(x: Any) -> str:
    record_usage("toy:inf", requests=1, input_tokens=1)
    record_model_latency(1.0)
    return f"{x}abc"


def nan_aware_score(output: Any, example: Any) -> float:
    return math.nan if "N" in str(output) else score_letters(output, example)


class InfinityPricer(Pricer):
    def total(self, usages: Iterable[ModelUsage]) -> CostQuote:
        usages = list(usages)
        if any(u.model_name == "toy:inf" for u in usages):
            return CostQuote(math.inf)
        return super().total(usages)


def test_f7_nan_and_infinite_candidates_are_never_best_never_on_the_front() -> None:
    assert MINIBATCH == {"1", "3", "5", "7", "8"}
    world = toy_world(extra={"nanstep": nan_off_the_minibatch, "infstep": infinitely_priced})
    prices = {
        f"toy:{k}": ModelPrice(input_usd_per_1k=v, output_usd_per_1k=0.0)
        for k, v in PRICES_USD.items()
    }
    world.evaluator = TopologyEvaluator(
        callable_registry=world.callables,
        agent_registry=world.agents,
        score_fn=nan_aware_score,
        pricer=InfinityPricer(prices),
        cache=InMemoryEvaluationCache(),
        max_depth=world.gene.max_depth,
        allowed_step_kinds=world.gene.allowed_step_kinds,
    )
    strategy = Scripted(
        [
            [
                Proposal(spec=pipeline("nanstep"), parent_idx=0),
                Proposal(spec=pipeline("infstep"), parent_idx=0),
                Proposal(spec=pipeline("a", "b"), parent_idx=0),
            ]
        ],
        n_generations=1,
        minibatch_size=5,
    )
    events: list[SearchEvent] = []
    result = world.run(strategy, events=events)
    seed, nan_c, inf_c, ab = result.history
    # perfect and free on the minibatch: it beats the seed there and goes to the full split,
    # where its NaN scores make it invalid
    assert (nan_c.promoted, nan_c.split, nan_c.valid) == (True, "validation", False)
    assert nan_c.reason == "non_finite_score: nan (example 'q0', trial 0; 5 of 10 runs invalid)"
    assert (nan_c.score, nan_c.accuracy) == (None, None)
    # infinitely priced: invalid on the minibatch already, never goes further
    assert (inf_c.promoted, inf_c.split, inf_c.valid) == (False, "minibatch", False)
    assert inf_c.reason == "non_finite_cost: inf (example 'q1', trial 0; 5 of 5 runs invalid)"
    assert inf_c.minibatch_score is None
    assert (ab.promoted, ab.valid) == (True, True)
    assert result.raw["best_idx"] == 3
    assert result.raw["pareto_idx"] == [0, 3]
    archive = result.raw["archive"]
    assert [e.valid for e in archive.entries] == [True, False, False, True]
    assert archive.pareto_indices() == [0, 3]  # over every split too
    assert archive.best_index() == 3
    assert [archive.entries.index(e) for e in archive.view()] == [3, 0]  # top_k: valid only
    snapshots = [e for e in events if e.type == "archive_snapshot"]
    assert all(set(s.front) <= {0, 3} for s in snapshots)  # type: ignore[union-attr]
    assert all(s.best_idx in (0, 3) for s in snapshots)  # type: ignore[union-attr]
    # the tracker never counts a non-finite cost
    assert math.isfinite(result.raw["budget_used"]["usd"])


# -- determinism whatever the concurrency -------------------------------------------------------


def test_the_same_seed_gives_the_same_archive_at_any_concurrency() -> None:
    results = []
    for concurrency in (1, 3, 16):
        world = toy_world(n_test=3)
        world.evaluator = world.evaluator.with_options(concurrency=concurrency)
        results.append(world.run(RandomSearch(RandomConfig(seed=4, n_generations=3))))
    first = results[0]
    for other in results[1:]:
        assert archive_fingerprint(other) == archive_fingerprint(first)
        assert history_fingerprint(other) == history_fingerprint(first)
        assert other.raw["budget_used"]["usd"] == first.raw["budget_used"]["usd"]
        assert other.raw["test"] == first.raw["test"]


def nan_everywhere(x: Any) -> str:
    record_model_latency(1.0)
    return f"{x}abcN"


def test_f7_a_candidate_nan_on_its_minibatch_is_never_promoted() -> None:
    world = toy_world(extra={"nanall": nan_everywhere})
    world.evaluator = TopologyEvaluator(
        callable_registry=world.callables,
        agent_registry=world.agents,
        score_fn=nan_aware_score,
        pricer=Pricer(
            {
                f"toy:{k}": ModelPrice(input_usd_per_1k=v, output_usd_per_1k=0.0)
                for k, v in PRICES_USD.items()
            }
        ),
        cache=InMemoryEvaluationCache(),
        max_depth=world.gene.max_depth,
        allowed_step_kinds=world.gene.allowed_step_kinds,
    )
    strategy = Scripted(
        [[Proposal(spec=pipeline("nanall"), parent_idx=0)]], n_generations=1, minibatch_size=5
    )
    result = world.run(strategy)
    _, nan_c = result.history
    assert (nan_c.promoted, nan_c.rescored, nan_c.split, nan_c.valid) == (
        False,
        False,
        "minibatch",
        False,
    )
    assert nan_c.reason == "non_finite_score: nan (example 'q1', trial 0; 5 of 5 runs invalid)"
    assert nan_c.minibatch_score is None
    assert (result.raw["best_idx"], result.raw["pareto_idx"]) == (0, [0])
