"""The shared strategy contract suite, and the small deterministic world it runs in.

Every model-free strategy runs this suite (see `Strategy`'s docstring for the contract):
subclass `StrategyContract` in a test file, name the subclass `Test...`, and implement
`make(seed)`. The suite checks that a strategy is deterministic under a seed (the same archive
and history twice, another seed another history), that every proposal is valid and new, that
`parent_idx` points at an evaluated candidate, and that budgets are respected.

The toy world ("letters"): a gold example's input is a digit string and its expected value a
set of letters; registered steps `a`, `b`, `c` each append their letter, cost a fixed priced
usage (1,000 input tokens of model `toy:<letter>`) and 10 ms of model time (so latency is
deterministic). An output is right when it holds every expected letter. Inputs 0-3 need `a`,
4-6 need `a` and `b`, 7-9 need all three: a pipeline `a` scores 0.4 accuracy, `a, b` 0.7,
`a, b, c` 1.0, at 0.001, 0.003 and 0.007 USD per example. A step `blank` returns "" (F5).
"""

from __future__ import annotations

import asyncio
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from core.evaluation.cache import InMemoryEvaluationCache
from core.evaluation.evaluator import TopologyEvaluator
from core.evaluation.metrics import GoldExample
from core.evaluation.pricing import ModelPrice, Pricer
from core.hydrate import AgentRegistry, CallableRegistry
from core.ir import TopologySpec, parse_topology
from core.ir.canonical import spec_hash
from core.runtime.tracing import record_model_latency, record_usage
from core.search._engine import SearchRun
from core.search.budget import Budget
from core.search.events import SearchEvent
from core.search.gene import TopologyGene
from core.search.result import OptimizationResult
from core.search.strategies.base import Strategy

PRICES_USD = {"a": 0.001, "b": 0.002, "c": 0.004}
"""USD per call of each letter step (1,000 input tokens at these prices per 1K)."""
LATENCY_MS = 10.0
"""Model time per letter step."""


def letter_step(letter: str, calls: list[str] | None = None) -> Callable[[Any], str]:
    def step(x: Any) -> str:
        record_usage(f"toy:{letter}", requests=1, input_tokens=1000)
        record_model_latency(LATENCY_MS)
        if calls is not None:
            calls.append(f"{letter}:{x}")
        return f"{x}{letter}"

    step.__name__ = letter
    return step


def blank_step(x: Any) -> str:
    return ""


def score_letters(output: Any, example: GoldExample) -> float:
    letters = {ch for ch in str(output) if ch.isalpha()}
    return 1.0 if set(str(example.expected)) <= letters else 0.0


def toy_examples(n: int = 10) -> list[GoldExample]:
    need = ["a"] * 4 + ["ab"] * 3 + ["abc"] * 3
    return [GoldExample(input=str(i), expected=need[i % 10], id=f"q{i}") for i in range(n)]


def pipeline(*names: str) -> TopologySpec:
    steps = [{"operation": {"kind": "function_step", "callable_name": n}} for n in names]
    return parse_topology({"kind": "pipeline", "steps": steps})


@dataclass
class ToyWorld:
    """Registries, evaluator and gene of the letters world, with a log of step calls."""

    callables: CallableRegistry
    agents: AgentRegistry
    evaluator: TopologyEvaluator
    gene: TopologyGene
    validation: list[GoldExample]
    test: list[GoldExample]
    calls: list[str] = field(default_factory=list[str])
    roles: dict[str, list[str]] = field(default_factory=dict[str, list[str]])

    def run(
        self,
        strategy: Strategy,
        *,
        budget: Budget | None = None,
        events: list[SearchEvent] | None = None,
        **options: Any,
    ) -> OptimizationResult:
        """Run a search in this world (events appended to `events` when given)."""
        subscribers = [events.append] if events is not None else []
        run = SearchRun(
            strategy,
            gene=self.gene,
            evaluator=self.evaluator,
            validation=self.validation,
            test=self.test or None,
            callable_registry=self.callables,
            agent_registry=self.agents,
            roles=self.roles,
            problem="letters",
            budget=budget,
            subscribers=subscribers,
            handle_sigint=False,
            run_id=options.pop("run_id", "toy-run"),
            **options,
        )
        return asyncio.run(run.run())


