"""The search engine: an ask/tell loop around a strategy, with budgets, events and promotion.

```python
from core.problems import load_problem
from core.search.engine import run_search

problem = load_problem("gsm8k_replay", overrides={"models.time_scale": 0})
result = asyncio.run(run_search(problem, "evolutionary", seed=7, subscribers=[print]))
result.best_decoded["gsm8k_replay"], result.best_score, result.raw["test"]
```

The loop (`SearchRun`; a strategy only proposes, the engine does everything else):

1. **Before anything runs**: a budget that allows no work raises `BudgetError`; the strategy's
   `preflight` fails fast (F2: the meta agent's output schema under its provider's profile,
   its model's price), before any evaluation or paid call.
2. **Seed** (candidate 0): evaluated on the full validation split. A degenerate evaluation
   (mostly blank or failing runs, F5) stops the run with `DegenerateSeedError` and its
   diagnosis, after `RunFinished(status="failed")`.
3. **Generations**: the strategy is asked for proposals; each is checked before anything runs
   (the evaluator's rules: parse limits, `max_depth`, allowed kinds, registered names,
   hydration; then the static dataflow check with the problem's `effects`, whose rejections
   are named `condition_before_input`, `fastest_branch_without_answer`, `no_agent`,
   `router_matches_nothing` and counted in `RunFinished.budget_used` as
   `static_rejected:<code>`), so an invalid one is recorded `rejected` with its reason and
   never reaches the archive (F4), and one with the canonical hash of an earlier candidate, or
   the same no-op-free normal form (`core.ir.dataflow.behaviour_hash`), is recorded
   `duplicate` and not evaluated again. A valid new one is evaluated on the minibatch:
   - with `minibatch_margin` (the GSM8K replay problem sets 0.05): one fixed minibatch for the
     whole run, sized from the seed's measured accuracy (`minibatch_size_for`), drawn once. A
     candidate whose per-example results there equal an earlier one's is recorded `same_as`
     it: never promoted, never re-scored, not in the archive. A candidate that no distinct
     candidate dominates there (accuracy, cost, latency) is **promoted** to the full
     validation split (at once when the minibatch is the whole split);
   - without: `minibatch_size` examples drawn with `random.Random(f"minibatch:
     {seed}:{generation}")` (the same for every candidate of the generation), compared with
     its parent on the same examples (the parent's runs come from the evaluation cache, or are
     run now: like with like); if it scores strictly higher it is **promoted**.
   It enters the archive with the split it was scored on.
4. **Stopping**: between evaluations, the budget (`Budget`: candidate evaluations, USD, wall
   time, patience), a stop file, a first Ctrl-C (SIGINT, main thread only) or `request_stop()`
   end the run cleanly (`RunFinished(status="stopped")`). After `n_generations`, or when the
   strategy has proposed nothing new to evaluate for three generations in a row, it
   completes: `"strategy exhausted: no proposals for 3 generations"`, or, when it proposed only
   duplicates and rejected specs, `"strategy exhausted: nothing new to evaluate for 3
   generations (6 proposals: 0 duplicate, 6 rejected, last unknown_names)"`.
5. **Report**: the minibatch-only candidates that are best or on the front on their own scores
   are re-scored on the full validation split, again until none is left (a re-scored one can
   drop off the front and put another on it; a stop between two is honoured); the winner and
   the front are then taken among the candidates scored on the full validation split, and
   every front candidate, the winner first, is evaluated once on the test split, if one is
   given (`raw["test_front"]`, the winner's as `raw["test"]`): reported, never used to choose.
   After a stop by money, time or a person, the report spends nothing more: no re-scoring, no
   test split (`raw["test"]` is None, `raw["test_front"]` empty).
6. **Resume**: `resume_from=<recorded events>` serves every recorded example result from the
   evaluation cache and every recorded proposal to the strategy, re-runs the same deterministic
   loop, and emits only what was not recorded (the `seq` continues): recorded work costs
   nothing again, counts toward the budget as it did, and the final archive equals an
   uninterrupted run's.

Events (`core.search.events`) go to every subscriber in order: `RunStarted`, then per candidate
`CandidateProposed`, `ExampleEvaluated` (each example result the run needs for the first time),
`CandidateEvaluated` (per split), an `ArchiveSnapshot` per generation (front and best on the
full validation split), `LogMessage`s, and `RunFinished`.

Determinism: the same seed and inputs give the same archive and history (the strategies own
one seeded generator; the minibatch draws are seeded; costs are summed in a fixed way; the
budget counts what the run needs, whatever the cache held).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from pydantic_ai.models import Model

from core.agents.call_cache import CallCache
from core.agents.rate_budget import RateBudget, RateBudgetLike
from core.evaluation.cache import EvaluationCache, InMemoryEvaluationCache
from core.evaluation.executor import Executor
from core.evaluation.metrics import MetricWeights
from core.evaluation.pricing import Pricer
from core.problems.problem import Problem
from core.search._engine import SearchRun, Subscriber, build_search_space, minibatch_indices
from core.search.budget import Budget
from core.search.events import SearchEvent
from core.search.gene import TopologyGene
from core.search.result import OptimizationResult
from core.search.strategies import Strategy, StrategyConfig, get_strategy, strategy_config_class

__all__ = [
    "SearchRun",
    "Subscriber",
    "build_search",
    "build_search_space",
    "minibatch_indices",
    "run_search",
]


def _strategy_for(
    problem: Problem,
    strategy: str | Strategy | None,
    config: StrategyConfig | Mapping[str, Any] | None,
    seed: int | None,
    model: str | Model | None,
    pricer: Pricer,
    weights: MetricWeights | Mapping[str, Any] | None,
) -> Strategy:
    if isinstance(strategy, Strategy):
        if config is not None or seed is not None or weights is not None:
            raise ValueError(
                "give config, seed and weights to the strategy itself when passing one"
            )
        return strategy
    name = strategy or problem.search.strategy
    cls = strategy_config_class(name)
    defaults: dict[str, Any] = {
        "minibatch_size": problem.search.minibatch_size,
        "minibatch_margin": problem.search.minibatch_margin,
        "seed": problem.search.seed,
        "weights": problem.search.weights,
    }
    if problem.search.promotion_k_se is not None:
        defaults["promotion_k_se"] = problem.search.promotion_k_se
    if isinstance(config, StrategyConfig):
        data = config.model_dump()
        if "weights" not in config.model_fields_set:
            data["weights"] = problem.search.weights
    else:
        data = {**defaults, **dict(config or {})}
    if seed is not None:
        data["seed"] = seed
    if weights is not None:
        data["weights"] = weights
    cfg = cls.model_validate(data)
    designer = model if model is not None else problem.search.meta_model
    return get_strategy(name, cfg, model=designer, pricer=pricer)


def build_search(
    problem: Problem,
    strategy: str | Strategy | None = None,
    *,
    config: StrategyConfig | Mapping[str, Any] | None = None,
    seed: int | None = None,
    model: str | Model | None = None,
    budget: Budget | None = None,
    run_id: str | None = None,
    subscribers: Sequence[Subscriber] = (),
    resume_from: Sequence[SearchEvent] | None = None,
    stop_file: str | None = None,
    handle_sigint: bool = True,
    cache: EvaluationCache | None = None,
    use_test_split: bool = True,
    test_size: int | None = None,
    constraints: str | None = None,
    weights: MetricWeights | Mapping[str, Any] | None = None,
    call_cache: CallCache | None = None,
    executor: Executor | None = None,
    rate_budget: RateBudgetLike | None = None,
) -> SearchRun:
    """A `SearchRun` on a loaded problem, with the problem's defaults for what is not given.

    The problem's `[rate_limits]` (requests and tokens per minute, calls in flight, per
    provider) become the evaluator's in-process `RateBudget` unless `rate_budget` is given;
    a remote `executor` brings its workers their own budget.

    Args:
        problem: from `core.problems.load_problem`.
        strategy: `"evolutionary"`, `"random"`, `"meta_agent"` (or `"meta-agent"`), a
            `Strategy` instance, or None for the problem's `[search] strategy`.
        config: the strategy's config (model or mapping); the problem's `minibatch_size`,
            `seed` and `weights` fill a mapping's gaps, and its `weights` a config model's
            when that model was built without them.
        seed: overrides the config's seed.
        model: the meta agent's designer model (default: the problem's `meta_model`).
        budget: the limits (default: the problem's `max_evaluations`, `max_usd`,
            `max_wall_time_s`, `patience`).
        run_id: the run's id (default: a new one; a resumed run keeps the recorded one).
        subscribers: called with every event, in order (e.g. `RunJournal.append`).
        resume_from: the events of an interrupted run to continue (see `SearchRun`).
        stop_file: a path whose existence stops the run cleanly.
        handle_sigint: first Ctrl-C stops cleanly (main thread only).
        cache: the evaluation cache (default: a new in-memory one).
        use_test_split: evaluate the winner once on the problem's test split at the end.
        test_size: score the held-out test on the first `test_size` examples of the test split
            only (its hash order, so the same examples every time; the demo's short test);
            None: all of them. A run records how many it used (`n_test`), which a resume
            passes back here.
        constraints: plain-words constraints shown to the meta agent.
        weights: the metric weights of the aggregate score; overrides the config's (default:
            the problem's `[search.weights]`). They rank candidates, pick the winner, and are
            recorded in `RunStarted.config` (`weights`, and the evaluator's).
        call_cache: the evaluator's call-level model cache (None: off).
        executor: where the evaluator's runs execute (None: `LocalExecutor`); the caller
            starts it (before `run`, so `RunStarted` records its workers) and closes it.
        rate_budget: what the evaluator's in-process model calls draw from (None: a
            `RateBudget` of the problem's `[rate_limits]`, unlimited without them).

    Raises:
        ValueError: an unknown strategy, `meta_agent` without a model, or a `Strategy`
            instance together with `config`, `seed` or `weights`.
        pydantic.ValidationError: a config with bad values.
    """
    search = problem.search
    pricer = Pricer(problem.prices)
    strat = _strategy_for(problem, strategy, config, seed, model, pricer, weights)
    gene = TopologyGene(
        name=problem.name,
        initial=problem.seed_spec,
        constraints=constraints,
        allowed_step_kinds=tuple(search.allowed_step_kinds),
        max_depth=search.max_depth,
    )
    evaluator = problem.evaluator(
        cache=cache if cache is not None else InMemoryEvaluationCache(),
        weights=strat.config.weights,
        concurrency=search.concurrency,
        max_depth=gene.max_depth,
        allowed_step_kinds=gene.allowed_step_kinds,
        pricer=pricer,
        call_cache=call_cache,
        executor=executor,
        rate_budget=(
            rate_budget
            if rate_budget is not None or not problem.rate_limits
            else RateBudget(problem.rate_limits)
        ),
    )
    if budget is None:
        budget = Budget(
            max_evaluations=search.max_evaluations,
            max_usd=search.max_usd,
            max_wall_s=search.max_wall_time_s,
            patience=search.patience,
        )
    test = problem.splits.get("test") if use_test_split else None
    if test is not None and test_size is not None:
        if test_size < 1:
            raise ValueError(f"test_size must be at least 1, got {test_size}")
        test = test[:test_size]
    return SearchRun(
        strat,
        gene=gene,
        evaluator=evaluator,
        validation=problem.splits["validation"],
        test=test,
        train=problem.splits.get("train"),
        callable_registry=problem.callable_registry,
        agent_registry=problem.agent_registry,
        roles=problem.roles,
        effects=problem.effects,
        problem=problem.name,
        problem_description=problem.description,
        problem_config=problem.to_dict(),
        budget=budget,
        run_id=run_id,
        subscribers=subscribers,
        resume_from=resume_from,
        stop_file=stop_file,
        handle_sigint=handle_sigint,
    )


async def run_search(
    problem: Problem, strategy: str | Strategy | None = None, **options: Any
) -> OptimizationResult:
    """Build a search on `problem` (`build_search`, same options) and run it to its end.

    Raises:
        BudgetError, DegenerateSeedError, SearchError: see `SearchRun.run`.
    """
    return await build_search(problem, strategy, **options).run()
