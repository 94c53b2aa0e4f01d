"""The engine's proposal check: the evaluator's own `check`, remembered by canonical hash.

There is one definition of a valid candidate, `TopologyEvaluator.check` (parse limits,
`max_depth`, allowed kinds, inline agents, registered names, hydration; see
`core.evaluation.checks`). The engine checks every proposal with it before anything runs (so a
rejected or duplicate proposal is recorded without an evaluation), against the gene's
constraints, and the meta agent's debug loop feeds its reason to the designer.
"""

from __future__ import annotations

from typing import Any

from core.evaluation.checks import CheckResult
from core.evaluation.evaluator import TopologyEvaluator
from core.ir.canonical import spec_hash
from core.ir.dataflow import EffectTable, analyse, behaviour_hash
from core.ir.models import NODE_TYPES
from core.search.gene import TopologyGene

__all__ = ["CandidateChecker"]


class CandidateChecker:
    """`evaluator.check` under the gene's `max_depth` and `allowed_step_kinds`, remembered.

    The evaluator is used as given when it already enforces the gene's constraints, else a copy
    of it with them (`with_options`); its registries, limits and inline-agent rule apply.
    Verdicts on parsed specs are remembered by canonical hash (registries are not expected to
    change during a search), so checking a proposal again costs a hash; raw text is checked
    every time.

    On top of the evaluator's check, a parsed spec goes through the static dataflow analysis
    (`core.ir.dataflow.analyse` with the problem's `effects`): its first issue rejects it with
    that issue's code (`condition_before_input`, `fastest_branch_without_answer`, `no_agent`,
    `router_matches_nothing`) and path. A valid result carries `behaviour_hash`, the hash of its
    no-op-free normal form, which the engine de-duplicates on.

    Args:
        evaluator: the search's evaluator.
        gene: the searched gene.
        effects: what each registered name reads and produces (default: nothing declared, so
            no static rejection and only name/id normalisation).
    """

    def __init__(
        self, evaluator: TopologyEvaluator, gene: TopologyGene, effects: EffectTable | None = None
    ) -> None:
        cfg = evaluator.config
        if cfg.max_depth != gene.max_depth or cfg.allowed_step_kinds != gene.allowed_step_kinds:
            evaluator = evaluator.with_options(
                max_depth=gene.max_depth, allowed_step_kinds=gene.allowed_step_kinds
            )
        self._evaluator = evaluator
        self._effects = effects if effects is not None else EffectTable()
        self._memo: dict[str, CheckResult] = {}
        self.static_rejections: dict[str, int] = {}
        """Distinct specs rejected by the static dataflow check, by issue code (what the
        strategies asked about and the engine checked; text proposals counted each time)."""

    @property
    def effects(self) -> EffectTable:
        """What each registered name reads and produces (the problem's `effects`)."""
        return self._effects

    def _static(self, result: CheckResult) -> CheckResult:
        if not result.ok or result.spec is None:
            return result
        analysis = analyse(result.spec, self._effects)
        if analysis.issues:
            code = analysis.issues[0].code
            self.static_rejections[code] = self.static_rejections.get(code, 0) + 1
            return result.model_copy(update={"reason": analysis.issues[0].reason()})
        return result.model_copy(
            update={"behaviour_hash": behaviour_hash(result.spec, self._effects)}
        )

    def __call__(self, spec: Any) -> CheckResult:
        """Check `spec` (a `TopologySpec`, JSON text or a mapping); never raises for a bad one."""
        if not isinstance(spec, NODE_TYPES):
            return self._static(self._evaluator.check(spec))
        digest = spec_hash(spec)
        known = self._memo.get(digest)
        if known is None:
            known = self._memo[digest] = self._static(self._evaluator.check(spec))
        if known.spec is None or known.spec is spec:
            return known
        return known.model_copy(update={"spec": spec})  # the caller's own object, same content
