"""The structure operators (escalate-after, agreement gate, k-way vote, branch replacement) and
the opening built from the registries (generation 0: every single agent, then the cascades,
agreement gates and votes the agents' cost order allows)."""

from __future__ import annotations

import random
from typing import Any

from core.ir import parse_topology, spec_hash
from core.ir.dataflow import EffectTable, NameEffect, analyse
from core.search.operators import (
    MutationContext,
    agent_cost_order,
    agreement_gate,
    bridge_specs,
    complementarity,
    escalate_after,
    feature_conditions,
    k_vote,
    mix_specs,
    mutate,
    opening_specs,
    oracle_router_point,
    random_spec,
    replace_branch,
    router_pairs,
)

EFFECTS = EffectTable(
    names={
        "keep": NameEffect(identity=True),
        "vote": NameEffect(needs_candidates=2),
        "collect": NameEffect(combine="all"),
        "ok": NameEffect(needs_candidates=1, verdict="accept"),
        "bad": NameEffect(needs_candidates=1, verdict="reject"),
        "not_ok": NameEffect(needs_candidates=1, verdict="reject", complement_of="ok"),
        "agree": NameEffect(needs_candidates=2, verdict="accept"),
        "is_long": NameEffect(),
    },
    answer_needs_agent=True,
)
COSTS = {"cheap": 0.001, "mid": 0.01, "strong": 1.0}
CTX = MutationContext(
    agent_names=("strong", "cheap", "mid"),
    callables={
        "step": ["keep", "vote"],
        "merge": ["collect"],
        "condition": ["ok", "bad", "not_ok", "agree", "is_long"],
    },
    allowed_step_kinds=None,
    max_depth=4,
    effects=EFFECTS,
    agent_costs=COSTS,
)


def A(name: str) -> dict[str, Any]:
    return {"kind": "agent_step", "agent_name": name}


def F(name: str) -> dict[str, Any]:
    return {"kind": "function_step", "callable_name": name}


def pipe(*ops: dict[str, Any]) -> dict[str, Any]:
    return {"kind": "pipeline", "steps": [{"operation": op} for op in ops]}


def router(cond: str, step: dict[str, Any], fallback: dict[str, Any], name: str) -> dict[str, Any]:
    return {
        "kind": "router",
        "routes": [{"name": name, "step": step, "condition_name": cond}],
        "fallback_step": fallback,
    }


def same(spec: Any, expected: dict[str, Any]) -> bool:
    return spec_hash(spec) == spec_hash(parse_topology(expected))


SEED = parse_topology(pipe(A("cheap")))


def test_agents_are_ordered_by_measured_cost_then_name() -> None:
    assert agent_cost_order(CTX) == ("cheap", "mid", "strong")
    unmeasured = CTX.model_copy(update={"agent_costs": {"strong": 0.5}})
    assert agent_cost_order(unmeasured) == ("strong", "cheap", "mid")


def test_escalate_after_accepts_on_a_one_candidate_condition_else_runs_a_dearer_agent() -> None:
    seen: set[str] = set()
    for seed in range(40):
        child = escalate_after(SEED, CTX, random.Random(seed))
        assert child is not None
        data = child.model_dump(mode="json")
        assert [s["operation"]["kind"] for s in data["steps"]] == ["agent_step", "router"]
        route = data["steps"][1]["operation"]["routes"][0]
        # never a condition that needs two candidates after one agent (agree), never one with
        # no verdict (is_long), never the declared complement (not_ok: the same router as ok)
        assert route["condition_name"] in ("ok", "bad")
        seen.add(spec_hash(child))
    expected = {
        pipe(A("cheap"), router("ok", F("keep"), A(y), "accept")).__repr__()
        for y in ("mid", "strong")
    }
    assert len(expected) == 2 and len(seen) == 4  # 2 conditions x 2 dearer agents
    one = escalate_after(
        SEED, CTX.model_copy(update={"agent_names": ("cheap", "mid")}), random.Random(0)
    )
    assert one is not None
    assert same(one, pipe(A("cheap"), router("ok", F("keep"), A("mid"), "accept"))) or same(
        one, pipe(A("cheap"), router("bad", A("mid"), F("keep"), "escalate"))
    )


def test_escalate_after_does_not_apply_without_a_dearer_agent_or_an_identity_step() -> None:
    top = parse_topology(pipe(A("strong")))
    assert escalate_after(top, CTX, random.Random(0)) is None
    no_keep = CTX.model_copy(update={"callables": {**CTX.callables, "step": ("vote",)}})
    assert escalate_after(SEED, no_keep, random.Random(0)) is None


def test_agreement_gate_is_two_agents_collected_then_agree_or_escalate() -> None:
    results = {
        spec_hash(c) for s in range(30) if (c := agreement_gate(SEED, CTX, random.Random(s)))
    }
    gate = pipe(
        {"kind": "parallel", "steps": [A("cheap"), A("mid")], "merge": "collect"},
        router("agree", F("keep"), A("strong"), "accept"),
    )
    # the only gate from `cheap`: a partner and an escalation dearer than both
    assert results == {spec_hash(parse_topology(gate))}
    assert analyse(parse_topology(gate), EFFECTS).ok


