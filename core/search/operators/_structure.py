"""The structure operators: cascades, agreement gates, votes and input-feature routers, built
from the problem's declared effects and the agents' measured costs and accuracies; also the
bridges between two front candidates (cascades, input-feature mixes, learned routers) and the
opening's structures (`opening_specs`).
"""

from __future__ import annotations

import itertools
import random
import re
from collections.abc import Collection, Sequence
from typing import Any, cast

from core.ir.canonical import strip_node_ids
from core.ir.dataflow import analyse, behaviour_hash
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
    walk,
)
from core.ir.nodes import node_at, replace_at
from core.search.operators._context import (
    MutationContext,
    Pos,
    finish,
    is_valid_candidate,
    positions,
    rebuild,
)
from core.vocab.pareto import hypervolume

__all__ = [
    "accept_router",
    "agent_cost_order",
    "agreement_gate",
    "bridge_specs",
    "cascade_spec",
    "complementarity",
    "escalate_after",
    "feature_conditions",
    "feature_router_spec",
    "gate_spec",
    "k_vote",
    "learned_router_spec",
    "mix_specs",
    "opening_specs",
    "replace_branch",
    "router_pairs",
    "vote_spec",
]

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
        return replace_at(spec, path, rebuild(here, steps=[*here.steps, *new.steps[1:]]))
    m = _PIPELINE_SLOT.match(path)
    if m is not None:
        parent = node_at(spec, m.group("parent"))
        if isinstance(parent, PipelineSpec):
            i = int(m.group("i"))
            entry = parent.steps[i]
            if entry.config is None:
                steps = [*parent.steps[:i], *new.steps, *parent.steps[i + 1 :]]
                return replace_at(spec, m.group("parent"), rebuild(parent, steps=steps))
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


def _answering_targets(spec: TopologySpec, ctx: MutationContext, min_lo: int) -> list[Pos]:
    """Nodes that surely leave at least `min_lo` candidates (from their own subtree) and hold an
    agent, where one more pipeline level would not break `max_depth`."""
    out: list[Pos] = []
    for pos in positions(spec):
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
    return finish(lambda: _splice(spec, target.path, new), ctx)


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
        spec = finish(lambda new=new: _splice(cheap, "$", new), ctx)
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


def learned_router_spec(
    condition: str, cheap: TopologySpec, dear: TopologySpec, ctx: MutationContext
) -> TopologySpec | None:
    """`router(when <condition>: cheap, else dear)` for a learned "the cheaper one is right"
    condition (`core.search.learned`): the inputs it picks run `cheap` whole, the rest `dear`
    whole. None when routers are not allowed or the result breaks `ctx`'s limits."""
    if not ctx.kind_allowed("router"):
        return None
    data = {
        "kind": "router",
        "routes": [{"name": "learned", "step": _id_free(cheap), "condition_name": condition}],
        "fallback_step": _id_free(dear),
    }
    return is_valid_candidate(data, ctx)  # type: ignore[arg-type]


def _agent_target(spec: TopologySpec, rng: random.Random) -> tuple[Pos, str] | None:
    """A registered agent step of `spec`, drawn uniformly in document order, with its name."""
    targets = [
        p for p in positions(spec) if isinstance(p.node, AgentStepSpec) and p.node.agent_name
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
    return finish(lambda: _splice(spec, target.path, new), ctx)


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
        return finish(lambda: _splice(spec, target.path, new), ctx)
    return finish(lambda: replace_at(spec, target.path, new), ctx)


def replace_branch(
    spec: TopologySpec, ctx: MutationContext, rng: random.Random
) -> TopologySpec | None:
    """A parallel branch, a route's step or a router's fallback is replaced by a new agent step
    (another agent than the one it held, if it was one)."""
    slots: list[tuple[str, AnyNode]] = []
    for pos in positions(spec):
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
    return finish(lambda: replace_at(spec, path, _agent(rng.choice(options))), ctx)


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
