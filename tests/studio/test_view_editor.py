"""The editor's pure edits and view data: tree, insert, wrap, replace, delete, move, forms,
JSON validation with paths, static metrics and the cost estimate."""

from __future__ import annotations

import math

import pytest

from core.errors import SpecError
from core.evaluation.pricing import ModelPrice
from core.ir import parse_topology
from studio.views.editor import (
    delete_node,
    edit_node,
    estimate_cost,
    insert_step,
    move_node,
    new_atomic,
    node_fields,
    parent_path,
    replace_node,
    spec_to_text,
    static_metrics,
    tree_rows,
    validate_text,
    wrap_node,
)

SPEC = parse_topology(
    '{"kind": "pipeline", "id": "p", "steps": ['
    '{"operation": {"kind": "agent_step", "id": "a", "agent_name": "solver"}},'
    '{"operation": {"kind": "router", "id": "r", "classifier": "pick", "routes": ['
    '{"name": "x", "step": {"kind": "function_step", "id": "fx", "callable_name": "fx"}},'
    '{"name": "y", "step": {"kind": "agent_step", "id": "ay", "agent_name": "big"}}]}}]}'
)


def _ids(spec) -> list[str | None]:
    return [r.node_id for r in tree_rows(spec)]


def test_tree_rows_are_in_document_order_with_depth_and_slots() -> None:
    rows = tree_rows(SPEC)
    assert [(r.path, r.depth, r.slot) for r in rows] == [
        ("$", 0, "root"),
        ("$.steps[0].operation", 1, "step 1"),
        ("$.steps[1].operation", 1, "step 2"),
        ("$.steps[1].operation.routes[0].step", 2, "route 'x'"),
        ("$.steps[1].operation.routes[1].step", 2, "route 'y'"),
    ]
    assert rows[1].label == "agent_step [a]  agent: solver"
    assert rows[2].label == "router [r]  router: 2 routes by pick"


def test_parent_path() -> None:
    assert parent_path("$") is None
    assert parent_path("$.steps[1].operation") == "$"
    assert parent_path("$.steps[1].operation.routes[0].step") == "$.steps[1].operation"


def test_insert_before_after_and_inside_give_new_ids() -> None:
    after = insert_step(SPEC, "$.steps[0].operation", new_atomic("function_step", "check"))
    assert _ids(after) == ["p", "a", "function_step_1", "r", "fx", "ay"]
    before = insert_step(
        SPEC, "$.steps[0].operation", new_atomic("agent_step", "s"), where="before"
    )
    assert _ids(before)[:3] == ["p", "agent_step_1", "a"]
    inside = insert_step(SPEC, "$", new_atomic("agent_step", "last"), where="inside")
    assert _ids(inside) == ["p", "a", "r", "fx", "ay", "agent_step_1"]
    assert SPEC.steps[0].operation.id == "a"  # the input is unchanged


def test_insert_next_to_a_route_or_the_root_is_refused_with_a_path() -> None:
    with pytest.raises(SpecError, match="only next to a step of a pipeline or parallel") as exc:
        insert_step(SPEC, "$.steps[1].operation.routes[0].step", new_atomic("agent_step", "z"))
    assert exc.value.errors == [("$.steps[1].operation.routes[0].step", "not in a list of steps")]
    with pytest.raises(SpecError, match="the root has no siblings"):
        insert_step(SPEC, "$", new_atomic("agent_step", "z"))
    with pytest.raises(SpecError, match="cannot insert inside a router"):
        insert_step(SPEC, "$.steps[1].operation", new_atomic("agent_step", "z"), where="inside")