def test_k_vote_lists_branches_dearest_first_then_votes() -> None:
    child = k_vote(SEED, CTX, random.Random(3))
    assert child is not None
    expected = pipe(
        {"kind": "parallel", "steps": [A("strong"), A("mid"), A("cheap")], "merge": "collect"},
        F("vote"),
    )
    assert same(child, expected)


def test_replace_branch_swaps_a_branch_for_another_agent() -> None:
    spec = parse_topology(
        pipe({"kind": "parallel", "steps": [A("cheap"), A("mid")], "merge": "collect"}, F("vote"))
    )
    outcomes = {
        spec_hash(c) for s in range(30) if (c := replace_branch(spec, CTX, random.Random(s)))
    }
    expected = set()
    for first, second in [
        ("strong", "mid"),
        ("mid", "mid"),
        ("cheap", "strong"),
        ("cheap", "cheap"),
    ]:
        par = {"kind": "parallel", "steps": [A(first), A(second)], "merge": "collect"}
        expected.add(spec_hash(parse_topology(pipe(par, F("vote")))))
    assert outcomes == expected


def test_no_operator_places_a_condition_before_its_input() -> None:
    for seed in range(60):
        rng = random.Random(seed)
        spec = random_spec(CTX, rng)
        for _ in range(6):
            spec, op = mutate(spec, CTX, rng)
            analysis = analyse(spec, EFFECTS)
            assert analysis.ok, (op, [i.reason() for i in analysis.issues])


def test_the_opening_is_singles_then_gates_votes_and_cascades_in_cost_order() -> None:
    opening = opening_specs(CTX)
    ops = [op for _, op in opening]
    assert (
        ops
        == ["opening:single"] * 3
        + ["opening:gate", "opening:vote"]
        + ["opening:cascade"] * 6
        + ["opening:router"] * 6
    )
    singles = [pipe(A(a)) for a in ("cheap", "mid", "strong")]
    gate = pipe(
        {"kind": "parallel", "steps": [A("cheap"), A("mid")], "merge": "collect"},
        router("agree", F("keep"), A("strong"), "accept"),
    )
    vote = pipe(
        {"kind": "parallel", "steps": [A("strong"), A("mid"), A("cheap")], "merge": "collect"},
        F("vote"),
    )
    cascades = [
        pipe(A(x), r)
        for x, y in (("cheap", "mid"), ("mid", "strong"), ("cheap", "strong"))
        for r in (
            router("bad", A(y), F("keep"), "escalate"),  # sorted condition names: bad, ok
            router("ok", F("keep"), A(y), "accept"),
        )
    ]
    # no measured per-example scores: every pair, cost-neighbours first, dearer on the route
    routers = [
        {
            "kind": "router",
            "routes": [{"name": "when_is_long", "step": A(w), "condition_name": "is_long"}],
            "fallback_step": A(o),
        }
        for x, y in (("cheap", "mid"), ("mid", "strong"), ("cheap", "strong"))
        for w, o in ((y, x), (x, y))
    ]
    expected = [*singles, gate, vote, *cascades, *routers]
    assert [spec_hash(s) for s, _ in opening] == [spec_hash(parse_topology(e)) for e in expected]


def test_router_pairs_rank_by_oracle_accuracy_and_drop_dominated_pairs() -> None:
    scores = {
        "cheap": (1.0, 1.0, 0.0, 0.0),  # 0.50, right on the first half
        "mid": (0.0, 0.0, 1.0, 1.0),  # 0.50, right on the second half: oracle 1.0 with cheap
        "strong": (1.0, 0.0, 1.0, 1.0),  # 0.75
    }
    ctx = CTX.model_copy(update={"agent_scores": scores})
    # cheap+mid: oracle 1.0 > 0.5 (the best agent at most as dear as mid); cheap+strong:
    # oracle 1.0 > 0.75, a wider cost gap; strong is right wherever mid is: no mid+strong
    assert router_pairs(ctx) == [("cheap", "mid"), ("cheap", "strong")]
    # mid now (0, 0, 1, 0): mid+strong has no complementarity; cheap+strong's oracle
    # (1.0) beats strong (0.75); cheap+mid's oracle 0.75 beats every agent up to mid (0.5)
    scores["mid"] = (0.0, 0.0, 1.0, 0.0)
    assert router_pairs(ctx.model_copy(update={"agent_scores": scores})) == [
        ("cheap", "strong"),
        ("cheap", "mid"),
    ]
    # a pair whose oracle an agent at most as dear already reaches is dominated: dropped
    # (mid+strong: oracle 0.5, and cheap is 1.0); cheap is right wherever either is
    scores = {"cheap": (1.0,) * 4, "mid": (1.0, 0.0, 0.0, 0.0), "strong": (0.0, 1.0, 0.0, 0.0)}
    assert router_pairs(ctx.model_copy(update={"agent_scores": scores})) == []
    assert complementarity((1.0, 0.0), (0.0, 1.0)) == 0.5
    # only conditions declared to read the input alone: not verdicts, not undeclared names
    undeclared = CTX.model_copy(
        update={"callables": {**CTX.callables, "condition": ("agree", "is_long", "mystery")}}
    )
    assert feature_conditions(undeclared) == ("is_long",)
    assert complementarity((1.0, 0.0), (1.0,)) == 0.0


