"""Mutation operators: exact outcomes per operator, validity, limits, determinism, coverage."""

import collections
import json
import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import ValidationError

from core.errors import SearchError
from core.ir.canonical import canonical_json, spec_hash
from core.ir.limits import SpecLimits, parse_topology
from core.ir.metrics import spec_metrics
from core.ir.models import walk
from core.search.operators import (
    OPERATORS,
    ROLES,
    MutationContext,
    crossover,
    is_valid_candidate,
    mutate,
    random_spec,
)

RICH = MutationContext(
    agent_names=("strong", "cheap", "critic"),
    callables={
        "step": ["extract", "clean"],
        "merge": ["vote"],
        "condition": ["is_easy", "is_long"],
        "classifier": ["pick"],
        "evaluator": ["check"],
        "state_updater": ["add_feedback"],
    },
    allowed_step_kinds=None,
    max_depth=4,
)


def A(name: str) -> dict:
    return {"kind": "agent_step", "agent_name": name}


def F(name: str) -> dict:
    return {"kind": "function_step", "callable_name": name}


def pipe(*ops: dict) -> dict:
    return {"kind": "pipeline", "steps": [{"operation": op} for op in ops]}


def par(*ops: dict, merge: str = "first_wins") -> dict:
    return {"kind": "parallel", "steps": list(ops), "merge": merge}


def canon(data: dict) -> str:
    return canonical_json(parse_topology(data))


def outcomes(op: str, spec: dict, ctx: MutationContext, seeds: int = 40) -> set[str | None]:
    parsed = parse_topology(spec)
    out: set[str | None] = set()
    for seed in range(seeds):
        child = OPERATORS[op](parsed, ctx, random.Random(seed))
        out.add(None if child is None else canonical_json(child))
    return out


# --- the context -------------------------------------------------------------------------------


def test_roles_match_the_problem_roles() -> None:
    problems = pytest.importorskip("core.problems")
    assert tuple(problems.CALLABLE_ROLES) == ROLES


def test_context_normalizes_and_validates() -> None:
    ctx = MutationContext(agent_names=("b", "a", "b"), callables={"step": ["y", "x", "x"]})
    assert ctx.agent_names == ("a", "b")
    assert ctx.names("step") == ("x", "y")
    assert ctx.names("merge") == ()
    assert ctx.merge_names() == ("fastest", "first_wins")
    assert RICH.merge_names() == ("fastest", "first_wins", "vote")
    assert (ctx.max_depth, ctx.allowed_step_kinds, ctx.limits) == (
        4,
        ("agent_step", "function_step"),
        SpecLimits(),
    )
    with pytest.raises(ValidationError, match="unknown callable role"):
        MutationContext(callables={"judge": ["x"]})
    with pytest.raises(ValidationError, match="not built-in merges"):
        MutationContext(builtin_merges=("vote",))
    with pytest.raises(ValidationError):
        MutationContext(allowed_step_kinds=("agent",))
    with pytest.raises(ValueError, match="unknown callable role"):
        ctx.names("judge")


@pytest.mark.parametrize(
    ("allowed", "kind", "expected"),
    [
        (None, "function_step", True),
        (("agent_step", "function_step"), "agent_step", True),
        (("agent_step", "function_step"), "parallel", True),  # no composite listed: all allowed
        (("agent_step",), "function_step", False),
        (("agent_step", "pipeline"), "pipeline", True),
        (("agent_step", "pipeline"), "router", False),  # a composite listed: others refused
    ],
)
def test_kind_allowed(allowed: tuple | None, kind: str, expected: bool) -> None:
    assert MutationContext(allowed_step_kinds=allowed).kind_allowed(kind) is expected


def test_context_from_search_space() -> None:
    from core.search.gene import TopologyGene
    from core.search.strategies.base import NameInfo, SearchSpace

    gene = TopologyGene(name="g", initial=parse_topology(pipe(A("a"))), max_depth=3)
    space = SearchSpace(
        gene=gene,
        agents=(NameInfo(name="a"), NameInfo(name="b")),
        callables=(
            NameInfo(name="vote", roles=("merge",)),
            NameInfo(name="easy", roles=("condition", "step")),
        ),
    )
    ctx = MutationContext.from_space(space, loop_max_iterations=2)
    assert ctx.agent_names == ("a", "b")
    assert (ctx.names("merge"), ctx.names("condition"), ctx.names("step")) == (
        ("vote",),
        ("easy",),
        ("easy",),
    )
    assert (ctx.max_depth, ctx.allowed_step_kinds, ctx.loop_max_iterations) == (
        3,
        ("agent_step", "function_step"),
        2,
    )