def test_wrap_replace_delete_and_move() -> None:
    wrapped = wrap_node(SPEC, "$.steps[0].operation", "parallel")
    assert [r.kind for r in tree_rows(wrapped)][:3] == ["pipeline", "parallel", "agent_step"]
    loop = wrap_node(
        SPEC, "$.steps[0].operation", "refinement_loop", evaluator="ev", state_updater="up"
    )
    assert (
        tree_rows(loop)[1].label
        == "refinement_loop [refinement_loop_1]  refinement_loop: up to 5x, evaluator ev"
    )
    with pytest.raises(SpecError, match="needs an evaluator and a state updater"):
        wrap_node(SPEC, "$.steps[0].operation", "refinement_loop")
    replaced = replace_node(SPEC, "$.steps[0].operation", new_atomic("agent_step", "other"))
    assert tree_rows(replaced)[1].label == "agent_step [agent_step_1]  agent: other"
    deleted = delete_node(SPEC, "$.steps[1].operation.routes[0].step")
    assert _ids(deleted) == ["p", "a", "r", "ay"]
    moved = move_node(SPEC, "$.steps[1].operation", -1)
    assert _ids(moved) == ["p", "r", "fx", "ay", "a"]
    routes = move_node(SPEC, "$.steps[1].operation.routes[1].step", -1)
    assert _ids(routes) == ["p", "a", "r", "ay", "fx"]
    assert move_node(SPEC, "$.steps[0].operation", -1) is SPEC  # already first
    with pytest.raises(SpecError, match="the root cannot be moved"):
        move_node(SPEC, "$", 1)
    with pytest.raises(SpecError, match="a pipeline needs at least one step"):
        delete_node(delete_node(SPEC, "$.steps[1].operation"), "$.steps[0].operation")


def test_node_form_fields_and_edits_with_paths_into_the_spec() -> None:
    assert node_fields(SPEC.steps[0].operation) == {"id": "a", "agent_name": "solver"}
    edited = edit_node(SPEC, "$.steps[0].operation", {"id": "solve", "agent_name": "big"})
    assert tree_rows(edited)[1].label == "agent_step [solve]  agent: big"
    with pytest.raises(SpecError) as exc:
        edit_node(SPEC, "$.steps[0].operation", {"agent_name": "  "})
    assert exc.value.errors == [
        ("$.steps[0].operation.agent_name", "String should have at least 1 character")
    ]
    with pytest.raises(SpecError, match="no editable field"):
        edit_node(SPEC, "$", {"merge": "x"})
    unnamed = edit_node(SPEC, "$", {"name": ""})
    assert unnamed.name == "pipeline"


def test_validate_text_points_at_json_paths() -> None:
    spec, errors = validate_text(spec_to_text(SPEC))
    assert spec == SPEC and errors == []
    spec, errors = validate_text(
        '{"kind": "pipeline", "steps": [{"operation": {"kind": "agnet"}}]}'
    )
    assert spec is None
    assert [p for p, _ in errors] == ["$.steps[0].operation"]
    spec, errors = validate_text('{"kind": ')
    assert spec is None and errors == [
        ("$", "not JSON: Expecting value: line 1 column 10 (char 9)")
    ]


def test_static_metrics_and_cost_estimate() -> None:
    prices = {
        "replay:solver": ModelPrice(input_usd_per_1k=1.0, output_usd_per_1k=2.0),
        "replay:big": ModelPrice(input_usd_per_1k=10.0, output_usd_per_1k=10.0),
    }
    est = estimate_cost(
        SPEC, prices, input_tokens=100, output_tokens=100, agent_names=["solver", "big"]
    )
    # solver (0.1 + 0.2) + the dearer route (big: 1.0 + 1.0); "pick" is not an agent
    assert est.usd_per_example == pytest.approx(2.3)
    assert est.calls == {"replay:big": 1.0, "replay:solver": 1.0}
    assert est.unpriced == ()
    unpriced = estimate_cost(SPEC, prices)  # "pick" counts as an agent and has no price
    assert math.isnan(unpriced.usd_per_example) and unpriced.unpriced == ("pick",)
    assert static_metrics(SPEC) == {"n_agents": 3, "depth": 2, "n_nodes": 5}
    assert static_metrics(SPEC, prices, agent_names=["solver", "big"]) == {
        "n_agents": 2,
        "depth": 2,
        "n_nodes": 5,
        # default 200 tokens in, 300 out: solver 0.2 + 0.6, big 2.0 + 3.0
        "est_cost_usd": pytest.approx(5.8),
    }
