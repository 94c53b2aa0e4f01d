"""`TopologyEvaluator`: run a candidate topology on gold examples, concurrently, with real cost.

Kept whole: the four steps of one evaluation are read in order here; each step's machinery is
already its own module (`checks`, `_run`, `_fork`, `_aggregate`).

One `evaluate(spec, examples)` call:

1. **Checks, before anything runs** (F4), exactly what the public `check(spec)` does (the
   search engine and the meta agent's debug loop call it: one definition of a valid
   candidate, see `core.evaluation.checks`). The spec is parsed with the structural limits
   (`parse_limits`: `core.ir.parse_topology`), then checked against `max_depth`, `allowed_step_kinds` and
   inline agents, then hydrated once (`core.hydrate.topology_from_spec`, which resolves every
   registered name before building anything). Any failure gives a `CandidateEvaluation` with
   `status="rejected"`, a `reason` starting with a code, no results, no cost and `valid=False`:

   | code                     | when                                                       |
   |--------------------------|------------------------------------------------------------|
   | `invalid_spec`           | not JSON, not a valid spec (`SpecError` text kept)          |
   | `max_depth_exceeded`     | deeper than the IR limit or than `max_depth` (`depth 5 > 4`) |
   | `max_nodes_exceeded`     | more nodes than the IR limit                               |
   | `step_kind_not_allowed`  | a node kind outside `allowed_step_kinds` (kind and path)    |
   | `inline_agents_disabled` | an inline `AgentSpec` while `allow_inline_agents` is False  |
   | `unknown_names`          | unregistered names (the `UnknownNamesError` text, every     |
   |                          | name with its JSON path; also in `unknown_names`)           |
   | `hydration_error`        | anything else hydration raised                             |

2. **Runs.** Every (example, trial) not in the cache runs under one
   `asyncio.Semaphore(concurrency)`, each in its own `capture_trace()` (the spans give its
   usage and model time; they are kept in the result only with `capture_traces`), through the
   hydrated topology's `execute` (a top-level `Parallel` yields its merged value, a loop its output). A run
   never raises (see `core.evaluation._run`): exceptions and `example_timeout_s` become status
   `error`; blank outputs status `degenerate` (not scored); a NaN, infinite or out-of-range
   score, a failing score function, or a non-finite or unpriced cost status `invalid`.
   Cost is the `Pricer` over the trace's usage by model: every request, retries included.
   Latency, in ms, follows `latency_source`: `"auto"` (default) is the critical-path model time
   when the run recorded any (replay models do, so latency is deterministic), else wall time;
   `"model"` is always model time, 0 for a run that recorded none (e.g. functions only: a
   problem whose models all report model time sets it, so identical runs give identical
   latency); `"wall"` is always wall time.
   With `workers` above 1, an evaluation of enough runs shares them with forked worker
   processes (`core.evaluation._fork`: runs dealt by weight, results sent back and handled
   here in the same way, so the `CandidateEvaluation` is the same). With a remote
   `executor` (`core.evaluation.executor`, e.g. `core.distributed.RayExecutor`), the runs
   go to its workers as JSON batches instead and their results are handled here in the same
   way, each (example, trial) recorded once even when a lost worker's batch is retried.
   With a `rate_budget` (`core.agents.rate_budget`), every model call of a run
   made in this process draws from it.

3. **Verdict** (`core.evaluation._aggregate.judge`): one bundle per example (trials combined),
   weighted means, the aggregate score, error and blank rates, and the status `ok`,
   `invalid` (any invalid run: F7) or `degenerate` ((blank + error) runs / runs >=
   `degenerate_threshold`: F5). Only `ok` is valid.

Finished runs go into the evaluation cache under `(spec_hash, example_id, trial)`, so a spec
proposed again (same canonical hash) makes no model call.

The reference library's per-example API is here too: `evaluate_one(decoded, example)` and
`evaluate_batch(decoded=..., batch=...)` take a decoded genome (gene name -> spec; the topology
under `topology_gene_name`, default `"main"`) and return `MetricBundle`s whose `raw` carries
`n_agents`, `depth` and `cost_source`, plus `error` and `error_type` on a failure (a missing
gene, a rejected candidate, a run that raised): such a bundle has accuracy 0 and status
`"error"`; these methods never raise. A `cost_estimator` (`RunUsage -> USD`), when given,
replaces each run's measured cost (every call's usage priced by the `Pricer`, which is then
`Pricer(unknown="zero")` unless one is given) in `cost_usd`; the run records
`raw["cost_source"] = "estimate"` and the measured figure as `raw["measured_cost_usd"]`. A
failing estimator, or one that returns a negative or non-finite value, makes the run `invalid`.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import math
import weakref
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, field_validator
from pydantic_ai.usage import RunUsage

from core.agents.call_cache import CallCache, CallCacheStats
from core.agents.rate_budget import ProviderLimit, RateBudget, RateBudgetLike, use_rate_budget
from core.errors import EvaluationError, SpecError, SpecLimitError, UnknownNamesError
from core.evaluation import example_memo
from core.evaluation._aggregate import fsum_finite, judge
from core.evaluation._fork import Command, Job, Prepared, WorkerPool, Workers, resolve_workers
from core.evaluation._records import CandidateEvaluation, CandidateStatus, ExampleResult
from core.evaluation._run import (
    BlankFn,
    LatencySource,
    RunContext,
    RunnableTopology,
    default_is_blank,
    example_key,
    run_example,
)
from core.evaluation.cache import EvaluationCache
from core.evaluation.checks import (
    CheckResult,
    check_allowed_kinds,
    check_max_depth,
    inline_agent_path,
    normalize_allowed_kinds,
)
from core.evaluation.executor import (
    Executor,
    LocalExecutor,
    RemoteBatch,
    RemoteExecutor,
    learned_artefacts,
)
from core.evaluation.metrics import GoldExample, MetricBundle, MetricWeights, ScoreFn
from core.evaluation.pricing import Pricer
from core.hydrate import (
    AgentRegistry,
    AgentRegistryLike,
    CallableRegistry,
    CallableRegistryLike,
    HydrationHooks,
    InlineAgentFactory,
    as_agent_registry,
    as_callable_registry,
    topology_from_spec,
)
from core.ir import SpecLimits, parse_topology, spec_hash, spec_metrics
from core.ir.limits import DEFAULT_MAX_DEPTH, MAX_DEPTH_CEILING

__all__ = [
    "CandidateEvaluation",
    "CostEstimator",
    "EvaluatorConfig",
    "ExampleCallback",
    "ExampleResult",
    "LatencySource",
    "TopologyEvaluator",
    "prompted_hash",
]

CostEstimator = Callable[[RunUsage], float]
"""`cost_estimator(usage) -> USD`: one run's cost from its usage (requests, input and output
tokens summed over every model call of the run)."""

_KEEP: Any = object()
"""`with_collaborators`' default: keep this evaluator's collaborator."""

ExampleCallback = Callable[[ExampleResult], None]
"""Receives each `ExampleResult` as it completes (cache hits too), e.g. to journal it live."""


class EvaluatorConfig(BaseModel):
    """The evaluator's options, as one frozen record (what a run journal stores)."""

    model_config = ConfigDict(frozen=True, extra="forbid", use_attribute_docstrings=True)

    concurrency: int = Field(default=8, ge=1)
    """Runs in flight at once, over all (example, trial) pairs of one `evaluate` call."""
    n_trials: int = Field(default=1, ge=1)
    """Runs per example; with more than one, bundles are means with the accuracy's stdev."""
    weights: MetricWeights = Field(default_factory=MetricWeights)
    """Weights of the aggregate score (semantics section 8 defaults)."""
    max_depth: int | None = Field(default=None, ge=0)
    """Reject specs deeper than this (`TopologyGene.max_depth`); None: only the IR limits."""
    allowed_step_kinds: tuple[str, ...] | None = None
    """Reject specs with other node kinds (`TopologyGene.allowed_step_kinds`; see
    `checks.check_allowed_kinds` for how composites are treated); None: all kinds."""
    limits: SpecLimits | None = None
    """The IR's structural limits when parsing (None: `SpecLimits()` defaults, with the depth
    limit raised to `max_depth` when that is deeper, so such a spec parses and is checked)."""
    degenerate_threshold: float = Field(default=0.5, ge=0.0, le=1.0, allow_inf_nan=False)
    """A candidate whose share of blank or failed runs is at least this is degenerate (F5)."""
    example_timeout_s: float | None = Field(default=None, gt=0, allow_inf_nan=False)
    """Per-run deadline in seconds; a run past it is an `error` (and is not cached)."""
    allow_inline_agents: bool = False
    """Allow inline `AgentSpec`s (needs an `agent_factory`); off: such specs are rejected."""
    latency_source: LatencySource = "auto"
    """Where a run's latency comes from: `"auto"` model time if recorded else wall time,
    `"model"` model time (0 when none recorded), `"wall"` wall time (see the module docstring)."""
    capture_traces: bool = False
    """Keep each run's spans in `ExampleResult.trace` (what a run journal records per example,
    about 2.6 KB a run on gsm8k_replay); off: `trace` is `[]`. Usage and model time are read
    from the spans either way, so cost and latency do not change."""

    @field_validator("allowed_step_kinds", mode="before")
    @classmethod
    def _kinds(cls, value: Any) -> Any:
        return normalize_allowed_kinds(value) if value is not None else None


