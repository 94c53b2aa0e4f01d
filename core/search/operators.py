"""Structural mutation operators over the IR, for the model-free strategies.

Each operator takes a spec, a `MutationContext` (what a candidate may be built from) and a
`random.Random`, and returns a new valid `TopologySpec`, or None when it does not apply (no
target, no usable name) or its result breaks a rule. Everything is deterministic given the
generator's state: names are used in sorted order and nodes in document order.

| operator              | what it does                                                          |
|-----------------------|-----------------------------------------------------------------------|
| `insert_step`         | a new agent or function step at a random position of a pipeline       |
| `remove_step`         | removes a pipeline step, a parallel branch, a route or a fallback     |
|                       | (never the last of a list)                                            |
| `swap_steps`          | swaps two pipeline steps, parallel branches or routes                 |
| `wrap_in_parallel`    | a node becomes the first branch of a parallel with a new branch       |
| `add_parallel_branch` | a new branch in an existing parallel                                  |
| `add_router`          | a node becomes a router's fallback; inputs a registered condition     |
|                       | accepts go to a new step instead                                      |
| `add_cascade`         | a node handles the inputs a registered condition accepts; the rest    |
|                       | escalate to a new (e.g. stronger) step                                |
| `wrap_in_loop`        | a node becomes a refinement loop's step (registered evaluator and     |
|                       | state updater)                                                        |
| `unwrap`              | a composite is replaced by one of its children                        |
| `change_agent`        | an agent step uses another registered agent                           |
| `change_function`     | a function step uses another `step` callable                          |
| `change_merge`        | a parallel uses another merge                                         |
| `change_condition`    | a route uses another registered condition                             |
| `escalate_after`      | X becomes X, then a router that accepts X's answer on a condition     |
|                       | (declared verdict, needing no more candidates than X surely leaves)   |
|                       | and otherwise runs a dearer agent Y                                   |
| `agreement_gate`      | an agent X becomes X and Z in parallel collecting candidates, then    |
|                       | accept when a two-candidate condition holds (they agree), else Y      |
| `k_vote`              | an agent X becomes a vote of `vote_k` different agents (dearest       |
|                       | first, the tie-break order), collected, then a selection step         |
| `replace_branch`      | a parallel branch, route step or fallback becomes another agent       |

The four structure operators read the problem's declared effects (`ctx.effects`,
`core.ir.dataflow`): an identity step for the accept route, conditions with a verdict, merges
that collect candidates, selection steps (needing two candidates), and the agents' measured
costs (`ctx.agent_costs`) so escalation goes only to dearer agents. `opening_specs` builds the
same structures exhaustively from the registries for a strategy's first generations (on a
problem with only agents, from the standard library's entries, `core.combinators`). Every
operator's result also passes the static dataflow check, so no condition is ever placed where
its input does not exist.

New nodes carry no `id`. A result is valid when it parses within `ctx.limits`, its depth is at
most `ctx.max_depth`, and its kinds pass `ctx.allowed_step_kinds` (the evaluator's rule:
`core.evaluation.checks.check_allowed_kinds`). `mutate` adds that the result differs in
canonical hash from its input (and from any hash to avoid), and tries until one does.
"""

from __future__ import annotations

import itertools
import random
import re
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any, TypeAlias, cast

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from core.errors import SearchError, SpecError
from core.evaluation.checks import check_allowed_kinds, normalize_allowed_kinds
from core.hydrate import BUILTIN_MERGES
from core.ir.canonical import canonical_dict, spec_hash, strip_node_ids
from core.ir.dataflow import EffectTable, analyse, behaviour_hash
from core.ir.limits import SpecLimits, parse_operation, parse_topology
from core.ir.metrics import spec_metrics
from core.ir.models import (
    ATOMIC_KINDS,
    COMPOSITE_KINDS,
    AgentStepSpec,
    AnyNode,
    FunctionStepSpec,
    ParallelSpec,
    PipelineSpec,
    PipelineStepEntry,
    RefinementLoopSpec,
    RouterSpec,
    RouteSpec,
    TopologySpec,
    child_slots,
    walk,
)
from core.ir.nodes import node_at, remove_at, replace_at
from core.vocab.pareto import hypervolume

__all__ = [
    "BUILTIN_MERGES",
    "OPERATORS",
    "ROLES",
    "MutationContext",
    "Operator",
    "add_cascade",
    "add_parallel_branch",
    "add_router",
    "change_agent",
    "change_condition",
    "change_function",
    "change_merge",
    "complementarity",
    "feature_conditions",
    "feature_router_spec",
    "router_pairs",
    "accept_router",
    "agent_cost_order",
    "agreement_gate",
    "cascade_spec",
    "crossover",
    "escalate_after",
    "gate_spec",
    "k_vote",
    "opening_specs",
    "replace_branch",
    "vote_spec",
    "insert_step",
    "is_valid_candidate",
    "mutate",
    "random_spec",
    "remove_step",
    "swap_steps",
    "unwrap",
    "wrap_in_loop",
    "wrap_in_parallel",
]

ROLES: tuple[str, ...] = ("step", "merge", "condition", "classifier", "evaluator", "state_updater")
"""Callable roles (the same as `core.problems.CALLABLE_ROLES`):

- `step`: `state -> state`, usable as a `function_step`;
- `merge`: `list[output] -> value`, a parallel's merge;
- `condition`: `state -> bool`, a route's `condition_name`;
- `classifier`: `state -> route name`, a router's classifier (not used by the operators: a new
  router's route names could not match what an existing classifier answers);
- `evaluator`: `state -> EvalResult`, a refinement loop's evaluator (a registered agent name
  may be listed here too: the hydrator looks evaluators up in the agent registry first);
- `state_updater`: `(input, output, EvalResult) -> next input`, a loop's state updater.
"""


