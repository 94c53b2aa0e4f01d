"""The search loop: `SearchRun`, a live handle on one run (ask/tell, budgets, events, promotion).

See `core.search.engine` for the public entry points and the rules in prose.
"""

from __future__ import annotations

import asyncio
import itertools
import math
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Literal

from core.errors import BudgetError, DegenerateSeedError, ProviderError, SearchError
from core.evaluation._records import CandidateEvaluation
from core.evaluation.evaluator import TopologyEvaluator
from core.evaluation.metrics import GoldExample
from core.hydrate import (
    AgentRegistryLike,
    CallableRegistryLike,
    as_agent_registry,
    as_callable_registry,
)
from core.ir import TopologySpec
from core.ir.dataflow import EffectTable
from core.search._checker import CandidateChecker
from core.search._emission import Cand, StopKind, WallStop, evaluation_figures, finite_or_none
from core.search._learning import LearningMixin
from core.search._rescoring import ReportMixin
from core.search._resume import plan_resume
from core.search._selection import FixedMinibatch, KnownSpecs
from core.search._space import build_search_space, minibatch_indices
from core.search._stream import EventStream, Subscriber
from core.search.archive import Archive, ObjectiveLike
from core.search.budget import Budget, BudgetTracker, StopSignal
from core.search.events import (
    CandidateProposed,
    LogMessage,
    SearchEvent,
)
from core.search.gene import TopologyGene
from core.search.pareto import DEFAULT_OBJECTIVES
from core.search.result import CandidateRecord, OptimizationResult
from core.search.strategies.base import AskContext, CheckResult, Proposal, Strategy
from core.storage.journal import new_run_id

__all__ = ["SearchRun", "Subscriber", "build_search_space", "minibatch_indices"]

_IDLE_GENERATIONS = 3
"""Generations in a row without any proposal after which a run ends (`strategy exhausted`)."""


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


