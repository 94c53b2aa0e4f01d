"""`core.ir.dataflow`: the static rejections of `analyse`, the no-op rules of `normalize`, and
the defects a review found (each pinned by the spec that showed it).

The unit tests use a small table declared here, modelled on the GSM8K replay problem's; one
test at the end evaluates specs on the replay problem itself (its data: tests/conftest.py).
"""

from __future__ import annotations

import asyncio
import random
from typing import Any

import pytest

from core.ir import canonical_dict, parse_topology
from core.ir.dataflow import (
    UNBOUNDED,
    EffectTable,
    Flow,
    NameEffect,
    analyse,
    behaviour_hash,
    normalize,
)
from core.search.operators import MutationContext, random_spec

T = EffectTable(
    names={
        "vote": NameEffect(needs_candidates=2),
        "extract": NameEffect(needs_candidates=2),
        "keep": NameEffect(identity=True),
        "merge_all": NameEffect(combine="all"),
        "passes": NameEffect(needs_candidates=1, verdict="accept"),
        "fails": NameEffect(needs_candidates=1, verdict="reject", complement_of="passes"),
        "agree": NameEffect(needs_candidates=2, verdict="accept"),
        "disagree": NameEffect(needs_candidates=2, verdict="reject", complement_of="agree"),
        "check": NameEffect(needs_candidates=1),
        "next_run": NameEffect(needs_candidates=1),
        "eval_check": NameEffect(needs_candidates=1),
    },
    answer_needs_agent=True,
)
"""`long` (a condition), `by_length` (a classifier), `carry` (a state updater) and `undeclared`
(a step) are deliberately not declared."""


def A(name: str) -> dict[str, Any]:
    return {"kind": "agent_step", "agent_name": name}


def F(name: str) -> dict[str, Any]:
    return {"kind": "function_step", "callable_name": name}


def pipe(*ops: dict[str, Any]) -> dict[str, Any]:
    return {"kind": "pipeline", "steps": [{"operation": op} for op in ops]}


def par(merge: str, *steps: dict[str, Any]) -> dict[str, Any]:
    return {"kind": "parallel", "merge": merge, "steps": list(steps)}


def router(
    routes: list[tuple[str | None, dict[str, Any]]],
    fallback: dict[str, Any] | None = None,
    classifier: str | None = None,
    names: list[str] | None = None,
) -> dict[str, Any]:
    out: dict[str, Any] = {
        "kind": "router",
        "routes": [
            {"name": (names or [])[i] if names else f"r{i}", "step": s, "condition_name": c}
            for i, (c, s) in enumerate(routes)
        ],
    }
    if fallback is not None:
        out["fallback_step"] = fallback
    if classifier is not None:
        out["classifier"] = classifier
    return out


def loop(step: dict[str, Any], evaluator: str, n: int = 3, **kw: Any) -> dict[str, Any]:
    return {
        "kind": "refinement_loop",
        "step": step,
        "evaluator": evaluator,
        "state_updater_name": "carry",
        "max_iterations": n,
        **kw,
    }


def spec(data: dict[str, Any]) -> Any:
    return parse_topology(data)


def reasons(data: dict[str, Any], table: EffectTable = T) -> list[str]:
    return [i.reason() for i in analyse(spec(data), table).issues]


def normal(data: dict[str, Any], table: EffectTable = T) -> dict[str, Any]:
    return canonical_dict(normalize(spec(data), table))


def same_behaviour(a: dict[str, Any], b: dict[str, Any], table: EffectTable = T) -> bool:
    return behaviour_hash(spec(a), table) == behaviour_hash(spec(b), table)


GATE = pipe(par("merge_all", A("a"), A("b")), router([("agree", F("keep"))], A("c")))
"""The agreement gate: two agents' candidates, accepted when they agree, else a third."""
CASCADE = pipe(A("a"), router([("passes", F("keep"))], A("b")))
"""Escalate after: accept the first answer when it passes a check, else a second agent."""


# --- static rejections -------------------------------------------------------------------------


def test_condition_before_input_route_condition() -> None:
    assert reasons(pipe(router([("passes", F("keep"))], A("b")))) == [
        "no_agent: a path on which no agent answers: the problem's answers come only from "
        "agents (at $)",
        "condition_before_input: condition 'passes' reads 1 candidate(s), but its input holds "
        "no candidate (it is constant there) (at $.steps[0].operation.routes[0].condition_name)",
    ]


