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

    Args:
        evaluator: the search's evaluator.
        gene: the searched gene.
    """

    def __init__(self, evaluator: TopologyEvaluator, gene: TopologyGene) -> None:
        cfg = evaluator.config
        if cfg.max_depth != gene.max_depth or cfg.allowed_step_kinds != gene.allowed_step_kinds:
            evaluator = evaluator.with_options(
                max_depth=gene.max_depth, allowed_step_kinds=gene.allowed_step_kinds
            )
        self._evaluator = evaluator
        self._memo: dict[str, CheckResult] = {}

    def __call__(self, spec: Any) -> CheckResult:
        """Check `spec` (a `TopologySpec`, JSON text or a mapping); never raises for a bad one."""
        if not isinstance(spec, NODE_TYPES):
            return self._evaluator.check(spec)
        digest = spec_hash(spec)
        known = self._memo.get(digest)
        if known is None:
            known = self._memo[digest] = self._evaluator.check(spec)
        if known.spec is None or known.spec is spec:
            return known
        return known.model_copy(update={"spec": spec})  # the caller's own object, same content
