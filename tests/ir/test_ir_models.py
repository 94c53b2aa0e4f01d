"""The IR models: fields, defaults, validation rules, and `kind`-keeping serialization."""

from __future__ import annotations

import json
from typing import Any

import pytest
from pydantic import TypeAdapter, ValidationError

from core.ir import (
    AgentSpec,
    AgentStepSpec,
    FunctionStepSpec,
    OperationSpec,
    ParallelSpec,
    PipelineSpec,
    PipelineStepEntry,
    RefinementLoopSpec,
    RouterSpec,
    RouteSpec,
    StepConfigSpec,
    TopologySpec,
)

A = AgentStepSpec(agent_name="solver")
F = FunctionStepSpec(callable_name="upper")


def _inline(model: str, system_prompt: str = "") -> AgentSpec:
    return AgentSpec(
        name="inline", model=model, system_prompt=system_prompt, output_schema={"type": "string"}
    )


def _pipe(*ops: Any, **kw: Any) -> PipelineSpec:
    return PipelineSpec(steps=[PipelineStepEntry(operation=o) for o in ops], **kw)


def _messages(exc: ValidationError) -> list[str]:
    return [e["msg"] for e in exc.errors()]


# --- defaults -------------------------------------------------------------------------------


def test_atomic_defaults() -> None:
    assert A.model_dump() == {
        "kind": "agent_step",
        "id": None,
        "agent_name": "solver",
        "inline_spec": None,
    }
    assert F.model_dump() == {
        "kind": "function_step",
        "id": None,
        "callable_name": "upper",
        "name": None,
    }


def test_agent_spec_defaults() -> None:
    spec = AgentSpec(name="a", output_schema={"type": "string"})
    assert spec.model_dump() == {
        "name": "a",
        "system_prompt": "",
        "output_schema": {"type": "string"},
        "tools": [],
        "model": None,
        "constraints": [],
    }


def test_old_agent_spec_shape_loads_converted_with_a_deprecation_warning() -> None:
    with pytest.warns(DeprecationWarning, match="old inline agent shape"):
        spec = AgentSpec.model_validate({"model": "openai:gpt-4o-mini"})
    assert spec == AgentSpec(
        name="inline_agent", model="openai:gpt-4o-mini", output_schema={"type": "string"}
    )


def test_step_config_defaults() -> None:
    assert StepConfigSpec().model_dump() == {"name": "", "on_error": "stop", "max_retries": 1}


def test_composite_defaults() -> None:
    p = _pipe(A)
    assert (p.kind, p.name, p.id, p.steps[0].config) == ("pipeline", "pipeline", None, None)
    par = ParallelSpec(steps=[A])
    assert (par.kind, par.name, par.merge, par.timeout) == (
        "parallel",
        "parallel",
        "collect_all",
        None,
    )
    r = RouterSpec(routes=[RouteSpec(name="math", step=A)], classifier="clf")
    assert (r.kind, r.name, r.fallback_step, r.routes[0].condition_name) == (
        "router",
        "router",
        None,
        None,
    )
    loop = RefinementLoopSpec(step=A, evaluator="judge", state_updater_name="update")
    assert loop.model_dump(exclude={"step"}) == {
        "kind": "refinement_loop",
        "id": None,
        "evaluator": "judge",
        "state_updater_name": "update",
        "max_iterations": 5,
        "timeout": None,
        "convergence_window": None,
        "convergence_threshold": 0.01,
        "confidence_threshold": None,
        "keep_best": True,
        "name": "refinement_loop",
    }


# --- validation rules -------------------------------------------------------------------------


def test_agent_step_needs_exactly_one_source() -> None:
    with pytest.raises(ValidationError) as neither:
        AgentStepSpec()
    assert _messages(neither.value) == [
        "Value error, an agent step needs exactly one of agent_name and inline_spec"
    ]
    with pytest.raises(ValidationError):
        AgentStepSpec(agent_name="a", inline_spec=_inline("openai:gpt-4o"))
    inline = AgentStepSpec(inline_spec=_inline("openai:gpt-4o", system_prompt="hi"))
    assert inline.agent_name is None


@pytest.mark.parametrize("bad", ["", "   ", "\n"])
def test_names_must_not_be_blank(bad: str) -> None:
    with pytest.raises(ValidationError):
        FunctionStepSpec(callable_name=bad)
    with pytest.raises(ValidationError):
        AgentStepSpec(agent_name=bad)
    with pytest.raises(ValidationError):
        _pipe(A, name=bad)
    with pytest.raises(ValidationError):
        AgentStepSpec(agent_name="a", id=bad)


