"""What generation 0 proposes from the library on a problem with only agents, and that a
problem with its own parts (gsm8k_replay) is offered exactly what it had."""

from __future__ import annotations

import os
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from ticket_problem import PRICES, write_problem

import core
from core.ir.canonical import canonical_dict
from core.problems import DATASETS_ENV, load_problem
from core.search.operators import MutationContext, opening_specs


def short(n: dict[str, Any]) -> str:
    """A spec's shape in one line: `[a, router(c->keep; else b)]`, `par(a, b; merge)`."""
    kind = n["kind"]
    if kind == "agent_step":
        return n["agent_name"]
    if kind == "function_step":
        return n["callable_name"]
    if kind == "pipeline":
        return "[" + ", ".join(short(s["operation"]) for s in n["steps"]) + "]"
    if kind == "parallel":
        return "par(" + ", ".join(short(s) for s in n["steps"]) + "; " + n["merge"] + ")"
    routes = ", ".join(f"{r['condition_name']}->{short(r['step'])}" for r in n["routes"])
    return f"router({routes}; else {short(n['fallback_step'])})"


def opening(tmp_path: Path, **ctx: Any) -> list[tuple[str, str]]:
    p = load_problem(write_problem(tmp_path))
    mctx = MutationContext(
        agent_names=p.agent_registry.names(),
        callables=p.roles,
        effects=p.effects,
        agent_costs=PRICES,
        allowed_step_kinds=None,
        **ctx,
    )
    return [(op, short(canonical_dict(spec))) for spec, op in opening_specs(mctx)]


def test_an_agents_only_problem_opens_with_gates_votes_cascades_and_self_consistency(
    tmp_path: Path,
) -> None:
    ops = opening(tmp_path)
    assert Counter(op for op, _ in ops) == {
        "opening:single": 5,
        "opening:gate": 10,  # every pair below each agent: 1 + 3 + 6
        "opening:vote": 10,  # every 3 of 5 agents
        "opening:cascade": 29,  # 10 pairs x answer_present, + 2 judges where two are cheaper
        "opening:self_consistency": 5,
        "opening:router": 20,  # no measured scores: 10 pairs x input_is_long x both ways
    }
    gates = [s for op, s in ops if op == "opening:gate"]
    assert gates[0] == (
        "[par(cheap_a, cheap_b; collect_candidates), router(all_agree->keep_answer; else cheap_c)]"
    )
    assert (
        "[par(cheap_a, cheap_b; collect_candidates), router(all_agree->keep_answer; else dear)]"
        in gates
    )
    votes = [s for op, s in ops if op == "opening:vote"]
    assert votes[0] == "[par(dear, mid, cheap_c; collect_candidates), plurality_vote]"
    cascades = [s for op, s in ops if op == "opening:cascade"]
    # adjacent pairs first; judges are the two cheapest agents cheaper than the escalation
    assert cascades[:3] == [
        "[cheap_a, router(answer_present->keep_answer; else cheap_b)]",
        "[cheap_a, router(judge_by_cheap_a->keep_answer; else cheap_b)]",
        "[cheap_b, router(answer_present->keep_answer; else cheap_c)]",
    ]
    assert not any("judge_by_mid" in s or "judge_by_dear" in s for s in cascades)
    routers = [s for op, s in ops if op == "opening:router"]
    assert routers[:3] == [  # cost-neighbours first, the dearer one on the route first
        "router(input_is_long->cheap_b; else cheap_a)",
        "router(input_is_long->cheap_a; else cheap_b)",
        "router(input_is_long->cheap_c; else cheap_b)",
    ]
    assert [s for op, s in ops if op == "opening:self_consistency"][0] == (
        "[par(cheap_a, cheap_a, cheap_a; collect_candidates), plurality_vote]"
    )


def test_the_judge_bound_is_a_context_setting(tmp_path: Path) -> None:
    ops = opening(tmp_path, max_judges=0)
    cascades = [s for op, s in ops if op == "opening:cascade"]
    assert len(cascades) == 10
    assert all("answer_present" in s for s in cascades)


DATASETS = os.environ.get(DATASETS_ENV) or str(
    Path(core.__file__).resolve().parents[2] / "shared" / "datasets"
)


@pytest.mark.skipif(not (Path(DATASETS) / "gsm8k").is_dir(), reason="needs the gsm8k dataset")
def test_gsm8k_replay_is_offered_exactly_its_own_parts() -> None:
    on = load_problem("gsm8k_replay", datasets_dir=DATASETS, overrides={"models.time_scale": 0})
    off = load_problem(
        "gsm8k_replay",
        datasets_dir=DATASETS,
        overrides={"models.time_scale": 0, "search.standard_library": False},
    )
    assert on.callable_registry.names() == off.callable_registry.names()
    assert on.roles == off.roles
    assert on.effects == off.effects
    assert on.hydration_hooks is None
    assert on.config_hash == off.config_hash


def test_bridges_and_mutations_build_from_the_library(tmp_path: Path) -> None:
    import random

    from core.ir import parse_topology
    from core.search.operators import agreement_gate, bridge_specs, k_vote, mix_specs

    p = load_problem(write_problem(tmp_path))
    ctx = MutationContext(
        agent_names=p.agent_registry.names(),
        callables=p.roles,
        effects=p.effects,
        agent_costs=PRICES,
        allowed_step_kinds=None,
    )
    cheap = parse_topology(
        {
            "kind": "pipeline",
            "steps": [{"operation": {"kind": "agent_step", "agent_name": "cheap_b"}}],
        }
    )
    dear = parse_topology(
        {"kind": "pipeline", "steps": [{"operation": {"kind": "agent_step", "agent_name": "dear"}}]}
    )
    assert [short(canonical_dict(s)) for s in bridge_specs(cheap, dear, ctx)] == [
        "[cheap_b, router(answer_present->keep_answer; else dear)]",
        "[cheap_b, router(judge_by_cheap_a->keep_answer; else dear)]",
        "[cheap_b, router(judge_by_cheap_b->keep_answer; else dear)]",
    ]
    # the ticket texts differ only in length: that is the one input feature
    assert [short(canonical_dict(s)) for s in mix_specs(cheap, dear, ctx)] == [
        "router(input_is_long->[dear]; else [cheap_b])",
        "router(input_is_long->[cheap_b]; else [dear])",
    ]
    # a draw fails when it picks a partner with no dearer agent left (e.g. dear itself)
    gate = next(g for seed in range(10) if (g := agreement_gate(cheap, ctx, random.Random(seed))))
    assert "collect_candidates" in short(canonical_dict(gate))
    assert "all_agree->keep_answer" in short(canonical_dict(gate))
    vote = k_vote(cheap, ctx, random.Random(0))
    assert vote is not None
    assert short(canonical_dict(vote)).endswith("collect_candidates), plurality_vote]")