class TopologyEvaluator:
    """Evaluates candidate topologies on gold examples; see the module docstring for the rules.

    Args:
        callable_registry: the registered functions, merges, conditions, state updaters (a
            `CallableRegistry` or a mapping of name -> callable).
        agent_registry: the registered agent factories (an `AgentRegistry` or a mapping of
            name -> zero-argument factory).
        score_fn: `(output, example) -> float in [0, 1]`, sync or async.
        pricer: prices model usage; default `Pricer()` (genai-prices, unpriced models invalid),
            `Pricer(unknown="zero")` when a `cost_estimator` is given.
        concurrency: runs in flight at once (>= 1).
        n_trials: runs per example (>= 1).
        weights: metric weights of the aggregate score.
        cache: the evaluation cache; None: no caching.
        max_depth: reject deeper specs with `max_depth_exceeded`.
        allowed_step_kinds: reject other kinds with `step_kind_not_allowed`.
        limits: the IR's structural limits for parsing.
        degenerate_threshold: share of blank or failed runs that makes a candidate degenerate.
        example_timeout_s: per-run deadline, seconds.
        allow_inline_agents: accept inline `AgentSpec`s (requires `agent_factory`).
        agent_factory: builds an agent from an inline `AgentSpec`, for hydration.
        is_blank: the problem's blank test for structured outputs; default `default_is_blank`.
        latency_source: `"auto"`, `"model"` or `"wall"` (see the module docstring).
        config: all the options above at once; when given, the option arguments must be left at
            their defaults.
        topology_gene_name: the gene of a decoded genome that holds the topology, for
            `evaluate_one` and `evaluate_batch` (default `"main"`).
        cost_estimator: `RunUsage -> USD`, used instead of the measured cost and recorded as an
            estimate (see the module docstring); None: measured cost.
        confidence_protocol: accepted for the reference library's signature; must be None
            (topology runs report no confidence).
        timer: the wall clock in seconds (default `time.perf_counter`), for wall-time latency;
            tests pass a fake one.
        workers: processes that share the runs of one `evaluate` call: 1 (the default) runs
            them all here; N > 1 shares each evaluation of at least 2 x
            `core.evaluation._fork.MIN_RUNS_PER_WORKER` runs with up to N - 1 forked
            worker processes, kept from one evaluation to the next (`"auto"`: one process per
            CPU this process may use). Results are identical either way. Only for in-process
            models (replayed, function models), never hosted ones; Linux only, elsewhere 1
            (see `core.evaluation._fork`). The workers are killed when the evaluator is
            collected (or `close_workers` is called).
        executor: where runs execute (`core.evaluation.executor`); None: `LocalExecutor`
            (in this process and its forked workers). A remote executor gets every run the
            evaluation cache did not answer. The evaluator does not own it: the caller starts
            and closes it (a search first reads it when it records `RunStarted`, so it may be
            started after construction).
        rate_budget: what every model call of a run made in this process draws from (None:
            unlimited; a remote executor brings its workers their own client of one budget).
            With a budget, every run is made in this process, never in the forked `workers`
            (a forked child would draw from its own copy of the buckets).
        hydration_hooks: what the problem changes in each built topology
            (`core.hydrate.HydrationHooks`, e.g. the standard library's ballots); None: nothing.
        call_cache: the call-level model cache every agent call of a run uses (None: off).
            A call made before (same agent, model, configuration, prompt, trial: see
            `core.agents.call_cache`) is answered from it and still charged its recorded usage
            and model time, so costs and latencies are the same with or without it; only model
            calls and wall time are saved. It is flushed at the end of every `evaluate`.

    Every collaborator is fixed here: there are no setters. `with_options` (other options) and
    `with_collaborators` (another call cache, executor or rate budget) return a new evaluator.

    Raises:
        EvaluationError: inline agents allowed without an `agent_factory`, `config` given
            together with option arguments, a `confidence_protocol`, or `workers` not an int
            >= 1 nor `"auto"`.
        pydantic.ValidationError: an option out of range (e.g. `concurrency=0`, an unknown kind).
    """

    def __init__(
        self,
        *,
        callable_registry: CallableRegistryLike,
        agent_registry: AgentRegistryLike,
        score_fn: ScoreFn,
        pricer: Pricer | None = None,
        concurrency: int = 8,
        n_trials: int = 1,
        weights: MetricWeights | None = None,
        cache: EvaluationCache | None = None,
        max_depth: int | None = None,
        allowed_step_kinds: Sequence[str] | None = None,
        limits: SpecLimits | None = None,
        degenerate_threshold: float = 0.5,
        example_timeout_s: float | None = None,
        allow_inline_agents: bool = False,
        agent_factory: InlineAgentFactory | None = None,
        is_blank: BlankFn | None = None,
        latency_source: LatencySource = "auto",
        config: EvaluatorConfig | None = None,
        topology_gene_name: str = "main",
        cost_estimator: CostEstimator | None = None,
        confidence_protocol: Any = None,
        timer: Callable[[], float] | None = None,
        workers: Workers = 1,
        executor: Executor | None = None,
        rate_budget: RateBudgetLike | None = None,
        hydration_hooks: HydrationHooks | None = None,
        call_cache: CallCache | None = None,
    ) -> None:
        if confidence_protocol is not None:
            raise EvaluationError(
                "confidence_protocol is not supported: topology runs report no confidence; "
                "leave it None (a score_fn can grade confidence into accuracy)"
            )
        options = EvaluatorConfig(
            concurrency=concurrency,
            n_trials=n_trials,
            weights=weights if weights is not None else MetricWeights(),
            max_depth=max_depth,
            allowed_step_kinds=None if allowed_step_kinds is None else tuple(allowed_step_kinds),
            limits=limits,
            degenerate_threshold=degenerate_threshold,
            example_timeout_s=example_timeout_s,
            allow_inline_agents=allow_inline_agents,
            latency_source=latency_source,
        )
        if config is not None:
            if options != EvaluatorConfig():
                raise EvaluationError("pass either config= or option arguments, not both")
            options = config
        if options.allow_inline_agents and agent_factory is None:
            raise EvaluationError("allow_inline_agents=True needs an agent_factory")
        self._config = options
        self._callables: CallableRegistry = as_callable_registry(callable_registry)
        self._agents: AgentRegistry = as_agent_registry(agent_registry)
        self._score_fn = score_fn
        if pricer is None:
            pricer = Pricer() if cost_estimator is None else Pricer(unknown="zero")
        self._pricer = pricer
        self._gene_name = topology_gene_name
        self._cost_estimator = cost_estimator
        self._timer = timer
        self._cache = cache
        self._agent_factory_given = agent_factory
        self._agent_factory = agent_factory if options.allow_inline_agents else None
        self._is_blank: BlankFn = is_blank if is_blank is not None else default_is_blank
        self._call_cache = call_cache
        self._workers: Workers = workers
        try:
            self._n_workers = resolve_workers(workers)
        except ValueError as exc:
            raise EvaluationError(str(exc)) from None
        self._pool: WorkerPool | None = None
        self._executor: Executor = executor if executor is not None else LocalExecutor()
        self._rate_budget = rate_budget
        self._hooks = hydration_hooks
        if self._n_workers > 1:
            pool = self._pool = WorkerPool(self._n_workers)
            weakref.finalize(self, pool.close)

    def close_workers(self) -> None:
        """Kill and reap the forked evaluation workers, if any (a later evaluation forks fresh
        ones). A search run calls it when it ends, so their memory is free before the run is
        stored; it is also done when the evaluator is collected."""
        if self._pool is not None:
            self._pool.close()

    @property
    def workers(self) -> int:
        """Processes sharing one evaluation's runs here (the `workers` argument resolved: 1
        where forking is unsupported)."""
        return self._n_workers

    @property
    def executor(self) -> Executor:
        """Where runs execute (`LocalExecutor` unless one was given)."""
        return self._executor

    @property
    def rate_budget(self) -> RateBudgetLike | None:
        """The in-process rate budget of model calls, if any."""
        return self._rate_budget

    @property
    def rate_limits(self) -> dict[str, ProviderLimit]:
        """Provider -> the limit model calls of later runs draw from: a remote executor's, else
        the in-process `RateBudget`'s; `{}` when unlimited (or when the budget is another
        `RateBudgetLike`, whose limits are not known here). A search records them in
        `RunStarted.config["rate_limits"]`."""
        if isinstance(self._executor, RemoteExecutor):
            return dict(self._executor.rate_limits)
        if isinstance(self._rate_budget, RateBudget):
            return self._rate_budget.limits
        return {}

    @property
    def call_cache(self) -> CallCache | None:
        """The call-level model cache, if any (the `call_cache` argument)."""
        return self._call_cache

    def call_cache_stats(self) -> CallCacheStats:
        """The call cache's counters (hits = model calls saved, misses = new model calls
        stored, uncacheable), all 0 without a call cache; `.summary_line()` gives the run
        summary's `call cache: N hits of M calls (x%), K new model calls`."""
        return CallCacheStats() if self._call_cache is None else self._call_cache.stats()

    @property
    def config(self) -> EvaluatorConfig:
        """The options, as one frozen record."""
        return self._config

    @property
    def callable_registry(self) -> CallableRegistry:
        """The registered callables candidates may name."""
        return self._callables

    @property
    def agent_registry(self) -> AgentRegistry:
        """The registered agents candidates may name."""
        return self._agents

    @property
    def topology_gene_name(self) -> str:
        """The decoded genome's key of the topology (`evaluate_one`, `evaluate_batch`)."""
        return self._gene_name

    @property
    def cost_estimator(self) -> CostEstimator | None:
        """The cost estimator, if any (None: measured cost)."""
        return self._cost_estimator

    @property
    def cache(self) -> EvaluationCache | None:
        """The evaluation cache, if any."""
        return self._cache

    @property
    def pricer(self) -> Pricer:
        """The pricer."""
        return self._pricer

    @property
    def parse_limits(self) -> SpecLimits:
        """The structural limits candidates are parsed with: `limits`, else the IR defaults
        with the depth limit raised to `max_depth` when that is deeper (so a spec `max_depth`
        allows always parses)."""
        cfg = self._config
        if cfg.limits is not None:
            return cfg.limits
        depth = max(DEFAULT_MAX_DEPTH, cfg.max_depth or 0)
        return SpecLimits(max_depth=min(MAX_DEPTH_CEILING, depth))

    def with_options(self, **options: Any) -> TopologyEvaluator:
        """A new evaluator with some options changed (any `EvaluatorConfig` field), sharing
        this one's registries, score function, pricer, cache, agent factory, blank test,
        workers, executor, rate budget and call cache.

        Example: `evaluator.with_options(max_depth=3)` checks against a gene's depth limit.

        Raises:
            pydantic.ValidationError: an unknown option or a value out of range.
            EvaluationError: inline agents allowed without an agent factory.
        """
        config = EvaluatorConfig.model_validate({**self._config.model_dump(), **options})
        return self._copy(config, self._call_cache, self._executor, self._rate_budget)

    def with_collaborators(
        self,
        *,
        call_cache: CallCache | None = _KEEP,
        executor: Executor | None = _KEEP,
        rate_budget: RateBudgetLike | None = _KEEP,
    ) -> TopologyEvaluator:
        """A new evaluator with the same options and another call cache, executor or rate
        budget (an argument left out keeps this one's; None turns it off: no call cache,
        `LocalExecutor`, unlimited). This evaluator is unchanged.

        Example: `evaluator.with_collaborators(executor=RayExecutor(...))`.
        """
        return self._copy(
            self._config,
            self._call_cache if call_cache is _KEEP else call_cache,
            self._executor if executor is _KEEP else executor,
            self._rate_budget if rate_budget is _KEEP else rate_budget,
        )

    def _copy(
        self,
        config: EvaluatorConfig,
        call_cache: CallCache | None,
        executor: Executor | None,
        rate_budget: RateBudgetLike | None,
    ) -> TopologyEvaluator:
        """A new evaluator sharing everything but these (see `with_options`)."""
        return TopologyEvaluator(
            callable_registry=self._callables,
            agent_registry=self._agents,
            score_fn=self._score_fn,
            pricer=self._pricer,
            cache=self._cache,
            agent_factory=self._agent_factory_given,
            is_blank=self._is_blank,
            config=config,
            topology_gene_name=self._gene_name,
            cost_estimator=self._cost_estimator,
            timer=self._timer,
            workers=self._workers,
            executor=executor,
            rate_budget=rate_budget,
            hydration_hooks=self._hooks,
            call_cache=call_cache,
        )

    def check(self, spec: Any) -> CheckResult:
        """Check a candidate exactly as `evaluate` does before it runs anything; never raises
        for a bad candidate.

        The checks, in order (reason codes in the module docstring): parse with
        `parse_limits`; `max_depth`; `allowed_step_kinds`; inline agents while they are
        disabled; hydration (every registered name resolved first, then the topology built and
        discarded). A valid candidate gives `ok` with the parsed spec, its canonical hash,
        `n_agents` and `depth`.

        Args:
            spec: a `TopologySpec`, its JSON text, or a mapping.
        """
        return self._check(spec)[0]

    def _check(
        self, spec: Any, prompt_overrides: Mapping[str, str] | None = None
    ) -> tuple[CheckResult, RunnableTopology | None]:
        """`check`, with the hydrated topology when the candidate is valid."""
        cfg = self._config
        try:
            parsed = parse_topology(spec, self.parse_limits)
        except SpecLimitError as exc:
            return CheckResult(reason=f"{exc.limit}_exceeded: {exc}"), None
        except SpecError as exc:
            return CheckResult(reason=f"invalid_spec: {exc}"), None
        metrics = spec_metrics(parsed, agent_names=self._agents.names())
        result = CheckResult(
            spec=parsed, spec_hash=spec_hash(parsed), n_agents=metrics.n_agents, depth=metrics.depth
        )
        reason = check_max_depth(metrics.depth, cfg.max_depth) or check_allowed_kinds(
            parsed, cfg.allowed_step_kinds
        )
        if reason is None and not cfg.allow_inline_agents:
            path = inline_agent_path(parsed)
            if path is not None:
                reason = (
                    f"inline_agents_disabled: inline AgentSpec at {path}; use a registered "
                    "agent name"
                )
                if self._agent_factory_given is not None:  # the reference library's form
                    reason += (
                        " (this evaluator has an agent_factory: pass allow_inline_agents=True "
                        "to accept inline agents)"
                    )
        if reason is not None:
            return result.model_copy(update={"reason": reason}), None
        try:
            topology: RunnableTopology = topology_from_spec(
                parsed,
                callable_registry=self._callables,
                agent_registry=self._agents,
                agent_factory=self._agent_factory,
                allow_inline_agents=cfg.allow_inline_agents,
                prompt_overrides=prompt_overrides,
                hooks=self._hooks,
            )
        except UnknownNamesError as exc:
            refused = result.model_copy(
                update={
                    "reason": f"unknown_names: {exc}",
                    "unknown_names": tuple(exc.unknown),
                    "known_names": {k: tuple(v) for k, v in exc.known.items()},
                }
            )
            return refused, None
        except Exception as exc:  # a proposal must never crash the search
            reason = f"hydration_error: {type(exc).__name__}: {exc}"
            return result.model_copy(update={"reason": reason}), None
        return result, topology

    def _run_context(
        self, digest: str, split: str, n_agents: int, depth: int, call_cache: CallCache | None
    ) -> RunContext:
        """What every run of one evaluation shares (also built by a forked worker)."""
        cfg = self._config
        return RunContext(
            spec_hash=digest,
            split=split,
            n_agents=n_agents,
            depth=depth,
            pricer=self._pricer,
            score_fn=self._score_fn,
            is_blank=self._is_blank,
            timeout_s=cfg.example_timeout_s,
            latency_source=cfg.latency_source,
            capture_traces=cfg.capture_traces,
            call_cache=call_cache,
            clock=self._timer,
        )

    def _prepare_in_worker(self, command: Command, call_cache: CallCache | None) -> Prepared:
        """In a forked worker: the topology and run context of one evaluation's `command`
        (hydrated here, from the checked spec's JSON, as the parent hydrated it)."""
        spec_json, overrides, digest, split, n_agents, depth = command
        checked, topology = self._check(spec_json, overrides)
        if topology is None:
            raise EvaluationError(f"the worker could not hydrate the candidate: {checked.reason}")
        return topology, self._run_context(digest, split, n_agents, depth, call_cache)

    def _rejected(self, split: str, check: CheckResult) -> CandidateEvaluation:
        reason = check.reason or "invalid_spec"
        return CandidateEvaluation(
            spec_hash=check.spec_hash,
            split=split,
            status="rejected",
            reason=reason,
            n_trials=self._config.n_trials,
            n_agents=check.n_agents,
            depth=check.depth,
            cost_usd=0.0,
            valid=False,
            invalid_reason=reason,
            unknown_names=list(check.unknown_names),
            known_names={k: list(v) for k, v in check.known_names.items()},
        )

    async def evaluate(
        self,
        spec: Any,
        examples: Sequence[GoldExample],
        *,
        split: str = "validation",
        on_example: ExampleCallback | None = None,
        prompt_overrides: Mapping[str, str] | None = None,
    ) -> CandidateEvaluation:
        """Evaluate one candidate on `examples`; never raises for a bad candidate or run.

        Args:
            spec: a `TopologySpec`, its JSON text, or a mapping.
            examples: the gold examples (ids unique; an example without `id` is keyed by a
                content hash, see `example_key`).
            split: recorded on the result, e.g. `"validation"`, `"minibatch"`, `"test"`.
            on_example: called (synchronously, on the event loop) with each `ExampleResult` as it
                completes, cache hits included; an exception it raises cancels the remaining
                runs and propagates.
            prompt_overrides: target name (`"<agent>.system_prompt"`) -> system prompt, applied
                at hydration (`core.hydrate.topology_from_spec`); a bad target rejects the
                candidate with `hydration_error`. With overrides, the results' and the cache's
                `spec_hash` is `prompted_hash(spec_hash, overrides)`, so runs with different
                prompts never share cache entries.

        Returns:
            The `CandidateEvaluation`: `rejected` (nothing ran), or `ok` / `degenerate` /
            `invalid` with every run's result.

        Raises:
            EvaluationError: `examples` is empty or two examples share an id (misuse, not a
                candidate's fault).
        """
        if not examples:
            raise EvaluationError("evaluate() needs at least one example")
        keys = [example_key(e) for e in examples]
        dupes = sorted(k for k, n in Counter(keys).items() if n > 1)  # (not keys.count: n^2)
        if dupes:
            raise EvaluationError(f"duplicate example ids {dupes}: give each example a unique id")
        checked, topology = self._check(spec, prompt_overrides)
        if topology is None:
            return self._rejected(split, checked)
        digest = prompted_hash(checked.spec_hash, prompt_overrides)
        n_agents, depth = checked.n_agents or 0, checked.depth or 0
        cfg = self._config
        ctx = self._run_context(digest, split, n_agents, depth, self._call_cache)
        n_trials = cfg.n_trials
        slots: list[ExampleResult | None] = [None] * (len(examples) * n_trials)
        fresh: list[ExampleResult] = []
        semaphore = asyncio.Semaphore(cfg.concurrency)

        def done(index: int, result: ExampleResult, cacheable: bool) -> None:
            if cacheable and self._cache is not None:
                self._cache.put(result)  # the measured figures: an estimate is applied on top
            result = self._estimated(result)
            fresh.append(result)
            slots[index] = result
            if on_example is not None:
                on_example(result)

        async def run_one(job: Job) -> None:
            index, example, key, trial = job
            async with semaphore:
                result, cacheable = await run_example(topology, example, key, trial, ctx)
            done(index, result, cacheable)

        pending: list[Job] = []
        for i, (example, key) in enumerate(zip(examples, keys, strict=True)):
            for trial in range(n_trials):
                index = i * n_trials + trial
                hit = None if self._cache is None else self._cache.get(digest, key, trial)
                if hit is None:
                    memo = example_memo.lookup(ctx, key, trial)  # the run's own result
                    if memo is None:
                        pending.append((index, example, key, trial))
                    else:
                        done(index, memo, True)
                    continue
                cached = self._estimated(hit.model_copy(update={"cached": True, "split": split}))
                slots[index] = cached
                if on_example is not None:
                    on_example(cached)
        executor = self._executor
        try:
            if pending and isinstance(executor, RemoteExecutor):
                assert checked.spec is not None
                batch = RemoteBatch(
                    spec_json=checked.spec.model_dump_json(),
                    prompt_overrides=dict(prompt_overrides) if prompt_overrides else None,
                    spec_hash=digest,
                    split=split,
                    n_agents=n_agents,
                    depth=depth,
                    config=cfg.model_dump(mode="json"),
                    items=tuple((index, key, trial) for index, _, key, trial in pending),
                    learned=learned_artefacts(checked.spec, self._callables),
                )

                def done_once(index: int, result: ExampleResult, cacheable: bool) -> None:
                    if slots[index] is None:  # a retried batch's run is recorded once
                        done(index, result, cacheable)

                await executor.run(batch, done_once, self._call_cache)
            elif (
                self._pool is None
                or self._rate_budget is not None  # a budget is this process's: no forking
                or not self._pool.shares(pending)
            ):
                with use_rate_budget(self._rate_budget):
                    async with asyncio.TaskGroup() as group:
                        for job in pending:
                            group.create_task(run_one(job))
            else:
                assert checked.spec is not None
                command: Command = (
                    checked.spec.model_dump_json(),
                    dict(prompt_overrides) if prompt_overrides else None,
                    digest,
                    split,
                    n_agents,
                    depth,
                )
                await self._pool.run(
                    pending,
                    command,
                    prepare=self._prepare_in_worker,
                    call_cache=self._call_cache,
                    concurrency=cfg.concurrency,
                    run_here=run_one,
                    done=done,
                )
        except BaseExceptionGroup as failed:  # only on_example or the cache can raise here
            raise failed.exceptions[0] from None
        finally:
            if self._call_cache is not None:
                self._call_cache.flush()

        results = [r for r in slots if r is not None]
        verdict = judge(
            results,
            n_examples=len(examples),
            n_trials=n_trials,
            example_weights=[e.weight for e in examples],
            weights=cfg.weights,
            degenerate_threshold=cfg.degenerate_threshold,
        )
        status: CandidateStatus = verdict.status
        return CandidateEvaluation(
            spec_hash=digest,
            split=split,
            status=status,
            reason=verdict.reason,
            results=results,
            bundles=verdict.bundles,
            n_examples=len(examples),
            n_trials=n_trials,
            accuracy=verdict.accuracy,
            cost_usd=verdict.cost_usd,
            latency_ms=verdict.latency_ms,
            stdev=verdict.stdev,
            n_agents=n_agents,
            depth=depth,
            aggregate_score=verdict.aggregate_score,
            error_rate=verdict.error_rate,
            blank_rate=verdict.blank_rate,
            n_model_requests=sum(r.requests for r in fresh),
            fresh_cost_usd=fsum_finite([r.cost_usd for r in fresh]),
            n_cached=len(results) - len(fresh),
            valid=status == "ok",
            invalid_reason=None if status == "ok" else verdict.reason,
        )

    # -- the reference library's per-example API ---------------------------------------------

    def _estimated(self, result: ExampleResult) -> ExampleResult:
        """`result` with its cost replaced by the cost estimator's, when there is one."""
        estimator = self._cost_estimator
        if estimator is None:
            return result
        b = result.bundle
        usage = RunUsage(
            requests=result.requests, input_tokens=b.input_tokens, output_tokens=b.output_tokens
        )
        raw = {**b.raw, "cost_source": "estimate", "measured_cost_usd": b.cost_usd}
        update: dict[str, Any] = {"raw": raw}
        try:
            value = float(estimator(usage))
        except Exception as exc:
            update.update(
                status="invalid",
                error=f"cost_estimator_error: {type(exc).__name__}: {exc}",
                cost_usd=math.nan,
            )
        else:
            update["cost_usd"] = value
            if not math.isfinite(value) or value < 0:
                update.update(
                    status="invalid", error=f"cost_estimator_invalid: {value!r} is not a cost"
                )
        return result.model_copy(update={"bundle": b.model_copy(update=update)})

    async def evaluate_one(self, decoded: Mapping[str, Any], example: GoldExample) -> MetricBundle:
        """Run the decoded genome's topology on one example; never raises for a bad candidate.

        Args:
            decoded: gene name -> spec (a `TopologySpec`, its JSON text or a mapping); the
                topology is under `topology_gene_name`.
            example: the gold example.

        Returns:
            Its `MetricBundle` (see `evaluate_batch`).
        """
        return (await self.evaluate_batch(decoded=decoded, batch=[example]))[0]

    async def evaluate_batch(
        self,
        decoded: Mapping[str, Any],
        batch: Sequence[GoldExample],
        *,
        split: str = "validation",
    ) -> list[MetricBundle]:
        """Run the decoded genome's topology on `batch`, one `MetricBundle` per example, in order.

        Each bundle's `raw` has `n_agents`, `depth` (0 when the spec does not parse) and
        `cost_source` (`"measured"` or `"estimate"`), and on a failure `error` (the message)
        and `error_type`: `"MissingGene"` when `decoded` has no `topology_gene_name`, the
        rejection code (e.g. `"unknown_names"`, `"max_depth_exceeded"`) for a candidate refused
        before it ran, the exception's type name for a run that raised. A failed example has
        accuracy 0 and status `"error"`. Never raises for a bad candidate or run.

        Args:
            decoded: gene name -> spec.
            batch: the gold examples (ids unique); empty gives `[]`.
            split: recorded on the run results, as in `evaluate`.
        """
        if not batch:
            return []
        source = "estimate" if self._cost_estimator is not None else "measured"
        spec = decoded.get(self._gene_name)
        if spec is None:
            known = ", ".join(sorted(str(k) for k in decoded)) or "(none)"
            message = f"the decoded genome has no gene {self._gene_name!r} (genes: {known})"
            return [_failed(message, "MissingGene", 0, 0, source) for _ in batch]
        try:
            ev = await self.evaluate(spec, batch, split=split)
        except EvaluationError as exc:  # misuse of the batch (duplicate ids): still no raise
            return [_failed(str(exc), "EvaluationError", 0, 0, source) for _ in batch]
        n_agents, depth = ev.n_agents or 0, ev.depth or 0
        if ev.status == "rejected":
            reason = ev.reason or "invalid_spec"
            code = reason.split(":", 1)[0]
            return [_failed(reason, code, n_agents, depth, source) for _ in batch]
        out: list[MetricBundle] = []
        for bundle in ev.bundles:
            raw: dict[str, Any] = {
                **bundle.raw,
                "n_agents": n_agents,
                "depth": depth,
                "cost_source": source,
            }
            if bundle.status != "ok":
                error = bundle.error or bundle.status
                raw["error"] = error
                raw["error_type"] = error.split(":", 1)[0] if ":" in error else bundle.status
            out.append(bundle.model_copy(update={"raw": raw}))
        return out


def prompted_hash(digest: str, prompt_overrides: Mapping[str, str] | None) -> str:
    """The hash results are keyed by for spec `digest` run with `prompt_overrides`.

    `digest` itself when there are none; else `"<digest>+p<16 hex>"`, the hex being the first
    16 of the sha256 of the overrides as canonical JSON (sorted keys).
    """
    if not prompt_overrides:
        return digest
    text = json.dumps(dict(prompt_overrides), sort_keys=True, ensure_ascii=False)
    return f"{digest}+p{hashlib.sha256(text.encode()).hexdigest()[:16]}"


def _failed(message: str, kind: str, n_agents: int, depth: int, source: str) -> MetricBundle:
    """A zero-accuracy bundle for an example that did not run."""
    return MetricBundle(
        accuracy=0.0,
        status="error",
        error=message,
        raw={
            "error": message,
            "error_type": kind,
            "n_agents": n_agents,
            "depth": depth,
            "cost_source": source,
        },
    )