class MutationContext(BaseModel):
    """What mutated and sampled candidates may be built from, and the limits they must meet.

    Build it from a problem's registries and its gene, or with `from_space` from a search
    space. Names are de-duplicated and sorted on construction (determinism).
    """

    model_config = ConfigDict(frozen=True, extra="forbid", use_attribute_docstrings=True)

    agent_names: Sequence[str] = ()
    """Registered agents usable as agent steps (stored sorted, as a tuple)."""
    callables: Mapping[str, Sequence[str]] = Field(default_factory=dict[str, Sequence[str]])
    """Role -> registered callable names usable in that role; roles are `ROLES`. A name may be
    listed under several roles."""
    allowed_step_kinds: Sequence[str] | None = ("agent_step", "function_step")
    """Node kinds a candidate may use, with the gene's rule: atomic kinds must be listed;
    composite kinds are restricted only when at least one composite kind is listed. None: all."""
    max_depth: int = Field(default=4, ge=1)
    """Maximum nesting depth of a candidate (a flat pipeline is 1)."""
    limits: SpecLimits = Field(default_factory=SpecLimits)
    """The IR's parse limits (node count, and a depth ceiling above `max_depth`)."""
    builtin_merges: Sequence[str] = ("fastest", "first_wins")
    """Built-in merges the operators may use besides the registered `merge` callables. Default:
    the two that return one branch's output, so a wrapped step keeps its output type
    (`collect_all` returns a list; add it here if the next step takes one)."""
    loop_max_iterations: int = Field(default=3, ge=1)
    """`max_iterations` of a loop made by `wrap_in_loop`."""
    agent_costs: Mapping[str, float] = Field(default_factory=dict[str, float])
    """Measured USD per example of each agent alone (e.g. from the archive's single-agent
    candidates): the structure operators escalate only to dearer agents, and the opening orders
    agents cheapest first. Empty: name order, and any other agent counts as dearer."""
    agent_scores: Mapping[str, Sequence[float]] = Field(default_factory=dict[str, Sequence[float]])
    """Per-example accuracy of each agent alone, on the same examples in the same order (e.g.
    the archive's single-agent candidates scored on the full validation split): the opening
    ranks the agent pairs of its input-feature routers by how much one agent is right where
    the other is wrong (`complementarity`). Empty: cost-neighbours first."""
    vote_k: int = Field(default=3, ge=2)
    """Branches of a vote made by `k_vote` and the opening (odd, so two-way ties need three
    different answers)."""
    effects: EffectTable = Field(default_factory=EffectTable)
    """What each registered name reads and produces: the structure operators place a condition
    only where its input exists, and reject what `core.ir.dataflow.analyse` rejects."""
    max_judges: int = Field(default=2, ge=0)
    """Judge conditions (conditions that run an agent, `NameEffect.calls_agent`) the opening
    and the bridges try per escalation: the cheapest judges, each cheaper than the agent
    escalated to (every judge is one more call per example)."""

    @field_validator("agent_names", "builtin_merges")
    @classmethod
    def _sorted(cls, value: Sequence[str]) -> tuple[str, ...]:
        return tuple(sorted(set(value)))

    @field_validator("callables")
    @classmethod
    def _roles(cls, value: Mapping[str, Sequence[str]]) -> Mapping[str, tuple[str, ...]]:
        unknown = sorted(set(value) - set(ROLES))
        if unknown:
            raise ValueError(f"unknown callable role(s) {unknown}; roles are {list(ROLES)}")
        return {r: tuple(sorted(set(value.get(r, ())))) for r in ROLES}

    @field_validator("builtin_merges")
    @classmethod
    def _builtin(cls, value: Sequence[str]) -> Sequence[str]:
        bad = [m for m in value if m not in BUILTIN_MERGES]
        if bad:
            raise ValueError(f"not built-in merges: {bad}; built-ins are {list(BUILTIN_MERGES)}")
        return value

    @field_validator("allowed_step_kinds")
    @classmethod
    def _kinds(cls, value: Sequence[str] | None) -> tuple[str, ...] | None:
        return normalize_allowed_kinds(value)

    @classmethod
    def from_space(cls, space: Any, **overrides: Any) -> MutationContext:
        """A context from a `core.search.strategies.SearchSpace` (gene and registered names).

        Uses `space.agents` (names), `space.names_by_role()`, `space.gene.max_depth` and
        `space.gene.allowed_step_kinds`; `overrides` set any other field.
        """
        data: dict[str, Any] = {
            "agent_names": tuple(a.name for a in space.agents),
            "callables": dict(space.names_by_role()),
            "allowed_step_kinds": tuple(space.gene.allowed_step_kinds),
            "max_depth": int(space.gene.max_depth),
            "effects": space.effects,
        }
        data.update(overrides)
        return cls.model_validate(data)

    def names(self, role: str) -> tuple[str, ...]:
        """Callable names registered for `role` (sorted; empty when none).

        Raises:
            ValueError: an unknown role.
        """
        if role not in ROLES:
            raise ValueError(f"unknown callable role {role!r}; roles are {list(ROLES)}")
        return tuple(self.callables.get(role, ()))

    def merge_names(self) -> tuple[str, ...]:
        """Merges the operators may use: `builtin_merges`, then registered `merge` callables."""
        registered = [m for m in self.names("merge") if m not in self.builtin_merges]
        return (*self.builtin_merges, *registered)

    def kind_allowed(self, kind: str) -> bool:
        """Whether a node of `kind` may appear (the gene's `allowed_step_kinds` rule)."""
        allowed = self.allowed_step_kinds
        if allowed is None or kind in allowed:
            return True
        if kind in ATOMIC_KINDS:
            return False
        return not any(k in COMPOSITE_KINDS for k in allowed)


Operator: TypeAlias = Callable[[TopologySpec, MutationContext, random.Random], TopologySpec | None]
"""A mutation operator: `(spec, ctx, rng) -> new valid spec | None`."""


# --- helpers -----------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class _Pos:
    path: str
    node: AnyNode
    level: int  # composites above this node
    subtree_depth: int


def _positions(spec: AnyNode) -> list[_Pos]:
    out: list[_Pos] = []
    stack: list[tuple[str, AnyNode, int]] = [("$", spec, 0)]
    while stack:
        path, node, level = stack.pop()
        out.append(_Pos(path, node, level, spec_metrics(node).depth))
        for suffix, child in reversed(child_slots(node)):
            stack.append((path + suffix, child, level + 1))
    return out


def _rebuild(model: BaseModel, **updates: Any) -> Any:
    data = {name: getattr(model, name) for name in model.model_fields_set}
    data.update(updates)
    return type(model).model_validate(data)


def is_valid_candidate(spec: AnyNode, ctx: MutationContext) -> TopologySpec | None:
    """`spec` as a validated topology when it meets every rule of `ctx`, else None.

    Rules: a composite root, the IR's parse limits (`ctx.limits`), depth at most
    `ctx.max_depth`, every kind allowed by `ctx.allowed_step_kinds`, and no static issue
    (`core.ir.dataflow.analyse` with `ctx.effects`: no condition before its input, no `fastest`
    branch without an answer, an agent where answers need one, no router that matches nothing).
    """
    try:
        parsed = parse_topology(spec, ctx.limits)
    except SpecError:
        return None
    if spec_metrics(parsed).depth > ctx.max_depth:
        return None
    allowed = None if ctx.allowed_step_kinds is None else tuple(ctx.allowed_step_kinds)
    if check_allowed_kinds(parsed, allowed) is not None:
        return None
    if not analyse(parsed, ctx.effects).ok:
        return None
    return parsed


def _finish(build: Callable[[], AnyNode], ctx: MutationContext) -> TopologySpec | None:
    try:
        node = build()
    except (SpecError, ValidationError, ValueError):
        return None
    return is_valid_candidate(node, ctx)


def _atomic_options(ctx: MutationContext) -> list[tuple[str, str]]:
    options: list[tuple[str, str]] = []
    if ctx.kind_allowed("agent_step"):
        options.extend(("agent_step", name) for name in ctx.agent_names)
    if ctx.kind_allowed("function_step"):
        options.extend(("function_step", name) for name in ctx.names("step"))
    return options


def _atomic_name(node: AnyNode) -> tuple[str, str] | None:
    if isinstance(node, AgentStepSpec) and node.agent_name is not None:
        return ("agent_step", node.agent_name)
    if isinstance(node, FunctionStepSpec):
        return ("function_step", node.callable_name)
    return None


def _new_atomic(
    ctx: MutationContext, rng: random.Random, avoid: AnyNode | None = None
) -> AnyNode | None:
    """A new agent or function step (no id), preferring one different from `avoid`."""
    options = _atomic_options(ctx)
    if avoid is not None:
        current = _atomic_name(avoid)
        others = [o for o in options if o != current]
        options = others or options
    if not options:
        return None
    kind, name = rng.choice(options)
    if kind == "agent_step":
        return AgentStepSpec(agent_name=name)
    return FunctionStepSpec(callable_name=name)


