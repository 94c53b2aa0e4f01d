"""`EvolutionarySearch`: an opening of known structures, then structural mutations with NSGA-II
selection; needs no model.

**Opening** (`opening=True`, the default): before any mutation, the strategy proposes the
structures a researcher tries first, built from the registries by
`core.search.operators.opening_specs`: generation 0 proposes every single agent not yet
evaluated (so each agent's cost per example is measured); the next generation proposes the
agreement gates, votes, escalate-after cascades (verifier cascades among them, when judge
conditions are registered), input-feature routers between agents whose measured per-example
accuracies complement each other, the pair whose perfect router would add the most hypervolume
to the singles' front first (`core.search.operators.router_pairs`) and, where the
problem's agents are sampled, self-consistency votes that the agents' cost order allows (cheap
agents first, escalation only to dearer ones), interleaved kind by kind (gate, vote, cascade
or router in turn, self-consistency, gate, ...), at most
`opening_share` of the run's evaluation budget in all (singles included). On a problem with only
agents these are built from the standard library (`core.combinators`).
Each is new by behaviour (`CheckResult.behaviour_hash`).

Then per generation:

1. **Population** (NSGA-II environmental selection over the whole archive): the valid entries
   are ranked by non-dominated sorting on `survival_objectives` (accuracy up; cost and latency
   down), within a front by crowding distance (more isolated first), then fewer agents, then
   smaller depth (size and depth only break ties), then archive order; the first
   `population_size` form the population.
2. **Front bridges**, up to `bridge_share` of the generation's offspring: the valid entries'
   (accuracy, cost) Pareto front, sorted by cost, has a gap between each pair of neighbours,
   the hypervolume a point between them could add, `(acc_dear - acc_cheap) * (cost_dear -
   cost_cheap)`. Widest gap first, its bridges are, in `bridge_order` (default mix, learned,
   cascade): **mix**, routers that send the inputs an input-only condition picks to one
   neighbour and the rest to the other, both ways round (`core.search.operators.mix_specs`,
   operator `bridge:mix`); **learned**, only when the problem has a train split
   (`AskContext.train`): both neighbours are run on every train example (through the run's
   evaluator and cache), "the cheaper one is right" is fitted on the train inputs' features,
   and `router(when learned_<digest>: cheap, else dear)` is proposed at the thresholds that
   send 25%, 50% and 75% of the train inputs to the cheaper one (one fit, a curve of points
   between the neighbours; fitted once per pair in a run, and only when its turn comes;
   operator `bridge:learned`; `core.search.learned` has the rule, from fit to `apply`);
   **cascade**, the cheaper neighbour run whole, escalating on each condition its candidates
   allow to the dearer neighbour's dearest
   agent (`bridge_specs`, operator `bridge:cascade`). Parent: the cheaper neighbour. A bridge's
   cost lies between its ends, so each one is a bet on exactly the part of the front with the
   most hypervolume missing; random mutation rarely builds one (it needs two whole
   topologies, or the right agent and a condition after the right node, at once).
3. **Parents** by binary (or `tournament_size`) tournament on (rank, -crowding, archive index).
4. **Offspring**, the rest of `population_size`: with probability `crossover_rate` a subtree
   crossover of two parents (`core.search.operators.crossover`), else (or when it fails) a
   mutation of one parent (`core.search.operators.mutate`). Every offspring is checked with the
   engine's own check (`ctx.check(spec).ok`) and is new (its canonical hash is not among the
   candidates so far nor this generation's offspring); a slot with no such offspring after the
   operators' tries is left empty.

Scores of archive entries are on the split each was evaluated on (a generation's minibatch, or
the full validation split): selection treats them as estimates of the same quantity (by
design; promotion and the final report compare like with like).

Determinism: one `random.Random(config.seed)`, reset by `preflight` at the start of every run;
names and nodes are visited in sorted or document order by the operators.
"""

from __future__ import annotations

import math
import random
from collections.abc import Callable
from typing import ClassVar, Literal

import numpy as np
from pydantic import Field, field_validator

from core.combinators.learned import LearnedCondition
from core.errors import SearchError
from core.ir import TopologySpec, parse_topology, spec_hash
from core.ir.dataflow import EffectTable, normalize
from core.ir.models import AgentStepSpec, PipelineSpec
from core.search.learned import fit_between
from core.search.operators import (
    MutationContext,
    bridge_specs,
    crossover,
    learned_router_spec,
    mix_specs,
    mutate,
    opening_specs,
)
from core.search.pareto import crowding_distance, non_dominated_sort, pareto_front_mask
from core.search.strategies.base import AskContext, Proposal, SearchSpace, Strategy, StrategyConfig

