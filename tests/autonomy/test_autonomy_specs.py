"""AgentSpec / ToolSpec / GeneratedToolSpec: untrusted schemas refused with their path
(runtime contract, decision 1), the mixed tools list, output_type in code only, the IR's inline
agent and the old four-field shape."""

from __future__ import annotations

import pytest
from pydantic import BaseModel, ValidationError

from core.errors import SpecError
from core.ir import (
    AgentSpec,
    AgentStepSpec,
    GeneratedToolSpec,
    PipelineSpec,
    SchemaLimits,
    ToolSpec,
    check_schema,
    parse_agent_spec,
    parse_topology,
    schema_to_type,
)


def _spec(schema: object) -> dict[str, object]:
    return {"name": "n", "output_schema": schema}


def test_a_remote_ref_is_refused_with_its_path() -> None:
    schema = {"type": "object", "properties": {"x": {"$ref": "https://evil.example/x.json"}}}
    with pytest.raises(SpecError) as exc:
        parse_agent_spec(_spec(schema))
    assert exc.value.errors == [
        (
            '$.output_schema.properties.x["$ref"]',
            "$ref 'https://evil.example/x.json' refused: only local '#/$defs/<name>' "
            "references are allowed (no remote or file references)",
        )
    ]


def test_a_file_ref_and_a_ref_into_nothing_are_refused() -> None:
    with pytest.raises(SpecError) as exc:
        check_schema({"$ref": "file:///etc/passwd"})
    assert exc.value.errors[0][0] == '$["$ref"]'
    with pytest.raises(SpecError) as missing:
        check_schema({"$ref": "#/$defs/Nope", "$defs": {}})
    assert missing.value.errors == [('$["$ref"]', "$ref '#/$defs/Nope' names no entry of $defs")]


def test_ten_thousand_properties_are_refused_at_the_properties_object() -> None:
    props = {f"p{i}": {"type": "string"} for i in range(10_000)}
    with pytest.raises(SpecError) as exc:
        parse_agent_spec(_spec({"type": "object", "properties": props}))
    assert exc.value.errors == [
        ("$.output_schema.properties", "10000 properties, more than max_properties=200")
    ]


def test_deep_nesting_is_refused_at_the_limit_without_recursion() -> None:
    deep: dict[str, object] = {"type": "string"}
    for _ in range(100_000):
        deep = {"type": "object", "properties": {"a": deep}}
    with pytest.raises(SpecError) as exc:
        parse_agent_spec(_spec(deep))
    assert exc.value.errors == [
        ("$.output_schema" + ".properties.a" * 12, "nesting deeper than max_depth=12")
    ]


def test_the_model_itself_refuses_a_bad_schema() -> None:
    with pytest.raises(ValidationError, match=r"refused at \$\.output_schema\.properties\.x"):
        AgentSpec(name="n", output_schema={"properties": {"x": {"$ref": "http://a/b"}}})


def test_limits_are_configurable() -> None:
    schema = {"type": "object", "properties": {"a": {"type": "string"}, "b": {"type": "string"}}}
    with pytest.raises(SpecError) as exc:
        check_schema(schema, limits=SchemaLimits(max_properties=1))
    assert exc.value.errors == [("$.properties", "2 properties, more than max_properties=1")]
    with pytest.raises(SpecError) as long:
        check_schema({"description": "x" * 11}, limits=SchemaLimits(max_string_length=10))
    assert long.value.errors == [
        ("$.description", "a string of 11 characters, more than max_string_length=10")
    ]


def test_unsupported_keywords_and_types_and_recursion_are_refused() -> None:
    with pytest.raises(SpecError) as kw:
        check_schema({"oneOf": [{"type": "string"}]})
    assert kw.value.errors[0][0] == "$.oneOf"
    with pytest.raises(SpecError) as ty:
        check_schema({"type": "tuple"})
    assert ty.value.errors == [("$.type", "type 'tuple' is not supported")]
    recursive = {
        "$ref": "#/$defs/Node",
        "$defs": {"Node": {"properties": {"next": {"$ref": "#/$defs/Node"}}}},
    }
    with pytest.raises(SpecError) as rec:
        check_schema(recursive)
    assert rec.value.errors == [
        ('$["$defs"].Node.properties.next["$ref"]', "recursive $ref to 'Node' is not supported")
    ]


def test_schema_to_type_builds_the_documented_model() -> None:
    output = schema_to_type(
        {
            "type": "object",
            "properties": {
                "pattern": {"type": "string"},
                "confidence": {"type": "number"},
                "kind": {"enum": ["a", "b"]},
                "tags": {"type": "array", "items": {"type": "string"}},
                "class": {"type": "integer"},
            },
            "required": ["pattern"],
        },
        name="Out",
    )
    value = output.model_validate({"pattern": "burst", "kind": "a", "tags": ["x"], "class": 2})
    assert value.model_dump(by_alias=True) == {
        "pattern": "burst",
        "confidence": None,
        "kind": "a",
        "tags": ["x"],
        "class": 2,
    }
    with pytest.raises(ValidationError):
        output.model_validate({"confidence": 1.0})
    assert schema_to_type({"type": "string"}) is str


