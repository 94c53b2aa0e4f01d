"""The editor's pure edits and view data: tree, insert, wrap, replace, delete, move, forms,
JSON validation with paths, static metrics and the cost estimate."""

from __future__ import annotations

import math

import pandas as pd
import pytest

from core.errors import SpecError
from core.evaluation.pricing import ModelPrice
from core.hydrate import AgentRegistry, CallableRegistry
from core.ir import parse_topology
from studio.views.editor import (
    MeasuredCost,
    accuracy_interval,
    calls_per_request,
    compact_value,
    delete_node,
    edit_node,
    estimate_cost,
    insert_step,
    measured_cost,
    move_node,
    new_atomic,
    node_fields,
    parent_path,
    replace_node,
    spec_to_text,
    static_metrics,
    tree_rows,
    unknown_name_errors,
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


def test_labels_pluralize_counts() -> None:
    one = parse_topology(
        '{"kind": "pipeline", "id": "p", "steps": [{"operation": {"kind": "parallel", "id": "v",'
        ' "steps": [{"kind": "agent_step", "id": "a", "agent_name": "a"}]}}]}'
    )
    assert [r.label for r in tree_rows(one)][:2] == [
        "pipeline [p]  pipeline: 1 step",
        "parallel [v]  parallel: 1 branch, merge collect_all",
    ]
    two = insert_step(one, "$.steps[0].operation", new_atomic("agent_step", "b"), where="inside")
    assert tree_rows(two)[1].label == "parallel [v]  parallel: 2 branches, merge collect_all"
    assert tree_rows(SPEC)[0].label == "pipeline [p]  pipeline: 2 steps"


def _registries() -> tuple[CallableRegistry, AgentRegistry]:
    calls = CallableRegistry()
    calls.register("fx", lambda s: s)
    calls.register("pick", lambda s: "x")
    agents = AgentRegistry()
    agents.register("solver", lambda: object())
    agents.register("big", lambda: object())
    return calls, agents


def test_validate_text_with_registries_reports_every_unknown_name_with_its_path() -> None:
    calls, agents = _registries()
    spec, errors = validate_text(spec_to_text(SPEC), callable_registry=calls, agent_registry=agents)
    assert spec == SPEC and errors == []
    text = spec_to_text(SPEC).replace('"solver"', '"gpt-17"').replace('"fx"', '"nope"')
    spec, errors = validate_text(text, callable_registry=calls, agent_registry=agents)
    assert spec is None
    assert errors == [
        ("$.steps[0].operation.agent_name", "unknown agent 'gpt-17'; registered: big, solver"),
        (
            "$.steps[1].operation.routes[0].step.callable_name",
            "unknown callable 'nope'; registered: fx, pick",
        ),
    ]
    # without registries only the structure is checked
    assert validate_text(text)[1] == []
    assert (
        unknown_name_errors(parse_topology(text), callable_registry=calls, agent_registry=agents)
        == errors
    )


def test_calls_per_request_reads_the_problems_runs_table() -> None:
    params = {
        "chars_per_token": 4.0,
        "runs": {
            "6b_finetuning": {"calls_per_request": 1},
            "175b_verification": {"calls_per_request": 200, "latency_passes": 2.0},
            "odd": {"description": "no multiplier"},
        },
    }
    assert calls_per_request(params) == {"6b_finetuning": 1.0, "175b_verification": 200.0}
    assert calls_per_request({}) == {}
    assert calls_per_request({"runs": "not a table"}) == {}


def test_cost_estimate_counts_every_model_call_of_a_request() -> None:
    """The gsm8k_replay case: a verification agent is 200 calls; its seed costs $0.03."""
    prices = {
        "replay:175b_finetuning": ModelPrice(input_usd_per_1k=0.06, output_usd_per_1k=0.06),
        "replay:175b_verification": ModelPrice(input_usd_per_1k=0.06, output_usd_per_1k=0.06),
    }
    calls = {"175b_finetuning": 1.0, "175b_verification": 200.0}
    names = ["175b_finetuning", "175b_verification"]
    seed = parse_topology(
        '{"kind": "pipeline", "steps": [{"operation": '
        '{"kind": "agent_step", "agent_name": "175b_finetuning"}}]}'
    )
    est = estimate_cost(seed, prices, agent_names=names, calls=calls)
    assert est.usd_per_example == pytest.approx(0.03)  # (200 + 300) tokens x $0.06 / 1K
    assert est.assumptions.endswith("; one model call per agent request")  # only agents used
    # the search's best: long questions to 175b_finetuning, the rest to 175b_verification
    best = parse_topology(
        '{"kind": "pipeline", "steps": [{"operation": {"kind": "router", "routes": ['
        '{"name": "long", "condition_name": "question_is_long", "step": '
        '{"kind": "agent_step", "agent_name": "175b_finetuning"}}], "fallback_step": '
        '{"kind": "agent_step", "agent_name": "175b_verification"}}}]}'
    )
    est = estimate_cost(best, prices, agent_names=names, calls=calls)
    assert est.usd_per_example == pytest.approx(6.0)  # 200 calls x $0.03, the dearer route
    assert est.calls == {"replay:175b_verification": 200.0}
    assert est.assumptions == (
        "a rough guess, not a bound: every model call at 200 tokens in and 300 out, a "
        "router's dearest route, loops to max_iterations; 175b_verification = 200 calls a "
        "request"
    )
    plain = estimate_cost(best, prices, agent_names=names)
    assert plain.usd_per_example == pytest.approx(0.03)
    assert plain.assumptions.endswith("; one model call per agent request")
    assert "upper bound" not in plain.assumptions


def _arch(*rows: tuple[int, str, str, int, float]) -> pd.DataFrame:
    return pd.DataFrame(
        rows, columns=["candidate_idx", "spec_hash", "objective_split", "n_examples", "cost_usd"]
    )


def test_measured_cost_prefers_the_full_validation_split_then_the_newest_run() -> None:
    archives = {
        "run-new": _arch((3, "h", "minibatch", 20, 0.9), (4, "other", "validation", 300, 0.1)),
        "run-old": _arch((28, "h", "validation", 300, 1.0612), (29, "h", "validation", 100, 2.0)),
        "run-empty": _arch(),
    }
    assert measured_cost(archives, "h") == MeasuredCost(1.0612, 300, "validation", "run-old", 28)
    assert measured_cost({"a": _arch((1, "h", "minibatch", 20, 0.5))}, "h") == MeasuredCost(
        0.5, 20, "minibatch", "a", 1
    )
    same = {
        "a": _arch((1, "h", "validation", 300, 0.5)),
        "b": _arch((2, "h", "validation", 300, 0.7)),
    }
    assert measured_cost(same, "h") == MeasuredCost(0.5, 300, "validation", "a", 1)
    assert measured_cost({"a": _arch((1, "h", "validation", 300, math.nan))}, "h") is None
    assert measured_cost(archives, "unknown") is None


def test_accuracy_interval_is_the_wilson_95_percent_interval() -> None:
    lo, hi = accuracy_interval(0.55, 20)
    assert (round(lo, 4), round(hi, 4)) == (0.3421, 0.7418)
    lo, hi = accuracy_interval(0.0, 20)
    assert (lo, round(hi, 4)) == (0.0, 0.1611)
    lo, hi = accuracy_interval(1.0, 5)
    assert (round(lo, 4), hi) == (0.5655, 1.0)
    lo, hi = accuracy_interval(0.53, 300)
    assert (round(lo, 4), round(hi, 4)) == (0.4735, 0.5857)
    assert all(math.isnan(x) for x in accuracy_interval(0.5, 0))
    assert all(math.isnan(x) for x in accuracy_interval(math.nan, 20))


@pytest.mark.parametrize(
    ("name", "value", "text"),
    [
        ("cost_usd", 0.8123, "$0.812"),
        ("cost_usd", 1.0612, "$1.06"),
        ("cost_usd", 12.345, "$12.3"),
        ("cost_usd", 0.0079833, "$0.00798"),
        ("cost_usd", 0.03, "$0.0300"),
        ("cost_usd", 5e-05, "$0.000050"),
        ("cost_usd", 1234.5, "$1,234"),
        ("cost_usd", 0.0, "$0"),
        ("cost_usd", 2e-07, "<$0.000001"),
        ("latency_ms", 5420.0, "5.4 s"),
        ("latency_ms", 999.0, "999 ms"),
        ("latency_ms", 123456.0, "123.5 s"),
        ("accuracy", 0.55, "55.0%"),
        ("aggregate_score", 0.45801, "0.458"),
        ("n_agents", 2, "2"),
        ("accuracy", math.nan, "-"),
        ("accuracy", None, "-"),
    ],
)
def test_compact_values_fit_a_narrow_tile(name: str, value: float | None, text: str) -> None:
    assert compact_value(name, value) == text