def toy_world(
    seed: TopologySpec | None = None,
    *,
    n_validation: int = 10,
    n_test: int = 0,
    max_depth: int = 3,
    extra: dict[str, Callable[[Any], Any]] | None = None,
) -> ToyWorld:
    """A fresh letters world (new registries, evaluator and cache each time)."""
    calls: list[str] = []
    callables = CallableRegistry()
    for letter in ("a", "b", "c"):
        callables.register(letter, letter_step(letter, calls), f"appends {letter!r}")
    for name, fn in (extra or {}).items():
        callables.register(name, fn, f"the {name} step")
    agents = AgentRegistry()
    gene = TopologyGene(name="letters", initial=seed or pipeline("a"), max_depth=max_depth)
    prices = {
        f"toy:{k}": ModelPrice(input_usd_per_1k=v, output_usd_per_1k=0.0)
        for k, v in PRICES_USD.items()
    }
    evaluator = TopologyEvaluator(
        callable_registry=callables,
        agent_registry=agents,
        score_fn=score_letters,
        pricer=Pricer(prices),
        cache=InMemoryEvaluationCache(),
        max_depth=gene.max_depth,
        allowed_step_kinds=gene.allowed_step_kinds,
        concurrency=4,
    )
    examples = toy_examples(n_validation + n_test)
    return ToyWorld(
        callables=callables,
        agents=agents,
        evaluator=evaluator,
        gene=gene,
        validation=examples[:n_validation],
        test=examples[n_validation:],
        calls=calls,
        roles={"step": sorted(callables.names())},
    )


def archive_fingerprint(result: OptimizationResult) -> list[tuple[Any, ...]]:
    """What must be equal between two runs: every archive entry's spec, split, score, metrics."""
    archive = result.raw["archive"]
    return [
        (
            e.spec_hash,
            e.generation,
            e.split,
            e.aggregate_score,
            e.parent_idx,
            tuple((b.accuracy, b.cost_usd, b.latency_ms, b.status) for b in e.bundles),
        )
        for e in archive.entries
    ]


def history_fingerprint(result: OptimizationResult) -> list[dict[str, Any]]:
    return [r.model_dump() for r in result.history]


class StrategyContract:
    """The contract every model-free strategy passes. Subclass with `make(seed)`."""

    generations: int = 3

    def make(self, seed: int) -> Strategy:  # pragma: no cover - overridden
        raise NotImplementedError

    def test_deterministic_under_a_seed(self) -> None:
        first = toy_world().run(self.make(7))
        second = toy_world().run(self.make(7))
        assert archive_fingerprint(first) == archive_fingerprint(second)
        assert history_fingerprint(first) == history_fingerprint(second)
        assert first.best_candidate == second.best_candidate
        other = toy_world().run(self.make(8))
        assert history_fingerprint(other) != history_fingerprint(first)

    def test_every_proposal_is_valid_and_new(self) -> None:
        world = toy_world()
        result = world.run(self.make(3))
        assert len(result.history) > 1
        seen: set[str] = set()
        evaluated: set[int] = set()
        for record in result.history:
            assert record.status == "evaluated", record
            spec = parse_topology(record.spec_json)
            assert spec_hash(spec) == record.spec_hash
            assert record.spec_hash not in seen
            seen.add(record.spec_hash)
            assert record.depth is not None and record.depth <= world.gene.max_depth
            if record.parent_idx is not None:
                assert record.parent_idx in evaluated
            evaluated.add(record.candidate_idx)

    def test_max_evaluations_is_never_exceeded(self) -> None:
        for limit in (1, 2, 5):
            result = toy_world().run(self.make(1), budget=Budget(max_evaluations=limit))
            evaluated = [r for r in result.history if r.status == "evaluated"]
            assert len(evaluated) == limit
            assert result.raw["budget_used"]["evaluations"] == float(limit)
            assert result.raw["stop_reason"] == f"max_evaluations reached ({limit})"

    def test_max_usd_stops_at_the_first_check_past_it(self) -> None:
        events: list[SearchEvent] = []
        result = toy_world().run(self.make(2), budget=Budget(max_usd=0.02), events=events)
        assert result.raw["stop_reason"].startswith("max_usd reached")
        spent = 0.0
        spent_before_last_proposal = 0.0
        for e in events:
            if e.type == "example_evaluated":
                spent += e.cost_usd
            elif e.type == "candidate_proposed" and e.status == "proposed":
                spent_before_last_proposal = spent
        # checked before every evaluation: the last one started below the limit, and the run
        # ended at or past it (the seed alone costs 0.01)
        assert spent_before_last_proposal < 0.02 <= spent
        assert math.isclose(result.raw["budget_used"]["usd"], spent, rel_tol=1e-12)
        assert result.raw["test"] is None

    def test_proposals_respect_the_remaining_budget(self) -> None:
        events: list[SearchEvent] = []
        toy_world().run(self.make(4), budget=Budget(max_evaluations=3), events=events)
        proposed = [e for e in events if e.type == "candidate_proposed"]
        assert len(proposed) == 3  # the seed and two proposals: nothing proposed in vain
        assert all(not math.isnan(e.design_cost_usd) for e in proposed)


def run_strategy_twice(make: Callable[[int], Strategy], seed: int) -> Sequence[OptimizationResult]:
    return [toy_world().run(make(seed)), toy_world().run(make(seed))]
