"""The end of a run: re-scoring what is left on the full validation split, the held-out test of
the whole validation front, and the `OptimizationResult`."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from core.combinators.learned import LearnedCondition
from core.search._emission import (
    REPORT_ALLOWED,
    RunBase,
    StopKind,
    WallStop,
    evaluation_figures,
)
from core.search.archive import Archive
from core.search.result import OptimizationResult, RunDetails

__all__ = ["ReportMixin"]


class ReportMixin(RunBase):
    """Re-scoring, the test front and the final report of a `SearchRun`."""

    _learned: dict[str, LearnedCondition]

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
        candidates, as during the search; the wall-clock budget cuts a re-scoring in flight (that
        candidate keeps its minibatch scores).

        Returns:
            None when done, else the stop's reason (the report then spends nothing more).
        """
        rescored = 0
        wanted = self._rescore_wanted()
        if wanted:
            self._log(f"re-scoring {len(wanted)} candidate(s) on the full validation split")
        while wanted:
            for idx in wanted:
                reason = self.stop.reason()
                if reason is None:
                    try:
                        await self._rescore_one(idx)
                    except WallStop as stop:
                        reason = stop.reason
                if reason is not None:
                    self._log(
                        f"stopped during the re-scoring ({reason}) after {rescored} candidate(s)",
                        "warning",
                    )
                    return reason
                rescored += 1
            wanted = self._rescore_wanted()
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
                    **evaluation_figures(ev, score),
                    "valid": valid,
                    "reason": None if valid else (ev.reason or "non_finite_score"),
                }
            )
        )

    async def _test_split(
        self, best_idx: int, front: Sequence[int]
    ) -> tuple[list[dict[str, Any]], str | None]:
        """Score the winner, then every other validation-front candidate, once each on the
        held-out test split (reported only: nothing is chosen by a test score). A stop is
        honoured before each candidate, the winner's included; the wall-clock budget cuts a
        test in flight (that candidate has no test record). Returns one record per candidate
        scored, the winner's first, and the stop's reason (None: all were scored)."""
        if not self.test:
            return [], None
        out: list[dict[str, Any]] = []
        todo = [best_idx, *[i for i in front if i != best_idx]]
        self._log(f"scoring {len(todo)} front candidate(s) on the held-out test split")
        for idx in todo:
            cand = self._cands[idx]
            stopped = self.stop.reason()
            ev = None
            if stopped is None:
                try:
                    ev = await self._evaluate(idx, cand.spec, self.test, "test")
                except WallStop as stop:
                    stopped = stop.reason
            if ev is None:
                self._log(
                    f"stopped during the held-out test of the front ({stopped}) after "
                    f"{len(out)} candidate(s)",
                    "warning",
                )
                return out, stopped
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
        return out, None

    def _validation_archive(self) -> Archive:
        """A new archive of the entries scored on the full validation split, in archive order."""
        source = self.archive
        out = Archive(source.strategy, source.size, source.objectives)
        for entry in source.entries:
            if entry.split == "validation":
                out.add(entry)
        return out

    async def _finish(self, kind: StopKind, reason: str) -> OptimizationResult:
        report = kind in REPORT_ALLOWED
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
            test, stopped = await self._test_split(best_idx, front)
            if stopped is not None:
                kind, reason = "user", f"{stopped} (during the held-out test)"
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
            raw=RunDetails(
                {
                    "run_id": self.run_id,
                    "strategy": self.strategy.name,
                    "seed": self.config.seed,
                    "status": status,
                    "stop_reason": reason,
                    "archive": self.archive,
                    "validation_archive": self._validation_archive(),
                    "archive_candidates": list(self._archive_to_cand),
                    "best_idx": best_idx,
                    "pareto_idx": front,
                    "test": test[0] if test else None,
                    "test_front": test,
                    "budget_used": self.tracker.used(),
                    "learned": dict(self._learned),
                }
            ),
        )
        self._finished(status, reason, best_idx)
        return result
