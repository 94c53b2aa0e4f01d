"""The engine's half of learned routers (`core.search.learned` has the rule): the train split
a strategy may fit on, registration where the checker, the evaluator and its workers see an
artefact, and the artefacts each `CandidateProposed` carries for the journal and a resume.
"""

from __future__ import annotations

from core.combinators.learned import LearnedCondition, question_reader, register_learned
from core.evaluation.metrics import GoldExample
from core.ir import TopologySpec
from core.search._emission import RunBase
from core.search.learned import TrainAccess, learned_names_in_json

__all__ = ["LearningMixin"]


class LearningMixin(RunBase):
    """Learned artefacts of a `SearchRun`: `_learned` (by registered name, every artefact the run
    registered or a resume read back) and `_announced` (names a proposal already carried)."""

    train: list[GoldExample] | None
    _learned: dict[str, LearnedCondition]
    _announced: set[str]

    def _init_learning(
        self, train: list[GoldExample] | None, recorded: dict[str, LearnedCondition]
    ) -> None:
        """Keep the train split; register what a resumed run's journal carries (before
        anything is checked or evaluated)."""
        self.train = train or None
        self._learned = {}
        self._announced = set()
        for cond in recorded.values():
            self._learn(cond)

    def _train_access(self) -> TrainAccess | None:
        registry = self.evaluator.callable_registry
        if self.train is None or (registry.input_text is None and self.check.effects.names):
            # a state of the problem's own and no reader of its question: nothing to fit on
            return None
        return TrainAccess(
            examples=tuple(self.train),
            scores=self._train_scores,
            learn=self._learn,
            text_of=question_reader(registry),
        )

    def _learn(self, cond: LearnedCondition) -> str:
        """Register `cond` in the evaluator's callable registry (shared by the checker's copy).
        A new name closes the evaluator's forked workers: they hold the registry of their fork,
        and the next evaluation forks fresh ones that know it."""
        registry = self.evaluator.callable_registry
        new = cond.name not in registry
        name = register_learned(cond, registry)
        self._learned.setdefault(name, cond)
        if new:
            self.evaluator.close_workers()
        return name

    async def _train_scores(
        self, candidate_idx: int, spec: TopologySpec
    ) -> dict[str, float] | None:
        """Per-example mean accuracy of `spec` on the train split (by example key), journaled
        under `candidate_idx`; None when a stop or the budget allows no more work."""
        if self.train is None or self._stop_reason(next_evaluation=False) is not None:
            return None
        ev = await self._evaluate(candidate_idx, spec, self.train, "train")
        if ev.rejected:
            return None
        sums: dict[str, list[float]] = {}
        for r in ev.results:
            sums.setdefault(r.example_id, []).append(r.bundle.accuracy)
        return {k: sum(v) / len(v) for k, v in sums.items()}

    def _to_announce(self, spec_json: str) -> list[str]:
        """The JSON of the artefacts `spec_json` names that no earlier proposal carried (each
        then counts as carried)."""
        out: list[str] = []
        for name in learned_names_in_json(spec_json):
            cond = self._learned.get(name)
            if cond is not None and name not in self._announced:
                self._announced.add(name)
                out.append(cond.to_json())
        return out