def _wrap_targets(spec: AnyNode, ctx: MutationContext) -> list[_Pos]:
    """Nodes that can gain one level of nesting without exceeding `max_depth`."""
    return [p for p in _positions(spec) if p.level + 1 + p.subtree_depth <= ctx.max_depth]


# --- operators ---------------------------------------------------------------------------------


def insert_step(
    spec: TopologySpec, ctx: MutationContext, rng: random.Random
) -> TopologySpec | None:
    """A new agent or function step at a random position of a random pipeline."""
    pipelines = [p for p in _positions(spec) if isinstance(p.node, PipelineSpec)]
    if not pipelines or not _atomic_options(ctx):
        return None
    target = rng.choice(pipelines)
    pipe = cast(PipelineSpec, target.node)
    new = _new_atomic(ctx, rng)
    if new is None:
        return None
    position = rng.randint(0, len(pipe.steps))
    steps = list(pipe.steps)
    steps.insert(position, PipelineStepEntry(operation=new))
    return _finish(lambda: replace_at(spec, target.path, _rebuild(pipe, steps=steps)), ctx)


def _removable(spec: AnyNode) -> list[str]:
    paths: list[str] = []
    for pos in _positions(spec):
        node = pos.node
        slots = child_slots(node)
        if isinstance(node, PipelineSpec | ParallelSpec) and len(slots) >= 2:
            paths.extend(pos.path + suffix for suffix, _ in slots)
        elif isinstance(node, RouterSpec):
            if len(node.routes) >= 2:
                paths.extend(pos.path + f".routes[{i}].step" for i in range(len(node.routes)))
            if node.fallback_step is not None:
                paths.append(pos.path + ".fallback_step")
    return paths


def remove_step(
    spec: TopologySpec, ctx: MutationContext, rng: random.Random
) -> TopologySpec | None:
    """Remove a pipeline step, a parallel branch, a route or a router's fallback.

    Never empties a list (only lists of two or more lose an element).
    """
    paths = _removable(spec)
    if not paths:
        return None
    path = rng.choice(paths)
    return _finish(lambda: remove_at(spec, path), ctx)


def swap_steps(spec: TopologySpec, ctx: MutationContext, rng: random.Random) -> TopologySpec | None:
    """Swap two different pipeline steps, parallel branches or routes of one composite."""
    targets: list[tuple[_Pos, list[tuple[int, int]]]] = []
    for pos in _positions(spec):
        node = pos.node
        items: list[Any]
        if isinstance(node, PipelineSpec):
            items = [canonical_dict(e.operation) for e in node.steps]
        elif isinstance(node, ParallelSpec):
            items = [canonical_dict(s) for s in node.steps]
        elif isinstance(node, RouterSpec):
            items = [(r.condition_name, canonical_dict(r.step)) for r in node.routes]
        else:
            continue
        pairs = [
            (i, j)
            for i in range(len(items))
            for j in range(i + 1, len(items))
            if items[i] != items[j]
        ]
        if pairs:
            targets.append((pos, pairs))
    if not targets:
        return None
    pos, pairs = rng.choice(targets)
    i, j = rng.choice(pairs)
    node = pos.node

    def build() -> AnyNode:
        if isinstance(node, PipelineSpec):
            new: AnyNode = _rebuild(node, steps=_swapped(node.steps, i, j))
        elif isinstance(node, ParallelSpec):
            new = _rebuild(node, steps=_swapped(node.steps, i, j))
        else:
            router = cast(RouterSpec, node)
            new = _rebuild(router, routes=_swapped(router.routes, i, j))
        return replace_at(spec, pos.path, new)

    return _finish(build, ctx)


def _swapped(items: Sequence[Any], i: int, j: int) -> list[Any]:
    out = list(items)
    out[i], out[j] = out[j], out[i]
    return out


def wrap_in_parallel(
    spec: TopologySpec, ctx: MutationContext, rng: random.Random
) -> TopologySpec | None:
    """A node becomes the first branch of a new parallel; the second is a new step; the merge is
    one of `ctx.merge_names()`."""
    merges = ctx.merge_names()
    if not ctx.kind_allowed("parallel") or not merges or not _atomic_options(ctx):
        return None
    targets = _wrap_targets(spec, ctx)
    if not targets:
        return None
    target = rng.choice(targets)
    branch = _new_atomic(ctx, rng)
    merge = rng.choice(merges)
    if branch is None:
        return None
    new = ParallelSpec(steps=[target.node, branch], merge=merge)
    return _finish(lambda: replace_at(spec, target.path, new), ctx)


def add_parallel_branch(
    spec: TopologySpec, ctx: MutationContext, rng: random.Random
) -> TopologySpec | None:
    """A new step appended to the branches of a random parallel."""
    parallels = [p for p in _positions(spec) if isinstance(p.node, ParallelSpec)]
    if not parallels or not _atomic_options(ctx):
        return None
    target = rng.choice(parallels)
    par = cast(ParallelSpec, target.node)
    branch = _new_atomic(ctx, rng)
    if branch is None:
        return None
    return _finish(
        lambda: replace_at(spec, target.path, _rebuild(par, steps=[*par.steps, branch])), ctx
    )


def _router_parts(
    spec: TopologySpec, ctx: MutationContext, rng: random.Random
) -> tuple[_Pos, str, AnyNode] | None:
    conditions = ctx.names("condition")
    if not ctx.kind_allowed("router") or not conditions or not _atomic_options(ctx):
        return None
    targets = _wrap_targets(spec, ctx)
    if not targets:
        return None
    target = rng.choice(targets)
    condition = rng.choice(conditions)
    other = _new_atomic(ctx, rng, avoid=target.node)
    if other is None:
        return None
    return target, condition, other


def add_router(spec: TopologySpec, ctx: MutationContext, rng: random.Random) -> TopologySpec | None:
    """A node becomes a router's fallback; inputs a registered condition accepts go to a new step.

    `X` -> `router(routes=[when_<cond>: Y if cond(input)], fallback=X)`: a specialist branch.
    """
    parts = _router_parts(spec, ctx, rng)
    if parts is None:
        return None
    target, condition, other = parts
    new = RouterSpec(
        routes=[RouteSpec(name=f"when_{condition}", step=other, condition_name=condition)],
        fallback_step=target.node,
    )
    return _finish(lambda: replace_at(spec, target.path, new), ctx)


def add_cascade(
    spec: TopologySpec, ctx: MutationContext, rng: random.Random
) -> TopologySpec | None:
    """Condition-based escalation: a node keeps the inputs a registered condition accepts, the
    rest escalate to a new step (e.g. a stronger, dearer agent).

    `X` -> `router(routes=[<cond>: X if cond(input)], fallback=Y)`: with a condition such as
    "the input is easy", the cheap step answers what it can and the expensive one the rest.
    """
    parts = _router_parts(spec, ctx, rng)
    if parts is None:
        return None
    target, condition, other = parts
    new = RouterSpec(
        routes=[RouteSpec(name=condition, step=target.node, condition_name=condition)],
        fallback_step=other,
    )
    return _finish(lambda: replace_at(spec, target.path, new), ctx)