def test_condition_before_input_counts_the_candidates_an_earlier_step_makes() -> None:
    assert reasons(pipe(A("a"), router([("agree", F("keep"))], A("b")))) == [
        "condition_before_input: condition 'agree' reads 2 candidate(s), but its input holds "
        "at most 1 candidate(s) (it is constant there) "
        "(at $.steps[1].operation.routes[0].condition_name)"
    ]


def test_condition_before_input_classifier_and_evaluator() -> None:
    assert reasons(
        pipe(router([(None, A("a")), (None, A("b"))], classifier="check", names=["x", "y"]))
    ) == [
        "condition_before_input: classifier 'check' reads 1 candidate(s), but its input holds "
        "no candidate (it is constant there) (at $.steps[0].operation.classifier)"
    ]
    assert reasons(loop(F("keep"), "eval_check", n=1)) == [
        "no_agent: no agent step: the problem's answers come only from agents (at $)",
        "condition_before_input: evaluator 'eval_check' reads 1 candidate(s), but its input "
        "holds no candidate (it is constant there) (at $.evaluator)",
    ]


def test_fastest_branch_without_answer() -> None:
    assert reasons(par("fastest", A("a"), F("keep"))) == [
        "no_agent: a path on which no agent answers: the problem's answers come only from "
        "agents (at $)",
        "fastest_branch_without_answer: a branch of a 'fastest' race in which no agent "
        "answers (it can win with no answer) (at $.steps[1])",
    ]
    # after an agent the identity branch carries that agent's answer: not rejected
    assert reasons(pipe(A("a"), par("fastest", A("b"), F("keep")))) == []


def test_no_agent() -> None:
    assert reasons(pipe(F("keep"))) == [
        "no_agent: no agent step: the problem's answers come only from agents (at $)"
    ]
    assert reasons(pipe(F("keep")), EffectTable(names=T.names)) == []


def test_no_agent_on_one_path() -> None:
    # a route that keeps an answer nobody gave: blank on the inputs the condition picks
    feature_keep = pipe(router([("long", F("keep"))], A("b")))
    assert reasons(feature_keep) == [
        "no_agent: a path on which no agent answers: the problem's answers come only from "
        "agents (at $)"
    ]
    assert reasons(feature_keep, EffectTable(names=T.names)) == []
    # after an agent, the same route keeps that agent's answer
    assert reasons(pipe(A("a"), router([("long", F("keep"))], A("b")))) == []


def test_router_matches_nothing() -> None:
    assert reasons(pipe(router([("passes", A("a"))]), A("b"))) == [
        "condition_before_input: condition 'passes' reads 1 candidate(s), but its input holds "
        "no candidate (it is constant there) (at $.steps[0].operation.routes[0].condition_name)",
        "router_matches_nothing: a router with no fallback whose every condition is constant "
        "on its input (at $.steps[0].operation)",
    ]


@pytest.mark.parametrize(
    "data",
    [
        GATE,
        CASCADE,
        pipe(A("a"), router([("fails", A("b"))], F("keep"))),
        pipe(router([("long", A("a"))])),  # an undeclared condition: never rejected
        pipe(A("a"), F("undeclared"), router([("agree", F("keep"))], A("b"))),
        pipe(A("a"), A("b"), F("vote")),
        # the escalation loop: a classifier on earlier candidates is constant only on the
        # first iteration (a false rejection before the fix)
        loop(
            router(
                [(None, A("a")), (None, A("b"))],
                fallback=F("keep"),
                classifier="next_run",
                names=["a", "b"],
            ),
            "eval_check",
        ),
        loop(pipe(router([("passes", F("keep"))], A("a")), F("vote")), "eval_check"),
    ],
)
def test_useful_topologies_are_not_rejected(data: dict[str, Any]) -> None:
    assert reasons(data) == []


def test_analysis_flows() -> None:
    assert analyse(spec(GATE), T).out == Flow(2, 3, True)
    assert analyse(spec(CASCADE), T).out == Flow(1, 2, True)
    # a loop's later iterations start from the updater's result: unknown
    assert analyse(spec(loop(A("a"), "eval_check")), T).out == Flow(1, UNBOUNDED, True)
    assert analyse(spec(loop(A("a"), "eval_check", n=1)), T).out == Flow(1, 1, True)
    assert analyse(spec(pipe(A("a"), F("undeclared"))), T).out == Flow(0, UNBOUNDED, True)
    assert analyse(spec(par("collect_all", A("a"), A("b"))), T).out == Flow(0, UNBOUNDED, True)
    assert Flow(0, UNBOUNDED).add(3, True) == Flow(3, UNBOUNDED, True)


