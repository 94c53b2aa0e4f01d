"""The search loop: `SearchRun`, a live handle on one run (ask/tell, budgets, events, promotion).

See `core.search.engine` for the public entry points and the rules in prose.
"""

from __future__ import annotations

import asyncio
import itertools
import math
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from core.errors import BudgetError, DegenerateSeedError, SearchError
from core.evaluation._records import CandidateEvaluation, ExampleResult
from core.evaluation._run import example_key
from core.evaluation.evaluator import TopologyEvaluator
from core.evaluation.metrics import GoldExample, aggregate_score
from core.hydrate import AgentRegistry, CallableRegistry
from core.ir import TopologySpec
from core.ir.dataflow import EffectTable
from core.search._checker import CandidateChecker
from core.search._resume import plan_resume
from core.search._space import build_search_space, minibatch_indices, minibatch_size_for
from core.search._stream import EventKey, EventStream, Subscriber
from core.search.archive import Archive, ArchiveEntry, ObjectiveLike
from core.search.budget import Budget, BudgetTracker, StopSignal
from core.search.events import (
    ArchiveSnapshot,
    CandidateEvaluated,
    CandidateProposed,
    ExampleEvaluated,
    LogMessage,
    RunFinished,
    RunStarted,
    SearchEvent,
)
from core.search.gene import TopologyGene
from core.search.pareto import DEFAULT_OBJECTIVES
from core.search.result import CandidateRecord, OptimizationResult
from core.search.strategies.base import AskContext, CheckResult, Proposal, Strategy
from core.storage.journal import new_run_id

__all__ = ["SearchRun", "Subscriber", "build_search_space", "minibatch_indices"]

StopKind = Literal["completed", "max_evaluations", "patience", "max_usd", "max_wall_s", "user"]

_REPORT_ALLOWED: frozenset[str] = frozenset({"completed", "max_evaluations", "patience"})
"""Stops after which the final report may spend more (re-scoring, test split): count limits.
Money, time and a person's stop are never exceeded by the report."""

_IDLE_GENERATIONS = 3
"""Generations in a row without any proposal after which a run ends (`strategy exhausted`)."""


@dataclass(slots=True)
class _Cand:
    """Live bookkeeping of one evaluated candidate."""

    idx: int
    spec: TopologySpec
    spec_hash: str
    archive_idx: int
    full: bool
    valid: bool


def _finite_or_none(value: float | None) -> float | None:
    return value if value is not None and math.isfinite(value) else None


def _diagnosis(ev: CandidateEvaluation) -> str:
    errors: list[str] = []
    for r in ev.results:
        if r.error and r.error not in errors:
            errors.append(r.error)
        if len(errors) == 3:
            break
    text = (
        f"{ev.reason or 'degenerate'}; blank outputs {ev.blank_rate:.0%}, errors "
        f"{ev.error_rate:.0%} of {len(ev.results)} runs"
    )
    if errors:
        text += "; first errors: " + " | ".join(errors)
    return text + (
        ". The seed topology does not produce answers: check the agents' models and keys, the "
        "registered functions, and the problem's blank-output rule before searching."
    )


def _exhausted_reason(records: Sequence[CandidateRecord]) -> str:
    """Why a run ended after `_IDLE_GENERATIONS` generations with nothing evaluated: nothing
    proposed, or only duplicates and rejected proposals (with the last rejection's code)."""
    n = _IDLE_GENERATIONS
    if not records:
        return f"strategy exhausted: no proposals for {n} generations"
    n_dup = sum(1 for r in records if r.status == "duplicate")
    rejected = [r for r in records if r.status == "rejected"]
    text = (
        f"strategy exhausted: nothing new to evaluate for {n} generations ({len(records)} "
        f"proposals: {n_dup} duplicate, {len(rejected)} rejected"
    )
    if rejected and rejected[-1].reason:
        text += f", last {rejected[-1].reason.split(':', 1)[0].strip()}"
    return text + ")"