@pytest.mark.parametrize("bad", ["\x1c", "\x1d\x1e \x1f", "\u3000", "\x85\u2028"])
def test_names_blank_by_str_strip_are_blank(bad: str) -> None:
    """Blank means what the runtime and the registries check, `not name.strip()`: these pass a
    regex `\\S` (pydantic-core's Rust engine does not count U+001C..U+001F as space) but could
    never be registered, and a route of that name fails only at hydration."""
    assert not bad.strip()
    with pytest.raises(ValidationError):
        FunctionStepSpec(callable_name=bad)
    with pytest.raises(ValidationError):
        RouteSpec(name=bad, step=A)
    with pytest.raises(ValidationError):
        AgentStepSpec(agent_name="a", id=bad)
    with pytest.raises(ValidationError):
        AgentSpec(name=bad, output_schema={"type": "string"})
    assert FunctionStepSpec(callable_name="\u200bx\x1c").callable_name == "\u200bx\x1c"


def test_step_config_rules() -> None:
    assert StepConfigSpec(on_error="retry", max_retries=0).max_retries == 0
    with pytest.raises(ValidationError):
        StepConfigSpec(max_retries=-1)
    with pytest.raises(ValidationError):
        StepConfigSpec(on_error="ignore")  # type: ignore[arg-type]


def test_lists_need_one_item() -> None:
    with pytest.raises(ValidationError):
        PipelineSpec(steps=[])
    with pytest.raises(ValidationError):
        ParallelSpec(steps=[])
    with pytest.raises(ValidationError):
        RouterSpec(routes=[], classifier="c")


@pytest.mark.parametrize("timeout", [0, -1.0, float("nan"), float("inf")])
def test_timeouts_must_be_positive_and_finite(timeout: float) -> None:
    with pytest.raises(ValidationError):
        ParallelSpec(steps=[A], timeout=timeout)
    with pytest.raises(ValidationError):
        RefinementLoopSpec(step=A, evaluator="e", state_updater_name="u", timeout=timeout)


def test_router_needs_a_classifier_or_a_condition() -> None:
    with pytest.raises(ValidationError) as exc:
        RouterSpec(routes=[RouteSpec(name="math", step=A)])
    assert _messages(exc.value) == [
        "Value error, a router needs a classifier or at least one route condition_name"
    ]
    ok = RouterSpec(routes=[RouteSpec(name="math", step=A, condition_name="is_math")])
    assert ok.classifier is None
    agent_clf = RouterSpec(
        routes=[RouteSpec(name="math", step=A)],
        classifier=_inline("openai:gpt-4o"),
    )
    assert isinstance(agent_clf.classifier, AgentSpec)


def test_router_route_names_unique_after_normalisation() -> None:
    with pytest.raises(ValidationError) as exc:
        RouterSpec(
            routes=[RouteSpec(name="math", step=A), RouteSpec(name=" Math ", step=F)],
            classifier="c",
        )
    assert _messages(exc.value) == [
        "Value error, duplicate route name ' Math ' (same as 'math' after strip and case-fold)"
    ]


@pytest.mark.parametrize(
    "field, value",
    [
        ("max_iterations", 0),
        ("convergence_window", 0),
        ("convergence_threshold", -0.1),
        ("confidence_threshold", -1.0),
        ("convergence_threshold", float("nan")),
    ],
)
def test_loop_ranges(field: str, value: float) -> None:
    with pytest.raises(ValidationError):
        RefinementLoopSpec(step=A, evaluator="e", state_updater_name="u", **{field: value})


def test_loop_range_edges_accepted() -> None:
    loop = RefinementLoopSpec(
        step=A,
        evaluator="e",
        state_updater_name="u",
        max_iterations=1,
        convergence_window=1,
        convergence_threshold=0.0,
        confidence_threshold=0.0,
    )
    assert (loop.max_iterations, loop.convergence_window) == (1, 1)


def test_ids_unique_across_the_topology() -> None:
    inner = ParallelSpec(steps=[AgentStepSpec(agent_name="a", id="x")], id="par")
    with pytest.raises(ValidationError) as exc:
        _pipe(inner, FunctionStepSpec(callable_name="f", id="x"))
    assert _messages(exc.value) == [
        "Value error, duplicate node id 'x' at $.steps[0].operation.steps[0] and "
        "$.steps[1].operation (ids must be unique within a topology)"
    ]
    with pytest.raises(ValidationError):
        PipelineSpec(steps=[PipelineStepEntry(operation=_pipe(A, id="p"))], id="p")
    assert _pipe(inner, FunctionStepSpec(callable_name="f", id="y")).steps[1].operation.id == "y"


