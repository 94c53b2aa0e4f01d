"""`RandomSearch`: a baseline sampler over the same operators as the evolutionary strategy.

Each proposal is, with probability `p_fresh`, a fresh random topology
(`core.search.operators.random_spec`, no parent: compared with the seed), else the seed with
one to `max_mutations` random mutations chained (parent: the seed). Every proposal passes the
engine's check and is new; a slot that finds none in `n_tries` draws is left empty. One
`random.Random(config.seed)`, reset by `preflight` at the start of every run.
"""

from __future__ import annotations

import random
from typing import ClassVar

from pydantic import Field

from core.errors import SearchError
from core.ir import TopologySpec
from core.search.operators import MutationContext, mutate, random_spec
from core.search.strategies.base import AskContext, Proposal, SearchSpace, Strategy, StrategyConfig

__all__ = ["RandomConfig", "RandomSearch"]


class RandomConfig(StrategyConfig):
    """Options of the random strategy (values checked)."""

    proposals_per_generation: int = Field(default=8, ge=1)
    """Proposals per generation."""
    p_fresh: float = Field(default=0.5, ge=0.0, le=1.0)
    """Probability that a proposal is a fresh random topology (else a mutated seed)."""
    max_mutations: int = Field(default=3, ge=1)
    """At most this many mutations chained onto the seed."""
    n_tries: int = Field(default=10, ge=1)
    """Draws per proposal before its slot is left empty."""


class RandomSearch(Strategy):
    """Random sampling baseline (see the module docstring)."""

    name: ClassVar[str] = "random"
    config: RandomConfig

    def __init__(self, config: RandomConfig | None = None) -> None:
        super().__init__(config or RandomConfig())
        self._rng = random.Random(self.config.seed)
        self._mctx: MutationContext | None = None

    def preflight(self, space: SearchSpace) -> None:
        """Reset the generator and build the operators' context."""
        self._rng = random.Random(self.config.seed)
        self._mctx = MutationContext.from_space(space)

    def _draw(self, ctx: AskContext, mctx: MutationContext) -> tuple[TopologySpec, str, bool]:
        rng = self._rng
        if rng.random() < self.config.p_fresh:
            return random_spec(mctx, rng), "random_spec", True
        spec: TopologySpec = ctx.seed_spec
        ops: list[str] = []
        for _ in range(rng.randint(1, self.config.max_mutations)):
            spec, op = mutate(spec, mctx, rng, n_tries=5)
            ops.append(op)
        return spec, "mutate:" + "+".join(ops), False

    async def ask(self, ctx: AskContext) -> list[Proposal]:
        """`proposals_per_generation` proposals (fewer when the budget or the draws run out)."""
        if self._mctx is None:
            self.preflight(ctx.space)
        assert self._mctx is not None
        n = self.config.proposals_per_generation
        if ctx.max_proposals is not None:
            n = min(n, ctx.max_proposals)
        avoid: set[str] = set(ctx.known_hashes)
        out: list[Proposal] = []
        for _ in range(n):
            for _ in range(self.config.n_tries):
                try:
                    spec, operator, fresh = self._draw(ctx, self._mctx)
                except SearchError:
                    continue
                check = ctx.check(spec)
                if not check.ok or avoid & {check.spec_hash, check.behaviour_hash}:
                    continue
                avoid.update(h for h in (check.spec_hash, check.behaviour_hash) if h)
                out.append(Proposal(spec=spec, parent_idx=None if fresh else 0, operator=operator))
                break
        return out