def test_a_mixed_tools_list_dispatches_by_structure() -> None:
    spec = AgentSpec.model_validate(
        {
            "name": "researcher",
            "output_schema": {"type": "string"},
            "tools": [
                {"name": "search", "description": "web"},
                {"name": "extract", "implementation": "return 1", "allowed_imports": ["re"]},
            ],
        }
    )
    assert [type(t) for t in spec.tools] == [ToolSpec, GeneratedToolSpec]
    generated = spec.tools[1]
    assert isinstance(generated, GeneratedToolSpec)
    assert generated.allowed_imports == frozenset({"re"})
    assert (generated.timeout_s, generated.memory_mb, generated.dependencies) == (5.0, 128, ())


def test_exactly_one_output_declaration() -> None:
    class Out(BaseModel):
        code: str

    with pytest.raises(
        ValidationError, match=r"exactly one of output_schema and output_type \(both"
    ):
        AgentSpec(name="c", output_type=Out, output_schema={"type": "string"})
    with pytest.raises(ValidationError, match=r"\(neither given\)"):
        AgentSpec(name="c", system_prompt="x", tools=[])


def test_output_type_is_code_only_and_dumps_as_its_schema() -> None:
    class CoderOutput(BaseModel):
        reasoning: str
        code: str

    spec = AgentSpec(name="coder", system_prompt="Write code.", output_type=CoderOutput)
    assert spec.output_spec() is CoderOutput
    wire = spec.model_dump(mode="json")
    assert wire["output_schema"] == CoderOutput.model_json_schema()
    assert "output_type" not in wire
    again = AgentSpec.model_validate_json(spec.model_dump_json())
    assert again.output_type is None
    assert again.output_spec().model_validate({"reasoning": "r", "code": "c"}).code == "c"
    with pytest.raises(SpecError) as exc:
        parse_agent_spec({"name": "coder", "output_type": "CoderOutput"})
    assert exc.value.errors == [("$.output_type", "not allowed outside code")]
    with pytest.raises(ValidationError, match="accepted only in code"):
        AgentSpec.model_validate({"name": "c", "output_type": "CoderOutput"})
    with pytest.raises(ValidationError, match="cannot use output_type"):
        AgentStepSpec(inline_spec=spec)


def test_the_ir_inline_agent_is_the_docs_agent_spec_and_round_trips() -> None:
    inline = AgentSpec(
        name="analyst",
        system_prompt="Analyse.",
        output_schema={"type": "object", "properties": {"kind": {"type": "string"}}},
        tools=[ToolSpec(name="logs", description="fetch logs")],
        model="test",
        constraints=["cite a log line"],
    )
    spec = PipelineSpec(steps=[{"operation": AgentStepSpec(inline_spec=inline)}])  # type: ignore[list-item]
    text = spec.model_dump_json()
    assert parse_topology(text) == spec
    step = parse_topology(text).steps[0].operation
    assert isinstance(step, AgentStepSpec)
    assert step.inline_spec == inline


def test_old_shape_loads_converted_with_a_deprecation_warning() -> None:
    old = {
        "kind": "pipeline",
        "steps": [
            {
                "operation": {
                    "kind": "agent_step",
                    "inline_spec": {
                        "model": "test",
                        "instructions": "judge it",
                        "name": "judge",
                        "output": "eval",
                    },
                }
            }
        ],
    }
    with pytest.warns(DeprecationWarning, match="old inline agent shape"):
        spec = parse_topology(old)
    step = spec.steps[0].operation
    assert isinstance(step, AgentStepSpec)
    assert step.inline_spec == AgentSpec(
        name="judge",
        system_prompt="judge it",
        model="test",
        output_schema={
            "type": "object",
            "properties": {
                "passed": {"type": "boolean"},
                "feedback": {"type": "string"},
                "score": {"type": "number"},
            },
            "required": ["passed"],
        },
    )
    # the converted spec is stored in the new shape: it loads again without a warning
    assert parse_topology(spec.model_dump_json()) == spec


def test_an_anyof_of_many_consts_is_one_literal_and_a_union_over_the_limit_is_refused() -> None:
    # the bug this pins (found in review): the union was built with repeated `|` (quadratic); now in
    # one step, and the member count is bounded by `max_union` (checked before anything is built)
    schema = {"type": "object", "properties": {"x": {"anyOf": [{"const": i} for i in range(500)]}}}
    model = schema_to_type(schema)
    assert model.model_validate({"x": 499}).x == 499
    with pytest.raises(ValidationError):
        model.model_validate({"x": 500})
    too_many = {"anyOf": [{"const": i} for i in range(501)]}
    with pytest.raises(SpecError) as exc:
        parse_agent_spec(_spec({"type": "object", "properties": {"x": too_many}}))
    assert exc.value.errors == [
        ("$.output_schema.properties.x.anyOf", "501 members, more than max_union=500")
    ]
    mixed = {"anyOf": [{"type": "string"}, {"const": 1}, {"const": 2}, {"type": "null"}]}
    built = schema_to_type({"type": "object", "properties": {"x": mixed}, "required": ["x"]})
    assert [built.model_validate({"x": v}).x for v in ("a", 1, 2, None)] == ["a", 1, 2, None]


