"""Canonical form and hash, structural metrics, node addressing, ids, edits, JSON schema."""

from __future__ import annotations

import json

import pytest

from core.errors import SpecError
from core.ir import (
    AgentSpec,
    AgentStepSpec,
    FunctionStepSpec,
    ParallelSpec,
    PipelineSpec,
    PipelineStepEntry,
    RefinementLoopSpec,
    RouterSpec,
    RouteSpec,
    StepConfigSpec,
    StructuralMetrics,
    assign_ids,
    canonical_json,
    iter_nodes,
    node_at,
    operation_json_schema,
    parse_topology,
    remove_at,
    replace_at,
    spec_hash,
    spec_metrics,
    topology_json_schema,
)

A = AgentStepSpec(agent_name="solver")
B = AgentStepSpec(agent_name="critic")
F = FunctionStepSpec(callable_name="upper")


def sample() -> PipelineSpec:
    """pipeline -> [router(routes: a, parallel[f, b]; fallback f; agent classifier), loop(a)]."""
    router = RouterSpec(
        routes=[
            RouteSpec(name="math", step=A),
            RouteSpec(name="code", step=ParallelSpec(steps=[F, B])),
        ],
        classifier=AgentSpec(name="clf", model="test:model", output_schema={"type": "string"}),
        fallback_step=F,
    )
    loop = RefinementLoopSpec(step=A, evaluator="judge", state_updater_name="update")
    return PipelineSpec(
        steps=[PipelineStepEntry(operation=router), PipelineStepEntry(operation=loop)]
    )


# --- canonical form and hash -----------------------------------------------------------------


def test_canonical_json_exact() -> None:
    spec = PipelineSpec(steps=[PipelineStepEntry(operation=A)], id="root")
    assert canonical_json(spec) == (
        '{"kind":"pipeline","name":"pipeline","steps":[{"config":null,"operation":'
        '{"agent_name":"solver","inline_spec":null,"kind":"agent_step"}}]}'
    )
    assert spec_hash(spec) == spec_hash(PipelineSpec(steps=[PipelineStepEntry(operation=A)]))
    assert len(spec_hash(spec)) == 64
    assert all(c in "0123456789abcdef" for c in spec_hash(spec))


def test_hash_ignores_ids_key_order_and_explicit_defaults() -> None:
    base = parse_topology(
        '{"kind": "parallel", "steps": [{"kind": "agent_step", "agent_name": "a"}]}'
    )
    same = parse_topology(
        '{"steps": [{"agent_name": "a", "kind": "agent_step", "id": "x"}], "merge": "collect_all",'
        ' "name": "parallel", "timeout": null, "kind": "parallel", "id": "root"}'
    )
    assert spec_hash(base) == spec_hash(same)
    assert spec_hash(assign_ids(base)) == spec_hash(base)


def test_hash_changes_with_structure() -> None:
    base = sample()
    hashes = {
        spec_hash(base),
        spec_hash(replace_at(base, "$.steps[1].operation.step", B)),
        spec_hash(remove_at(base, "$.steps[0].operation.fallback_step")),
        spec_hash(PipelineSpec(steps=list(reversed(base.steps)))),
        spec_hash(base.model_copy(update={"name": "other"})),
    }
    assert len(hashes) == 5


def test_float_and_int_timeouts_hash_alike() -> None:
    a = parse_topology(
        {"kind": "parallel", "steps": [{"kind": "agent_step", "agent_name": "a"}], "timeout": 5}
    )
    b = parse_topology(
        {"kind": "parallel", "steps": [{"kind": "agent_step", "agent_name": "a"}], "timeout": 5.0}
    )
    assert spec_hash(a) == spec_hash(b)


def test_negative_zero_hashes_like_zero() -> None:
    """-0.0 passes `>= 0` and equals 0.0 (the two specs are `==`), so it must not change the
    content hash: equal specs are one archive entry, one cache key."""
    loop = RefinementLoopSpec(step=A, evaluator="judge", state_updater_name="update")
    zero = loop.model_copy(update={"convergence_threshold": 0.0, "confidence_threshold": 0.0})
    negative = parse_topology(
        '{"kind": "refinement_loop", "step": {"kind": "agent_step", "agent_name": "solver"}, '
        '"evaluator": "judge", "state_updater_name": "update", "convergence_threshold": -0.0, '
        '"confidence_threshold": -0.0}'
    )
    assert negative == zero
    assert canonical_json(negative) == canonical_json(zero)
    assert '"convergence_threshold":0.0' in canonical_json(negative)
    assert spec_hash(negative) == spec_hash(zero)


