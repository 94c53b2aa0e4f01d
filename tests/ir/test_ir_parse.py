"""Parsing with limits before deep parsing (semantics section 6, field case F1)."""

from __future__ import annotations

import json
import types
from typing import Any

import pytest
from pydantic import TypeAdapter, ValidationError

from core.errors import SpecError, SpecLimitError
from core.ir import (
    MAX_DEPTH_CEILING,
    AgentStepSpec,
    ParallelSpec,
    PipelineSpec,
    SpecLimits,
    TopologySpec,
    check_limits,
    parse_operation,
    parse_topology,
)

LEAF: dict[str, Any] = {"kind": "agent_step", "agent_name": "solver"}


def f1_chain(levels: int) -> tuple[dict[str, Any], list[str]]:
    """F1's input: `levels` composites alternating pipeline / loop / parallel (outermost first)
    around one agent step; also the JSON path of each composite, outermost first."""
    kinds = [("pipeline", "refinement_loop", "parallel")[i % 3] for i in range(levels)]
    node: dict[str, Any] = dict(LEAF)
    for kind in reversed(kinds):
        if kind == "pipeline":
            node = {"kind": "pipeline", "steps": [{"operation": node}]}
        elif kind == "refinement_loop":
            node = {
                "kind": "refinement_loop",
                "step": node,
                "evaluator": "judge",
                "state_updater_name": "update",
            }
        else:
            node = {"kind": "parallel", "steps": [node]}
    paths = ["$"]
    for kind in kinds[:-1]:
        suffix = {"pipeline": ".steps[0].operation", "refinement_loop": ".step"}.get(
            kind, ".steps[0]"
        )
        paths.append(paths[-1] + suffix)
    return node, paths


def to_text(data: Any) -> str:
    return json.dumps(data)


# --- F1 -----------------------------------------------------------------------------------------


@pytest.mark.parametrize("levels", [10, 50])
def test_f1_valid_depths_validate_with_raised_limits(levels: int) -> None:
    data, _ = f1_chain(levels)
    spec = parse_topology(to_text(data), SpecLimits(max_depth=MAX_DEPTH_CEILING))
    assert spec.kind == "pipeline"
    depth = 0
    node: Any = spec
    while not isinstance(node, AgentStepSpec):
        depth += 1
        node = (
            node.steps[0].operation
            if isinstance(node, PipelineSpec)
            else node.steps[0]
            if isinstance(node, ParallelSpec)
            else node.step
        )
    assert depth == levels


def test_f1_ten_levels_exceed_the_default_limit() -> None:
    data, paths = f1_chain(10)
    with pytest.raises(SpecLimitError) as exc:
        parse_topology(to_text(data))
    assert (exc.value.limit, exc.value.value, exc.value.path) == ("max_depth", 8, paths[8])
    assert str(exc.value) == (
        f"spec nesting depth exceeds max_depth=8: the composite at {paths[8]} is at depth 9"
    )
    assert exc.value.errors == [(paths[8], str(exc.value))]


@pytest.mark.parametrize("as_text", [True, False])
@pytest.mark.parametrize("levels", [120, 300])
def test_f1_beyond_the_limit_is_our_error_with_the_path(levels: int, as_text: bool) -> None:
    data, paths = f1_chain(levels)
    limits = SpecLimits(max_depth=MAX_DEPTH_CEILING)
    if as_text and levels == 300:
        # 300 levels of JSON text are caught by the text pre-scan, before `json.loads`
        text = to_text_iterative(levels)
        with pytest.raises(SpecLimitError) as exc:
            parse_topology(text, limits)
        assert exc.value.limit == "max_depth"
        assert exc.value.path == container_path_at(data, 257)
    else:
        payload = to_text(data) if as_text else data
        with pytest.raises(SpecLimitError) as exc:
            parse_topology(payload, limits)
        assert (exc.value.limit, exc.value.value) == ("max_depth", 64)
        assert exc.value.path == paths[64]
    assert "recursion" not in str(exc.value).lower()
    assert "cyclic" not in str(exc.value).lower()


def to_text_iterative(levels: int) -> str:
    """F1 JSON text built without `json.dumps` (which recurses) for very deep chains."""
    head: list[str] = []
    tail: list[str] = []
    for i in range(levels):
        kind = ("pipeline", "refinement_loop", "parallel")[i % 3]
        if kind == "pipeline":
            head.append('{"kind": "pipeline", "steps": [{"operation": ')
            tail.append("}]}")
        elif kind == "refinement_loop":
            head.append(
                '{"kind": "refinement_loop", "evaluator": "judge", "state_updater_name": "update", "step": '
            )
            tail.append("}")
        else:
            head.append('{"kind": "parallel", "steps": [')
            tail.append("]}")
    return "".join(head) + json.dumps(LEAF) + "".join(reversed(tail))