# --- normalisation rules -----------------------------------------------------------------------


def test_vote_or_extract_over_one_candidate_is_removed() -> None:
    assert normal(pipe(A("a"), F("vote"), F("extract"))) == normal(pipe(A("a")))
    assert normal(pipe(A("a"), F("vote"))) == {
        "kind": "pipeline",
        "name": "pipeline",
        "steps": [
            {
                "config": None,
                "operation": {"agent_name": "a", "inline_spec": None, "kind": "agent_step"},
            }
        ],
    }
    # over two candidates it stays
    assert normal(pipe(A("a"), A("b"), F("vote")))["steps"][2]["operation"] == {
        "callable_name": "vote",
        "kind": "function_step",
        "name": None,
    }


def test_identity_beside_others_is_removed() -> None:
    assert same_behaviour(pipe(F("keep"), A("a"), F("keep")), pipe(A("a")))
    # as a route it is the accept branch: kept
    assert normal(CASCADE)["steps"][1]["operation"]["routes"][0]["step"]["callable_name"] == "keep"


def test_one_branch_parallel() -> None:
    assert same_behaviour(pipe(A("z"), par("fastest", A("a"))), pipe(A("z"), A("a")))
    assert same_behaviour(pipe(par("merge_all", A("a")), A("b")), pipe(A("a"), A("b")))
    # a candidate-collecting merge over two candidates clears a vote's answer: kept
    kept = pipe(par("merge_all", pipe(A("a"), A("b"), F("vote"))), A("c"))
    assert not same_behaviour(kept, pipe(A("a"), A("b"), F("vote"), A("c")))


def test_one_step_nested_pipeline_is_spliced() -> None:
    assert normal(pipe(A("a"), pipe(A("b")), pipe(A("c"), A("d")))) == normal(
        pipe(A("a"), A("b"), A("c"), A("d"))
    )
    assert same_behaviour(
        pipe(pipe(par("fastest", A("a"), A("b")))), par("fastest", A("a"), A("b"))
    )


def test_router_whose_routes_all_run_the_fallback() -> None:
    assert normal(pipe(A("z"), router([("passes", A("a")), ("long", A("a"))], A("a")))) == normal(
        pipe(A("z"), A("a"))
    )
    assert same_behaviour(
        pipe(A("z"), router([(None, A("a"))], A("a"), classifier="check", names=["x"])),
        pipe(A("z"), A("a")),
    )


def test_router_with_a_possible_agent_classifier_is_kept() -> None:
    # "judge" may be an agent (the hydrator looks classifiers up in the agent registry first):
    # it is paid for even when every route runs the fallback
    data = pipe(A("z"), router([(None, A("a"))], A("a"), classifier="judge", names=["x"]))
    assert not same_behaviour(data, pipe(A("z"), A("a")))
    assert normal(data)["steps"][1]["operation"]["classifier"] == "judge"


def test_complement_condition_is_flipped() -> None:
    assert normal(pipe(A("z"), router([("fails", A("a"))], F("keep")))) == normal(
        pipe(A("z"), router([("passes", F("keep"))], A("a")))
    )
    gate = pipe(par("merge_all", A("a"), A("b")), router([("disagree", A("c"))], F("keep")))
    assert same_behaviour(gate, GATE)


def test_complement_is_not_flipped_where_the_input_may_hold_too_few() -> None:
    # one path gives one candidate: there "agree" and "disagree" are both false, so
    # router(disagree -> c, else keep) keeps the answer and router(agree -> keep, else c) pays c
    # (on the replay problem this pair differed on 11 of 30 examples before the fix)
    head = router([("long", A("a"))], par("merge_all", A("a"), A("b")))
    flipped = pipe(head, router([("disagree", A("c"))], F("keep")))
    mirror = pipe(head, router([("agree", F("keep"))], A("c")))
    assert not same_behaviour(flipped, mirror)
    assert normal(flipped)["steps"][1]["operation"]["routes"][0]["condition_name"] == "disagree"


def test_symmetric_complements_are_idempotent() -> None:
    table = EffectTable(
        names={"p": NameEffect(complement_of="q"), "q": NameEffect(complement_of="p")}
    )
    a = pipe(A("z"), router([("p", A("a"))], A("b")))
    b = pipe(A("z"), router([("q", A("b"))], A("a")))
    once = normalize(spec(a), table)
    assert normalize(once, table) == once
    assert same_behaviour(a, b, table)
    # the smallest name of the cycle represents it
    assert canonical_dict(once)["steps"][1]["operation"]["routes"][0]["condition_name"] == "p"