# --- each operator: every outcome over many seeds ----------------------------------------------

ONE_AGENT = MutationContext(agent_names=("b",), builtin_merges=("first_wins",))


@pytest.mark.parametrize(
    ("op", "spec", "ctx", "expected"),
    [
        ("insert_step", pipe(A("a")), ONE_AGENT, {canon(pipe(A("b"), A("a"))), canon(pipe(A("a"), A("b")))}),
        (
            "insert_step",
            pipe(A("a")),
            MutationContext(callables={"step": ["f"]}),
            {canon(pipe(F("f"), A("a"))), canon(pipe(A("a"), F("f")))},
        ),
        ("insert_step", par(A("a"), A("c")), ONE_AGENT, {None}),  # no pipeline
        ("insert_step", pipe(A("a")), MutationContext(), {None}),  # no names
        ("remove_step", pipe(A("a"), A("b")), ONE_AGENT, {canon(pipe(A("a"))), canon(pipe(A("b")))}),
        ("remove_step", pipe(A("a")), ONE_AGENT, {None}),  # never empties a list
        ("remove_step", par(A("a"), A("c")), ONE_AGENT, {canon(par(A("a"))), canon(par(A("c")))}),
        ("swap_steps", pipe(A("a"), A("b")), ONE_AGENT, {canon(pipe(A("b"), A("a")))}),
        ("swap_steps", pipe(A("a"), A("a")), ONE_AGENT, {None}),  # nothing different to swap
        (
            "wrap_in_parallel",
            pipe(A("a")),
            ONE_AGENT.model_copy(update={"max_depth": 2}),
            {canon(par(pipe(A("a")), A("b"))), canon(pipe(par(A("a"), A("b"))))},
        ),
        # at max_depth 1 nothing can be wrapped
        ("wrap_in_parallel", pipe(A("a")), ONE_AGENT.model_copy(update={"max_depth": 1}), {None}),
        ("add_parallel_branch", par(A("a")), ONE_AGENT, {canon(par(A("a"), A("b")))}),
        ("add_parallel_branch", pipe(A("a")), ONE_AGENT, {None}),
        ("change_agent", pipe(A("a")), ONE_AGENT, {canon(pipe(A("b")))}),
        ("change_agent", pipe(A("b")), ONE_AGENT, {None}),  # no other agent
        (
            "change_function",
            pipe(F("f")),
            MutationContext(callables={"step": ["f", "g"]}),
            {canon(pipe(F("g")))},
        ),
        (
            "change_merge",
            par(A("a"), merge="first_wins"),
            MutationContext(callables={"merge": ["vote"]}, builtin_merges=("first_wins",)),
            {canon(par(A("a"), merge="vote"))},
        ),
        ("unwrap", pipe(par(A("a"), A("c"))), ONE_AGENT, {canon(pipe(A("a"))), canon(pipe(A("c"))), canon(par(A("a"), A("c")))}),
        ("unwrap", pipe(A("a")), ONE_AGENT, {None}),  # the root keeps a composite
    ],
)  # fmt: skip
def test_operator_outcomes(op: str, spec: dict, ctx: MutationContext, expected: set) -> None:
    assert outcomes(op, spec, ctx) == expected


def test_router_and_cascade_outcomes() -> None:
    ctx = MutationContext(
        agent_names=("cheap", "strong"), callables={"condition": ["is_easy"]}, max_depth=2
    )
    spec = pipe(A("cheap"))
    router_inner = {
        "kind": "router",
        "routes": [{"name": "when_is_easy", "step": A("strong"), "condition_name": "is_easy"}],
        "fallback_step": A("cheap"),
    }
    cascade_inner = {
        "kind": "router",
        "routes": [{"name": "is_easy", "step": A("cheap"), "condition_name": "is_easy"}],
        "fallback_step": A("strong"),
    }
    router_root = {**router_inner, "fallback_step": pipe(A("cheap"))}
    cascade_root = {
        **cascade_inner,
        "routes": [{"name": "is_easy", "step": pipe(A("cheap")), "condition_name": "is_easy"}],
    }
    # wrapping the root pipeline: the new step may be either agent
    router_root_2 = {**router_root, "routes": [{**router_root["routes"][0], "step": A("cheap")}]}
    cascade_root_2 = {**cascade_root, "fallback_step": A("cheap")}
    assert outcomes("add_router", spec, ctx) == {
        canon(pipe(router_inner)),
        canon(router_root),
        canon(router_root_2),
    }
    assert outcomes("add_cascade", spec, ctx) == {
        canon(pipe(cascade_inner)),
        canon(cascade_root),
        canon(cascade_root_2),
    }
    # no registered condition: not applicable
    assert outcomes("add_router", spec, MutationContext(agent_names=("strong",))) == {None}
    two = MutationContext(agent_names=("a",), callables={"condition": ["c1", "c2"]})
    routed = {**router_inner, "routes": [{"name": "r", "step": A("a"), "condition_name": "c1"}]}
    changed = {**routed, "routes": [{"name": "r", "step": A("a"), "condition_name": "c2"}]}
    assert outcomes("change_condition", routed, two) == {canon(changed)}