def container_path_at(data: Any, depth: int) -> str:
    """The JSON path of the first container (pre-order) nested `depth` containers deep."""
    stack: list[tuple[Any, str, int]] = [(data, "$", 1)]
    while stack:
        value, path, level = stack.pop()
        if level == depth:
            return path
        if isinstance(value, dict):
            children = [(v, f"{path}.{k}") for k, v in value.items()]
        else:
            children = [(v, f"{path}[{i}]") for i, v in enumerate(value)]
        for child, child_path in reversed(children):
            if isinstance(child, dict | list):
                stack.append((child, child_path, level + 1))
    raise AssertionError("not that deep")


def test_f1_text_builder_matches_json_dumps() -> None:
    data, _ = f1_chain(12)
    assert parse_topology(to_text_iterative(12), SpecLimits(max_depth=12)) == parse_topology(
        data, SpecLimits(max_depth=12)
    )


def test_pydantic_itself_validates_depth_150() -> None:
    """Past our limits, but pydantic-core must not be the one to fail at this depth."""
    data, _ = f1_chain(150)
    spec = TypeAdapter(TopologySpec).validate_python(data)
    assert spec.kind == "pipeline"


def test_depth_exactly_at_the_limit_passes() -> None:
    data, _ = f1_chain(8)
    assert parse_topology(data).kind == "pipeline"
    data9, paths = f1_chain(9)
    with pytest.raises(SpecLimitError) as exc:
        parse_topology(data9)
    assert exc.value.path == paths[8]


def test_ceiling_depth_serializes_in_the_worst_shape() -> None:
    """A chain of pipelines is the deepest JSON per level: at the ceiling it still dumps."""
    node: dict[str, Any] = dict(LEAF)
    for _ in range(MAX_DEPTH_CEILING):
        node = {"kind": "pipeline", "steps": [{"operation": node}]}
    spec = parse_topology(node, SpecLimits(max_depth=MAX_DEPTH_CEILING))
    assert parse_topology(spec.model_dump_json(), SpecLimits(max_depth=MAX_DEPTH_CEILING)) == spec


def test_bracket_bomb_never_reaches_the_json_parser() -> None:
    with pytest.raises(SpecLimitError) as exc:
        parse_topology("[" * 200_000)
    assert exc.value.limit == "max_depth"
    assert exc.value.path == "$" + "[0]" * 256
    with pytest.raises(SpecLimitError) as exc2:
        parse_topology('{"a": ' * 100_000)
    assert exc2.value.path == "$" + ".a" * 256


def test_brackets_inside_strings_do_not_count() -> None:
    text = json.dumps(
        {"kind": "pipeline", "steps": [{"operation": dict(LEAF)}], "name": "[" * 1000 + '"\\'}
    )
    assert parse_topology(text).name == "[" * 1000 + '"\\'


def test_deep_junk_inside_a_spec_is_a_limit_error() -> None:
    junk: Any = "x"
    for _ in range(30):
        junk = [junk]
    with pytest.raises(SpecLimitError) as exc:
        parse_topology({"kind": "pipeline", "steps": junk})
    assert exc.value.path == "$.steps" + "[0]" * 25


def test_max_nodes() -> None:
    data = {"kind": "parallel", "steps": [dict(LEAF) for _ in range(200)]}
    with pytest.raises(SpecLimitError) as exc:
        parse_topology(data)
    assert (exc.value.limit, exc.value.value, exc.value.path) == ("max_nodes", 200, "$.steps[199]")
    assert str(exc.value) == "spec has more than max_nodes=200 nodes (node 201 is at $.steps[199])"
    assert len(parse_topology(data, SpecLimits(max_nodes=201)).steps) == 200


def test_spec_limits_validation() -> None:
    assert SpecLimits().model_dump() == {"max_depth": 8, "max_nodes": 200, "max_text_bytes": None}
    bad_limits: tuple[dict[str, int], ...] = (
        {"max_depth": 0},
        {"max_depth": MAX_DEPTH_CEILING + 1},
        {"max_nodes": 0},
        {"max_text_bytes": 0},
    )
    for bad in bad_limits:
        with pytest.raises(ValidationError):
            SpecLimits(**bad)


def test_check_limits_on_built_specs() -> None:
    data, paths = f1_chain(12)
    spec = parse_topology(data, SpecLimits(max_depth=12))
    check_limits(spec, SpecLimits(max_depth=12))
    with pytest.raises(SpecLimitError) as exc:
        check_limits(spec)
    assert exc.value.path == paths[8]
    assert parse_topology(spec, SpecLimits(max_depth=12)) is spec
    with pytest.raises(SpecLimitError):
        parse_topology(spec)


def test_built_nodes_inside_raw_data_are_counted() -> None:
    inner = parse_topology(f1_chain(8)[0])
    with pytest.raises(SpecLimitError) as exc:
        parse_topology({"kind": "parallel", "steps": [inner]})
    assert exc.value.path == "$.steps[0]" + f1_chain(8)[1][7][1:]


# --- inputs and errors -----------------------------------------------------------------------

