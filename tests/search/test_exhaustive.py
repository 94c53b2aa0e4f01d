"""ExhaustiveSearch: exact counts of the grammar, normal forms only, determinism, and the
agreement gate on the replay registries."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "contracts"))

from strategy_contract import toy_world  # noqa: E402

from core.ir.canonical import canonical_json  # noqa: E402
from core.ir.dataflow import EffectTable, NameEffect, analyse, behaviour_hash  # noqa: E402
from core.ir.limits import parse_topology  # noqa: E402
from core.ir.metrics import spec_metrics  # noqa: E402
from core.search.budget import Budget  # noqa: E402
from core.search.operators import MutationContext  # noqa: E402
from core.search.strategies import ExhaustiveConfig, ExhaustiveSearch, get_strategy  # noqa: E402
from core.search.strategies.exhaustive import (  # noqa: E402
    BENCH_GRAMMAR,
    FULL_VALIDATION,
    enumerate_topologies,
)

# The tiny registry: agents a and b; one step `vote` that needs two candidates; one merge `mv`
# that keeps every branch's candidates; one condition `agree` (needs two candidates, "accept").
TINY = MutationContext(
    agent_names=("a", "b"),
    callables={"step": ["vote"], "merge": ["mv"], "condition": ["agree"]},
    allowed_step_kinds=("agent_step", "function_step", "pipeline", "parallel", "router"),
    builtin_merges=(),
    max_depth=4,
    effects=EffectTable(
        names={
            "vote": NameEffect(needs_candidates=2),
            "mv": NameEffect(combine="all"),
            "agree": NameEffect(needs_candidates=2, verdict="accept"),
        },
        answer_needs_agent=True,
    ),
)


def test_tiny_counts_by_size_worked_by_hand() -> None:
    # A root is a composite, so no topology has 1 node. The condition needs two candidates, so
    # no router can be the root (nothing is there to read) and `vote` can only follow two agents.
    # 2 nodes: pipeline[a], pipeline[b]                                                   -> 2
    # 3 nodes: pipeline[x, y], x, y in {a, b} (4); parallel([a, b]) and ([b, a]) with mv (2) -> 6
    # 4 nodes: pipeline[x, y, z]: x, y agents, z in {a, b, vote} (2*2*3); no parallel (three
    #          distinct branches from two agents, or a 2-node branch: none exists)           -> 12
    # 5 nodes: pipeline[x, y, z, w] with z, w in {a, b, vote} (2*2*3*3 = 36);
    #          pipeline[x, y, router(agree -> s)] with s in {a, b, vote} (2*2*3 = 12);
    #          pipeline[x, parallel(a, b | b, a)] (2*2 = 4);
    #          pipeline[parallel(a, b | b, a), z], z in {a, b, vote} (2*3 = 6);
    #          parallel of an agent and a 2-step pipeline, both orders (2*4*2 = 16)
    #          (a parallel inside an mv parallel is the flat group: not enumerated)      -> 74
    counts = {n: enumerate_topologies(TINY, n).by_size for n in range(1, 6)}
    assert counts == {
        1: (0,),
        2: (0, 2),
        3: (0, 2, 6),
        4: (0, 2, 6, 12),
        5: (0, 2, 6, 12, 74),
    }
    e = enumerate_topologies(TINY, 5)
    assert (e.count, e.generated, e.rejected, e.duplicates) == (94, 94, 0, 0)


def test_tiny_router_without_fallback_only_when_asked() -> None:
    always = enumerate_topologies(TINY, 5, ExhaustiveConfig(max_nodes=5, router_fallback="always"))
    # the 12 five-node pipelines ending in router(agree -> s) have no fallback
    assert always.by_size == (0, 2, 6, 12, 62)


def test_sizes_are_node_counts_and_the_order_is_small_first() -> None:
    e = enumerate_topologies(TINY, 5)
    sizes = [spec_metrics(s).n_nodes for s in e.specs]
    assert sizes == sorted(sizes)
    assert [sizes.count(n) for n in range(1, 6)] == list(e.by_size)
    assert canonical_json(e.specs[0]) == canonical_json(
        parse_topology(
            {
                "kind": "pipeline",
                "steps": [{"operation": {"kind": "agent_step", "agent_name": "a"}}],
            }
        )
    )


def test_no_duplicate_behaviour_and_nothing_statically_rejected() -> None:
    for n in (4, 5):
        e = enumerate_topologies(TINY, n)
        hashes = [behaviour_hash(s, TINY.effects) for s in e.specs]
        assert len(set(hashes)) == len(hashes) == e.count
        assert [analyse(s, TINY.effects).issues for s in e.specs] == [()] * e.count


def test_deterministic() -> None:
    first = [canonical_json(s) for s in enumerate_topologies(TINY, 5).specs]
    second = [canonical_json(s) for s in enumerate_topologies(TINY, 5).specs]
    assert first == second


def test_commutative_merge_enumerates_one_order() -> None:
    cfg = ExhaustiveConfig(max_nodes=3, commutative_merges=("mv",))
    # 3 nodes: 4 pipelines and parallel([a, b]) only
    assert enumerate_topologies(TINY, 3, cfg).by_size == (0, 2, 5)


def test_full_validation_sets_the_minibatch_size() -> None:
    assert ExhaustiveConfig(minibatch_size=20).minibatch_size == FULL_VALIDATION
    assert ExhaustiveConfig(minibatch_size=20, full_validation=False).minibatch_size == 20
    strategy = get_strategy("exhaustive", {"max_nodes": 3})
    assert isinstance(strategy, ExhaustiveSearch)
    assert strategy.config.max_nodes == 3


def test_bad_bound() -> None:
    with pytest.raises(ValueError, match="max_nodes must be at least 1, got 0"):
        enumerate_topologies(TINY, 0)


def test_runs_every_topology_once_in_the_letters_world() -> None:
    # letters world: steps a, b, c (undeclared effects), merges fastest and first_wins.
    # 2 nodes: pipeline[x] (3, one is the seed pipeline[a]); 3 nodes: pipeline[x, y] (9) and
    # 2 merges x 6 ordered pairs of distinct branches (12): 24 topologies, 23 new.
    world = toy_world()
    events: list = []
    strategy = ExhaustiveSearch(ExhaustiveConfig(max_nodes=3, batch_size=10))
    result = world.run(strategy, budget=Budget(max_evaluations=100), events=events)
    assert strategy.enumeration is not None and strategy.enumeration.count == 24
    evaluated = [r for r in result.history if r.status == "evaluated"]
    assert len(evaluated) == 24
    assert [r.operator for r in evaluated[1:]] == ["exhaustive"] * 23
    assert {r.split for r in evaluated} == {"validation"}
    started = events[0]
    assert started.config["enumerated"]["count"] == 24
    assert started.config["enumerated"]["by_size"] == [0, 3, 21]
    assert result.raw["stop_reason"] == "strategy exhausted: no proposals for 3 generations"


GATE = {
    "kind": "pipeline",
    "steps": [
        {
            "operation": {
                "kind": "parallel",
                "merge": "merge_candidates",
                "steps": [
                    {"kind": "agent_step", "agent_name": "6b_finetuning"},
                    {"kind": "agent_step", "agent_name": "175b_finetuning"},
                ],
            }
        },
        {
            "operation": {
                "kind": "router",
                "routes": [
                    {
                        "name": "candidates_agree",
                        "condition_name": "candidates_agree",
                        "step": {"kind": "function_step", "callable_name": "keep_answer"},
                    }
                ],
                "fallback_step": {"kind": "agent_step", "agent_name": "175b_verification"},
            }
        },
    ],
}


def test_the_agreement_gate_is_enumerated_on_the_replay_registries_at_7_nodes() -> None:
    from core.problems import load_problem
    from core.search.engine import build_search

    problem = load_problem("gsm8k_replay")
    ctx = MutationContext.from_space(build_search(problem, "random").space)
    gate = parse_topology(GATE)
    assert spec_metrics(gate).n_nodes == 7
    e = enumerate_topologies(ctx, 7, ExhaustiveConfig(max_nodes=7, **BENCH_GRAMMAR))
    assert e.by_size == (0, 4, 24, 48, 120, 144, 312)
    target = behaviour_hash(gate, ctx.effects)
    matches = [s for s in e.specs if behaviour_hash(s, ctx.effects) == target]
    assert [canonical_json(s) for s in matches] == [canonical_json(gate)]
    assert e.count == 652