def test_depth_through_a_ref_chain_counts_against_max_depth() -> None:
    # the bug this pins (found in review): d0 -> d1 -> ... -> d400 passed and then spawn hit
    # RecursionError
    n = 400
    defs: dict[str, object] = {
        f"d{i}": {"type": "object", "properties": {"x": {"$ref": f"#/$defs/d{i + 1}"}}}
        for i in range(n)
    }
    defs[f"d{n}"] = {"type": "string"}
    with pytest.raises(SpecError) as exc:
        parse_agent_spec(_spec({"$defs": defs, "$ref": "#/$defs/d0"}))
    assert exc.value.errors == [
        (
            '$.output_schema["$ref"]',
            "nesting through $ref '#/$defs/d0' reaches depth 401, deeper than max_depth=12",
        )
    ]
    # a `$ref` counts as the schema it names: root 1, x (= d0) 2, d0.x (= d1) 3, ..., d4 6
    short: dict[str, object] = {
        f"d{i}": {"type": "object", "properties": {"x": {"$ref": f"#/$defs/d{i + 1}"}}}
        for i in range(4)
    }
    short["d4"] = {"type": "string"}
    schema = {"$defs": short, "type": "object", "properties": {"x": {"$ref": "#/$defs/d0"}}}
    built = schema_to_type(schema)
    assert built.model_validate({"x": {"x": {"x": {"x": {"x": "s"}}}}}).x.x.x.x.x == "s"
    with pytest.raises(SpecError, match="reaches depth 6, deeper than max_depth=5"):
        check_schema(schema, limits=SchemaLimits(max_depth=5))
    check_schema(schema, limits=SchemaLimits(max_depth=6))


def test_const_and_enum_values_that_are_objects_or_arrays_are_refused_with_their_path() -> None:
    # the bug this pins (found in review): a dict or list const/enum gave a raw "TypeError:
    # unhashable type" at spawn
    cases = [
        ({"const": {"a": 1}}, "$.output_schema.properties.x.const"),
        ({"enum": ["ok", [1, 2]]}, "$.output_schema.properties.x.enum[1]"),
        ({"enum": [{"a": 1}]}, "$.output_schema.properties.x.enum[0]"),
    ]
    for sub, path in cases:
        with pytest.raises(SpecError) as exc:
            parse_agent_spec(_spec({"type": "object", "properties": {"x": sub}}))
        assert exc.value.errors == [
            (path, "const and enum values must be strings, numbers, booleans or null")
        ]


def test_a_spec_with_no_output_declaration_is_not_taken_for_the_old_shape() -> None:
    # the bug this pins (found in review): `AgentSpec(name="c")` matched the old four-field shape
    # (any subset of it) and got a string output; the old shape needs `instructions` or `output`, or
    # no name
    for data in ({"name": "c"}, {"name": "c", "model": "test"}):
        with pytest.raises(ValidationError, match=r"\(neither given\)"):
            AgentSpec.model_validate(data)
    with pytest.raises(ValidationError, match=r"\(neither given\)"):
        AgentSpec(name="c")
    with pytest.raises(SpecError, match=r"\(neither given\)"):
        parse_agent_spec({"name": "c", "model": "test"})
    for data in ({"name": "c", "instructions": "x"}, {"output": "route"}, {"model": "test"}):
        with pytest.warns(DeprecationWarning, match="old inline agent shape"):
            spec = AgentSpec.model_validate(data)
        assert spec.output_schema is not None
        assert spec.output_schema["type"] == "string"


def test_duplicate_tool_names_are_refused_naming_both_paths() -> None:
    # the bug this pins (found in review): a generated tool silently replaced the registered one of
    # the same name
    tools = [{"name": "x"}, {"name": "y"}, {"name": "x", "implementation": "return 'gen'"}]
    with pytest.raises(SpecError) as exc:
        parse_agent_spec({"name": "a", "output_schema": {"type": "string"}, "tools": tools})
    assert str(exc.value) == "duplicate tool name 'x' at $.tools[0] and $.tools[2]"
    assert exc.value.errors == [("$.tools[2].name", "duplicate tool name 'x', also at $.tools[0]")]
    with pytest.raises(ValidationError, match=r"duplicate tool name 'x' at \$\.tools\[0\] and"):
        AgentSpec(name="a", output_schema={"type": "string"}, tools=tools)  # type: ignore[arg-type]