def wrap_in_loop(
    spec: TopologySpec, ctx: MutationContext, rng: random.Random
) -> TopologySpec | None:
    """A node becomes the step of a refinement loop with a registered evaluator and state
    updater (`max_iterations = ctx.loop_max_iterations`)."""
    evaluators = ctx.names("evaluator")
    updaters = ctx.names("state_updater")
    if not ctx.kind_allowed("refinement_loop") or not evaluators or not updaters:
        return None
    targets = [p for p in _wrap_targets(spec, ctx) if not isinstance(p.node, RefinementLoopSpec)]
    if not targets:
        return None
    target = rng.choice(targets)
    new = RefinementLoopSpec(
        step=target.node,
        evaluator=rng.choice(evaluators),
        state_updater_name=rng.choice(updaters),
        max_iterations=ctx.loop_max_iterations,
    )
    return _finish(lambda: replace_at(spec, target.path, new), ctx)


def unwrap(spec: TopologySpec, ctx: MutationContext, rng: random.Random) -> TopologySpec | None:
    """A composite is replaced by one of its children (the root only by a composite child)."""
    choices: list[tuple[str, AnyNode]] = []
    for pos in _positions(spec):
        for _, child in child_slots(pos.node):
            if pos.path == "$" and child.node_kind not in COMPOSITE_KINDS:
                continue
            choices.append((pos.path, child))
    if not choices:
        return None
    path, child = rng.choice(choices)
    return _finish(lambda: replace_at(spec, path, child), ctx)


def change_agent(
    spec: TopologySpec, ctx: MutationContext, rng: random.Random
) -> TopologySpec | None:
    """A registered agent step uses another registered agent."""
    targets = [
        p
        for p in _positions(spec)
        if isinstance(p.node, AgentStepSpec)
        and p.node.agent_name is not None
        and any(a != p.node.agent_name for a in ctx.agent_names)
    ]
    if not targets:
        return None
    target = rng.choice(targets)
    node = cast(AgentStepSpec, target.node)
    name = rng.choice([a for a in ctx.agent_names if a != node.agent_name])
    return _finish(lambda: replace_at(spec, target.path, _rebuild(node, agent_name=name)), ctx)


def change_function(
    spec: TopologySpec, ctx: MutationContext, rng: random.Random
) -> TopologySpec | None:
    """A function step uses another `step` callable (its explicit `name`, if any, is dropped)."""
    steps = ctx.names("step")
    targets = [
        p
        for p in _positions(spec)
        if isinstance(p.node, FunctionStepSpec) and any(s != p.node.callable_name for s in steps)
    ]
    if not targets:
        return None
    target = rng.choice(targets)
    node = cast(FunctionStepSpec, target.node)
    name = rng.choice([s for s in steps if s != node.callable_name])
    return _finish(
        lambda: replace_at(spec, target.path, _rebuild(node, callable_name=name, name=None)), ctx
    )


def change_merge(
    spec: TopologySpec, ctx: MutationContext, rng: random.Random
) -> TopologySpec | None:
    """A parallel uses another merge from `ctx.merge_names()`."""
    merges = ctx.merge_names()
    targets = [
        p
        for p in _positions(spec)
        if isinstance(p.node, ParallelSpec) and any(m != p.node.merge for m in merges)
    ]
    if not targets:
        return None
    target = rng.choice(targets)
    node = cast(ParallelSpec, target.node)
    merge = rng.choice([m for m in merges if m != node.merge])
    return _finish(lambda: replace_at(spec, target.path, _rebuild(node, merge=merge)), ctx)


def change_condition(
    spec: TopologySpec, ctx: MutationContext, rng: random.Random
) -> TopologySpec | None:
    """A route with a condition uses another registered condition."""
    conditions = ctx.names("condition")
    targets = [
        (p, i)
        for p in _positions(spec)
        if isinstance(p.node, RouterSpec)
        for i, r in enumerate(p.node.routes)
        if r.condition_name is not None and any(c != r.condition_name for c in conditions)
    ]
    if not targets:
        return None
    target, i = rng.choice(targets)
    router = cast(RouterSpec, target.node)
    route = router.routes[i]
    condition = rng.choice([c for c in conditions if c != route.condition_name])

    def build() -> AnyNode:
        routes = list(router.routes)
        routes[i] = _rebuild(route, condition_name=condition)
        return replace_at(spec, target.path, _rebuild(router, routes=routes))

    return _finish(build, ctx)


# --- structure operators: cascades, agreement gates, votes ---------------------------


def agent_cost_order(ctx: MutationContext) -> tuple[str, ...]:
    """`ctx.agent_names` cheapest first: by `ctx.agent_costs` (measured USD per example), agents
    without a measured cost after those with one, ties by name."""
    costs = ctx.agent_costs
    return tuple(sorted(ctx.agent_names, key=lambda a: (a not in costs, costs.get(a, 0.0), a)))


def _keep_step(ctx: MutationContext) -> str | None:
    """The first registered `step` callable declared an identity (`NameEffect.identity`)."""
    return next((n for n in ctx.names("step") if ctx.effects.callable(n).identity), None)


def _selection_steps(ctx: MutationContext) -> tuple[str, ...]:
    """`step` callables that choose among two or more candidates (needs >= 2, adds none)."""
    return tuple(
        n
        for n in ctx.names("step")
        if ctx.effects.callable(n).needs_candidates >= 2
        and ctx.effects.callable(n).adds_candidates == 0
        and not ctx.effects.callable(n).identity
    )


def _collecting_merges(ctx: MutationContext) -> tuple[str, ...]:
    """Merges that keep every branch's candidates (`NameEffect.combine == "all"`)."""
    return tuple(n for n in ctx.merge_names() if ctx.effects.callable(n).combine == "all")


def _verdict_conditions(
    ctx: MutationContext, max_needs: int, min_needs: int = 0
) -> tuple[str, ...]:
    """Conditions with a declared verdict whose input need is in `min_needs..max_needs`; of a
    declared complement pair only the positive one (the other gives the same router)."""
    out: list[str] = []
    for name in ctx.names("condition"):
        effect = ctx.effects.callable(name)
        if effect.verdict is None or not min_needs <= effect.needs_candidates <= max_needs:
            continue
        if effect.complement_of is not None and effect.complement_of in ctx.names("condition"):
            continue
        out.append(name)
    return tuple(out)


def _escalation_conditions(ctx: MutationContext, max_needs: int, dearer: str) -> list[str]:
    """`_verdict_conditions(ctx, max_needs)` for an escalation to agent `dearer`: every
    condition that runs no agent, then at most `ctx.max_judges` judge conditions whose agent is
    cheaper than `dearer`, cheapest judge first (`agent_cost_order`)."""
    order = agent_cost_order(ctx)
    limit = order.index(dearer) if dearer in order else len(order)
    plain: list[str] = []
    judges: list[tuple[int, str]] = []
    for name in _verdict_conditions(ctx, max_needs):
        judge = ctx.effects.callable(name).calls_agent
        if judge is None:
            plain.append(name)
        elif judge in order and order.index(judge) < limit:
            judges.append((order.index(judge), name))
    return plain + [name for _, name in sorted(judges)[: ctx.max_judges]]


def feature_conditions(ctx: MutationContext) -> tuple[str, ...]:
    """Registered conditions declared to read only the input (listed in `ctx.effects` with
    `needs_candidates == 0`, no verdict, no agent call), e.g. the standard library's
    `input_is_long`: a router on one sends each input to one agent, at one agent's cost. An
    undeclared condition may read anything: the opening spends no budget on it (the bridges,
    `mix_specs`, still try it between front neighbours)."""
    out: list[str] = []
    for name in ctx.names("condition"):
        if name not in ctx.effects.names:
            continue
        effect = ctx.effects.callable(name)
        if effect.needs_candidates == 0 and effect.verdict is None and effect.calls_agent is None:
            out.append(name)
    return tuple(out)