__all__ = ["EvolutionaryConfig", "EvolutionarySearch"]

BridgeKind = Literal["mix", "learned", "cascade"]
"""A kind of front bridge (module docstring, step 2)."""


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
    opening: bool = True
    """Start with the registries' singles, gates, votes and cascades (module docstring)."""
    opening_share: float = Field(default=0.6, ge=0.0, le=1.0)
    """The most of the evaluation budget the opening may take (singles included); with no
    evaluation budget, the whole opening is proposed."""
    bridge_share: float = Field(default=0.5, ge=0.0, le=1.0)
    """The share of each generation's offspring (after the opening) that are front bridges:
    cascades aimed at the widest gaps of the (accuracy, cost) front (module docstring)."""
    bridge_order: tuple[BridgeKind, ...] = ("mix", "learned", "cascade")
    """The bridges of one gap, in the order they are proposed (each kind at most once; a kind
    left out is never proposed). Learned routers come after the input-feature mixes: they cost
    two runs of the train split to propose, and on `gsm8k_replay` (seed 42) proposing them first
    displaced the question-length router (0.543 at $1.27 a problem) with two learned ones it
    dominates (0.493 at $1.24, 0.457 at $1.00)."""
    survival_objectives: tuple[str, ...] = ("accuracy", "cost_usd", "latency_ms")
    """What NSGA-II ranks on (archive objective names; accuracy is maximised, the rest
    minimised); `n_agents` then `depth` break ties."""

    @field_validator("bridge_order")
    @classmethod
    def _distinct(cls, value: tuple[BridgeKind, ...]) -> tuple[BridgeKind, ...]:
        if len(set(value)) != len(value):
            raise ValueError(f"each bridge kind at most once, got {list(value)}")
        return value


