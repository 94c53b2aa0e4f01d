"""`EvolutionarySearch`: structural mutations with NSGA-II selection; needs no model.

Per generation:

1. **Population** (NSGA-II environmental selection over the whole archive): the valid entries
   are ranked by non-dominated sorting on the archive's objectives (accuracy up; cost,
   latency, agents, depth down by default), and within a front by crowding distance (more
   isolated first; ties by archive order); the first `population_size` form the population.
2. **Parents** by binary (or `tournament_size`) tournament on (rank, -crowding, archive index).
3. **Offspring**, `population_size` of them: with probability `crossover_rate` a subtree
   crossover of two parents (`core.search.operators.crossover`), else (or when it fails) a
   mutation of one parent (`core.search.operators.mutate`). Every offspring is checked with the
   engine's own check (`ctx.check(spec).ok`) and is new (its canonical hash is not among the
   candidates so far nor this generation's offspring); a slot with no such offspring after the
   operators' tries is left empty.

Scores of archive entries are on the split each was evaluated on (a generation's minibatch, or
the full validation split): selection treats them as estimates of the same quantity (issue 3's
design; promotion and the final report compare like with like).

Determinism: one `random.Random(config.seed)`, reset by `preflight` at the start of every run;
names and nodes are visited in sorted or document order by the operators.
"""

from __future__ import annotations

import random
from typing import ClassVar

import numpy as np
from pydantic import Field

from core.errors import SearchError
from core.ir import TopologySpec, parse_topology
from core.search.operators import MutationContext, crossover, mutate
from core.search.pareto import crowding_distance
from core.search.strategies.base import AskContext, Proposal, SearchSpace, Strategy, StrategyConfig

__all__ = ["EvolutionaryConfig", "EvolutionarySearch"]


class EvolutionaryConfig(StrategyConfig):
    """Options of the evolutionary strategy (values checked)."""

    population_size: int = Field(default=8, ge=1)
    """Parents kept per generation, and offspring proposed per generation."""
    crossover_rate: float = Field(default=0.2, ge=0.0, le=1.0)
    """Probability that an offspring is a crossover of two parents (else a mutation)."""
    tournament_size: int = Field(default=2, ge=1)
    """Contestants per parent tournament."""
    n_tries: int = Field(default=20, ge=1)
    """Random operator draws per offspring before the operators' final sweep."""


class EvolutionarySearch(Strategy):
    """NSGA-II-style evolutionary search over the IR (see the module docstring)."""

    name: ClassVar[str] = "evolutionary"
    config: EvolutionaryConfig

    def __init__(self, config: EvolutionaryConfig | None = None) -> None:
        super().__init__(config or EvolutionaryConfig())
        self._rng = random.Random(self.config.seed)
        self._mctx: MutationContext | None = None

    def preflight(self, space: SearchSpace) -> None:
        """Reset the generator (a run starts from the seed) and build the operators' context."""
        self._rng = random.Random(self.config.seed)
        self._mctx = MutationContext.from_space(space)

    def population(self, ctx: AskContext) -> list[tuple[int, int, float]]:
        """The generation's population: `(archive index, rank, crowding distance)`, best first."""
        archive = ctx.archive
        ranks = archive.ranks()
        fronts: dict[int, list[int]] = {}
        for a_idx, rank in enumerate(ranks):
            if rank is not None:
                fronts.setdefault(rank, []).append(a_idx)
        names = [o.name for o in archive.objectives]
        members: list[tuple[int, int, float]] = []
        for rank in sorted(fronts):
            idxs = fronts[rank]
            points = np.array(
                [[archive[i].objective(n) for n in names] for i in idxs], dtype=np.float64
            )
            dist = crowding_distance(points)
            members.extend((i, rank, float(d)) for i, d in zip(idxs, dist, strict=True))
        members.sort(key=lambda m: (m[1], -m[2], m[0]))
        return members[: self.config.population_size]

    def _tournament(self, population: list[tuple[int, int, float]]) -> tuple[int, int, float]:
        k = min(self.config.tournament_size, len(population))
        contestants = self._rng.sample(population, k)
        return min(contestants, key=lambda m: (m[1], -m[2], m[0]))

    async def ask(self, ctx: AskContext) -> list[Proposal]:
        """`population_size` offspring (fewer when the budget or the operators run out)."""
        if self._mctx is None:
            self.preflight(ctx.space)
        assert self._mctx is not None
        mctx = self._mctx
        population = self.population(ctx)
        if not population:
            return []
        n = self.config.population_size
        if ctx.max_proposals is not None:
            n = min(n, ctx.max_proposals)
        avoid: set[str] = set(ctx.known_hashes)
        out: list[Proposal] = []
        specs: dict[int, TopologySpec] = {}

        def spec_of(a_idx: int) -> TopologySpec:
            if a_idx not in specs:
                specs[a_idx] = parse_topology(ctx.archive[a_idx].spec_json)
            return specs[a_idx]

        def accept(spec: TopologySpec) -> bool:
            check = ctx.check(spec)
            return check.ok and check.behaviour_hash not in avoid

        for _ in range(n):
            a = self._tournament(population)
            child: TopologySpec | None = None
            operator = ""
            if len(population) > 1 and self._rng.random() < self.config.crossover_rate:
                b = self._tournament(population)
                if b[0] != a[0]:
                    child = crossover(spec_of(a[0]), spec_of(b[0]), mctx, self._rng)
                    if child is not None:
                        check = ctx.check(child)
                        if not check.ok or avoid & {check.spec_hash, check.behaviour_hash}:
                            child = None
                        else:
                            operator = "crossover"
            if child is None:
                try:
                    child, op = mutate(
                        spec_of(a[0]),
                        mctx,
                        self._rng,
                        self.config.n_tries,
                        avoid=avoid,
                        accept=accept,
                    )
                except SearchError:
                    continue
                operator = f"mutate:{op}"
            done = ctx.check(child)
            avoid.update(h for h in (done.spec_hash, done.behaviour_hash) if h)
            out.append(
                Proposal(spec=child, parent_idx=ctx.archive_candidates[a[0]], operator=operator)
            )
        return out
