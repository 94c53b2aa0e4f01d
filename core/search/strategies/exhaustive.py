"""`ExhaustiveSearch`: every topology of at most N nodes the registries allow, once each.

The true front of small topologies: a yardstick for the other strategies, and a strategy a
researcher with a small registry will want.

**The grammar.** `enumerate_topologies(ctx, max_nodes)` builds candidates bottom-up, by exact
node count (`core.ir.spec_metrics(spec).n_nodes`: every node of every kind), knowing at each
position how many candidates the input can hold (`core.ir.dataflow.Flow`, from the problem's
`EffectTable`). It generates normal forms directly, so that nothing it produces is a no-op
`core.ir.dataflow.normalize` would delete or a shape `analyse` would reject:

- the root is a pipeline (of one atomic step, the normal form of a lone step, or of two or
  more steps), a parallel or a router; a nested pipeline has two or more steps and is never a
  pipeline's step (it would be spliced in);
- a function step appears only where its input can hold the candidates it needs
  (`NameEffect.needs_candidates`); an identity step (`NameEffect.identity`, e.g. `keep_answer`)
  only as a router's route or fallback (the accept route of a cascade: anywhere else it does
  nothing);
- a parallel has two or more branches (a one-branch parallel is a no-op or nearly one),
  pairwise different (`distinct_branches`: a replayed or temperature-0 agent twice gives the
  same answer at twice the cost), in every order unless its merge is listed in
  `commutative_merges` (then in one sorted order). None is listed by default: `first_wins`,
  the candidate merges and the votes depend on branch order, and even `fastest` does on an
  exact tie of model time. A branch is not itself a parallel with the same merge (for merges
  that declare `combine`, the nested group is the flat one). Every branch of a `fastest` race
  answers;
- a router chooses by route conditions (no classifier: a classifier's route names are not
  declared), route `i` is named after its condition, conditions are pairwise different and no
  two are complements (the later one would be the fallback), and every condition can be read
  on the router's input. A router with a fallback has a route whose step differs from it; with
  one route and a fallback, a condition that is the declared complement of another
  (`NameEffect.complement_of`) is not used (its mirror `router(C -> fallback, else step)` is
  the normal form). A router without a fallback is enumerated too (`router_fallback="any"`)
  unless `router_fallback="always"`.
- kinds are those `MutationContext.kind_allowed` allows, depth at most `max_depth`, agents the
  registered ones, callables by role; a `refinement_loop` is never enumerated (its evaluator,
  updater and iteration count are open-ended).

As a safety net every generated topology is still checked with `analyse` (kept only without a
static issue) and de-duplicated by `behaviour_hash`; `Enumeration.rejected` and
`Enumeration.duplicates` count what the net caught (0 and 0 on the registries tested).

**Order.** Cheap and small first: by node count, then number of agent steps, then the
canonical key (deterministic: no set or dict order of hashed values).

**The strategy.** `preflight` enumerates once (the count is in `describe()`, so in
`RunStarted.config` as `enumerated`, and in the first proposal's `thought`); `ask` returns the
next `batch_size` topologies not yet known to the run (`AskContext.known_hashes`, e.g. the
seed), each checked with the engine's own check. With `full_validation` (default) every
candidate is scored on the whole validation split (`minibatch_size` is set to
`FULL_VALIDATION`, so the engine never draws a minibatch and never re-scores). Give the run a
budget of at least `count + 1` evaluations (the seed is one) so it is not cut short; the CLI
does that when no `--max-evaluations` is given.
"""

from __future__ import annotations

import time
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any, ClassVar, Literal

from pydantic import Field, model_validator

from core.ir.dataflow import EffectTable, Flow, analyse, behaviour_hash
from core.ir.models import (
    AgentStepSpec,
    AnyNode,
    FunctionStepSpec,
    ParallelSpec,
    PipelineSpec,
    PipelineStepEntry,
    RouterSpec,
    RouteSpec,
    TopologySpec,
)
from core.search.operators import MutationContext
from core.search.strategies.base import AskContext, Proposal, SearchSpace, Strategy, StrategyConfig

