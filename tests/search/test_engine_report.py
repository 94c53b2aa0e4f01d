"""The engine's report: what is re-scored on the full validation split before the winner and the
front are reported (compare like with like)."""

from __future__ import annotations

import math
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any, ClassVar

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "contracts"))

from strategy_contract import pipeline, toy_world  # noqa: E402

from core.runtime.tracing import record_model_latency  # noqa: E402
from core.search._engine import minibatch_indices  # noqa: E402
from core.search.strategies.base import (  # noqa: E402
    AskContext,
    Proposal,
    Strategy,
    StrategyConfig,
)


class Scripted(Strategy):
    """Proposes what it is told, one list per generation."""

    name: ClassVar[str] = "scripted"

    def __init__(self, script: Sequence[Sequence[Proposal]], **config: Any) -> None:
        config.setdefault("n_generations", len(script))
        super().__init__(StrategyConfig(**config))
        self.script = [list(g) for g in script]

    async def ask(self, ctx: AskContext) -> list[Proposal]:
        return self.script[ctx.generation] if ctx.generation < len(self.script) else []


def right_on(inputs: set[str]) -> Any:
    """A free step (model time 1 ms) that answers every letter on `inputs`, nothing elsewhere."""

    def step(x: Any) -> str:
        record_model_latency(1.0)
        return f"{x}abc" if str(x) in inputs else f"{x}z"

    return step


def score(accuracies: list[int]) -> float:
    """The aggregate score of free 1 ms runs (default weights)."""
    return math.fsum(a - 0.00002 * 1.0 for a in accuracies) / len(accuracies)


def test_rescoring_reaches_a_fixed_point_so_no_front_candidate_stays_on_its_minibatch() -> None:
    """`sharp` dominates `broad` on the minibatch, so only `sharp` is on the front on its own
    scores and is re-scored; on the full split it is worse, and `broad` (now on the front on its
    own scores) must be re-scored too, not left out of the reported front."""
    mb = minibatch_indices(10, 5, 42, 0)
    assert mb == [1, 3, 5, 7, 8]
    sharp = right_on({"1", "3", "5", "7", "0"})  # minibatch 4/5 = 0.8, full 5/10
    broad = right_on({"1", "3", "5", "0", "2", "4", "6", "9"})  # minibatch 3/5, full 8/10
    world = toy_world(seed=pipeline("a", "b", "c"), extra={"sharp": sharp, "broad": broad})
    strategy = Scripted(
        [[Proposal(spec=pipeline("sharp"), parent_idx=0), Proposal(spec=pipeline("broad"))]],
        minibatch_size=5,
    )
    result = world.run(strategy)
    seed, s, b = result.history
    assert (s.minibatch_score, b.minibatch_score) == (
        score([1, 1, 1, 1, 0]),
        score([1, 1, 1, 0, 0]),
    )
    assert (s.promoted, b.promoted) == (False, False)  # the seed scores 0.9294 on the minibatch
    assert (s.rescored, s.split, s.accuracy) == (True, "validation", 0.5)
    assert (b.rescored, b.split, b.accuracy) == (True, "validation", 0.8)
    assert result.raw["pareto_idx"] == [0, 2]
    assert result.raw["best_idx"] == 0
    archive = result.raw["archive"]
    assert [e.split for e in archive.entries] == ["validation"] * 3