def complementarity(a: Sequence[float], b: Sequence[float]) -> float:
    """How much choosing, per example, the better of two agents beats the better agent alone:
    `mean(max(a_i, b_i)) - max(mean(a), mean(b))`, in accuracy (0 when the lengths differ or
    are 0). The most a router between them can gain; 0 when one is right wherever the other
    is."""
    if not a or len(a) != len(b):
        return 0.0
    n = len(a)
    oracle = sum(max(x, y) for x, y in zip(a, b, strict=True)) / n
    return max(0.0, oracle - max(sum(a) / n, sum(b) / n))


def oracle_router_point(
    a: Sequence[float], b: Sequence[float], cost_a: float, cost_b: float
) -> tuple[float, float]:
    """The (accuracy, USD per example) of a router between two agents that picks, per
    example, the right one and, where both are equally right, the cheaper: accuracy
    `mean(max(a_i, b_i))`, cost the cheaper agent's plus the dearer's surcharge on the share of
    examples where only the dearer one scores higher. The best point any router between them
    can reach (its cost assumes the router runs one agent per input)."""
    n = len(a)
    if not n or len(b) != n:
        return 0.0, 0.0
    accuracy = sum(max(x, y) for x, y in zip(a, b, strict=True)) / n
    if cost_a > cost_b:
        a, b, cost_a, cost_b = b, a, cost_b, cost_a
    dearer_share = sum(1 for x, y in zip(a, b, strict=True) if y > x) / n
    return accuracy, cost_a + dearer_share * (cost_b - cost_a)


def _front_gain(point: tuple[float, float], front: Sequence[tuple[float, float]]) -> float:
    """The (accuracy up, cost down) hypervolume `point` adds to `front`, with the reference
    point accuracy 0 and 1.1 x the dearest cost among them (exact, two objectives)."""
    points = [*front, point]
    ref = [0.0, 1.1 * max(c for _, c in points)]
    directions = ["max", "min"]
    return hypervolume(points, ref, directions) - hypervolume(list(front), ref, directions)


def router_pairs(ctx: MutationContext) -> list[tuple[str, str]]:
    """Agent pairs `(cheaper, dearer)` (by `agent_cost_order`) for input-feature routers, most
    promising first.

    With both agents' `ctx.agent_scores`, a pair's oracle accuracy is what a router that always
    picked the right one would score (the better agent's accuracy plus their
    `complementarity`); a router costs at most the dearer agent's cost, so a pair whose oracle
    accuracy no agent at most that dear falls short of is dominated whatever the condition, and
    is dropped (so is a pair with no complementarity: a router only mixes the two). The rest
    come most hypervolume first: what the pair's `oracle_router_point` adds to the front of the
    single agents (accuracy up, cost down; it needs both agents' `ctx.agent_costs`, else 0),
    since the search's yardstick is the front's hypervolume and a cheap pair's router can add
    more of it than a dear pair's more accurate one; then highest oracle accuracy, then
    cost-neighbours first, then cost order. Pairs without scores come after, cost-neighbours
    first."""
    order = agent_cost_order(ctx)
    scores = ctx.agent_scores
    costs = ctx.agent_costs
    mean = {a: sum(v) / len(v) for a, v in scores.items() if v}
    singles = [(mean[a], costs[a]) for a in order if a in mean and a in costs]
    ranked: list[tuple[bool, float, float, int, int, int]] = []
    for j in range(len(order)):
        for i in range(j):
            a, b = order[i], order[j]
            if a in mean and b in mean and len(scores[a]) == len(scores[b]):
                gain = complementarity(scores[a], scores[b])
                oracle = max(mean[a], mean[b]) + gain
                cheaper = [mean[c] for c in order[: j + 1] if c in mean]
                if gain <= 0.0 or oracle <= max(cheaper):
                    continue
                added = 0.0
                if a in costs and b in costs:
                    point = oracle_router_point(scores[a], scores[b], costs[a], costs[b])
                    added = _front_gain(point, singles)
                ranked.append((False, -added, -oracle, j - i, i, j))
            else:
                ranked.append((True, 0.0, 0.0, j - i, i, j))
    return [(order[i], order[j]) for *_, i, j in sorted(ranked)]


def feature_router_spec(condition: str, when: AnyNode, otherwise: AnyNode) -> RouterSpec:
    """`router(when <condition>: when, else otherwise)`: the inputs the input-only condition
    picks go to `when`, the rest to `otherwise` (one of them runs per input)."""
    return RouterSpec(
        routes=[RouteSpec(name=f"when_{condition}", step=when, condition_name=condition)],
        fallback_step=otherwise,
    )


def _agent(name: str) -> AgentStepSpec:
    return AgentStepSpec(agent_name=name)


def accept_router(condition: str, keep: str, escalate: AnyNode, ctx: MutationContext) -> RouterSpec:
    """Accept the current answer when `condition` says so, else run `escalate`.

    A condition whose verdict is `"accept"` routes to `keep` (the identity step) with
    `escalate` as the fallback; a `"reject"` condition routes to `escalate` with `keep` as the
    fallback.
    """
    keep_node = FunctionStepSpec(callable_name=keep)
    if ctx.effects.callable(condition).verdict == "reject":
        return RouterSpec(
            routes=[RouteSpec(name="escalate", step=escalate, condition_name=condition)],
            fallback_step=keep_node,
        )
    return RouterSpec(
        routes=[RouteSpec(name="accept", step=keep_node, condition_name=condition)],
        fallback_step=escalate,
    )


def cascade_spec(
    first: AnyNode, then: AnyNode, condition: str, keep: str, ctx: MutationContext
) -> PipelineSpec:
    """`pipeline[first, router(accept on condition -> keep, else then)]` (FrugalGPT-style
    escalation: the dearer `then` runs only when `condition` does not accept `first`'s
    answer)."""
    return PipelineSpec(
        steps=[
            PipelineStepEntry(operation=first),
            PipelineStepEntry(operation=accept_router(condition, keep, then, ctx)),
        ]
    )


def gate_spec(
    a: AnyNode,
    b: AnyNode,
    escalate: AnyNode,
    merge: str,
    condition: str,
    keep: str,
    ctx: MutationContext,
) -> PipelineSpec:
    """`pipeline[parallel([a, b], merge), router(agree -> keep, else escalate)]`: run two
    answers at once, accept when `condition` (e.g. they agree) holds, else escalate (AutoMix /
    agreement cascades). 7 nodes when `a`, `b` and `escalate` are agent steps."""
    return PipelineSpec(
        steps=[
            PipelineStepEntry(operation=ParallelSpec(steps=[a, b], merge=merge)),
            PipelineStepEntry(operation=accept_router(condition, keep, escalate, ctx)),
        ]
    )


def vote_spec(branches: Sequence[AnyNode], merge: str, select: str | None) -> AnyNode:
    """`pipeline[parallel(branches, merge), select]`, or the parallel alone without `select`.

    Tie-break order: the caller lists branches dearest agent first, so a selection step that
    breaks ties by candidate order (the replay problem's `majority_vote`: ties to the earliest
    candidate) sides with the strongest agent.
    """
    par = ParallelSpec(steps=list(branches), merge=merge)
    if select is None:
        return par
    return PipelineSpec(
        steps=[
            PipelineStepEntry(operation=par),
            PipelineStepEntry(operation=FunctionStepSpec(callable_name=select)),
        ]
    )


