"""The run's bookkeeping and event emission: what every part of the loop records and emits.

`RunBase` holds a run's state (declared here, set by `SearchRun.__init__`) and the helpers that
turn an evaluation into events, archive entries and history records; the loop
(`core.search._engine`), the selection rules (`core.search._selection`) and the report
(`core.search._rescoring`) build on it.
"""

from __future__ import annotations

import asyncio
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Literal, TypedDict

from core.evaluation._records import CandidateEvaluation, ExampleResult
from core.evaluation.evaluator import TopologyEvaluator
from core.evaluation.metrics import GoldExample, MetricWeights, aggregate_score
from core.ir import TopologySpec
from core.search._checker import CandidateChecker
from core.search._stream import EventKey, EventStream
from core.search.archive import Archive, ArchiveEntry
from core.search.budget import Budget, BudgetTracker, StopSignal
from core.search.events import (
    ArchiveSnapshot,
    CandidateEvaluated,
    ExampleEvaluated,
    RunFinished,
    RunStarted,
)
from core.search.gene import TopologyGene
from core.search.result import CandidateRecord
from core.search.strategies.base import SearchSpace, Strategy, StrategyConfig

__all__ = [
    "REPORT_ALLOWED",
    "Cand",
    "RunBase",
    "StopKind",
    "WallStop",
    "evaluation_figures",
    "finite_or_none",
]

StopKind = Literal["completed", "max_evaluations", "patience", "max_usd", "max_wall_s", "user"]

REPORT_ALLOWED: frozenset[str] = frozenset({"completed", "max_evaluations", "patience"})
"""Stops after which the final report may spend more (re-scoring, test split): count limits.
Money, time and a person's stop are never exceeded by the report."""


class WallStop(Exception):
    """The wall-clock budget ran out during an evaluation, which was cut short there.

    Raised by `RunBase._evaluate`; the loop ends the run as stopped by `max_wall_s`, the report
    keeps what was scored before.

    Args:
        reason: the budget's line, e.g. `"max_wall_s reached (5 s)"`.
    """

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


@dataclass(slots=True)
class Cand:
    """Live bookkeeping of one evaluated candidate."""

    idx: int
    spec: TopologySpec
    spec_hash: str
    archive_idx: int
    full: bool
    valid: bool


def finite_or_none(value: float | None) -> float | None:
    """`value` when it is a finite number, else None (what records and events store)."""
    return value if value is not None and math.isfinite(value) else None


def evaluation_figures(ev: CandidateEvaluation, score: float) -> dict[str, float | None]:
    """A history record's figures from an evaluation: `score`, `accuracy`, `cost_usd`,
    `latency_ms`, each None when not finite."""
    return {
        "score": finite_or_none(score),
        "accuracy": finite_or_none(ev.accuracy),
        "cost_usd": finite_or_none(ev.cost_usd),
        "latency_ms": finite_or_none(ev.latency_ms),
    }


class RunBase:
    """A search run's state and its recording helpers (see the module docstring)."""

    # what SearchRun.__init__ sets (declared here for the mixins)
    strategy: Strategy
    config: StrategyConfig
    gene: TopologyGene
    evaluator: TopologyEvaluator
    validation: list[GoldExample]
    test: list[GoldExample] | None
    problem: str
    problem_config: dict[str, Any]
    budget: Budget
    stop: StopSignal
    handle_sigint: bool
    space: SearchSpace
    check: CandidateChecker
    archive: Archive
    resumed: bool
    run_id: str
    tracker: BudgetTracker
    _weights: MetricWeights
    _stream: EventStream
    _history: list[CandidateRecord]
    _cands: dict[int, Cand]
    _archive_to_cand: list[int]
    _best_full: tuple[float, int] | None
    _snapshots: int

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
                "executor": self.evaluator.executor.describe(),
                "rate_limits": {
                    provider: limit.model_dump(mode="json")
                    for provider, limit in self.evaluator.rate_limits.items()
                },
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
            hypervolume=finite_or_none(self.archive.hypervolume(split="validation")),
            n_evaluations=self.tracker.example_evaluations,
            cost_usd_total=self.tracker.usd,
        )

    def _on_example(self, candidate_idx: int) -> Callable[[ExampleResult], None]:
        def record(r: ExampleResult) -> None:
            key = (r.spec_hash, r.example_id, r.trial)
            if not self.tracker.record_example(key, r.cost_usd, fresh=not r.cached):
                return
            self._emit(
                ExampleEvaluated,
                key=("e", *key),
                candidate_idx=candidate_idx,
                **example_event_fields(r),
            )

        return record

    async def _evaluate(
        self, candidate_idx: int, spec: TopologySpec, examples: Sequence[GoldExample], split: str
    ) -> CandidateEvaluation:
        """Evaluate, cut short when the wall-clock budget runs out meanwhile.

        Raises:
            WallStop: `max_wall_s` was reached before the evaluation finished (its finished
                examples were emitted; cached ones always are, before anything can wait).
        """
        evaluation = self.evaluator.evaluate(
            spec, examples, split=split, on_example=self._on_example(candidate_idx)
        )
        left = self.tracker.wall_left_s()
        if left is None:
            return await evaluation
        deadline = asyncio.timeout(left)
        try:
            async with deadline:
                return await evaluation
        except TimeoutError:
            if not deadline.expired():
                raise
            raise WallStop(f"max_wall_s reached ({self.budget.max_wall_s:g} s)") from None

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

    def _stop_reason(self, *, next_evaluation: bool) -> tuple[StopKind, str] | None:
        reason = self.stop.reason()
        if reason is not None:
            return "user", reason
        # wall time is left out while a resumed run replays what it recorded (its recorded span
        # may be past the limit already): it reaches where it stopped; `_evaluate` still cuts
        reason = self.tracker.exhausted(
            next_evaluation=next_evaluation, wall=not self._stream.replay_pending
        )
        if reason is None:
            return None
        kind: StopKind = "max_evaluations"
        for name in ("max_usd", "max_wall_s", "patience"):
            if reason.startswith(name):
                kind = name  # type: ignore[assignment]
        return kind, reason


class ExampleEventFields(TypedDict):
    """The fields of `ExampleEvaluated` one example result fills (`example_event_fields`)."""

    spec_hash: str
    split: str
    example_id: str
    trial: int
    accuracy: float
    cost_usd: float
    latency_ms: float
    input_tokens: int
    output_tokens: int
    requests: int
    status: Literal["ok", "error", "degenerate", "invalid"]
    error: str | None
    output_summary: str
    cached: bool
    trace: list[dict[str, Any]]


def example_event_fields(r: ExampleResult) -> ExampleEventFields:
    """The `ExampleEvaluated` fields one example result fills (all but the run's head, `seq`
    and `candidate_idx`): what the search journals per example, and what the studio journals
    for an editor evaluation (`StudioManager.record_evaluation`), so both record the same."""
    return ExampleEventFields(
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