class SearchRun:
    """One search run: the loop around a strategy (a live handle; `run()` once).

    Args:
        strategy: proposes candidates (`Strategy`); its config gives generations, minibatch
            size, seed, weights and the archive view.
        gene: the searched topology (seed, depth limit, allowed kinds, constraints).
        evaluator: evaluates candidates, and checks every proposal before anything runs
            (`evaluator.check`, under the gene's `max_depth` and `allowed_step_kinds`; it
            should enforce them too); needs a cache to resume.
        validation: the validation split (what the search scores on).
        callable_registry: registered functions (the designer's prompt and the operators'
            names; checks use the evaluator's registries, normally the same).
        agent_registry: registered agents.
        test: a held-out split; the winner is evaluated on it once, at the end.
        roles: callable role -> names (a problem's `roles`), for the designer and operators.
        effects: what each registered name reads and produces (a problem's `effects`): static
            rejections, no-op normalisation and the structure operators use it.
        problem: the problem's name (run records).
        problem_description: shown to the designer.
        problem_config: the problem's settings as JSON, for `RunStarted.problem_config`.
        budget: limits (default: none; then the strategy's `n_generations` must be set).
        run_id: the run's id; default a new one (a resumed run keeps the recorded id).
        subscribers: called with every event, in order.
        resume_from: events recorded by an interrupted run with the same inputs: recorded
            example results are served from the evaluation cache and recorded proposals
            replayed, the same deterministic loop is run again, and only events not recorded
            yet are emitted (their `seq` continuing the recorded ones).
        stop_file: a path whose existence stops the run cleanly.
        handle_sigint: install the first-Ctrl-C-stops-cleanly handler (main thread only).
        objectives: the front's objectives (default accuracy, cost, latency, agents, depth).
        clock: Unix time for event timestamps (tests pass a fake).
        timer: monotonic seconds for the wall-time budget (tests pass a fake).
    """

    def __init__(
        self,
        strategy: Strategy,
        *,
        gene: TopologyGene,
        evaluator: TopologyEvaluator,
        validation: Sequence[GoldExample],
        callable_registry: CallableRegistry,
        agent_registry: AgentRegistry,
        test: Sequence[GoldExample] | None = None,
        roles: Mapping[str, Sequence[str]] | None = None,
        effects: EffectTable | None = None,
        problem: str = "",
        problem_description: str = "",
        problem_config: Mapping[str, Any] | None = None,
        budget: Budget | None = None,
        run_id: str | None = None,
        subscribers: Sequence[Subscriber] = (),
        resume_from: Sequence[SearchEvent] | None = None,
        stop_file: str | None = None,
        handle_sigint: bool = True,
        objectives: Sequence[ObjectiveLike] = DEFAULT_OBJECTIVES,
        clock: Callable[[], float] = time.time,
        timer: Callable[[], float] = time.monotonic,
    ) -> None:
        if not validation:
            raise SearchError("the validation split is empty: a search needs examples to score")
        self.strategy = strategy
        self.config = strategy.config
        self.gene = gene
        self.evaluator = evaluator
        self.validation: list[GoldExample] = list(validation)
        self.test: list[GoldExample] | None = list(test) if test else None
        self.problem = problem
        self.problem_config: dict[str, Any] = dict(problem_config or {})
        self.budget = budget or Budget()
        self.stop = StopSignal(stop_file)
        self.handle_sigint = handle_sigint
        self.space = build_search_space(
            gene,
            callable_registry=callable_registry,
            agent_registry=agent_registry,
            roles=roles,
            problem_description=problem_description,
            effects=effects,
        )
        self.check = CandidateChecker(evaluator, gene, effects)
        self.archive = Archive(
            self.config.archive_strategy, self.config.archive_size, objectives=objectives
        )
        self._weights = self.config.weights
        self.resumed = bool(resume_from)
        plan = plan_resume(resume_from, run_id, evaluator.cache) if resume_from else None
        if plan is not None:
            run_id = plan.run_id or run_id
        self.run_id = run_id or new_run_id()
        self._recorded_proposals: dict[int, Proposal] = plan.proposals if plan else {}
        self._stream = EventStream(
            self.run_id,
            subscribers,
            clock,
            next_seq=plan.next_seq if plan else 0,
            recorded=plan.recorded if plan else frozenset(),
        )
        self.tracker = BudgetTracker(
            self.budget, clock=timer, wall_offset_s=plan.wall_offset_s if plan else 0.0
        )
        # state
        self._history: list[CandidateRecord] = []
        self._cands: dict[int, _Cand] = {}
        self._by_hash: dict[str, int] = {}
        self._archive_to_cand: list[int] = []
        self._best_full: tuple[float, int] | None = None
        self._snapshots = 0
        self._started = False
        # one fixed minibatch per run (config.minibatch_margin), set after the seed
        self._fixed_minibatch: list[GoldExample] | None = None
        self._fingerprints: dict[tuple[Any, ...], int] = {}
        self._mb_points: dict[int, tuple[float, float, float]] = {}

    # -- public ------------------------------------------------------------------------------

    def request_stop(self, reason: str = "stop requested") -> None:
        """Stop the run cleanly at its next check (thread-safe), e.g. from the studio."""
        self.stop.request(reason)

    @property
    def history(self) -> tuple[CandidateRecord, ...]:
        """Every candidate so far, in candidate order."""
        return tuple(self._history)

    async def run(self) -> OptimizationResult:
        """Run the search to its end and report.

        Returns:
            The `OptimizationResult` (winner and front on the full validation split).

        Raises:
            BudgetError: the budget allows no work, or nothing bounds the run.
            DegenerateSeedError: the seed's evaluation is degenerate (with a diagnosis).
            SearchError: the seed is rejected or its evaluation is invalid.
            Whatever `strategy.preflight` raises (e.g. F2: a provider that cannot take the
            designer's output schema), before anything runs or is paid for.
        """
        if self._started:
            raise SearchError("a SearchRun runs once: build a new one (or resume from its events)")
        self._started = True
        self.budget.validate_allows_work()
        if self.config.n_generations is None and not self.budget.bounded:
            raise BudgetError(
                "nothing bounds this run: set the strategy's n_generations or a budget limit"
            )
        self.strategy.preflight(self.space)
        guard = self.stop.sigint_handler() if self.handle_sigint else None
        if guard is not None:
            guard.__enter__()
        try:
            self._emit_started()
            try:
                kind, reason = await self._search()
                return await self._finish(kind, reason)
            except DegenerateSeedError as exc:
                self._emit(LogMessage, level="error", message=f"{exc}: {exc.diagnosis}")
                self._finished("failed", f"{exc}: {exc.diagnosis}")
                raise
            except (asyncio.CancelledError, KeyboardInterrupt) as exc:
                how = (
                    "cancelled" if isinstance(exc, asyncio.CancelledError) else "KeyboardInterrupt"
                )
                requested = self.stop.reason()  # e.g. a first Ctrl-C, before the second one
                self._finished("stopped", how if requested is None else f"{requested}, then {how}")
                raise
            except Exception as exc:
                self._finished("failed", f"{type(exc).__name__}: {exc}")
                raise
        finally:
            if guard is not None:
                guard.__exit__(None, None, None)

    # -- events ------------------------------------------------------------------------------

    def _emit(self, cls: type[Any], /, key: EventKey | None = None, **fields: Any) -> None:
        self._stream.emit(cls, key, **fields)

    def _log(self, message: str, level: str = "info") -> None:
        self._stream.log(message, level)

    def _emit_started(self) -> None:
        self._emit(
            RunStarted,
            problem=self.problem,
            strategy=self.strategy.name,
            seed=self.config.seed,
            config={
                **self.strategy.describe(),
                "budget": self.budget.model_dump(mode="json"),
                "gene": {
                    "name": self.gene.name,
                    "max_depth": self.gene.max_depth,
                    "allowed_step_kinds": list(self.gene.allowed_step_kinds),
                    "constraints": self.gene.constraints,
                },
                "evaluator": self.evaluator.config.model_dump(mode="json"),
                "n_validation": len(self.validation),
                "n_test": len(self.test or []),
            },
            problem_config=self.problem_config,
            resumed=self.resumed,
        )

    def _finished(self, status: str, reason: str, best_idx: int | None = None) -> None:
        static = {
            f"static_rejected:{code}": float(n)
            for code, n in sorted(self.check.static_rejections.items())
        }
        if static:
            self._log(
                "rejected before any model call: "
                + ", ".join(f"{k.split(':', 1)[1]} {int(v)}" for k, v in static.items())
            )
        self._emit(
            RunFinished,
            status=status,
            reason=reason,
            best_idx=best_idx,
            budget_used={**self.tracker.used(), **static},
        )

    def _snapshot(self, generation: int) -> None:
        front = [self._archive_to_cand[i] for i in self.archive.pareto_indices("validation")]
        best = self._best_full
        self._snapshots += 1
        self._emit(
            ArchiveSnapshot,
            key=("s", self._snapshots),
            generation=generation,
            entries=list(self._archive_to_cand),
            front=front,
            best_idx=None if best is None else best[1],
            best_score=None if best is None else best[0],
            hypervolume=_finite_or_none(self.archive.hypervolume(split="validation")),
            n_evaluations=self.tracker.example_evaluations,
            cost_usd_total=self.tracker.usd,
        )

    # -- evaluation --------------------------------------------------------------------------

    def _on_example(self, candidate_idx: int) -> Callable[[ExampleResult], None]:
        def record(r: ExampleResult) -> None:
            key = (r.spec_hash, r.example_id, r.trial)
            if not self.tracker.record_example(key, r.cost_usd, fresh=not r.cached):
                return
            self._emit(
                ExampleEvaluated,
                key=("e", *key),
                candidate_idx=candidate_idx,
                spec_hash=r.spec_hash,
                split=r.split,
                example_id=r.example_id,
                trial=r.trial,
                accuracy=r.accuracy,
                cost_usd=r.cost_usd,
                latency_ms=r.latency_ms,
                input_tokens=r.bundle.input_tokens,
                output_tokens=r.bundle.output_tokens,
                requests=r.requests,
                status=r.status,
                error=r.error,
                output_summary=r.output_summary,
                cached=r.cached,
                trace=r.trace,
            )

        return record

    async def _evaluate(
        self, candidate_idx: int, spec: TopologySpec, examples: Sequence[GoldExample], split: str
    ) -> CandidateEvaluation:
        return await self.evaluator.evaluate(
            spec, examples, split=split, on_example=self._on_example(candidate_idx)
        )

    def _score(self, ev: CandidateEvaluation, examples: Sequence[GoldExample]) -> float:
        if not ev.bundles or len(ev.bundles) != len(examples):
            return math.nan
        return aggregate_score(ev.bundles, self._weights, [e.weight for e in examples])

    def _valid(self, ev: CandidateEvaluation, score: float) -> bool:
        return ev.valid and math.isfinite(score)

    def _emit_evaluated(
        self,
        idx: int,
        ev: CandidateEvaluation,
        split: str,
        score: float,
        valid: bool,
        same_as: int | None = None,
    ) -> None:
        self._emit(
            CandidateEvaluated,
            key=("c", idx, split),
            candidate_idx=idx,
            spec_hash=ev.spec_hash,
            split=split,
            n_examples=ev.n_examples,
            accuracy=ev.accuracy,
            cost_usd=ev.cost_usd,
            latency_ms=ev.latency_ms,
            n_agents=ev.n_agents or 0,
            depth=ev.depth or 0,
            aggregate_score=score,
            valid=valid,
            invalid_reason=None if valid else (ev.reason or "non_finite_score"),
            error_rate=ev.error_rate,
            blank_rate=ev.blank_rate,
            stdev=ev.stdev,
            same_as=same_as,
        )

    def _archive_entry(
        self,
        *,
        generation: int,
        spec: TopologySpec,
        ev: CandidateEvaluation,
        score: float,
        valid: bool,
        split: str,
        thought: str,
        parent_idx: int | None,
    ) -> ArchiveEntry:
        parent_archive = None
        if parent_idx is not None and parent_idx in self._cands:
            parent_archive = self._cands[parent_idx].archive_idx
        return ArchiveEntry(
            generation=generation,
            spec_json=spec.model_dump_json(),
            bundles=tuple(ev.bundles),
            aggregate_score=score,
            thought=thought,
            parent_idx=parent_archive,
            split=split,
            spec_hash=ev.spec_hash,
            invalid_reason=None if valid else (ev.reason or "non_finite_score: aggregate"),
        )

    def _add_to_archive(self, idx: int, entry: ArchiveEntry) -> int:
        a_idx = self.archive.add(entry)
        if a_idx == len(self._archive_to_cand):
            self._archive_to_cand.append(idx)
        return a_idx

    def _record(self, record: CandidateRecord) -> CandidateRecord:
        if record.candidate_idx < len(self._history):
            self._history[record.candidate_idx] = record
        else:
            self._history.append(record)
        return record

    def _note_full_score(self, idx: int, score: float, valid: bool) -> bool:
        """Track the best full-validation score; True when `idx` is a new best."""
        if not valid:
            return False
        if self._best_full is None or score > self._best_full[0]:
            self._best_full = (score, idx)
            return True
        return False

    # -- the loop ----------------------------------------------------------------------------

    def _stop_reason(self, *, next_evaluation: bool) -> tuple[StopKind, str] | None:
        reason = self.stop.reason()
        if reason is not None:
            return "user", reason
        reason = self.tracker.exhausted(next_evaluation=next_evaluation)
        if reason is None:
            return None
        kind: StopKind = "max_evaluations"
        for name in ("max_usd", "max_wall_s", "patience"):
            if reason.startswith(name):
                kind = name  # type: ignore[assignment]
        return kind, reason

    async def _search(self) -> tuple[StopKind, str]:
        await self._seed()
        n_gen = self.config.n_generations
        generations = range(n_gen) if n_gen is not None else itertools.count()
        idle = 0
        idle_records: list[CandidateRecord] = []  # what the idle generations proposed
        for generation in generations:
            stop = self._stop_reason(next_evaluation=True)
            if stop is not None:
                return stop
            first = len(self._history)
            outcome = await self._generation(generation)
            if isinstance(outcome, tuple):
                self._snapshot(generation)
                return outcome
            if outcome == 0:
                idle += 1
                idle_records += self._history[first:]
            else:
                idle, idle_records = 0, []
            self._snapshot(generation)
            if idle >= _IDLE_GENERATIONS:
                return "completed", _exhausted_reason(idle_records)
        return "completed", f"{n_gen} generations done"

    async def _seed(self) -> None:
        seed = self.gene.initial
        check = self.check(seed)
        idx = 0
        spec_json = seed.model_dump_json()
        self._announce(
            idx,
            -1,
            Proposal(spec=seed, operator="seed"),
            spec_hash=check.spec_hash,
            spec_json=spec_json,
            parent_idx=None,
            status="proposed" if check.ok else "rejected",
            reason=check.reason,
        )
        if not check.ok:
            raise SearchError(f"the seed topology is rejected: {check.reason}")
        self._remember(check, idx)
        self._log(f"evaluating the seed on {len(self.validation)} validation examples")
        ev = await self._evaluate(idx, seed, self.validation, "validation")
        self.tracker.evaluations += 1
        score = self._score(ev, self.validation)
        valid = self._valid(ev, score)
        self._emit_evaluated(idx, ev, "validation", score, valid)
        if ev.status == "degenerate":
            raise DegenerateSeedError(
                "the seed topology's evaluation is degenerate", diagnosis=_diagnosis(ev)
            )
        if not valid:
            raise SearchError(
                f"the seed topology's evaluation is not valid: {ev.reason or 'non-finite score'}"
            )
        entry = self._archive_entry(
            generation=-1,
            spec=seed,
            ev=ev,
            score=score,
            valid=True,
            split="validation",
            thought="",
            parent_idx=None,
        )
        a_idx = self._add_to_archive(idx, entry)
        self._cands[idx] = _Cand(idx, seed, check.spec_hash, a_idx, full=True, valid=True)
        self._note_full_score(idx, score, True)
        self._record(
            CandidateRecord(
                candidate_idx=idx,
                generation=-1,
                operator="seed",
                spec_hash=check.spec_hash,
                spec_json=spec_json,
                split="validation",
                promoted=False,
                score=score,
                accuracy=ev.accuracy,
                cost_usd=ev.cost_usd,
                latency_ms=ev.latency_ms,
                n_agents=ev.n_agents,
                depth=ev.depth,
                valid=True,
            )
        )
        self._log(f"seed: score {score:.4f}, accuracy {ev.accuracy:.3f}")
        self._fix_minibatch(ev)
        self._snapshot(-1)

    def _fix_minibatch(self, seed_ev: CandidateEvaluation) -> None:
        """With `minibatch_margin`: draw the run's one minibatch, sized from the seed's measured
        accuracy (`minibatch_size_for`), and fingerprint the seed on it."""
        margin = self.config.minibatch_margin
        if margin is None:
            return
        n_val = len(self.validation)
        size = minibatch_size_for(seed_ev.accuracy, margin, self.config.minibatch_size, n_val)
        idx = minibatch_indices(n_val, size, self.config.seed, -1)
        self._fixed_minibatch = [self.validation[i] for i in idx]
        self._log(
            f"fixed minibatch: {size} of {n_val} validation examples for every candidate (seed "
            f"accuracy {seed_ev.accuracy:.3f}, 95% margin {margin:g}: "
            f"ceil(1.96^2 p(1-p) / margin^2), at least {self.config.minibatch_size})"
        )
        ids = {_example_id(e) for e in self._fixed_minibatch}
        self._remember_behaviour(0, seed_ev, ids)

    def _remember_behaviour(
        self, idx: int, ev: CandidateEvaluation, ids: set[str] | None = None
    ) -> int | None:
        """Fingerprint `ev` on the fixed minibatch's examples; the earlier candidate with the same
        per-example results, or None (then `idx` is remembered under it)."""
        rows = sorted(
            (r.example_id, r.trial, r.status, r.accuracy, r.cost_usd, r.latency_ms)
            for r in ev.results
            if ids is None or r.example_id in ids
        )
        key = tuple(rows)
        twin = self._fingerprints.get(key)
        if twin is None:
            self._fingerprints[key] = idx
            pts = [r for r in ev.results if ids is None or r.example_id in ids]
            if pts:
                n = len(pts)
                self._mb_points[idx] = (
                    math.fsum(r.accuracy for r in pts) / n,
                    math.fsum(r.cost_usd for r in pts) / n,
                    math.fsum(r.latency_ms for r in pts) / n,
                )
        return twin

    def _non_dominated_on_minibatch(self, idx: int) -> bool:
        """No other distinct candidate is at least as good on the fixed minibatch's accuracy,
        cost and latency and better on one."""
        mine = self._mb_points.get(idx)
        if mine is None:
            return False
        for other, pt in self._mb_points.items():
            if other == idx:
                continue
            ge = pt[0] >= mine[0] and pt[1] <= mine[1] and pt[2] <= mine[2]
            if ge and pt != mine:
                return False
        return True

    def _context(self, generation: int) -> AskContext:
        remaining = None
        if self.budget.max_evaluations is not None:
            remaining = max(0, self.budget.max_evaluations - self.tracker.evaluations)
        return AskContext(
            generation=generation,
            space=self.space,
            seed_spec=self.gene.initial,
            archive=self.archive,
            archive_candidates=tuple(self._archive_to_cand),
            history=tuple(self._history),
            next_candidate_idx=len(self._history),
            check=self._check,
            known_hashes=frozenset(self._by_hash),
            recorded=dict(self._recorded_proposals),
            max_proposals=remaining,
        )

    def _check(self, spec: TopologySpec | str) -> CheckResult:
        return self.check(spec)

    async def _generation(self, generation: int) -> int | tuple[StopKind, str]:
        """Ask, then process each proposal; the number evaluated, or the stop that ended it."""
        ctx = self._context(generation)
        proposals = await self.strategy.ask(ctx)
        if self._fixed_minibatch is not None:
            minibatch = self._fixed_minibatch
        else:
            examples_idx = minibatch_indices(
                len(self.validation), self.config.minibatch_size, self.config.seed, generation
            )
            minibatch = [self.validation[i] for i in examples_idx]
        records: list[CandidateRecord] = []
        stop: tuple[StopKind, str] | None = None
        evaluated = 0
        for proposal in proposals:
            if stop is not None:
                # designed but never evaluated: keep its cost on record
                if proposal.design_cost_usd > 0 or proposal.design_requests > 0:
                    records.append(
                        self._rejected(
                            proposal, generation, f"not_evaluated: {stop[1]}", CheckResult()
                        )
                    )
                continue
            record, stop = await self._process(proposal, generation, minibatch)
            if record is not None:
                records.append(record)
                if record.status == "evaluated":
                    evaluated += 1
        self.strategy.tell(records)
        return stop if stop is not None else evaluated

    def _announce(
        self,
        idx: int,
        generation: int,
        proposal: Proposal,
        *,
        spec_hash: str,
        spec_json: str,
        parent_idx: int | None,
        status: str = "proposed",
        reason: str | None = None,
    ) -> None:
        """Count the proposal's design cost and emit its `CandidateProposed`."""
        self.tracker.record_design(proposal.design_cost_usd, fresh=not proposal.replayed)
        self._emit(
            CandidateProposed,
            key=("p", idx),
            candidate_idx=idx,
            generation=generation,
            spec_hash=spec_hash,
            spec_json=spec_json,
            parent_idx=parent_idx,
            operator=proposal.operator,
            thought=proposal.thought,
            design_cost_usd=proposal.design_cost_usd,
            design_requests=proposal.design_requests,
            status=status,
            reason=reason,
        )

    def _unevaluated(
        self,
        proposal: Proposal,
        generation: int,
        check: CheckResult,
        *,
        status: Literal["rejected", "duplicate"],
        reason: str,
        duplicate_of: int | None = None,
    ) -> CandidateRecord:
        """Record a proposal that is not evaluated: rejected (with its reason) or a duplicate."""
        idx = len(self._history)
        spec = check.spec if check.spec is not None else proposal.spec
        text = spec.model_dump_json() if spec is not None else proposal.text or ""
        self._announce(
            idx,
            generation,
            proposal,
            spec_hash=check.spec_hash,
            spec_json=text,
            parent_idx=proposal.parent_idx,
            status=status,
            reason=reason,
        )
        if check.spec_hash and self._known(check) is None:
            self._remember(check, idx)
        if status == "rejected":
            self._log(f"candidate {idx} rejected: {reason.splitlines()[0]}", "warning")
        return self._record(
            _proposal_record(
                idx,
                generation,
                proposal.parent_idx,
                proposal,
                check.spec_hash,
                text,
                status=status,
                reason=reason,
                duplicate_of=duplicate_of,
            )
        )

    def _rejected(
        self, proposal: Proposal, generation: int, reason: str, check: CheckResult
    ) -> CandidateRecord:
        return self._unevaluated(proposal, generation, check, status="rejected", reason=reason)

    def _parent_of(self, proposal: Proposal) -> _Cand:
        parent = self._cands.get(proposal.parent_idx) if proposal.parent_idx is not None else None
        if parent is None or not parent.valid:
            return self._cands[0]
        return parent

    async def _process(
        self, proposal: Proposal, generation: int, minibatch: list[GoldExample]
    ) -> tuple[CandidateRecord | None, tuple[StopKind, str] | None]:
        if proposal.reason is not None:
            check = CheckResult() if proposal.spec is None else self.check(proposal.spec)
            return self._rejected(proposal, generation, proposal.reason, check), None
        check = self.check(proposal.spec if proposal.spec is not None else proposal.text or "")
        if not check.ok or check.spec is None:
            return self._rejected(proposal, generation, check.reason or "invalid", check), None
        if self._known(check) is not None:
            return self._duplicate(proposal, generation, check), None
        stop = self._stop_reason(next_evaluation=True)
        if stop is not None:
            if proposal.design_cost_usd > 0 or proposal.design_requests > 0:
                return self._rejected(
                    proposal, generation, f"not_evaluated: {stop[1]}", check
                ), stop
            return None, stop
        return await self._evaluate_proposal(proposal, generation, minibatch, check)

    def _same_as(
        self,
        idx: int,
        generation: int,
        parent: _Cand,
        proposal: Proposal,
        check: CheckResult,
        ev: CandidateEvaluation,
        mb_score: float,
        twin: int,
    ) -> tuple[CandidateRecord | None, tuple[StopKind, str] | None]:
        """Record a candidate whose per-example results equal candidate `twin`'s on the fixed
        minibatch: evaluated once, never promoted, never re-scored, not in the archive."""
        assert check.spec is not None
        self.tracker.since_improvement += 1
        self._log(
            f"candidate {idx} ({proposal.operator}): the same per-example answers, costs and "
            f"latencies as candidate {twin} on the minibatch; recorded as same_as {twin}"
        )
        record = _proposal_record(
            idx,
            generation,
            parent.idx,
            proposal,
            check.spec_hash,
            check.spec.model_dump_json(),
            status="evaluated",
            split="minibatch" if len(ev.results) < len(self.validation) else "validation",
            minibatch_score=_finite_or_none(mb_score),
            score=_finite_or_none(mb_score),
            accuracy=_finite_or_none(ev.accuracy),
            cost_usd=_finite_or_none(ev.cost_usd),
            latency_ms=_finite_or_none(ev.latency_ms),
            n_agents=ev.n_agents,
            depth=ev.depth,
            valid=True,
            same_as=twin,
        )
        return self._record(record), None

    def _duplicate(
        self, proposal: Proposal, generation: int, check: CheckResult
    ) -> CandidateRecord:
        of = self._known(check)
        assert of is not None
        same = check.spec_hash in self._by_hash
        return self._unevaluated(
            proposal,
            generation,
            check,
            status="duplicate",
            reason=(
                f"duplicate of candidate {of}"
                if same
                else f"duplicate of candidate {of}: the same behaviour once no-ops are removed "
                "(normalised form)"
            ),
            duplicate_of=of,
        )

    def _known(self, check: CheckResult) -> int | None:
        """The candidate with this spec's canonical hash, or else its behavioural hash."""
        found = self._by_hash.get(check.spec_hash)
        if found is None and check.behaviour_hash:
            found = self._by_hash.get(check.behaviour_hash)
        return found

    def _remember(self, check: CheckResult, idx: int) -> None:
        self._by_hash.setdefault(check.spec_hash, idx)
        if check.behaviour_hash:
            self._by_hash.setdefault(check.behaviour_hash, idx)

    async def _evaluate_proposal(
        self,
        proposal: Proposal,
        generation: int,
        minibatch: list[GoldExample],
        check: CheckResult,
    ) -> tuple[CandidateRecord | None, tuple[StopKind, str] | None]:
        assert check.spec is not None
        spec = check.spec
        idx = len(self._history)
        spec_json = spec.model_dump_json()
        self._remember(check, idx)
        parent = self._parent_of(proposal)
        self._announce(
            idx,
            generation,
            proposal,
            spec_hash=check.spec_hash,
            spec_json=spec_json,
            parent_idx=parent.idx,
        )
        whole = len(minibatch) == len(self.validation)
        mb_split = "validation" if whole else "minibatch"
        ev = await self._evaluate(idx, spec, minibatch, "validation")
        self.tracker.evaluations += 1
        if ev.rejected:  # the checker and the evaluator disagree: the evaluator wins
            self._log(f"candidate {idx} rejected by the evaluator: {ev.reason}", "warning")
            self._emit_evaluated(idx, ev, mb_split, math.nan, False)
            record = _proposal_record(
                idx,
                generation,
                parent.idx,
                proposal,
                check.spec_hash,
                spec_json,
                status="rejected",
                reason=ev.reason,
            )
            return self._record(record), None
        mb_score = self._score(ev, minibatch)
        valid = self._valid(ev, mb_score)
        fixed = self._fixed_minibatch is not None
        twin = self._remember_behaviour(idx, ev) if fixed and valid else None
        self._emit_evaluated(idx, ev, mb_split, mb_score, valid, same_as=twin)
        if twin is not None:
            return self._same_as(idx, generation, parent, proposal, check, ev, mb_score, twin)
        parent_ev = await self._evaluate(parent.idx, parent.spec, minibatch, "validation")
        parent_score = self._score(parent_ev, minibatch)
        if fixed:  # like with like: promote what no distinct candidate dominates
            beats = valid and self._non_dominated_on_minibatch(idx)
        else:
            beats = valid and (not math.isfinite(parent_score) or mb_score > parent_score)
        final_ev, final_score, split, promoted = ev, mb_score, mb_split, False
        stop: tuple[StopKind, str] | None = None
        if beats and whole:
            promoted = True
        elif beats:
            block = self._stop_reason(next_evaluation=False)
            if block is not None and block[0] not in ("max_evaluations", "patience"):
                stop = block  # no more money or time: it stays on the minibatch; the run ends
            else:
                full_ev = await self._evaluate(idx, spec, self.validation, "validation")
                final_ev, final_score = full_ev, self._score(full_ev, self.validation)
                split, promoted = "validation", True
                valid = self._valid(full_ev, final_score)
                self._emit_evaluated(idx, full_ev, "validation", final_score, valid)
        new_best = split == "validation" and self._note_full_score(idx, final_score, valid)
        self.tracker.since_improvement = 0 if new_best else self.tracker.since_improvement + 1
        entry = self._archive_entry(
            generation=generation,
            spec=spec,
            ev=final_ev,
            score=final_score,
            valid=valid,
            split=split,
            thought=proposal.thought,
            parent_idx=parent.idx,
        )
        a_idx = self._add_to_archive(idx, entry)
        self._cands[idx] = _Cand(idx, spec, check.spec_hash, a_idx, split == "validation", valid)
        note = "promoted" if promoted else "kept on the minibatch"
        self._log(
            f"candidate {idx} ({proposal.operator}): minibatch {mb_score:.4f} vs parent "
            f"{parent.idx} {parent_score:.4f}; {note}" + ("; new best" if new_best else "")
        )
        record = _proposal_record(
            idx,
            generation,
            parent.idx,
            proposal,
            check.spec_hash,
            spec_json,
            status="evaluated",
            reason=None if valid else (final_ev.reason or "non_finite_score"),
            split=split,
            minibatch_score=_finite_or_none(mb_score),
            parent_minibatch_score=_finite_or_none(parent_score),
            promoted=promoted,
            score=_finite_or_none(final_score),
            accuracy=_finite_or_none(final_ev.accuracy),
            cost_usd=_finite_or_none(final_ev.cost_usd),
            latency_ms=_finite_or_none(final_ev.latency_ms),
            n_agents=final_ev.n_agents,
            depth=final_ev.depth,
            valid=valid,
        )
        return self._record(record), stop

    # -- the report --------------------------------------------------------------------------

    def _rescore_wanted(self) -> list[int]:
        """Minibatch-only valid candidates that are best or on the front on their own scores."""
        wanted: list[int] = []
        best = self.archive.best_index()
        picked: set[int] = set(self.archive.pareto_indices())
        if best is not None:
            picked.add(best)
        for a_idx in sorted(picked):
            cand = self._cands[self._archive_to_cand[a_idx]]
            if not cand.full and cand.valid:
                wanted.append(cand.idx)
        return wanted

    async def _rescore(self) -> str | None:
        """Re-score on the full validation split the minibatch-only entries that are best or on
        the front on their own scores (compare like with like before reporting), until none is
        left: a re-scored entry can do worse on the full split and leave the front, putting
        another minibatch-only entry on it. Each round re-scores at least one entry, so this
        ends after at most one round per minibatch-only entry. Only what is left is re-scored:
        promoted candidates are already on the full split, and `same_as` candidates are not in
        the archive. A stop (Ctrl-C, the stop file, the studio) is honoured between two
        candidates, as during the search.

        Returns:
            None when done, else the stop's reason (the report then spends nothing more).
        """
        rescored = 0
        while wanted := self._rescore_wanted():
            for idx in wanted:
                reason = self.stop.reason()
                if reason is not None:
                    self._log(
                        f"stopped during the re-scoring ({reason}) after {rescored} candidate(s)",
                        "warning",
                    )
                    return reason
                await self._rescore_one(idx)
                rescored += 1
        if rescored:
            self._log(f"re-scored {rescored} candidate(s) on the full validation split")
        return None

    async def _rescore_one(self, idx: int) -> None:
        cand = self._cands[idx]
        ev = await self._evaluate(idx, cand.spec, self.validation, "validation")
        score = self._score(ev, self.validation)
        valid = self._valid(ev, score)
        self._emit_evaluated(idx, ev, "validation", score, valid)
        old = self._history[idx]
        entry = self._archive_entry(
            generation=old.generation,
            spec=cand.spec,
            ev=ev,
            score=score,
            valid=valid,
            split="validation",
            thought=old.thought,
            parent_idx=old.parent_idx,
        )
        self.archive.add(entry)
        cand.full, cand.valid = True, valid
        self._note_full_score(idx, score, valid)
        self._record(
            old.model_copy(
                update={
                    "split": "validation",
                    "rescored": True,
                    "score": _finite_or_none(score),
                    "accuracy": _finite_or_none(ev.accuracy),
                    "cost_usd": _finite_or_none(ev.cost_usd),
                    "latency_ms": _finite_or_none(ev.latency_ms),
                    "valid": valid,
                    "reason": None if valid else (ev.reason or "non_finite_score"),
                }
            )
        )

    async def _test_split(self, best_idx: int, front: Sequence[int]) -> list[dict[str, Any]]:
        """Score the winner, then every other validation-front candidate, once each on the
        held-out test split (reported only: nothing is chosen by a test score). A stop is
        honoured between two candidates. Returns one record per candidate scored, the winner's
        first."""
        if not self.test:
            return []
        out: list[dict[str, Any]] = []
        for idx in [best_idx, *[i for i in front if i != best_idx]]:
            if out and self.stop.reason() is not None:
                self._log("stopped during the held-out test of the front", "warning")
                break
            cand = self._cands[idx]
            ev = await self._evaluate(idx, cand.spec, self.test, "test")
            score = self._score(ev, self.test)
            valid = self._valid(ev, score)
            self._emit_evaluated(idx, ev, "test", score, valid)
            out.append(
                {
                    "candidate_idx": idx,
                    "n_examples": ev.n_examples,
                    "accuracy": ev.accuracy,
                    "cost_usd": ev.cost_usd,
                    "latency_ms": ev.latency_ms,
                    "aggregate_score": score,
                    "valid": valid,
                    "reason": ev.reason,
                }
            )
        return out

    async def _finish(self, kind: StopKind, reason: str) -> OptimizationResult:
        report = kind in _REPORT_ALLOWED
        test: list[dict[str, Any]] = []
        if report:
            stopped = await self._rescore()
            if stopped is not None:
                kind, reason, report = "user", f"{stopped} (during the re-scoring)", False
        else:
            self._log(
                f"stopped ({reason}): the report compares only candidates already scored on the "
                "full validation split; no re-scoring and no test split",
                "warning",
            )
        best_a = self.archive.best_index("validation")
        assert best_a is not None  # the seed is valid and scored on the full split
        best_idx = self._archive_to_cand[best_a]
        front = [self._archive_to_cand[i] for i in self.archive.pareto_indices("validation")]
        if report:
            test = await self._test_split(best_idx, front)
        self._snapshot(self._history[-1].generation if self._history else -1)
        status = "completed" if kind == "completed" else "stopped"
        gene = self.gene.name
        best_spec = self._cands[best_idx].spec
        result = OptimizationResult(
            best_candidate={gene: best_spec.model_dump_json()},
            best_decoded={gene: best_spec},
            best_score=self.archive[best_a].aggregate_score,
            pareto_candidates=[{gene: self._cands[i].spec.model_dump_json()} for i in front],
            history=list(self._history),
            raw={
                "run_id": self.run_id,
                "strategy": self.strategy.name,
                "seed": self.config.seed,
                "status": status,
                "stop_reason": reason,
                "archive": self.archive,
                "archive_candidates": list(self._archive_to_cand),
                "best_idx": best_idx,
                "pareto_idx": front,
                "test": test[0] if test else None,
                "test_front": test,
                "budget_used": self.tracker.used(),
            },
        )
        self._finished(status, reason, best_idx)
        return result


def _proposal_record(
    idx: int,
    generation: int,
    parent_idx: int | None,
    proposal: Proposal,
    spec_hash: str,
    spec_json: str,
    **outcome: Any,
) -> CandidateRecord:
    """A history record of a proposed candidate: what the proposal says, plus its `outcome`
    (status, reason, scores...)."""
    return CandidateRecord(
        candidate_idx=idx,
        generation=generation,
        parent_idx=parent_idx,
        operator=proposal.operator,
        thought=proposal.thought,
        spec_hash=spec_hash,
        spec_json=spec_json,
        design_cost_usd=proposal.design_cost_usd,
        design_requests=proposal.design_requests,
        **outcome,
    )


def _example_id(example: GoldExample) -> str:
    return example_key(example)