_PIPELINE_SLOT = re.compile(r"^(?P<parent>.*)\.steps\[(?P<i>\d+)\]\.operation$")


def _splice(spec: TopologySpec, path: str, new: PipelineSpec) -> AnyNode:
    """Put the steps of `new` where the node at `path` is: spliced into its parent pipeline when
    it has one (no extra nesting), appended to it when it is itself a pipeline whose steps
    `new` starts with, else `new` itself replaces it."""
    here = node_at(spec, path)
    if isinstance(here, PipelineSpec) and new.steps[0].operation == here:
        return replace_at(spec, path, _rebuild(here, steps=[*here.steps, *new.steps[1:]]))
    m = _PIPELINE_SLOT.match(path)
    if m is not None:
        parent = node_at(spec, m.group("parent"))
        if isinstance(parent, PipelineSpec):
            i = int(m.group("i"))
            entry = parent.steps[i]
            if entry.config is None:
                steps = [*parent.steps[:i], *new.steps, *parent.steps[i + 1 :]]
                return replace_at(spec, m.group("parent"), _rebuild(parent, steps=steps))
    return replace_at(spec, path, new)


def _agents_in(node: AnyNode) -> list[str]:
    return [
        n.agent_name
        for _, n in walk(node)
        if isinstance(n, AgentStepSpec) and n.agent_name is not None
    ]


def _dearer_than(ctx: MutationContext, names: Collection[str]) -> list[str]:
    """Agents dearer than every agent in `names` (by `agent_cost_order`); all agents not in
    `names` when no cost is known."""
    order = agent_cost_order(ctx)
    if not ctx.agent_costs or not names:
        return [a for a in order if a not in names]
    top = max(order.index(n) for n in names if n in order) if any(n in order for n in names) else -1
    return list(order[top + 1 :])


def _answering_targets(spec: TopologySpec, ctx: MutationContext, min_lo: int) -> list[_Pos]:
    """Nodes that surely leave at least `min_lo` candidates (from their own subtree) and hold an
    agent, where one more pipeline level would not break `max_depth`."""
    out: list[_Pos] = []
    for pos in _positions(spec):
        if not _agents_in(pos.node):
            continue
        if pos.level + 1 + pos.subtree_depth > ctx.max_depth + 1:
            continue
        if analyse(pos.node, ctx.effects).out.lo >= min_lo:
            out.append(pos)
    return out


def escalate_after(
    spec: TopologySpec, ctx: MutationContext, rng: random.Random
) -> TopologySpec | None:
    """X becomes X, then a router that accepts X's answer on a condition and otherwise runs Y.

    X is a node that surely produces a candidate; the condition is one with a declared verdict
    that needs no more candidates than X surely leaves (so it is never placed before its
    input); Y is an agent dearer than every agent in X (by `ctx.agent_costs`); the accept route
    runs the problem's identity step. The new steps are spliced into X's pipeline when X is a
    pipeline step.
    """
    keep = _keep_step(ctx)
    if keep is None or not ctx.kind_allowed("router") or not ctx.kind_allowed("function_step"):
        return None
    targets = _answering_targets(spec, ctx, 1)
    if not targets:
        return None
    target = rng.choice(targets)
    lo = analyse(target.node, ctx.effects).out.lo
    conditions = _verdict_conditions(ctx, lo)
    dearer = _dearer_than(ctx, set(_agents_in(target.node)))
    if not conditions or not dearer:
        return None
    condition, y = rng.choice(conditions), rng.choice(dearer)
    new = cascade_spec(target.node, _agent(y), condition, keep, ctx)
    return _finish(lambda: _splice(spec, target.path, new), ctx)


def bridge_specs(
    cheap: TopologySpec, dear: TopologySpec, ctx: MutationContext
) -> list[TopologySpec]:
    """Cascades that fill the gap between two neighbours on an (accuracy, cost) front.

    `cheap` is run whole, then a router accepts its answer on a condition and otherwise runs Y,
    the dearest agent of `dear` that is dearer than every agent of `cheap` (by `ctx.agent_costs`):
    one spec per declared-verdict condition that needs no more candidates than `cheap` surely
    leaves (so no condition is placed before its input), in registry order. Each lands, in
    cost, between `cheap` and `cheap` + Y, and in accuracy where the condition's escalation
    rate puts it: the FrugalGPT construction, aimed at the part of the front with the most
    hypervolume missing (`EvolutionarySearch`). Empty when no such Y, condition or identity
    step exists, or a result breaks `ctx`'s limits.
    """
    keep = _keep_step(ctx)
    if keep is None or not ctx.kind_allowed("router") or not ctx.kind_allowed("function_step"):
        return []
    dearer = [a for a in _dearer_than(ctx, set(_agents_in(cheap))) if a in set(_agents_in(dear))]
    if not dearer or not _agents_in(cheap):
        return []
    y = dearer[-1]
    lo = analyse(cheap, ctx.effects).out.lo
    out: list[TopologySpec] = []
    for condition in _escalation_conditions(ctx, lo, y):
        new = cascade_spec(cheap, _agent(y), condition, keep, ctx)
        spec = _finish(lambda new=new: _splice(cheap, "$", new), ctx)
        if spec is not None:
            out.append(spec)
    return out


def _id_free(spec: AnyNode) -> dict[str, Any]:
    return strip_node_ids(spec.model_dump(mode="json", exclude_none=True))


def mix_specs(cheap: TopologySpec, dear: TopologySpec, ctx: MutationContext) -> list[TopologySpec]:
    """Routers that send part of the inputs to `dear` and the rest to `cheap`.

    For each registered condition that reads only the input (`needs_candidates == 0`, e.g. the
    question's length), both ways round: `router(when c: dear, else cheap)` and
    `router(when c: cheap, else dear)`, in registry order. Cost and accuracy are the two ends'
    mixed by the share of inputs the condition routes, so the points lie between them, above
    the straight line when the condition marks where `dear` pays off. Empty when routers are not
    allowed or a result breaks `ctx`'s limits (e.g. `max_depth`: a router adds one level).
    """
    if not ctx.kind_allowed("router"):
        return []
    a, b = _id_free(cheap), _id_free(dear)
    out: list[TopologySpec] = []
    for condition in ctx.names("condition"):
        if ctx.effects.callable(condition).needs_candidates != 0:
            continue
        for first, other in ((b, a), (a, b)):
            data = {
                "kind": "router",
                "routes": [{"name": "mix", "step": first, "condition_name": condition}],
                "fallback_step": other,
            }
            spec = is_valid_candidate(data, ctx)  # type: ignore[arg-type]
            if spec is not None:
                out.append(spec)
    return out


def _agent_target(spec: TopologySpec, rng: random.Random) -> tuple[_Pos, str] | None:
    """A registered agent step of `spec`, drawn uniformly in document order, with its name."""
    targets = [
        p for p in _positions(spec) if isinstance(p.node, AgentStepSpec) and p.node.agent_name
    ]
    if not targets:
        return None
    target = rng.choice(targets)
    name = cast(AgentStepSpec, target.node).agent_name
    assert name is not None
    return target, name


