"""The engine's proposal check is the evaluator's `check`, under the gene's constraints."""

from typing import Any

from core.evaluation.evaluator import TopologyEvaluator
from core.hydrate import AgentRegistry, CallableRegistry
from core.ir import parse_topology
from core.search._checker import CandidateChecker
from core.search.gene import TopologyGene


def nest(n: int) -> dict[str, Any]:
    node: dict[str, Any] = {"kind": "function_step", "callable_name": "f"}
    for _ in range(n):
        node = {"kind": "pipeline", "steps": [{"operation": node}]}
    return node


def make(**options: Any) -> TopologyEvaluator:
    calls = CallableRegistry()
    calls.register("f", lambda x: x)
    return TopologyEvaluator(
        callable_registry=calls,
        agent_registry=AgentRegistry(),
        score_fn=lambda output, example: 1.0,
        **options,
    )


def test_the_gene_constraints_apply_even_when_the_evaluator_has_none() -> None:
    gene = TopologyGene(name="g", initial=parse_topology(nest(1)), max_depth=2)
    check = CandidateChecker(make(), gene)
    assert check(nest(2)).ok
    assert check(nest(3)).reason == "max_depth_exceeded: depth 3 > 2"
    assert check(parse_topology(nest(3))).reason == "max_depth_exceeded: depth 3 > 2"
    kinds = {"kind": "parallel", "steps": [{"kind": "function_step", "callable_name": "f"}]}
    strict = TopologyGene(
        name="g",
        initial=parse_topology(nest(1)),
        allowed_step_kinds=("function_step", "pipeline"),
    )
    assert CandidateChecker(make(), strict)(kinds).reason == (
        "step_kind_not_allowed: parallel at $ (allowed: function_step, pipeline)"
    )


def test_verdicts_on_specs_are_remembered_and_return_the_callers_object() -> None:
    gene = TopologyGene(name="g", initial=parse_topology(nest(1)))
    check = CandidateChecker(make(max_depth=4, allowed_step_kinds=gene.allowed_step_kinds), gene)
    first, second = parse_topology(nest(2)), parse_topology(nest(2))
    a, b = check(first), check(second)
    assert a.ok and b.ok
    assert a.spec is first and b.spec is second
    assert a.spec_hash == b.spec_hash
    assert check("not json").reason is not None
    assert check(
        parse_topology(
            {
                "kind": "pipeline",
                "steps": [{"operation": {"kind": "function_step", "callable_name": "ghost"}}],
            }
        )
    ).unknown_names == (("$.steps[0].operation.callable_name", "callable", "ghost"),)