def test_models_are_frozen_and_strict() -> None:
    with pytest.raises(ValidationError):
        A.agent_name = "other"  # type: ignore[misc]
    with pytest.raises(ValidationError):
        AgentStepSpec(agent_name="a", prompt="x")  # type: ignore[call-arg]
    with pytest.raises(ValidationError):
        StepConfigSpec(retries=2)  # type: ignore[call-arg]


# --- serialization ----------------------------------------------------------------------------


def _every_kind() -> PipelineSpec:
    router = RouterSpec(
        routes=[
            RouteSpec(name="math", step=A, condition_name="is_math"),
            RouteSpec(name="code", step=ParallelSpec(steps=[F, A], merge="first_wins")),
        ],
        classifier=_inline("test:model"),
        fallback_step=FunctionStepSpec(callable_name="fb", name="fallback"),
    )
    loop = RefinementLoopSpec(step=router, evaluator="judge", state_updater_name="update")
    return PipelineSpec(
        steps=[
            PipelineStepEntry(operation=loop, config=StepConfigSpec(on_error="retry")),
            PipelineStepEntry(operation=A),
        ],
        id="root",
    )


DUMP_OPTIONS: list[dict[str, Any]] = [
    {},
    {"exclude_defaults": True},
    {"exclude_unset": True},
    {"exclude_none": True},
    {"exclude_defaults": True, "exclude_unset": True, "exclude_none": True},
    {"exclude": {"kind"}},
    {"include": {"steps"}},
    {"round_trip": True},
]


def _kinds_everywhere(data: Any) -> list[str]:
    """Collect `kind` of every dict that sits in a step position of a dumped spec."""
    found: list[str] = []
    stack = [data]
    while stack:
        cur = stack.pop()
        if isinstance(cur, dict):
            if "kind" in cur:
                found.append(cur["kind"])
            stack.extend(cur.values())
        elif isinstance(cur, list):
            stack.extend(cur)
    return sorted(found)


@pytest.mark.parametrize("options", DUMP_OPTIONS, ids=lambda o: ",".join(o) or "plain")
@pytest.mark.parametrize("mode", ["python", "json"])
def test_kind_survives_every_dump_option(options: dict[str, Any], mode: str) -> None:
    spec = _every_kind()
    expected = sorted(
        [
            "pipeline",
            "refinement_loop",
            "router",
            "agent_step",
            "parallel",
            "function_step",
            "agent_step",
            "function_step",
            "agent_step",
        ]
    )
    dumped = spec.model_dump(mode=mode, **options)  # type: ignore[arg-type]
    assert _kinds_everywhere(dumped) == expected
    text = spec.model_dump_json(**options)
    assert _kinds_everywhere(json.loads(text)) == expected
    assert list(dumped)[0] == "kind"


@pytest.mark.parametrize(
    "options", [o for o in DUMP_OPTIONS if "include" not in o], ids=lambda o: ",".join(o) or "plain"
)
def test_json_round_trip_is_equal(options: dict[str, Any]) -> None:
    spec = _every_kind()
    adapter: TypeAdapter[TopologySpec] = TypeAdapter(TopologySpec)
    if "exclude" in options:
        options = {}
    assert adapter.validate_json(spec.model_dump_json(**options)) == spec
    assert adapter.validate_python(spec.model_dump(**options)) == spec


def test_atomic_round_trip_through_operation_union() -> None:
    adapter: TypeAdapter[OperationSpec] = TypeAdapter(OperationSpec)
    for node in (A, F, AgentStepSpec(inline_spec=_inline("test:m"), id="a1")):
        assert adapter.validate_json(node.model_dump_json(exclude_defaults=True)) == node


def test_json_schema_requires_kind_everywhere() -> None:
    schema = TypeAdapter(TopologySpec).json_schema()
    for name in (
        "AgentStepSpec",
        "FunctionStepSpec",
        "PipelineSpec",
        "ParallelSpec",
        "RouterSpec",
        "RefinementLoopSpec",
    ):
        assert schema["$defs"][name]["required"][0] == "kind"
    assert schema["$defs"]["PipelineSpec"]["properties"]["steps"]["description"] == (
        "The steps in order (at least one)."
    )