def test_wrap_in_loop_outcomes() -> None:
    ctx = MutationContext(
        agent_names=("a",),
        callables={"evaluator": ["check"], "state_updater": ["retry"]},
        max_depth=2,
        loop_max_iterations=2,
    )

    def loop(step: dict) -> dict:
        return {
            "kind": "refinement_loop",
            "step": step,
            "evaluator": "check",
            "state_updater_name": "retry",
            "max_iterations": 2,
        }

    assert outcomes("wrap_in_loop", pipe(A("a")), ctx) == {
        canon(pipe(loop(A("a")))),
        canon(loop(pipe(A("a")))),
    }
    no_updater = MutationContext(agent_names=("a",), callables={"evaluator": ["check"]})
    assert outcomes("wrap_in_loop", pipe(A("a")), no_updater) == {None}


def test_operators_keep_ids_unique_and_new_nodes_bare() -> None:
    spec = parse_topology({**pipe({**A("cheap"), "id": "s0"}), "id": "root"})
    for seed in range(30):
        child, _ = mutate(spec, RICH, random.Random(seed))
        ids = [n.id for _, n in walk(child) if n.id is not None]
        assert len(ids) == len(set(ids))
        assert set(ids) <= {"s0", "root"}


# --- mutate ------------------------------------------------------------------------------------

SEED = pipe(A("cheap"), F("extract"))


def chain(seed: int, ctx: MutationContext, n: int = 8) -> list[tuple[str, str]]:
    rng = random.Random(seed)
    spec = parse_topology(SEED)
    out = []
    for _ in range(n):
        spec, op = mutate(spec, ctx, rng)
        out.append((spec_hash(spec), op))
    return out


def test_mutate_is_deterministic_under_a_seed() -> None:
    assert chain(7, RICH) == chain(7, RICH)
    assert chain(7, RICH) != chain(8, RICH)


@settings(max_examples=40, deadline=None)
@given(st.integers(0, 10_000))
def test_every_proposal_is_valid_new_and_within_limits(seed: int) -> None:
    rng = random.Random(seed)
    spec = parse_topology(SEED)
    for _ in range(6):
        child, op = mutate(spec, RICH, rng)
        assert op in OPERATORS
        assert is_valid_candidate(child, RICH) is not None
        assert spec_metrics(child).depth <= RICH.max_depth
        assert spec_hash(child) != spec_hash(spec)
        assert parse_topology(child.model_dump_json()) == child
        spec = child


@settings(max_examples=30, deadline=None)
@given(st.integers(0, 10_000), st.sampled_from([1, 2, 3]))
def test_allowed_kinds_and_depth_are_respected(seed: int, max_depth: int) -> None:
    ctx = RICH.model_copy(
        update={
            "allowed_step_kinds": ("agent_step", "pipeline", "parallel"),
            "max_depth": max_depth,
        }
    )
    rng = random.Random(seed)
    spec = parse_topology(pipe(A("cheap")))
    for _ in range(6):
        try:
            spec, _ = mutate(spec, ctx, rng)
        except SearchError:
            break
        kinds = {n.node_kind for _, n in walk(spec)}
        assert kinds <= {"agent_step", "pipeline", "parallel"}
        assert spec_metrics(spec).depth <= max_depth


def test_all_operators_are_exercised() -> None:
    used: collections.Counter[str] = collections.Counter()
    for seed in range(25):
        used.update(op for _, op in chain(seed, RICH, n=12))
    # the structure operators need declared effects (an identity step, verdicts): their own
    # tests are in test_structure_operators.py
    structure = {"escalate_after", "agreement_gate", "k_vote"}
    assert set(used) == set(OPERATORS) - structure