def test_names_and_ids_are_dropped() -> None:
    named = {
        "kind": "pipeline",
        "id": "root",
        "name": "mine",
        "steps": [
            {"operation": {"kind": "agent_step", "id": "s", "agent_name": "a"}},
            {
                "operation": {
                    "kind": "router",
                    "name": "gate",
                    "routes": [{"name": "ok", "step": F("keep"), "condition_name": "passes"}],
                    "fallback_step": A("b"),
                }
            },
        ],
    }
    assert normal(named) == normal(CASCADE)


def test_vote_inside_a_loop_body_is_kept() -> None:
    # the first iteration has one candidate, the later ones more: the vote matters there
    # (on the replay problem removing it changed the cost of an example before the fix)
    body = pipe(router([(None, A("a")), (None, A("b"))], F("keep"), "next_run", ["a", "b"]))
    with_vote = loop(pipe(body, F("vote")), "eval_check", keep_best=False)
    without = loop(body, "eval_check", keep_best=False)
    assert not same_behaviour(with_vote, without)
    # ... but with one iteration it is a no-op
    assert same_behaviour(
        loop(pipe(A("a"), F("vote")), "eval_check", n=1), loop(A("a"), "eval_check", n=1)
    )


def test_undeclared_step_keeps_what_follows() -> None:
    # an undeclared step may add candidates: the vote after it is not a no-op
    data = pipe(A("a"), F("undeclared"), F("vote"))
    assert normal(data) == canonical_dict(spec(data)) | {"name": "pipeline"}


def test_classifier_router_conditions_are_neither_read_nor_hashed() -> None:
    # the classifier alone chooses: a dead condition is no rejection and changes nothing
    with_condition = pipe(router([("agree", A("a"))], A("b"), "by_length", ["x"]))
    without = pipe(router([(None, A("a"))], A("b"), "by_length", ["x"]))
    assert reasons(with_condition) == []
    assert same_behaviour(with_condition, without)


def test_routes_that_never_match_are_dropped() -> None:
    dead = pipe(
        A("z"),
        router([(None, A("c")), ("passes", A("a")), ("passes", A("b")), ("long", A("b"))], A("c")),
    )
    assert normal(dead) == normal(
        pipe(A("z"), router([("passes", A("a")), ("long", A("b"))], A("c")))
    )
    # ... and the flows and the agent count ignore them
    assert analyse(spec(dead), T).out == Flow(2, 2, True)
    assert analyse(spec(pipe(router([(None, A("a")), ("long", F("keep"))]))), T).n_agent_steps == 0


def test_step_configs_as_they_behave() -> None:
    def entry(op: dict[str, Any], config: dict[str, Any] | None) -> dict[str, Any]:
        return {
            "kind": "pipeline",
            "steps": [{"operation": A("z")}, {"operation": op, "config": config}],
        }

    stop = entry(A("a"), {"name": "shown", "on_error": "stop", "max_retries": 4})
    assert normal(stop) == normal(pipe(A("z"), A("a")))
    # a nested pipeline with a stop config is spliced in too
    nested = entry(pipe(A("a"), A("b")), {"on_error": "stop"})
    assert normal(nested) == normal(pipe(A("z"), A("a"), A("b")))
    skip = entry(A("a"), {"name": "shown", "on_error": "skip", "max_retries": 4})
    assert normal(skip)["steps"][1]["config"] == {"max_retries": 1, "name": "", "on_error": "skip"}
    retry = entry(A("a"), {"name": "shown", "on_error": "retry", "max_retries": 4})
    assert normal(retry)["steps"][1]["config"] == {
        "max_retries": 4,
        "name": "",
        "on_error": "retry",
    }


def test_lone_step_root_becomes_one_step_pipeline() -> None:
    assert normal(router([("long", A("a"))], A("a"))) == normal(pipe(A("a")))


# --- properties over seeded random specs -------------------------------------------------------

CTX = MutationContext(
    agent_names=("a", "b", "c"),
    callables={
        "step": ["vote", "extract", "keep", "undeclared"],
        "merge": ["merge_all"],
        "condition": ["passes", "fails", "agree", "disagree", "long"],
        "classifier": ["check", "by_length"],
        "evaluator": ["eval_check"],
        "state_updater": ["carry"],
    },
    allowed_step_kinds=None,
    max_depth=4,
    effects=EffectTable(names=T.names),  # no agent rule: function-only specs too
)