__all__ = [
    "BENCH_GRAMMAR",
    "FULL_VALIDATION",
    "Enumeration",
    "ExhaustiveConfig",
    "ExhaustiveSearch",
    "enumerate_topologies",
]

FULL_VALIDATION = 1_000_000_000
"""The `minibatch_size` `full_validation` sets: larger than any split, so the engine scores
every candidate on the whole validation split (`minibatch_indices` returns every position)."""


BENCH_GRAMMAR: Mapping[str, Any] = MappingProxyType(
    {
        "merges": ("merge_candidates", "merge_vote"),
        "conditions": ("candidates_agree",),
        "branches": "agents",
        "pipeline_agents": "first",
        "verdict_routes": True,
        "router_fallback": "always",
        "consecutive_functions": False,
    }
)
"""The restriction `bench/bench_search.py` enumerates with (`ExhaustiveConfig(**BENCH_GRAMMAR)`):
the problem's registered merges only, parallels of agents, agents only first in a pipeline or as
an escalation, the agreement condition with its accept route, fallbacks always, no function step
right after another. On gsm8k_replay: 196, 340 and 652 topologies of at most 5, 6 and 7 nodes
(the full grammar, `ExhaustiveConfig()`: 656, 11,820 and 306,244 at 4, 5 and 6 nodes,
enumerated in 0.3 s, 9 s and 834 s on 2 busy cores; at 7 nodes millions, not enumerated). It
holds every single agent, every ordered pair, triple and quadruple of distinct agents under both
merges, their votes, and every agreement gate of two agents escalating to a third (7 nodes)."""


class ExhaustiveConfig(StrategyConfig):
    """Options of the exhaustive strategy (values checked)."""

    n_generations: int | None = Field(default=None, ge=1)
    """Generations to run; None (default): until every enumerated topology was proposed (the
    engine then ends the run, `strategy exhausted`) or a budget stops it."""
    max_nodes: int = Field(default=5, ge=1, le=12)
    """The node bound N: every topology of at most this many nodes (`spec_metrics().n_nodes`)."""
    batch_size: int = Field(default=16, ge=1)
    """Proposals per generation (an archive snapshot after each)."""
    full_validation: bool = True
    """Score every candidate on the whole validation split (sets `minibatch_size` to
    `FULL_VALIDATION`): the exhaustive front is then the true front on that split."""
    distinct_branches: bool = True
    """The branches of a parallel are pairwise different (see the module docstring)."""
    commutative_merges: tuple[str, ...] = ()
    """Merges whose result does not depend on branch order: their branches are enumerated in
    one sorted order only. Default none (see the module docstring)."""
    router_fallback: Literal["any", "always"] = "any"
    """`"any"`: routers with and without a fallback; `"always"`: only with one."""
    merges: tuple[str, ...] | None = None
    """Restriction: only these merges (None: every merge the context allows)."""
    conditions: tuple[str, ...] | None = None
    """Restriction: only these route conditions (None: every registered condition)."""
    branches: Literal["any", "agents"] = "any"
    """Restriction: `"agents"`: a parallel's branches are agent steps only."""
    pipeline_agents: Literal["any", "first"] = "any"
    """Restriction: `"first"`: in a pipeline only the first step may be an agent or a parallel
    (the later steps consume: function steps and routers; an agent then runs only as a
    router's route or fallback, i.e. as an escalation)."""
    consecutive_functions: bool = True
    """Restriction: False: no function step right after another in a pipeline (on the replay
    problem the later selection step overrides the earlier one's final answer)."""
    verdict_routes: bool = False
    """Restriction: a router on a condition with a declared verdict has one route and a
    fallback, one of which is the identity step: `accept` conditions route to it (accept the
    answer, else the fallback), `reject` conditions fall back to it (escalate on the route)."""

    @model_validator(mode="before")
    @classmethod
    def _full(cls, data: Any) -> Any:
        if isinstance(data, dict) and data.get("full_validation", True):  # type: ignore[union-attr]
            return {**data, "minibatch_size": FULL_VALIDATION}  # type: ignore[misc]
        return data  # type: ignore[return-value]