def test_mutate_options_and_errors() -> None:
    spec = parse_topology(pipe(A("cheap")))
    child, op = mutate(spec, RICH, random.Random(0), operators=["change_agent"])
    assert op == "change_agent"
    avoid = {
        spec_hash(parse_topology(pipe(A("critic")))),
    }
    for seed in range(10):
        child, _ = mutate(spec, RICH, random.Random(seed), operators=["change_agent"], avoid=avoid)
        assert canonical_json(child) == canon(pipe(A("strong")))
    child, _ = mutate(
        spec,
        RICH,
        random.Random(0),
        accept=lambda s: spec_metrics(s).n_agents == 2,
    )
    assert spec_metrics(child).n_agents == 2
    with pytest.raises(SearchError, match="no mutation applies"):
        mutate(spec, MutationContext(), random.Random(0))
    with pytest.raises(ValueError, match="unknown operator"):
        mutate(spec, RICH, random.Random(0), operators=["explode"])
    with pytest.raises(ValueError, match="n_tries"):
        mutate(spec, RICH, random.Random(0), n_tries=0)


# --- crossover and random specs ----------------------------------------------------------------


def test_crossover() -> None:
    a = parse_topology({**pipe({**A("cheap"), "id": "x"}, F("extract")), "id": "r"})
    b = parse_topology({**par({**A("strong"), "id": "x"}, A("critic")), "id": "r"})
    seen = set()
    for seed in range(20):
        child = crossover(a, b, RICH, random.Random(seed))
        assert child is not None
        assert is_valid_candidate(child, RICH) is not None
        assert spec_hash(child) not in {spec_hash(a), spec_hash(b)}
        seen.add(spec_hash(child))
    assert len(seen) > 3
    assert crossover(a, b, RICH, random.Random(3)) == crossover(a, b, RICH, random.Random(3))
    # nothing valid and new to give: a flat parent, a donor whose every subtree is the same
    # step, and a depth limit of 1
    flat = MutationContext(agent_names=("cheap",), max_depth=1)
    one = parse_topology(pipe(A("cheap")))
    assert crossover(one, one, flat, random.Random(0)) is None


def test_random_spec() -> None:
    specs = [random_spec(RICH, random.Random(s)) for s in range(30)]
    assert [canonical_json(s) for s in specs] == [
        canonical_json(random_spec(RICH, random.Random(s))) for s in range(30)
    ]
    assert len({spec_hash(s) for s in specs}) > 10
    for s in specs:
        assert is_valid_candidate(s, RICH) is not None
    flat = random_spec(RICH, random.Random(1), n_mutations=0)
    assert flat.kind == "pipeline" and 1 <= len(flat.steps) <= 3
    only_parallel = MutationContext(
        agent_names=("a",), allowed_step_kinds=("agent_step", "parallel")
    )
    p = random_spec(only_parallel, random.Random(0), n_mutations=0)
    assert json.loads(canonical_json(p))["kind"] == "parallel"
    with pytest.raises(SearchError, match="cannot build"):
        random_spec(MutationContext(), random.Random(0))
    with pytest.raises(SearchError, match="cannot build"):
        random_spec(
            MutationContext(callables={"step": ["f"]}, allowed_step_kinds=("agent_step",)),
            random.Random(0),
        )


def test_every_proposal_passes_the_engines_full_check() -> None:
    """Names by role hydrate: the engine's checker (parse, limits, kinds, names, hydration)
    accepts every mutation and random spec built from registered names."""
    from pydantic_ai import Agent
    from pydantic_ai.models.test import TestModel

    from core.evaluation.evaluator import TopologyEvaluator
    from core.hydrate import BUILTIN_MERGES as HYDRATE_MERGES
    from core.hydrate import AgentRegistry, CallableRegistry
    from core.search._checker import CandidateChecker
    from core.search.gene import TopologyGene
    from core.search.operators import BUILTIN_MERGES

    assert BUILTIN_MERGES == HYDRATE_MERGES
    calls = CallableRegistry()
    for role in ROLES:
        for name in RICH.names(role):
            calls.register(name, lambda *args: args[0])
    agents = AgentRegistry()
    for name in RICH.agent_names:
        agents.register(name, lambda: Agent(TestModel()))
    evaluator = TopologyEvaluator(
        callable_registry=calls, agent_registry=agents, score_fn=lambda o, e: 1.0
    )
    kinds = ("agent_step", "function_step", "pipeline", "parallel", "router", "refinement_loop")
    seed = random_spec(RICH, random.Random(0))
    gene = TopologyGene(
        name="rich", initial=seed, max_depth=RICH.max_depth, allowed_step_kinds=kinds
    )
    check = CandidateChecker(evaluator, gene)
    for seed in range(15):
        rng = random.Random(seed)
        spec = random_spec(RICH, rng)
        assert check(spec).ok, check(spec).reason
        for _ in range(5):
            spec, op = mutate(spec, RICH, rng)
            result = check(spec)
            assert result.ok, (op, result.reason)