# --- metrics -------------------------------------------------------------------------------


def test_metrics_of_the_sample() -> None:
    m = spec_metrics(sample())
    assert m == StructuralMetrics(
        # agent steps: a (route), b (parallel), a (loop) = 3; agent classifier = 1; evaluator
        # "judge" (a string, counted by default) = 1
        n_agents=5,
        depth=3,  # pipeline -> router -> parallel -> leaf
        n_nodes=9,
        kind_counts={
            "agent_step": 3,
            "function_step": 2,
            "pipeline": 1,
            "parallel": 1,
            "router": 1,
            "refinement_loop": 1,
        },
    )


def test_metrics_with_agent_names_and_fallback_depth() -> None:
    assert spec_metrics(sample(), agent_names={"solver"}).n_agents == 4
    assert spec_metrics(A).depth == 0
    assert spec_metrics(A).n_nodes == 1
    deep_fallback = RouterSpec(
        routes=[RouteSpec(name="r", step=A)],
        classifier="clf",
        fallback_step=PipelineSpec(steps=[PipelineStepEntry(operation=ParallelSpec(steps=[A]))]),
    )
    m = spec_metrics(deep_fallback)
    assert (m.depth, m.n_nodes, m.n_agents) == (3, 5, 3)
    assert spec_metrics(deep_fallback, agent_names=()).n_agents == 2


# --- addressing, ids, edits ------------------------------------------------------------------


def test_iter_nodes_document_order() -> None:
    assert [(p, n.node_kind) for p, n in iter_nodes(sample())] == [
        ("$", "pipeline"),
        ("$.steps[0].operation", "router"),
        ("$.steps[0].operation.routes[0].step", "agent_step"),
        ("$.steps[0].operation.routes[1].step", "parallel"),
        ("$.steps[0].operation.routes[1].step.steps[0]", "function_step"),
        ("$.steps[0].operation.routes[1].step.steps[1]", "agent_step"),
        ("$.steps[0].operation.fallback_step", "function_step"),
        ("$.steps[1].operation", "refinement_loop"),
        ("$.steps[1].operation.step", "agent_step"),
    ]
    assert node_at(sample(), "$.steps[1].operation.step") == A
    with pytest.raises(SpecError):
        node_at(sample(), "$.steps[7]")


def test_assign_ids_is_deterministic_and_keeps_existing() -> None:
    spec = sample()
    with_ids = assign_ids(spec)
    assert [n.id for _, n in iter_nodes(with_ids)] == [
        "pipeline_1",
        "router_1",
        "agent_step_1",
        "parallel_1",
        "function_step_1",
        "agent_step_2",
        "function_step_2",
        "refinement_loop_1",
        "agent_step_3",
    ]
    assert assign_ids(spec) == with_ids
    assert assign_ids(with_ids) is with_ids
    taken = replace_at(
        spec, "$.steps[1].operation.step", A.model_copy(update={"id": "agent_step_1"})
    )
    ids = [n.id for _, n in iter_nodes(assign_ids(taken))]
    assert ids[2] == "agent_step_2" and ids[-1] == "agent_step_1"
    assert len(set(ids)) == len(ids)
    # shared sub-trees (the same object twice) still get distinct ids
    shared = PipelineSpec(steps=[PipelineStepEntry(operation=A), PipelineStepEntry(operation=A)])
    assert [n.id for _, n in iter_nodes(assign_ids(shared))] == [
        "pipeline_1",
        "agent_step_1",
        "agent_step_2",
    ]