def _wild(rng: random.Random, depth: int) -> dict[str, Any]:
    """A random tree (not filtered by `analyse`), with every kind and name of the table."""
    atoms = [A("a"), A("b"), F("vote"), F("extract"), F("keep"), F("undeclared")]
    if depth == 0 or rng.random() < 0.35:
        return rng.choice(atoms)
    kind = rng.choice(["pipeline", "parallel", "router", "loop"])
    kids = [_wild(rng, depth - 1) for _ in range(rng.randint(1, 3))]
    if kind == "pipeline":
        out = pipe(*kids)
        for entry in out["steps"]:
            if rng.random() < 0.2:
                how = rng.choice(["stop", "skip", "retry"])
                entry["config"] = {"on_error": how, "max_retries": rng.randint(0, 2)}
        return out
    if kind == "parallel":
        return par(rng.choice(["fastest", "first_wins", "merge_all", "collect_all"]), *kids)
    if kind == "router":
        conds = rng.sample(["passes", "fails", "agree", "disagree", "long"], len(kids))
        fallback = _wild(rng, depth - 1) if rng.random() < 0.7 else None
        if rng.random() < 0.2:
            return router([(None, k) for k in kids], fallback, "check")
        return router(list(zip(conds, kids, strict=True)), fallback)
    return loop(kids[0], "eval_check", n=rng.randint(1, 3))


@pytest.mark.parametrize("source", ["random_spec", "wild"])
def test_normalize_is_idempotent_valid_and_keeps_the_analysis(source: str) -> None:
    rng = random.Random(20261201)
    changed = 0
    for _ in range(300):
        if source == "random_spec":
            original = random_spec(CTX, rng, n_mutations=rng.randint(0, 6))
        else:
            original = parse_topology(pipe(_wild(rng, 4)))
        once = normalize(original, T)
        assert normalize(once, T) == once
        reparsed = parse_topology(once.model_dump(mode="json"))
        assert canonical_dict(reparsed) == canonical_dict(once)
        before, after = analyse(original, T), analyse(once, T)
        assert after.out == before.out
        # normalising never makes a valid spec invalid (the other way round is allowed: a
        # router whose every route runs its fallback is rejected for a constant condition,
        # its normal form, the fallback alone, is not)
        assert not after.issues or bool(before.issues)
        changed += canonical_dict(once) != canonical_dict(original)
    assert changed > 100


# --- the replay problem ------------------------------------------------------------------------


def test_replay_problem_normal_forms_behave_the_same() -> None:
    """Each spec and its normal form give the same answers and costs on 30 validation
    examples of the replay problem."""
    from core.problems import load_problem

    problem = load_problem("gsm8k_replay")  # the data: tests/conftest.py's fallback rule
    table = problem.effects
    assert table.names["candidates_disagree"].complement_of == "candidates_agree"
    examples = problem.splits["validation"][:30]
    evaluator = problem.evaluator(concurrency=8)
    r6, r175, v175 = "6b_finetuning", "175b_finetuning", "175b_verification"
    specs = [
        pipe(
            par("merge_candidates", A(r6), A(r175)),
            router([("candidates_disagree", A(v175))], F("keep_answer")),
        ),
        pipe(
            A(r6),
            router([("last_fails_arithmetic", A(r175))], F("keep_answer")),
            F("majority_vote"),
        ),
        pipe(
            router([("question_is_long", A(r6))], par("merge_candidates", A(r6), A(r175))),
            router([("candidates_disagree", A(v175))], F("keep_answer")),
        ),
    ]

    def rows(data: Any) -> list[tuple[str, float, float, str]]:
        result = asyncio.run(evaluator.evaluate(data, examples))
        return [
            (e.example_id, e.bundle.accuracy, e.bundle.cost_usd, e.status) for e in result.results
        ]

    for data in specs:
        original = parse_topology(data)
        assert analyse(original, table).ok
        assert rows(original) == rows(normalize(original, table))


def test_one_branch_fastest_race_is_its_branch() -> None:
    # nothing is raced or cancelled: no rejection, and the same verdict as its normal form
    assert reasons(pipe(A("a"), par("fastest", F("extract")))) == []
    assert same_behaviour(pipe(A("a"), par("fastest", F("extract"))), pipe(A("a")))