class SearchRun(ReportMixin, LearningMixin):
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
        agent_registry: registered agents (either registry may be a plain mapping of names).
        test: a held-out split; the winner is evaluated on it once, at the end.
        train: the train split (a problem's `[gold] train_size`): what learned parts fit on
            (`AskContext.train`, `core.search.learned`), never scored or reported; None or
            empty: no train split, and no learned part.
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
        callable_registry: CallableRegistryLike,
        agent_registry: AgentRegistryLike,
        test: Sequence[GoldExample] | None = None,
        train: Sequence[GoldExample] | None = None,
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
            callable_registry=as_callable_registry(callable_registry),
            agent_registry=as_agent_registry(agent_registry),
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
        self._init_learning(list(train) if train else None, plan.learned if plan else {})
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
        self._cands: dict[int, Cand] = {}
        self._known_specs = KnownSpecs()
        self._archive_to_cand: list[int] = []
        self._best_full: tuple[float, int] | None = None
        self._snapshots = 0
        self._started = False
        # one fixed minibatch per run (config.minibatch_margin), drawn after the seed
        self._like = FixedMinibatch(
            self.validation,
            self.config.minibatch_margin,
            self.config.minibatch_size,
            self.config.seed,
        )

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
            BudgetError: the budget allows no work, or nothing bounds the run, or the wall
                time ran out during the seed's evaluation (the run is recorded as stopped).
            DegenerateSeedError: the seed's evaluation is degenerate (with a diagnosis).
            SearchError: the seed is rejected or its evaluation is invalid.
            Exception: whatever `strategy.preflight` raises (e.g. F2: a provider that cannot
                take the designer's output schema), before anything runs or is paid for.
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
                try:
                    kind, reason = await self._search()
                except WallStop as stop:
                    if 0 not in self._cands:
                        raise  # the seed's own evaluation was cut: nothing to report
                    kind, reason = "max_wall_s", stop.reason  # the cut candidate is left out
                return await self._finish(kind, reason)
            except WallStop as stop:
                why = f"{stop.reason} during the seed's evaluation"
                self._finished("stopped", why)
                raise BudgetError(
                    f"{why}: nothing was scored to compare; give the run more wall time "
                    "(max_wall_s), or its examples a shorter deadline (example_timeout_s)"
                ) from None
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
            except ProviderError as exc:
                # a provider that kept failing: stopped, resumable (what is scored is kept;
                # the call cache answers the calls made so far), never `failed`
                self._emit(LogMessage, level="error", message=str(exc))
                self._finished("stopped", f"provider: {exc}")
                raise
            except Exception as exc:
                self._finished("failed", f"{type(exc).__name__}: {exc}")
                raise
        finally:
            self.evaluator.close_workers()  # a run evaluates nothing more: free their memory
            if guard is not None:
                guard.__exit__(None, None, None)

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
        self._known_specs.add(check, idx)
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
        self._cands[idx] = Cand(idx, seed, check.spec_hash, a_idx, full=True, valid=True)
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
        fixed = self._like.fix(ev)
        if fixed is not None:
            self._log(fixed)
        self._snapshot(-1)

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
            known_hashes=self._known_specs.hashes(),
            recorded=dict(self._recorded_proposals),
            max_proposals=remaining,
            train=self._train_access(),
        )

    def _check(self, spec: TopologySpec | str) -> CheckResult:
        return self.check(spec)

    async def _generation(self, generation: int) -> int | tuple[StopKind, str]:
        """Ask, then process each proposal; the number evaluated, or the stop that ended it."""
        ctx = self._context(generation)
        proposals = await self.strategy.ask(ctx)
        if self._like.examples is not None:
            minibatch = self._like.examples
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
        self.tracker.record_design(
            proposal.design_cost_usd,
            fresh=not proposal.replayed,
            requests=proposal.design_requests,
            tokens=(proposal.design_input_tokens, proposal.design_output_tokens),
        )
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
            design_input_tokens=proposal.design_input_tokens,
            design_output_tokens=proposal.design_output_tokens,
            status=status,
            reason=reason,
            learned=self._to_announce(spec_json),
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
        if check.spec_hash and self._known_specs.find(check) is None:
            self._known_specs.add(check, idx)
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

    def _parent_of(self, proposal: Proposal) -> Cand:
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
        if self._known_specs.find(check) is not None:
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
        parent: Cand,
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
            minibatch_score=finite_or_none(mb_score),
            **evaluation_figures(ev, mb_score),
            n_agents=ev.n_agents,
            depth=ev.depth,
            valid=True,
            same_as=twin,
        )
        return self._record(record), None

    def _duplicate(
        self, proposal: Proposal, generation: int, check: CheckResult
    ) -> CandidateRecord:
        of = self._known_specs.find(check)
        assert of is not None
        same = self._known_specs.same_spec(check)
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
        self._known_specs.add(check, idx)
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
        fixed = self._like.examples is not None
        twin = self._like.remember(idx, ev) if fixed and valid else None
        self._emit_evaluated(idx, ev, mb_split, mb_score, valid, same_as=twin)
        if twin is not None:
            return self._same_as(idx, generation, parent, proposal, check, ev, mb_score, twin)
        parent_ev = await self._evaluate(parent.idx, parent.spec, minibatch, "validation")
        parent_score = self._score(parent_ev, minibatch)
        if fixed:  # like with like: promote what no distinct candidate dominates
            beats = valid and self._like.non_dominated(idx, self.config.promotion_k_se)
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
        self._cands[idx] = Cand(idx, spec, check.spec_hash, a_idx, split == "validation", valid)
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
            minibatch_score=finite_or_none(mb_score),
            parent_minibatch_score=finite_or_none(parent_score),
            promoted=promoted,
            **evaluation_figures(final_ev, final_score),
            n_agents=final_ev.n_agents,
            depth=final_ev.depth,
            valid=valid,
        )
        return self._record(record), stop


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
        design_input_tokens=proposal.design_input_tokens,
        design_output_tokens=proposal.design_output_tokens,
        **outcome,
    )