def test_replace_at_is_pure_and_validated() -> None:
    spec = sample()
    before = spec.model_dump()
    new = replace_at(spec, "$.steps[0].operation.routes[1].step.steps[0]", B)
    assert spec.model_dump() == before
    assert node_at(new, "$.steps[0].operation.routes[1].step.steps[0]") == B
    assert new.steps[1] is spec.steps[1]  # untouched sub-trees are shared
    with pytest.raises(SpecError):
        replace_at(spec, "$.steps[9].operation", B)
    with pytest.raises(SpecError) as exc:
        replace_at(spec, "$", A)
    assert exc.value.errors == [("$", "the root of a topology must be a composite")]
    assert replace_at(spec, "$", ParallelSpec(steps=[A])) == ParallelSpec(steps=[A])
    dup = assign_ids(spec)
    with pytest.raises(SpecError) as dup_exc:
        replace_at(dup, "$.steps[1].operation.step", A.model_copy(update={"id": "router_1"}))
    assert "duplicate node id 'router_1'" in str(dup_exc.value)


def test_remove_at_rules() -> None:
    spec = sample()
    fewer = remove_at(spec, "$.steps[1].operation")
    assert isinstance(fewer, PipelineSpec) and len(fewer.steps) == 1
    no_fallback = remove_at(spec, "$.steps[0].operation.fallback_step")
    assert node_at(no_fallback, "$.steps[0].operation").model_dump()["fallback_step"] is None
    one_route = remove_at(spec, "$.steps[0].operation.routes[0].step")
    router = node_at(one_route, "$.steps[0].operation")
    assert isinstance(router, RouterSpec) and [r.name for r in router.routes] == ["code"]
    branch = remove_at(spec, "$.steps[0].operation.routes[1].step.steps[0]")
    assert node_at(branch, "$.steps[0].operation.routes[1].step.steps[0]") == B
    for path in ("$", "$.steps[1].operation.step", "$.nowhere"):
        with pytest.raises(SpecError):
            remove_at(spec, path)
    single = PipelineSpec(steps=[PipelineStepEntry(operation=A)])
    with pytest.raises(SpecError):
        remove_at(single, "$.steps[0].operation")
    conditional = RouterSpec(
        routes=[RouteSpec(name="a", step=A, condition_name="c"), RouteSpec(name="b", step=B)]
    )
    with pytest.raises(SpecError) as exc:
        remove_at(conditional, "$.routes[0].step")
    assert "a router needs a classifier or at least one route condition_name" in str(exc.value)


def test_remove_keeps_step_config_of_others() -> None:
    spec = PipelineSpec(
        steps=[
            PipelineStepEntry(operation=A, config=StepConfigSpec(on_error="skip")),
            PipelineStepEntry(operation=B, config=StepConfigSpec(on_error="retry", max_retries=2)),
        ]
    )
    out = remove_at(spec, "$.steps[0].operation")
    assert isinstance(out, PipelineSpec)
    assert out.steps[0].config == StepConfigSpec(on_error="retry", max_retries=2)


# --- JSON schema -----------------------------------------------------------------------------


def test_json_schemas() -> None:
    schema = topology_json_schema()
    assert schema["title"] == "TopologySpec"
    assert [v["$ref"] for v in schema["anyOf"]] == [
        "#/$defs/PipelineSpec",
        "#/$defs/ParallelSpec",
        "#/$defs/RouterSpec",
        "#/$defs/RefinementLoopSpec",
    ]
    assert "oneOf" not in json.dumps(schema)
    schema["title"] = "changed"
    assert topology_json_schema()["title"] == "TopologySpec"
    assert len(operation_json_schema()["anyOf"]) == 6
    step_item = schema["$defs"]["ParallelSpec"]["properties"]["steps"]["items"]
    assert len(step_item["anyOf"]) == 6


def test_strip_node_ids_drops_ids_of_nodes_only_in_place() -> None:
    from core.ir import strip_node_ids

    data = {
        "kind": "pipeline",
        "id": "p",
        "steps": [{"operation": {"kind": "agent_step", "id": "a", "agent_name": "x"}}],
        "meta": {"id": "kept: not a node", "weight": -0.0},
    }
    out = strip_node_ids(data)
    assert out is data
    assert data == {
        "kind": "pipeline",
        "steps": [{"operation": {"kind": "agent_step", "agent_name": "x"}}],
        "meta": {"id": "kept: not a node", "weight": 0.0},
    }