# --- the grammar -------------------------------------------------------------------------------

# A term is a light tuple, turned into IR models only at the root:
#   ("A", agent) | ("F", callable) | ("P", (term, ...)) | ("L", merge, (term, ...))
#   | ("R", ((condition, term), ...), fallback term | None)
Term = tuple[Any, ...]


@dataclass(frozen=True, slots=True)
class _Item:
    term: Term
    key: str  # canonical text of the term (distinctness, order)
    flow: Flow  # what its output can hold
    depth: int
    agents: int  # agent steps


_STEP, _BRANCH, _ROUTE = "step", "branch", "route"


class _Grammar:
    def __init__(self, ctx: MutationContext, config: ExhaustiveConfig) -> None:
        self.ctx = ctx
        self.table: EffectTable = ctx.effects
        self.config = config
        self.kinds = {
            k: ctx.kind_allowed(k)
            for k in ("agent_step", "function_step", "pipeline", "parallel", "router")
        }
        self.agents = ctx.agent_names if self.kinds["agent_step"] else ()
        self.steps = ctx.names("step") if self.kinds["function_step"] else ()
        self.merges = tuple(
            m for m in ctx.merge_names() if config.merges is None or m in config.merges
        )
        self.conditions = tuple(
            c for c in ctx.names("condition") if config.conditions is None or c in config.conditions
        )
        self.first_only = config.pipeline_agents == "first"
        self.identity = tuple(s for s in self.steps if self.table.callable(s).identity)
        self.memo: dict[tuple[str, int, Flow, int], list[_Item]] = {}

    # atoms ---------------------------------------------------------------------------------

    def atoms(self, where: str, flow: Flow) -> list[_Item]:
        out: list[_Item] = []
        for name in self.agents:
            e = self.table.agent(name)
            out.append(
                _Item(("A", name), f"A:{name}", flow.add(e.adds_candidates, e.answers), 0, 1)
            )
        for name in self.steps:
            e = self.table.callable(name)
            if e.needs_candidates > flow.hi:
                continue  # a no-op here
            if e.identity and where != _ROUTE:
                continue  # keeps its input: meaningful only as an accept route
            answers = e.answers or name not in self.table.names
            out.append(_Item(("F", name), f"F:{name}", flow.add(e.adds_candidates, answers), 0, 0))
        return out

    # any node of exactly `size` nodes at a position --------------------------------------------

    def nodes(self, where: str, size: int, flow: Flow, depth_left: int) -> list[_Item]:
        key = (where, size, flow, depth_left)
        found = self.memo.get(key)
        if found is not None:
            return found
        out: list[_Item] = []
        if size == 1:
            out.extend(self.atoms(where, flow))
        elif depth_left >= 1:
            if self.kinds["pipeline"] and where != _STEP:
                out.extend(self.pipelines(size, flow, depth_left, min_steps=2))
            if self.kinds["parallel"]:
                out.extend(self.parallels(size, flow, depth_left))
            if self.kinds["router"]:
                out.extend(self.routers(size, flow, depth_left))
        self.memo[key] = out
        return out

    def pipelines(self, size: int, flow: Flow, depth_left: int, min_steps: int) -> list[_Item]:
        out: list[_Item] = []
        for steps in self._sequences(size - 1, flow, depth_left - 1, min_steps):
            terms = tuple(s.term for s in steps)
            out.append(
                _Item(
                    ("P", terms),
                    "P[" + ",".join(s.key for s in steps) + "]",
                    steps[-1].flow,
                    1 + max(s.depth for s in steps),
                    sum(s.agents for s in steps),
                )
            )
        return out

    def _sequences(
        self,
        size: int,
        flow: Flow,
        depth_left: int,
        min_steps: int,
        later: bool = False,
        after_function: bool = False,
    ) -> Iterator[list[_Item]]:
        """Pipeline steps (no nested pipeline) of `size` nodes in all, at least `min_steps`."""
        if size <= 0:
            return
        for first in range(1, size + 1):
            for head in self.nodes(_STEP, first, flow, depth_left):
                if later and head.term[0] in ("A", "L"):
                    continue  # pipeline_agents="first": agents only first, or as escalations
                if after_function and head.term[0] == "F":
                    continue  # consecutive_functions=False
                rest = size - first
                if rest == 0:
                    if min_steps <= 1:
                        yield [head]
                    continue
                for tail in self._sequences(
                    rest,
                    head.flow,
                    depth_left,
                    max(0, min_steps - 1),
                    self.first_only,
                    head.term[0] == "F" and not self.config.consecutive_functions,
                ):
                    yield [head, *tail]

    def parallels(self, size: int, flow: Flow, depth_left: int) -> list[_Item]:
        out: list[_Item] = []
        inner = size - 1
        for merge in self.merges:
            effect = self.table.callable(merge)
            commutative = merge in self.config.commutative_merges
            for branches in self._branch_lists(inner, flow, depth_left - 1, merge, commutative):
                if len(branches) < 2:
                    continue
                flows = [b.flow for b in branches]
                if merge == "fastest" and not all(f.answered for f in flows):
                    continue  # fastest_branch_without_answer
                if effect.combine == "one":
                    out_flow = Flow(
                        min(f.lo for f in flows),
                        max(f.hi for f in flows),
                        all(f.answered for f in flows),
                    )
                elif effect.combine == "all":
                    out_flow = Flow(
                        sum(f.lo for f in flows),
                        sum(f.hi for f in flows),
                        any(f.answered for f in flows),
                    )
                else:
                    out_flow = Flow(
                        min(f.lo for f in flows),
                        sum(f.hi for f in flows),
                        any(f.answered for f in flows),
                    )
                out.append(
                    _Item(
                        ("L", merge, tuple(b.term for b in branches)),
                        f"L{merge}[" + ",".join(b.key for b in branches) + "]",
                        out_flow,
                        1 + max(b.depth for b in branches),
                        sum(b.agents for b in branches),
                    )
                )
        return out

    def _branches(self, size: int, flow: Flow, depth_left: int, merge: str) -> list[_Item]:
        items = self.nodes(_BRANCH, size, flow, depth_left)
        if self.config.branches == "agents":
            items = [i for i in items if i.term[0] == "A"]
        combine = self.table.callable(merge).combine
        if combine is None:
            return items
        return [i for i in items if not self._flattens(i, merge, combine)]

    def _flattens(self, item: _Item, merge: str, combine: str) -> bool:
        """A branch that is a parallel the outer group absorbs: one with the same merge, or,
        under a merge that keeps every branch's candidates, any such merge (the outer merge
        then sees the same candidates in the same order as the flat group)."""
        if item.term[0] != "L":
            return False
        if item.term[1] == merge:
            return True
        return combine == "all" and self.table.callable(item.term[1]).combine == "all"

    def _branch_lists(
        self, size: int, flow: Flow, depth_left: int, merge: str, commutative: bool
    ) -> Iterator[list[_Item]]:
        distinct = self.config.distinct_branches

        def rec(remaining: int, chosen: list[_Item], floor: str | None) -> Iterator[list[_Item]]:
            if remaining == 0:
                yield list(chosen)
                return
            for part in range(1, remaining + 1):
                for b in self._branches(part, flow, depth_left, merge):
                    if distinct and any(b.key == c.key for c in chosen):
                        continue
                    if commutative and floor is not None:
                        if (b.key < floor) or (distinct and b.key == floor):
                            continue
                    chosen.append(b)
                    yield from rec(remaining - part, chosen, b.key if commutative else None)
                    chosen.pop()

        if depth_left < 0:
            return
        yield from rec(size, [], None)

    def routers(self, size: int, flow: Flow, depth_left: int) -> list[_Item]:
        readable = [
            c for c in self.conditions if self.table.callable(c).needs_candidates <= flow.hi
        ]
        if not readable:
            return []
        out: list[_Item] = []
        inner = size - 1
        fallback_sizes: list[int | None] = [] if self.config.router_fallback == "always" else [None]
        fallback_sizes += list(range(1, inner))
        for fb_size in fallback_sizes:
            route_nodes = inner - (fb_size or 0)
            if route_nodes < 1:
                continue
            fallbacks: list[_Item | None] = (
                [None]
                if fb_size is None
                else list(self.nodes(_ROUTE, fb_size, flow, depth_left - 1))
            )
            for routes in self._route_lists(route_nodes, flow, depth_left - 1, readable):
                verdicts = [self.table.callable(c).verdict for c, _ in routes]
                step_is_id = False
                if self.config.verdict_routes and any(verdicts):
                    if len(routes) != 1 or fb_size is None:
                        continue
                    step_is_id = routes[0][1].term in [("F", i) for i in self.identity]
                decided = [c for c, _ in routes]
                if any(self._decides(r[1], decided[: i + 1]) for i, r in enumerate(routes)):
                    continue
                for fb in fallbacks:
                    if fb is not None and self._decides(fb, decided):
                        continue
                    if self.config.verdict_routes and any(verdicts):
                        assert fb is not None
                        fb_is_id = fb.term in [("F", i) for i in self.identity]
                        want_route_id = verdicts[0] == "accept"
                        if step_is_id != want_route_id or fb_is_id == want_route_id:
                            continue
                    if fb is not None and all(r[1].key == fb.key for r in routes):
                        continue  # every route runs the fallback: the router is its fallback
                    if fb is not None and len(routes) == 1:
                        other = self.table.callable(routes[0][0]).complement_of
                        if other is not None and other in readable:
                            continue  # router(not C -> A, else B) is router(C -> B, else A)
                    parts = [r[1] for r in routes] + ([fb] if fb is not None else [])
                    flows = [p.flow for p in parts]
                    key = (
                        "R["
                        + ";".join(f"{c}>{s.key}" for c, s in routes)
                        + "|"
                        + (fb.key if fb is not None else "")
                        + "]"
                    )
                    out.append(
                        _Item(
                            (
                                "R",
                                tuple((c, s.term) for c, s in routes),
                                None if fb is None else fb.term,
                            ),
                            key,
                            Flow(
                                min(f.lo for f in flows),
                                max(f.hi for f in flows),
                                all(f.answered for f in flows),
                            ),
                            1 + max(p.depth for p in parts),
                            sum(p.agents for p in parts),
                        )
                    )
        return out

    def _decides(self, item: _Item, decided: Sequence[str]) -> bool:
        """`item` is a router that tests, on the same input, a condition whose value its
        position already fixes (a route's own condition and the earlier ones; all of them in
        the fallback): that route of it is dead, the router is a smaller one."""
        if item.term[0] != "R":
            return False
        fixed = set(decided)
        fixed |= {o for c in decided if (o := self.table.callable(c).complement_of) is not None}
        for cond, _ in item.term[1]:
            if cond in fixed or self.table.callable(cond).complement_of in fixed:
                return True
        return False

    def _route_lists(
        self, size: int, flow: Flow, depth_left: int, readable: Sequence[str]
    ) -> Iterator[list[tuple[str, _Item]]]:
        def clashes(cond: str, used: list[str]) -> bool:
            mine = self.table.callable(cond).complement_of
            for u in used:
                if u == cond or mine == u or self.table.callable(u).complement_of == cond:
                    return True
            return False

        def rec(remaining: int, chosen: list[tuple[str, _Item]]) -> Iterator[list[Any]]:
            if remaining == 0:
                if chosen:
                    yield list(chosen)
                return
            used = [c for c, _ in chosen]
            for part in range(1, remaining + 1):
                steps = self.nodes(_ROUTE, part, flow, depth_left)
                for cond in readable:
                    if clashes(cond, used):
                        continue
                    for s in steps:
                        chosen.append((cond, s))
                        yield from rec(remaining - part, chosen)
                        chosen.pop()

        yield from rec(size, [])

    # roots ---------------------------------------------------------------------------------

    def roots(self, size: int) -> list[_Item]:
        flow = Flow()
        depth_left = self.ctx.max_depth
        out: list[_Item] = []
        if self.kinds["pipeline"]:
            if size == 2:  # a lone step's normal form: pipeline[step]
                for atom in self.atoms(_STEP, flow):
                    out.append(
                        _Item(("P", (atom.term,)), f"P[{atom.key}]", atom.flow, 1, atom.agents)
                    )
            else:
                out.extend(self.pipelines(size, flow, depth_left, min_steps=2))
        if self.kinds["parallel"]:
            out.extend(self.parallels(size, flow, depth_left))
        if self.kinds["router"]:
            out.extend(self.routers(size, flow, depth_left))
        if self.table.answer_needs_agent:
            # else no_agent: no agent step, or a path on which none answers
            out = [i for i in out if i.agents > 0 and i.flow.answered]
        return out


