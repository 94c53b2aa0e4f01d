"""The edits: operators that insert, remove, swap, wrap, unwrap or rename one node (the
`core.search.operators` table's first thirteen rows).
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from typing import Any, cast

from core.ir.canonical import canonical_dict
from core.ir.models import (
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
)
from core.ir.nodes import remove_at, replace_at
from core.search.operators._context import (
    MutationContext,
    Pos,
    atomic_options,
    finish,
    new_atomic,
    positions,
    rebuild,
    wrap_targets,
)

__all__ = [
    "add_cascade",
    "add_parallel_branch",
    "add_router",
    "change_agent",
    "change_condition",
    "change_function",
    "change_merge",
    "insert_step",
    "remove_step",
    "swap_steps",
    "unwrap",
    "wrap_in_loop",
    "wrap_in_parallel",
]

# --- operators ---------------------------------------------------------------------------------


def insert_step(
    spec: TopologySpec, ctx: MutationContext, rng: random.Random
) -> TopologySpec | None:
    """A new agent or function step at a random position of a random pipeline."""
    pipelines = [p for p in positions(spec) if isinstance(p.node, PipelineSpec)]
    if not pipelines or not atomic_options(ctx):
        return None
    target = rng.choice(pipelines)
    pipe = cast(PipelineSpec, target.node)
    new = new_atomic(ctx, rng)
    if new is None:
        return None
    position = rng.randint(0, len(pipe.steps))
    steps = list(pipe.steps)
    steps.insert(position, PipelineStepEntry(operation=new))
    return finish(lambda: replace_at(spec, target.path, rebuild(pipe, steps=steps)), ctx)


def _removable(spec: AnyNode) -> list[str]:
    paths: list[str] = []
    for pos in positions(spec):
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
    return finish(lambda: remove_at(spec, path), ctx)


def swap_steps(spec: TopologySpec, ctx: MutationContext, rng: random.Random) -> TopologySpec | None:
    """Swap two different pipeline steps, parallel branches or routes of one composite."""
    targets: list[tuple[Pos, list[tuple[int, int]]]] = []
    for pos in positions(spec):
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
            new: AnyNode = rebuild(node, steps=_swapped(node.steps, i, j))
        elif isinstance(node, ParallelSpec):
            new = rebuild(node, steps=_swapped(node.steps, i, j))
        else:
            router = cast(RouterSpec, node)
            new = rebuild(router, routes=_swapped(router.routes, i, j))
        return replace_at(spec, pos.path, new)

    return finish(build, ctx)


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
    if not ctx.kind_allowed("parallel") or not merges or not atomic_options(ctx):
        return None
    targets = wrap_targets(spec, ctx)
    if not targets:
        return None
    target = rng.choice(targets)
    branch = new_atomic(ctx, rng)
    merge = rng.choice(merges)
    if branch is None:
        return None
    new = ParallelSpec(steps=[target.node, branch], merge=merge)
    return finish(lambda: replace_at(spec, target.path, new), ctx)


def add_parallel_branch(
    spec: TopologySpec, ctx: MutationContext, rng: random.Random
) -> TopologySpec | None:
    """A new step appended to the branches of a random parallel."""
    parallels = [p for p in positions(spec) if isinstance(p.node, ParallelSpec)]
    if not parallels or not atomic_options(ctx):
        return None
    target = rng.choice(parallels)
    par = cast(ParallelSpec, target.node)
    branch = new_atomic(ctx, rng)
    if branch is None:
        return None
    return finish(
        lambda: replace_at(spec, target.path, rebuild(par, steps=[*par.steps, branch])), ctx
    )


def _router_parts(
    spec: TopologySpec, ctx: MutationContext, rng: random.Random
) -> tuple[Pos, str, AnyNode] | None:
    conditions = ctx.names("condition")
    if not ctx.kind_allowed("router") or not conditions or not atomic_options(ctx):
        return None
    targets = wrap_targets(spec, ctx)
    if not targets:
        return None
    target = rng.choice(targets)
    condition = rng.choice(conditions)
    other = new_atomic(ctx, rng, avoid=target.node)
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
    return finish(lambda: replace_at(spec, target.path, new), ctx)


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
    return finish(lambda: replace_at(spec, target.path, new), ctx)


def wrap_in_loop(
    spec: TopologySpec, ctx: MutationContext, rng: random.Random
) -> TopologySpec | None:
    """A node becomes the step of a refinement loop with a registered evaluator and state
    updater (`max_iterations = ctx.loop_max_iterations`)."""
    evaluators = ctx.names("evaluator")
    updaters = ctx.names("state_updater")
    if not ctx.kind_allowed("refinement_loop") or not evaluators or not updaters:
        return None
    targets = [p for p in wrap_targets(spec, ctx) if not isinstance(p.node, RefinementLoopSpec)]
    if not targets:
        return None
    target = rng.choice(targets)
    new = RefinementLoopSpec(
        step=target.node,
        evaluator=rng.choice(evaluators),
        state_updater_name=rng.choice(updaters),
        max_iterations=ctx.loop_max_iterations,
    )
    return finish(lambda: replace_at(spec, target.path, new), ctx)


def unwrap(spec: TopologySpec, ctx: MutationContext, rng: random.Random) -> TopologySpec | None:
    """A composite is replaced by one of its children (the root only by a composite child)."""
    choices: list[tuple[str, AnyNode]] = []
    for pos in positions(spec):
        for _, child in child_slots(pos.node):
            if pos.path == "$" and child.node_kind not in COMPOSITE_KINDS:
                continue
            choices.append((pos.path, child))
    if not choices:
        return None
    path, child = rng.choice(choices)
    return finish(lambda: replace_at(spec, path, child), ctx)


def change_agent(
    spec: TopologySpec, ctx: MutationContext, rng: random.Random
) -> TopologySpec | None:
    """A registered agent step uses another registered agent."""
    targets = [
        p
        for p in positions(spec)
        if isinstance(p.node, AgentStepSpec)
        and p.node.agent_name is not None
        and any(a != p.node.agent_name for a in ctx.agent_names)
    ]
    if not targets:
        return None
    target = rng.choice(targets)
    node = cast(AgentStepSpec, target.node)
    name = rng.choice([a for a in ctx.agent_names if a != node.agent_name])
    return finish(lambda: replace_at(spec, target.path, rebuild(node, agent_name=name)), ctx)


def change_function(
    spec: TopologySpec, ctx: MutationContext, rng: random.Random
) -> TopologySpec | None:
    """A function step uses another `step` callable (its explicit `name`, if any, is dropped)."""
    steps = ctx.names("step")
    targets = [
        p
        for p in positions(spec)
        if isinstance(p.node, FunctionStepSpec) and any(s != p.node.callable_name for s in steps)
    ]
    if not targets:
        return None
    target = rng.choice(targets)
    node = cast(FunctionStepSpec, target.node)
    name = rng.choice([s for s in steps if s != node.callable_name])
    return finish(
        lambda: replace_at(spec, target.path, rebuild(node, callable_name=name, name=None)), ctx
    )


def change_merge(
    spec: TopologySpec, ctx: MutationContext, rng: random.Random
) -> TopologySpec | None:
    """A parallel uses another merge from `ctx.merge_names()`."""
    merges = ctx.merge_names()
    targets = [
        p
        for p in positions(spec)
        if isinstance(p.node, ParallelSpec) and any(m != p.node.merge for m in merges)
    ]
    if not targets:
        return None
    target = rng.choice(targets)
    node = cast(ParallelSpec, target.node)
    merge = rng.choice([m for m in merges if m != node.merge])
    return finish(lambda: replace_at(spec, target.path, rebuild(node, merge=merge)), ctx)


def change_condition(
    spec: TopologySpec, ctx: MutationContext, rng: random.Random
) -> TopologySpec | None:
    """A route with a condition uses another registered condition."""
    conditions = ctx.names("condition")
    targets = [
        (p, i)
        for p in positions(spec)
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
        routes[i] = rebuild(route, condition_name=condition)
        return replace_at(spec, target.path, rebuild(router, routes=routes))

    return finish(build, ctx)