def agreement_gate(
    spec: TopologySpec, ctx: MutationContext, rng: random.Random
) -> TopologySpec | None:
    """An agent step X becomes X and Z in parallel collecting candidates, then a router that
    accepts when a two-candidate condition (e.g. they agree) holds, else runs Y.

    Z is another agent, Y an agent dearer than both; the merge keeps every branch's candidates
    (`combine == "all"`); the condition needs two candidates (declared verdict).
    """
    keep = _keep_step(ctx)
    merges = _collecting_merges(ctx)
    conditions = _verdict_conditions(ctx, 2, 2)
    if keep is None or not merges or not conditions:
        return None
    if not (ctx.kind_allowed("parallel") and ctx.kind_allowed("router")):
        return None
    picked = _agent_target(spec, rng)
    if picked is None:
        return None
    target, x = picked
    others = [a for a in agent_cost_order(ctx) if a != x]
    if not others:
        return None
    z = rng.choice(others)
    dearer = _dearer_than(ctx, {x, z})
    if not dearer:
        return None
    y = rng.choice(dearer)
    new = gate_spec(
        _agent(x), _agent(z), _agent(y), rng.choice(merges), rng.choice(conditions), keep, ctx
    )
    return _finish(lambda: _splice(spec, target.path, new), ctx)


def k_vote(spec: TopologySpec, ctx: MutationContext, rng: random.Random) -> TopologySpec | None:
    """An agent step X becomes a vote of `ctx.vote_k` agents (X and k-1 others, all different)
    in parallel, collecting candidates, then a selection step (e.g. a majority vote).

    Tie-break order: branches are listed dearest agent first (`agent_cost_order`), so a vote
    that breaks ties by candidate order sides with the strongest agent.
    """
    merges = _collecting_merges(ctx)
    selects = _selection_steps(ctx)
    k = ctx.vote_k
    if not merges or not ctx.kind_allowed("parallel") or len(ctx.agent_names) < k:
        return None
    picked = _agent_target(spec, rng)
    if picked is None:
        return None
    target, x = picked
    others = [a for a in ctx.agent_names if a != x]
    chosen = {x, *rng.sample(others, k - 1)}
    order = agent_cost_order(ctx)
    branches = [_agent(a) for a in sorted(chosen, key=order.index, reverse=True)]
    select = rng.choice(selects) if selects else None
    new = vote_spec(branches, rng.choice(merges), select)
    if isinstance(new, PipelineSpec):
        return _finish(lambda: _splice(spec, target.path, new), ctx)
    return _finish(lambda: replace_at(spec, target.path, new), ctx)


def replace_branch(
    spec: TopologySpec, ctx: MutationContext, rng: random.Random
) -> TopologySpec | None:
    """A parallel branch, a route's step or a router's fallback is replaced by a new agent step
    (another agent than the one it held, if it was one)."""
    slots: list[tuple[str, AnyNode]] = []
    for pos in _positions(spec):
        node = pos.node
        if isinstance(node, ParallelSpec):
            slots.extend((pos.path + f".steps[{i}]", s) for i, s in enumerate(node.steps))
        elif isinstance(node, RouterSpec):
            slots.extend(
                (pos.path + f".routes[{i}].step", r.step) for i, r in enumerate(node.routes)
            )
            if node.fallback_step is not None:
                slots.append((pos.path + ".fallback_step", node.fallback_step))
    if not slots or not ctx.kind_allowed("agent_step"):
        return None
    path, old = rng.choice(slots)
    current = old.agent_name if isinstance(old, AgentStepSpec) else None
    options = [a for a in ctx.agent_names if a != current]
    if not options:
        return None
    return _finish(lambda: replace_at(spec, path, _agent(rng.choice(options))), ctx)


def opening_specs(ctx: MutationContext) -> list[tuple[TopologySpec, str]]:
    """The structures a researcher tries first, built from the registries (generation 0).

    In this order, each valid for `ctx` and distinct by behaviour (`behaviour_hash`):

    1. every single agent, `pipeline[agent]` (operator `opening:single`);
    2. agreement gates: for every agent Y and every pair X < Z of agents cheaper than Y
       (`agent_cost_order`), `gate_spec(X, Z, Y)` with the first collecting merge and each
       two-candidate verdict condition (`opening:gate`);
    3. votes: every set of `ctx.vote_k` agents, dearest first, collecting merge, then each
       selection step (`opening:vote`);
    4. escalate-after cascades: for every pair X cheaper than Y, `cascade_spec(X, Y, c)` for
       each one-candidate verdict condition c (`opening:cascade`), pairs adjacent in cost order
       first, then wider ones; of the judge conditions (which run an agent) at most
       `ctx.max_judges`, the cheapest judges cheaper than Y (`_escalation_conditions`);
    5. input-feature routers: for every agent pair (`router_pairs`: the pairs whose oracle
       router adds the most hypervolume to the singles' front first) and every input-only condition
       c (`feature_conditions`), `router(c: dearer, else cheaper)` and the other way round
       (`opening:router`): a specialist that is right on the inputs c picks;
    6. self-consistency, when the problem's agents are sampled (`EffectTable.sampled_agents`):
       each agent `ctx.vote_k` times in parallel, collected, then each selection step
       (`opening:self_consistency`; the call cache keys each repeat apart, so they are
       `vote_k` distinct calls).

    The caller bounds how many it evaluates (the evolutionary strategy's `opening_share` of
    the budget). Needs costs in `ctx.agent_costs` to order agents; without them, name order.
    """
    order = agent_cost_order(ctx)
    keep = _keep_step(ctx)
    merges = _collecting_merges(ctx)
    selects = _selection_steps(ctx)
    out: list[tuple[TopologySpec, str]] = []
    seen: set[str] = set()

    def add(node: AnyNode, op: str) -> None:
        spec = is_valid_candidate(node, ctx)
        if spec is None:
            return
        digest = behaviour_hash(spec, ctx.effects)
        if digest not in seen:
            seen.add(digest)
            out.append((spec, op))

    if ctx.kind_allowed("pipeline"):
        for a in order:
            add(PipelineSpec(steps=[PipelineStepEntry(operation=_agent(a))]), "opening:single")
    if keep is not None and merges:
        for yi, y in enumerate(order):
            for xi in range(yi):
                for zi in range(xi + 1, yi):
                    for cond in _verdict_conditions(ctx, 2, 2):
                        add(
                            gate_spec(
                                _agent(order[xi]),
                                _agent(order[zi]),
                                _agent(y),
                                merges[0],
                                cond,
                                keep,
                                ctx,
                            ),
                            "opening:gate",
                        )
    if merges and len(order) >= ctx.vote_k:
        for combo in itertools.combinations(reversed(order), ctx.vote_k):
            for select in selects or (None,):
                add(vote_spec([_agent(a) for a in combo], merges[0], select), "opening:vote")
    if merges and selects and ctx.effects.sampled_agents:
        for a in order:
            for select in selects:
                add(
                    vote_spec([_agent(a)] * ctx.vote_k, merges[0], select),
                    "opening:self_consistency",
                )
    if keep is not None:
        pairs = sorted(
            ((i, j) for j in range(len(order)) for i in range(j)), key=lambda p: (p[1] - p[0], p)
        )
        for i, j in pairs:
            for cond in _escalation_conditions(ctx, 1, order[j]):
                add(
                    cascade_spec(_agent(order[i]), _agent(order[j]), cond, keep, ctx),
                    "opening:cascade",
                )
    if ctx.kind_allowed("router"):
        conditions = feature_conditions(ctx)
        for x, y in router_pairs(ctx):
            for cond in conditions:
                for when, otherwise in ((y, x), (x, y)):
                    add(
                        feature_router_spec(cond, _agent(when), _agent(otherwise)), "opening:router"
                    )
    return out