def _to_spec(term: Term) -> AnyNode:
    tag = term[0]
    if tag == "A":
        return AgentStepSpec(agent_name=term[1])
    if tag == "F":
        return FunctionStepSpec(callable_name=term[1])
    if tag == "P":
        return PipelineSpec(steps=[PipelineStepEntry(operation=_to_spec(t)) for t in term[1]])
    if tag == "L":
        return ParallelSpec(merge=term[1], steps=[_to_spec(t) for t in term[2]])
    routes, fallback = term[1], term[2]
    return RouterSpec(
        routes=[RouteSpec(name=c, step=_to_spec(t), condition_name=c) for c, t in routes],
        fallback_step=None if fallback is None else _to_spec(fallback),
    )


# --- the enumeration ---------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Enumeration:
    """What `enumerate_topologies` found.

    Attributes:
        specs: the distinct topologies, cheap and small first (see the module docstring).
        by_size: how many of `specs` have 1, 2, ... `max_nodes` nodes (index 0: 1 node).
        generated: topologies the grammar produced before the safety net.
        rejected: of those, statically rejected (`analyse(...).issues`; expected 0).
        duplicates: of those, with the `behaviour_hash` of an earlier one (expected 0).
        elapsed_ms: wall time of the enumeration, ms.
        max_nodes: the node bound.
    """

    specs: tuple[TopologySpec, ...]
    by_size: tuple[int, ...]
    generated: int
    rejected: int
    duplicates: int
    elapsed_ms: float
    max_nodes: int

    @property
    def count(self) -> int:
        """`len(specs)`."""
        return len(self.specs)

    def summary(self) -> str:
        """One line, e.g. `'exhaustive: 412 topologies of at most 5 nodes (by size 0, 4, ...;
        generated 412, rejected 0, duplicates 0; enumerated in 35 ms)'`."""
        sizes = ", ".join(str(n) for n in self.by_size)
        return (
            f"exhaustive: {self.count} topologies of at most {self.max_nodes} nodes (by size "
            f"{sizes}; generated {self.generated}, rejected {self.rejected}, duplicates "
            f"{self.duplicates}; enumerated in {self.elapsed_ms:.0f} ms)"
        )