class EvolutionarySearch(Strategy):
    """NSGA-II-style evolutionary search over the IR (see the module docstring)."""

    name: ClassVar[str] = "evolutionary"
    config: EvolutionaryConfig

    def __init__(self, config: EvolutionaryConfig | None = None) -> None:
        super().__init__(config or EvolutionaryConfig())
        self._rng = random.Random(self.config.seed)
        self._mctx: MutationContext | None = None
        self._opening_done = False
        self._fits: dict[tuple[str, str], list[LearnedCondition]] = {}

    def preflight(self, space: SearchSpace) -> None:
        """Reset the generator (a run starts from the seed) and build the operators' context."""
        self._rng = random.Random(self.config.seed)
        self._mctx = MutationContext.from_space(space)
        self._opening_done = False
        self._fits = {}

    @staticmethod
    def agent_costs(ctx: AskContext) -> dict[str, float]:
        """USD per example of each agent measured alone: the archive's valid entries whose
        normal form is a one-agent pipeline (the first such entry per agent)."""
        effects = ctx.space.effects
        out: dict[str, float] = {}
        for entry in ctx.archive:
            if entry.invalid_reason is not None:
                continue
            name = _single_agent(entry.spec_json, effects)
            if name is not None:
                out.setdefault(name, entry.objective("cost_usd"))
        return out

    @staticmethod
    def agent_scores(ctx: AskContext) -> dict[str, tuple[float, ...]]:
        """Per-example accuracy of each agent measured alone on the full validation split (the
        same examples in the same order for every agent): the first valid entry per agent
        whose normal form is a one-agent pipeline and whose split is `"validation"`."""
        effects = ctx.space.effects
        out: dict[str, tuple[float, ...]] = {}
        for entry in ctx.archive:
            if entry.invalid_reason is not None or entry.split != "validation":
                continue
            name = _single_agent(entry.spec_json, effects)
            if name is not None and name not in out:
                out[name] = tuple(b.accuracy for b in entry.bundles)
        return out

    def population(self, ctx: AskContext) -> list[tuple[int, int, float]]:
        """The generation's population: `(archive index, rank, crowding distance)`, best first
        (NSGA-II on `survival_objectives`; ties: crowding, fewer agents, smaller depth, index)."""
        archive = ctx.archive
        names = list(self.config.survival_objectives)
        dirs = ["max" if n in ("accuracy", "confidence", "robustness") else "min" for n in names]
        valid = [i for i, e in enumerate(archive) if e.invalid_reason is None]
        if not valid:
            return []
        points = np.array(
            [[archive[i].objective(n) for n in names] for i in valid], dtype=np.float64
        )
        members: list[tuple[int, int, float]] = []
        for rank, rows in enumerate(non_dominated_sort(points, dirs)):
            dist = crowding_distance(points[rows])
            members.extend((valid[int(r)], rank, float(d)) for r, d in zip(rows, dist, strict=True))

        def key(m: tuple[int, int, float]) -> tuple[float, ...]:
            entry = archive[m[0]]
            return (m[1], -m[2], entry.objective("n_agents"), entry.objective("depth"), m[0])

        members.sort(key=key)
        return members[: self.config.population_size]

    def _opening(self, ctx: AskContext, mctx: MutationContext) -> list[Proposal] | None:
        """The opening's proposals for this generation, or None when the opening is over."""
        if not self.config.opening or self._opening_done:
            return None
        known: set[str] = set(ctx.known_hashes)
        evaluated = sum(1 for r in ctx.history if r.status == "evaluated")
        cap: int | None = None
        if ctx.max_proposals is not None:
            total = evaluated + ctx.max_proposals
            cap = max(0, min(ctx.max_proposals, int(self.config.opening_share * total) - evaluated))
        specs = opening_specs(mctx)  # mctx carries the measured agent costs

        def fresh(wanted: list[tuple[TopologySpec, str]]) -> list[Proposal]:
            out: list[Proposal] = []
            for spec, op in wanted:
                if cap is not None and len(out) >= cap:
                    break
                check = ctx.check(spec)
                hashes = {h for h in (check.spec_hash, check.behaviour_hash) if h}
                if not check.ok or hashes & known:
                    continue
                known.update(hashes)
                out.append(Proposal(spec=spec, parent_idx=0, operator=op))
            return out

        singles = fresh([(s, op) for s, op in specs if op == "opening:single"])
        if singles:  # measure every agent's cost first: the structures are ordered by it
            return singles
        self._opening_done = True
        by_kind: dict[str, list[tuple[TopologySpec, str]]] = {}
        for s, op in specs:
            by_kind.setdefault(op, []).append((s, op))
        # cascades and input-feature routers (both: two agents and one condition) share one
        # turn of the round, alternating, so the gates and votes keep their share
        two_agent = _interleave(
            [by_kind[k] for k in ("opening:cascade", "opening:router") if k in by_kind]
        )
        groups = [
            by_kind.get("opening:gate", []),
            by_kind.get("opening:vote", []),
            two_agent,
            by_kind.get("opening:self_consistency", []),
        ]
        return fresh(_interleave([g for g in groups if g]))

    @staticmethod
    def front_gaps(ctx: AskContext) -> list[tuple[int, int, float]]:
        """The gaps of the valid entries' (accuracy, cost) Pareto front: `(cheaper archive
        index, dearer archive index, area)` for each pair of cost-neighbours on the front whose
        accuracy rises, widest first (ties: cheaper first); area = accuracy gain x USD per
        example between them."""
        archive = ctx.archive
        valid = [i for i, e in enumerate(archive) if e.invalid_reason is None]
        if not valid:
            return []
        points = np.array(
            [[archive[i].objective("accuracy"), archive[i].objective("cost_usd")] for i in valid],
            dtype=np.float64,
        )
        mask = pareto_front_mask(points, ["max", "min"])
        front = sorted(
            (valid[k] for k in range(len(valid)) if mask[k]),
            key=lambda i: (archive[i].objective("cost_usd"), -archive[i].objective("accuracy"), i),
        )
        distinct: list[int] = []  # one entry per point, the earliest (twins make no gap)
        for i in front:
            point = (archive[i].objective("accuracy"), archive[i].objective("cost_usd"))
            if not distinct or point != (
                archive[distinct[-1]].objective("accuracy"),
                archive[distinct[-1]].objective("cost_usd"),
            ):
                distinct.append(i)
        gaps: list[tuple[int, int, float]] = []
        for lo, hi in zip(distinct, distinct[1:], strict=False):
            da = archive[hi].objective("accuracy") - archive[lo].objective("accuracy")
            dc = archive[hi].objective("cost_usd") - archive[lo].objective("cost_usd")
            if da > 0 and dc > 0:
                gaps.append((lo, hi, da * dc))
        gaps.sort(key=lambda g: (-g[2], archive[g[0]].objective("cost_usd"), g[0]))
        return gaps

    async def _learned(
        self,
        ctx: AskContext,
        mctx: MutationContext,
        lo: int,
        hi: int,
        cheap: TopologySpec,
        dear: TopologySpec,
    ) -> list[TopologySpec]:
        """The learned routers between archive entries `lo` (cheaper) and `hi` (module
        docstring, step 2); empty without a train split, or when the budget refuses the train
        runs (then asked again next generation), or there is nothing to learn."""
        train = ctx.train
        if train is None:
            return []
        key = (
            ctx.archive[lo].spec_hash or spec_hash(cheap),
            ctx.archive[hi].spec_hash or spec_hash(dear),
        )
        conds = self._fits.get(key)
        if conds is None:
            a = await train.scores(ctx.archive_candidates[lo], cheap)
            b = None if a is None else await train.scores(ctx.archive_candidates[hi], dear)
            if a is None or b is None:
                return []
            conds = self._fits[key] = fit_between(
                a, b, train.examples, cheaper=key[0], dearer=key[1], text_of=train.text_of
            )
        out: list[TopologySpec] = []
        for cond in conds:
            spec = learned_router_spec(train.learn(cond), cheap, dear, mctx)
            if spec is not None:
                out.append(spec)
        return out

    async def _bridges(
        self,
        ctx: AskContext,
        mctx: MutationContext,
        n: int,
        spec_of: Callable[[int], TopologySpec],
        avoid: set[str],
    ) -> list[Proposal]:
        """Up to `n` front bridges, widest gap first (module docstring, step 2)."""
        out: list[Proposal] = []

        def take(children: list[TopologySpec], operator: str, parent: int) -> None:
            for child in children:
                if len(out) >= n:
                    return
                check = ctx.check(child)
                hashes = {h for h in (check.spec_hash, check.behaviour_hash) if h}
                if not check.ok or hashes & avoid:
                    continue
                avoid.update(hashes)
                out.append(Proposal(spec=child, parent_idx=parent, operator=operator))

        for lo, hi, _area in self.front_gaps(ctx):
            cheap, dear = spec_of(lo), spec_of(hi)
            parent = ctx.archive_candidates[lo]
            for kind in self.config.bridge_order:
                if len(out) >= n:
                    return out
                if kind == "mix":
                    take(mix_specs(cheap, dear, mctx), "bridge:mix", parent)
                elif kind == "cascade":
                    take(bridge_specs(cheap, dear, mctx), "bridge:cascade", parent)
                else:  # fitted only when its turn comes: its train runs are paid for
                    take(
                        await self._learned(ctx, mctx, lo, hi, cheap, dear),
                        "bridge:learned",
                        parent,
                    )
        return out

    def _tournament(self, population: list[tuple[int, int, float]]) -> tuple[int, int, float]:
        k = min(self.config.tournament_size, len(population))
        contestants = self._rng.sample(population, k)
        return min(contestants, key=lambda m: (m[1], -m[2], m[0]))

    async def ask(self, ctx: AskContext) -> list[Proposal]:
        """`population_size` offspring (fewer when the budget or the operators run out)."""
        if self._mctx is None:
            self.preflight(ctx.space)
        assert self._mctx is not None
        mctx = self._mctx.model_copy(
            update={"agent_costs": self.agent_costs(ctx), "agent_scores": self.agent_scores(ctx)}
        )
        opening = self._opening(ctx, mctx)
        if opening:
            return opening
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

        out.extend(
            await self._bridges(ctx, mctx, math.ceil(self.config.bridge_share * n), spec_of, avoid)
        )
        for _ in range(n - len(out)):
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


def _single_agent(spec_json: str, effects: EffectTable) -> str | None:
    """The agent of a topology whose normal form is a one-agent pipeline, else None."""
    form = normalize(parse_topology(spec_json), effects)
    if isinstance(form, PipelineSpec) and len(form.steps) == 1:
        op = form.steps[0].operation
        if isinstance(op, AgentStepSpec) and op.agent_name is not None:
            return op.agent_name
    return None


def _interleave(groups: list[list[tuple[TopologySpec, str]]]) -> list[tuple[TopologySpec, str]]:
    """Round-robin over `groups`: the first of each, then the second of each, ..."""
    out: list[tuple[TopologySpec, str]] = []
    for i in range(max((len(g) for g in groups), default=0)):
        out.extend(g[i] for g in groups if i < len(g))
    return out