OPERATORS: Mapping[str, Operator] = MappingProxyType(
    {
        "insert_step": insert_step,
        "remove_step": remove_step,
        "swap_steps": swap_steps,
        "wrap_in_parallel": wrap_in_parallel,
        "add_parallel_branch": add_parallel_branch,
        "add_router": add_router,
        "add_cascade": add_cascade,
        "wrap_in_loop": wrap_in_loop,
        "unwrap": unwrap,
        "change_agent": change_agent,
        "change_function": change_function,
        "change_merge": change_merge,
        "change_condition": change_condition,
        "escalate_after": escalate_after,
        "agreement_gate": agreement_gate,
        "k_vote": k_vote,
        "replace_branch": replace_branch,
    }
)
"""Every mutation operator by name, in a fixed order."""


# --- mutate, crossover, random specs -----------------------------------------------------------


def mutate(
    spec: TopologySpec,
    ctx: MutationContext,
    rng: random.Random,
    n_tries: int = 20,
    *,
    operators: Sequence[str] | None = None,
    avoid: Collection[str] = (),
    accept: Callable[[TopologySpec], bool] | None = None,
) -> tuple[TopologySpec, str]:
    """Apply a random applicable operator; the result is valid and new.

    Up to `n_tries` times, an operator is drawn uniformly and applied; if none of those draws
    gives a usable result, every operator is tried once more in a shuffled order before giving
    up. A result is usable when it is valid for `ctx` (see `is_valid_candidate`), its canonical
    hash differs from the input's and is not in `avoid`, and `accept(result)` holds (e.g. the
    engine's full check, `lambda s: ask_ctx.check(s).ok`).

    Args:
        spec: the parent.
        ctx: names and limits.
        rng: the source of randomness (the same state gives the same result).
        n_tries: random draws before the final sweep (>= 1).
        operators: operator names to draw from (default: all of `OPERATORS`).
        avoid: canonical hashes the result must not have (e.g. every candidate so far).
        accept: an extra check the result must pass.

    Returns:
        `(new_spec, operator_name)`.

    Raises:
        ValueError: an unknown operator name or `n_tries` < 1.
        SearchError: no operator gives a usable result.
    """
    names = list(OPERATORS) if operators is None else list(operators)
    unknown = [n for n in names if n not in OPERATORS]
    if unknown or not names:
        raise ValueError(f"unknown operator(s) {unknown}; operators are {list(OPERATORS)}")
    if n_tries < 1:
        raise ValueError(f"n_tries must be >= 1, got {n_tries}")
    parent_hash = spec_hash(spec)

    def attempt(name: str) -> TopologySpec | None:
        child = OPERATORS[name](spec, ctx, rng)
        if child is None:
            return None
        digest = spec_hash(child)
        if digest == parent_hash or digest in avoid:
            return None
        if accept is not None and not accept(child):
            return None
        return child

    for _ in range(n_tries):
        name = rng.choice(names)
        child = attempt(name)
        if child is not None:
            return child, name
    sweep = list(names)
    rng.shuffle(sweep)
    for name in sweep:
        child = attempt(name)
        if child is not None:
            return child, name
    raise SearchError(
        f"no mutation applies to this spec with the names and limits given "
        f"(tried {', '.join(names)})"
    )


def crossover(
    a: TopologySpec,
    b: TopologySpec,
    ctx: MutationContext,
    rng: random.Random,
    n_tries: int = 10,
) -> TopologySpec | None:
    """Subtree crossover: a random node of `a` replaced by a random node of `b`.

    The donated subtree loses its node ids (so ids stay unique). The root of `a` is only
    replaced by a composite of `b`. Returns a valid spec that differs from both parents, or None
    after `n_tries` draws.
    """
    a_positions = _positions(a)
    b_nodes = [p.node for p in _positions(b)]
    hashes = {spec_hash(a), spec_hash(b)}
    for _ in range(n_tries):
        target = rng.choice(a_positions)
        pool = b_nodes
        if target.path == "$":
            pool = [n for n in b_nodes if n.node_kind in COMPOSITE_KINDS]
        child = _finish(_grafter(a, target.path, rng.choice(pool)), ctx)
        if child is not None and spec_hash(child) not in hashes:
            return child
    return None


def _grafter(spec: AnyNode, path: str, donor: AnyNode) -> Callable[[], AnyNode]:
    def build() -> AnyNode:
        # a copy of the donor without node ids (its canonical form), so ids stay unique
        return replace_at(spec, path, parse_operation(canonical_dict(donor)))

    return build


def random_spec(
    ctx: MutationContext, rng: random.Random, n_mutations: int | None = None
) -> TopologySpec:
    """A random valid topology (the `random` strategy's sampler).

    Starts from a small composite of new steps (a pipeline of one to three steps; or, when
    pipelines are not allowed, a parallel, a router or a loop), then applies `n_mutations`
    random mutations (default: 0 to 3, drawn).

    Raises:
        SearchError: nothing can be built from `ctx` (no usable agent or step callable, or no
            allowed composite with the names it needs).
    """
    base = _random_base(ctx, rng)
    if base is None:
        raise SearchError(
            "cannot build a topology from this context: it needs an allowed agent or step "
            "callable and an allowed composite kind with the names it needs"
        )
    spec = base
    count = rng.randint(0, 3) if n_mutations is None else n_mutations
    for _ in range(count):
        try:
            spec, _ = mutate(spec, ctx, rng, n_tries=5)
        except SearchError:
            break
    return spec


def _random_base(ctx: MutationContext, rng: random.Random) -> TopologySpec | None:
    if not _atomic_options(ctx):
        return None

    def atom() -> AnyNode:
        node = _new_atomic(ctx, rng)
        if node is None:  # pragma: no cover - options were checked above
            raise ValueError("no atomic step available")
        return node

    builders: list[Callable[[], AnyNode]] = []
    if ctx.kind_allowed("pipeline"):
        builders.append(
            lambda: PipelineSpec(
                steps=[PipelineStepEntry(operation=atom()) for _ in range(rng.randint(1, 3))]
            )
        )
    merges = ctx.merge_names()
    if ctx.kind_allowed("parallel") and merges:
        builders.append(lambda: ParallelSpec(steps=[atom(), atom()], merge=rng.choice(merges)))
    conditions = ctx.names("condition")
    if ctx.kind_allowed("router") and conditions:
        builders.append(
            lambda: RouterSpec(
                routes=[
                    RouteSpec(name="route", step=atom(), condition_name=rng.choice(conditions))
                ],
                fallback_step=atom(),
            )
        )
    evaluators, updaters = ctx.names("evaluator"), ctx.names("state_updater")
    if ctx.kind_allowed("refinement_loop") and evaluators and updaters:
        builders.append(
            lambda: RefinementLoopSpec(
                step=atom(),
                evaluator=rng.choice(evaluators),
                state_updater_name=rng.choice(updaters),
                max_iterations=ctx.loop_max_iterations,
            )
        )
    # pipelines first: the others only when pipelines are not allowed (or cannot be built);
    # a draw can fail the static dataflow check (e.g. a vote with no agent), so draw again
    for build in builders:
        for _ in range(_BASE_DRAWS):
            spec = _finish(build, ctx)
            if spec is not None:
                return spec
    return None


_BASE_DRAWS = 20
"""Draws per base shape in `random_spec` before trying the next shape."""
