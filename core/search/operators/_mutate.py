"""Every operator by name (`OPERATORS`), and what the strategies draw with it: `mutate` (a
random applicable operator), `crossover` (a subtree of one parent grafted into the other) and
`random_spec` (a random valid topology).
"""

from __future__ import annotations

import random
from collections.abc import Callable, Collection, Mapping, Sequence
from types import MappingProxyType

from core.errors import SearchError
from core.ir.canonical import canonical_dict, spec_hash
from core.ir.limits import parse_operation
from core.ir.models import (
    COMPOSITE_KINDS,
    AnyNode,
    ParallelSpec,
    PipelineSpec,
    PipelineStepEntry,
    RefinementLoopSpec,
    RouterSpec,
    RouteSpec,
    TopologySpec,
)
from core.ir.nodes import replace_at
from core.search.operators._context import (
    MutationContext,
    Operator,
    atomic_options,
    finish,
    new_atomic,
    positions,
)
from core.search.operators._edits import (
    add_cascade,
    add_parallel_branch,
    add_router,
    change_agent,
    change_condition,
    change_function,
    change_merge,
    insert_step,
    remove_step,
    swap_steps,
    unwrap,
    wrap_in_loop,
    wrap_in_parallel,
)
from core.search.operators._structure import agreement_gate, escalate_after, k_vote, replace_branch

__all__ = [
    "OPERATORS",
    "crossover",
    "mutate",
    "random_spec",
]

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
    a_positions = positions(a)
    b_nodes = [p.node for p in positions(b)]
    hashes = {spec_hash(a), spec_hash(b)}
    for _ in range(n_tries):
        target = rng.choice(a_positions)
        pool = b_nodes
        if target.path == "$":
            pool = [n for n in b_nodes if n.node_kind in COMPOSITE_KINDS]
        child = finish(_grafter(a, target.path, rng.choice(pool)), ctx)
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
    if not atomic_options(ctx):
        return None

    def atom() -> AnyNode:
        node = new_atomic(ctx, rng)
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
            spec = finish(build, ctx)
            if spec is not None:
                return spec
    return None


_BASE_DRAWS = 20
"""Draws per base shape in `random_spec` before trying the next shape."""