VALID = {"kind": "pipeline", "steps": [{"operation": LEAF}]}


def test_input_forms() -> None:
    expected = parse_topology(VALID)
    assert parse_topology(json.dumps(VALID)) == expected
    assert parse_topology(json.dumps(VALID).encode()) == expected
    assert parse_topology(b"\xef\xbb\xbf" + json.dumps(VALID).encode()) == expected
    assert parse_topology(types.MappingProxyType(VALID)) == expected
    assert parse_operation(LEAF) == AgentStepSpec(agent_name="solver")
    assert parse_operation(json.dumps(VALID)) == expected


@pytest.mark.parametrize(
    "payload, errors",
    [
        ("", [("$", "invalid JSON: Expecting value: line 1 column 1 (char 0)")]),
        ("null", [("$", "a spec must be a JSON object, got NoneType")]),
        ("[1]", [("$", "a spec must be a JSON object, got list")]),
        (b"\xff", [("$", "not UTF-8 text (invalid start byte at byte 0)")]),
        (
            '{"kind": "agent_step", "agent_name": "a"}',
            [
                (
                    "$",
                    "a topology must be a composite (pipeline, parallel, router, "
                    "refinement_loop), got the atomic kind 'agent_step'",
                )
            ],
        ),
        (
            '{"steps": []}',
            [
                (
                    "$",
                    "missing 'kind' (expected one of: pipeline, parallel, router, refinement_loop)",
                )
            ],
        ),
        (
            '{"kind":"pipeline","steps":[{"operation":{"kind":"agent_step","agent_name":"\\ud800"}}]}',
            [("$.steps[0].operation.agent_name", "not valid Unicode (surrogates not allowed)")],
        ),
    ],
)
def test_invalid_inputs(payload: str | bytes, errors: list[tuple[str, str]]) -> None:
    with pytest.raises(SpecError) as exc:
        parse_topology(payload)
    assert type(exc.value) is SpecError
    assert exc.value.errors == errors


def test_validation_errors_are_json_paths() -> None:
    data = {
        "kind": "pipeline",
        "steps": [
            {"operation": {"kind": "agnet_step"}},
            {
                "operation": {
                    "kind": "router",
                    "routes": [{"name": "x", "step": {"kind": "agent_step"}}],
                    "classifier": {"name": "", "output_schema": {"type": "string"}},
                }
            },
            {"operation": {"kind": "function_step", "callable_name": "f", "extra": 1}},
            {"operation": {"kind": "function_step"}},
            {"operation": LEAF, "config": {"on_error": "explode"}},
        ],
        "name": "",
    }
    with pytest.raises(SpecError) as exc:
        parse_topology(data)
    assert exc.value.errors == [
        (
            "$.steps[0].operation",
            "unknown kind 'agnet_step' (expected one of: agent_step, function_step, pipeline, "
            "parallel, router, refinement_loop)",
        ),
        (
            "$.steps[1].operation.routes[0].step",
            "an agent step needs exactly one of agent_name and inline_spec",
        ),
        ("$.steps[1].operation.classifier.name", "String should have at least 1 character"),
        ("$.steps[2].operation.extra", "Extra inputs are not permitted"),
        ("$.steps[3].operation.callable_name", "Field required"),
        ("$.steps[4].config.on_error", "Input should be 'stop', 'skip' or 'retry'"),
        ("$.name", "String should have at least 1 character"),
    ]
    assert str(exc.value).startswith(
        "invalid topology spec: 7 problem(s):\n  $.steps[0].operation:"
    )


def test_a_blank_string_classifier_is_one_error_at_its_path() -> None:
    data = {
        "kind": "router",
        "routes": [{"name": "x", "step": {"kind": "function_step", "callable_name": "f"}}],
        "classifier": "\x1c",
    }
    with pytest.raises(SpecError) as exc:
        parse_topology(data)
    assert exc.value.errors == [("$.classifier", "must not be blank (whitespace only)")]


def test_string_classifier_errors_are_not_doubled() -> None:
    data = {
        "kind": "router",
        "routes": [{"name": "a", "step": LEAF}],
        "classifier": "",
    }
    with pytest.raises(SpecError) as exc:
        parse_topology(data)
    assert exc.value.errors == [("$.classifier", "String should have at least 1 character")]


def test_non_string_keys_are_spec_errors() -> None:
    with pytest.raises(SpecError) as exc:
        parse_topology({"kind": "pipeline", 1: "x"})  # type: ignore[dict-item]
    assert exc.value.errors == [("$", "keys must be strings, got int")]


def test_huge_integers_and_nan_are_spec_errors() -> None:
    with pytest.raises(SpecError):
        parse_topology('{"kind": "parallel", "steps": [], "timeout": ' + "9" * 5000 + "}")
    with pytest.raises(SpecError) as exc:
        parse_topology('{"kind": "parallel", "steps": [' + json.dumps(LEAF) + '], "timeout": NaN}')
    assert exc.value.errors == [("$.timeout", "Input should be a finite number")]