def test_router_pairs_with_costs_rank_by_the_hypervolume_the_oracle_router_adds() -> None:
    scores = {
        "cheap": (1.0,) * 4 + (0.0,) * 4,  # 0.5
        "mid": (0.0,) * 4 + (1.0, 1.0, 1.0, 0.0),  # 0.375, right on 3 of cheap's misses
        "strong": (1.0, 1.0, 1.0, 0.0) + (1.0,) * 4,  # 0.875, right on all of cheap's misses
    }
    costs = {"cheap": 1.0, "mid": 2.0, "strong": 40.0}
    # cheap+mid: right on 7 of 8, mid run on the 3 inputs where only it is right
    assert oracle_router_point(scores["cheap"], scores["mid"], 1.0, 2.0) == (0.875, 1.375)
    # cheap+strong: right on all 8, strong run on the 4 inputs where only it is right
    assert oracle_router_point(scores["strong"], scores["cheap"], 40.0, 1.0) == (1.0, 20.5)
    ctx = CTX.model_copy(update={"agent_scores": scores, "agent_costs": costs})
    # on the singles' front (reference: accuracy 0, 1.1 x 40 USD) cheap+mid's point adds
    # (40 - 1.375) x (0.875 - 0.5) = 14.48, cheap+strong's (40 - 20.5) x 0.5 + 4 x 0.125 =
    # 10.25: the cheap pair first, though its oracle accuracy is lower; strong is right
    # wherever mid is: no mid+strong
    assert router_pairs(ctx) == [("cheap", "mid"), ("cheap", "strong")]
    # without costs: highest oracle accuracy first
    no_costs = ctx.model_copy(update={"agent_costs": {}})
    assert router_pairs(no_costs) == [("cheap", "strong"), ("cheap", "mid")]
    assert oracle_router_point((1.0,), (1.0, 0.0), 1.0, 2.0) == (0.0, 0.0)


GATE = parse_topology(
    pipe(
        {"kind": "parallel", "steps": [A("cheap"), A("mid")], "merge": "collect"},
        router("agree", F("keep"), A("mid"), "accept"),
    )
)
TOP = parse_topology(pipe(A("strong")))


def test_a_cascade_bridge_runs_the_cheap_end_whole_then_escalates_to_the_dear_ends_agent() -> None:
    """After the gate two candidates surely exist, so the two-candidate condition is allowed
    too; the escalation is `strong` (the dear end's dearest agent, dearer than the gate's)."""
    bridges = bridge_specs(GATE, TOP, CTX)
    gate_steps = GATE.model_dump(mode="json", exclude_none=True)["steps"]
    escalate = [
        router("agree", F("keep"), A("strong"), "accept"),
        router("bad", A("strong"), F("keep"), "escalate"),
        router("ok", F("keep"), A("strong"), "accept"),
    ]
    expected = [
        spec_hash(parse_topology({"kind": "pipeline", "steps": [*gate_steps, {"operation": r}]}))
        for r in escalate
    ]
    assert [spec_hash(b) for b in bridges] == expected  # condition names sorted
    # after one agent only one-candidate conditions: never `agree` before its input exists
    single = bridge_specs(SEED, TOP, CTX)
    assert [spec_hash(b) for b in single] == [
        spec_hash(
            parse_topology(pipe(A("cheap"), router("bad", A("strong"), F("keep"), "escalate")))
        ),
        spec_hash(parse_topology(pipe(A("cheap"), router("ok", F("keep"), A("strong"), "accept")))),
    ]
    # no agent of the dear end is dearer than the cheap end's: no bridge
    assert bridge_specs(TOP, SEED, CTX) == []


def test_a_mix_bridge_routes_on_each_input_only_condition_both_ways_round() -> None:
    mixes = mix_specs(SEED, TOP, CTX)
    assert [spec_hash(m) for m in mixes] == [
        spec_hash(parse_topology(router("is_long", pipe(A("strong")), pipe(A("cheap")), "mix"))),
        spec_hash(parse_topology(router("is_long", pipe(A("cheap")), pipe(A("strong")), "mix"))),
    ]
    assert all(analyse(m, EFFECTS).ok for m in mixes)
    # a router adds a level: over max_depth nothing is proposed (the gate is 2 deep, a mix 3)
    assert len(mix_specs(GATE, TOP, CTX.model_copy(update={"max_depth": 3}))) == 2
    assert mix_specs(GATE, TOP, CTX.model_copy(update={"max_depth": 2})) == []
    assert mix_specs(SEED, TOP, CTX.model_copy(update={"allowed_step_kinds": ("pipeline",)})) == []