def enumerate_topologies(
    ctx: MutationContext, max_nodes: int, config: ExhaustiveConfig | None = None
) -> Enumeration:
    """Every topology of at most `max_nodes` nodes that `ctx` allows, in normal form, once.

    Args:
        ctx: agents, callables by role, allowed kinds, `max_depth` and the `EffectTable` (e.g.
            `MutationContext.from_space(space)`).
        max_nodes: the node bound N (>= 1; one-node topologies do not exist: a root is a
            composite, so sizes start at 2).
        config: the grammar's options (`distinct_branches`, `commutative_merges`,
            `router_fallback`); default `ExhaustiveConfig()`.

    Returns:
        An `Enumeration` (specs cheap and small first; counts; time in ms).

    Raises:
        ValueError: `max_nodes` < 1.
    """
    if max_nodes < 1:
        raise ValueError(f"max_nodes must be at least 1, got {max_nodes}")
    cfg = config or ExhaustiveConfig(max_nodes=max_nodes)
    start = time.perf_counter()
    grammar = _Grammar(ctx, cfg)
    table = ctx.effects
    generated = rejected = duplicates = 0
    seen: set[str] = set()
    ranked: list[tuple[int, int, str, TopologySpec]] = []
    by_size = [0] * max_nodes
    for size in range(1, max_nodes + 1):
        for item in grammar.roots(size) if size >= 2 else []:
            generated += 1
            spec = _to_spec(item.term)
            assert not isinstance(spec, AgentStepSpec | FunctionStepSpec)
            if item.depth > ctx.max_depth or not analyse(spec, table).ok:
                rejected += 1
                continue
            digest = behaviour_hash(spec, table)
            if digest in seen:
                duplicates += 1
                continue
            seen.add(digest)
            by_size[size - 1] += 1
            ranked.append((size, item.agents, item.key, spec))
    ranked.sort(key=lambda r: (r[0], r[1], r[2]))
    return Enumeration(
        specs=tuple(r[3] for r in ranked),
        by_size=tuple(by_size),
        generated=generated,
        rejected=rejected,
        duplicates=duplicates,
        elapsed_ms=(time.perf_counter() - start) * 1000.0,
        max_nodes=max_nodes,
    )


# --- the strategy ------------------------------------------------------------------------------


class ExhaustiveSearch(Strategy):
    """Proposes every enumerated topology once (see the module docstring)."""

    name: ClassVar[str] = "exhaustive"
    config: ExhaustiveConfig

    def __init__(self, config: ExhaustiveConfig | None = None) -> None:
        super().__init__(config or ExhaustiveConfig())
        self._enumeration: Enumeration | None = None
        self._next = 0

    @property
    def enumeration(self) -> Enumeration | None:
        """The enumeration of the last `preflight` (None before one)."""
        return self._enumeration

    def preflight(self, space: SearchSpace) -> None:
        """Enumerate the space (`enumerate_topologies` with the space's registries) and start
        from its first topology."""
        ctx = MutationContext.from_space(space)
        self._enumeration = enumerate_topologies(ctx, self.config.max_nodes, self.config)
        self._next = 0

    async def ask(self, ctx: AskContext) -> list[Proposal]:
        """The next `batch_size` enumerated topologies new to the run (fewer at the end or
        under the budget's `max_proposals`; none once all were proposed)."""
        if self._enumeration is None:
            self.preflight(ctx.space)
        assert self._enumeration is not None
        specs = self._enumeration.specs
        n = self.config.batch_size
        if ctx.max_proposals is not None:
            n = min(n, ctx.max_proposals)
        avoid = set(ctx.known_hashes)
        out: list[Proposal] = []
        while len(out) < n and self._next < len(specs):
            position = self._next
            spec = specs[position]
            self._next += 1
            check = ctx.check(spec)
            if not check.ok or avoid & {check.spec_hash, check.behaviour_hash}:
                continue
            avoid.update(h for h in (check.spec_hash, check.behaviour_hash) if h)
            thought = f"enumerated topology {position + 1} of {len(specs)}"
            if position == 0:
                thought += f" ({self._enumeration.summary()})"
            out.append(Proposal(spec=spec, parent_idx=None, operator="exhaustive", thought=thought))
        return out

    def describe(self) -> dict[str, Any]:
        """Name, options, and (after `preflight`) `enumerated`: the count, by size, and ms."""
        out = super().describe()
        e = self._enumeration
        if e is not None:
            out["enumerated"] = {
                "count": e.count,
                "by_size": list(e.by_size),
                "elapsed_ms": round(e.elapsed_ms, 1),
            }
        return out
