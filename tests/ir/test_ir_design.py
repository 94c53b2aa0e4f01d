"""`TopologyDesign` (the meta agent's output) and F2: the design schema through every
JSON-schema transformer pydantic-ai applies per provider profile."""

from __future__ import annotations

import asyncio
import importlib
import inspect
import json
from typing import Any

import pytest
from pydantic import ValidationError
from pydantic_ai import Agent, models
from pydantic_ai.messages import ModelMessage, ModelResponse, ToolCallPart
from pydantic_ai.models.function import AgentInfo, FunctionModel
from pydantic_ai.profiles import JsonSchemaTransformer

from core.errors import SearchError, SpecError, SpecLimitError
from core.ir import (
    KINDS,
    SpecLimits,
    TopologyDesign,
    check_output_schema,
    design_output_schema,
    parse_design,
)
from core.ir.design import SPEC_LIMITS_CONTEXT_KEY

models.ALLOW_MODEL_REQUESTS = False

LEAF: dict[str, Any] = {"kind": "agent_step", "agent_name": "solver"}


def chain(levels: int) -> dict[str, Any]:
    node: dict[str, Any] = dict(LEAF)
    for _ in range(levels):
        node = {"kind": "pipeline", "steps": [{"operation": node}]}
    return node


# --- the model ----------------------------------------------------------------------------------


def test_design_fields() -> None:
    design = TopologyDesign.model_validate({"thought": "t", "spec": chain(1)})
    assert design.thought == "t"
    assert design.spec.kind == "pipeline"
    assert list(TopologyDesign.model_fields) == ["thought", "spec"]
    with pytest.raises(ValidationError):
        TopologyDesign.model_validate({"thought": "t", "spec": LEAF})
    with pytest.raises(ValidationError):
        TopologyDesign.model_validate({"thought": "t", "spec": chain(1), "extra": 1})


def test_design_spec_limits_come_first() -> None:
    with pytest.raises(ValidationError) as exc:
        TopologyDesign.model_validate({"thought": "t", "spec": chain(9)})
    [err] = exc.value.errors()
    assert err["loc"] == ("spec",)
    path = "$" + ".steps[0].operation" * 8
    assert err["msg"] == (
        f"Value error, spec nesting depth exceeds max_depth=8: the composite at {path} is at depth 9"
    )
    ok = TopologyDesign.model_validate(
        {"thought": "t", "spec": chain(9)},
        context={SPEC_LIMITS_CONTEXT_KEY: SpecLimits(max_depth=9)},
    )
    assert ok.spec.kind == "pipeline"


def test_design_accepts_spec_as_json_text() -> None:
    design = TopologyDesign.model_validate({"thought": "", "spec": json.dumps(chain(2))})
    assert design == TopologyDesign.model_validate({"thought": "", "spec": chain(2)})


def test_parse_design() -> None:
    text = json.dumps({"thought": "why", "spec": chain(2)})
    assert parse_design(text).thought == "why"
    assert parse_design(text.encode()) == parse_design(json.loads(text))
    with pytest.raises(SpecLimitError) as exc:
        parse_design(json.dumps({"thought": "x", "spec": chain(9)}))
    assert exc.value.path == "$.spec" + ".steps[0].operation" * 8
    assert exc.value.limit == "max_depth"
    assert str(exc.value).startswith(
        "spec nesting depth exceeds max_depth=8: the composite at $.spec"
    )
    with pytest.raises(SpecLimitError):
        parse_design("[" * 10_000)
    with pytest.raises(SpecError) as bad:
        parse_design({"thought": 1, "spec": {"kind": "pipeline", "steps": []}})
    assert bad.value.errors == [
        ("$.thought", "Input should be a valid string"),
        ("$.spec.steps", "List should have at least 1 item after validation, not 0"),
    ]


def test_too_deep_design_is_fed_back_to_the_model() -> None:
    """F1 through pydantic-ai: the retry prompt carries our limit message."""
    calls: list[list[ModelMessage]] = []

    def designer(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        calls.append(list(messages))
        spec = chain(9) if len(calls) == 1 else chain(2)
        tool = info.output_tools[0].name
        return ModelResponse(parts=[ToolCallPart(tool, {"thought": "t", "spec": spec})])

    agent = Agent(FunctionModel(designer), output_type=TopologyDesign)
    result = asyncio.run(agent.run("design"))
    assert result.output.spec.kind == "pipeline"
    # the second request carries the validation error back (as the output tool's return)
    fed_back = [str(getattr(part, "content", "")) for part in calls[1][-1].parts]
    assert len(calls) == 2
    assert any("spec nesting depth exceeds max_depth=8" in text for text in fed_back)


# --- F2 -----------------------------------------------------------------------------------------


def test_design_schema_is_what_pydantic_ai_builds() -> None:
    from pydantic_ai._output import ObjectOutputProcessor

    assert ObjectOutputProcessor(TopologyDesign).object_def.json_schema == design_output_schema()
    assert "oneOf" not in json.dumps(design_output_schema())


def _all_transformers() -> list[type[JsonSchemaTransformer]]:
    """Every JSON-schema transformer class pydantic-ai ships whose module imports here."""
    for module in (
        "pydantic_ai.profiles.openai",
        "pydantic_ai.profiles.google",
        "pydantic_ai.profiles.qwen",
        "pydantic_ai.profiles.zai",
        "pydantic_ai.providers.openrouter",
        "pydantic_ai.providers.azure",
        "pydantic_ai.providers.bedrock",
        "pydantic_ai.providers.anthropic",  # needs the `anthropic` SDK
    ):
        try:
            importlib.import_module(module)
        except ImportError:
            continue
    found: list[type[JsonSchemaTransformer]] = []
    todo: list[type[JsonSchemaTransformer]] = [JsonSchemaTransformer]
    while todo:
        for sub in todo.pop().__subclasses__():
            todo.append(sub)
            # abstract bases, and the realtime ElevenLabs tool transformer (never used for output
            # objects; it takes no `strict`), are not output-schema transformers
            if inspect.isabstract(sub) or sub.__name__ == "_ElevenLabsSchemaTransformer":
                continue
            found.append(sub)
    return sorted(set(found), key=lambda c: f"{c.__module__}.{c.__qualname__}")


# Transformers that cannot express a recursive schema at all: they must fail fast, with a clear
# message, before any paid call.
NO_RECURSION = {"GoogleOpenAPISchemaTransformer"}


def test_transformer_inventory() -> None:
    names = {cls.__name__ for cls in _all_transformers()}
    assert {
        "OpenAIJsonSchemaTransformer",
        "GoogleJsonSchemaTransformer",
        "GoogleOpenAPISchemaTransformer",
        "InlineDefsJsonSchemaTransformer",
    } <= names
    # Bedrock's transformer is only importable where boto3 is installed; the project does not
    # depend on it, so it is checked when present (by the parametrised test below), not required
    assert len(names) >= 12


@pytest.mark.parametrize("strict", [None, True, False])
@pytest.mark.parametrize("transformer", _all_transformers(), ids=lambda c: c.__name__)
def test_every_transformer_keeps_the_design_usable(
    transformer: type[JsonSchemaTransformer], strict: bool | None
) -> None:
    if transformer.__name__ in NO_RECURSION:
        with pytest.raises(SearchError) as exc:
            check_output_schema(transformer, strict=strict)
        assert str(exc.value).startswith(
            f"{transformer.__name__} cannot take the meta agent's output schema (the recursive "
            "TopologyDesign): Recursive `$ref`s in JSON Schema are not supported by Gemini"
        )
        return
    check_output_schema(transformer, strict=strict)


def test_openai_strict_result_independently() -> None:
    from pydantic_ai.profiles.openai import OpenAIJsonSchemaTransformer

    walker = OpenAIJsonSchemaTransformer(design_output_schema(), strict=True)
    result = walker.walk()
    text = json.dumps(result)
    assert "oneOf" not in text
    items = result["$defs"]["ParallelSpec"]["properties"]["steps"]["items"]
    kinds = []
    for ref in items["anyOf"]:
        name = ref["$ref"].removeprefix("#/$defs/")
        kinds.append(result["$defs"][name]["properties"]["kind"]["const"])
    assert tuple(kinds) == KINDS


def test_profiles_of_the_providers() -> None:
    from pydantic_ai.profiles.google import google_model_profile
    from pydantic_ai.profiles.openai import openai_model_profile

    for profile in (
        openai_model_profile("gpt-4o"),
        openai_model_profile("gpt-oss-120b"),
        google_model_profile("gemini-2.5-pro"),
    ):
        assert profile is not None
        for strict in (None, True):
            check_output_schema(profile, strict=strict)
    check_output_schema({}, strict=True)  # no transformer: the schema goes as it is


def test_a_model_is_checked_through_its_profile() -> None:
    from pydantic_ai.profiles.google import GoogleOpenAPISchemaTransformer

    check_output_schema(FunctionModel(lambda m, i: ModelResponse(parts=[])))
    broken = FunctionModel(
        lambda m, i: ModelResponse(parts=[]),
        model_name="gemini-live",
        profile={"json_schema_transformer": GoogleOpenAPISchemaTransformer},
    )
    with pytest.raises(SearchError) as exc:
        check_output_schema(broken)
    assert "gemini-live" in str(exc.value)
    with pytest.raises(TypeError):
        check_output_schema(42)


def test_provider_rejecting_recursive_strict_schemas_fails_fast() -> None:
    profile = {"anthropic_enforces_strict_schema_limits": True}
    check_output_schema(profile)  # non-strict tool output: accepted
    with pytest.raises(SearchError) as exc:
        check_output_schema(profile, strict=True)
    assert str(exc.value) == (
        "this provider profile breaks the meta agent's output schema in strict mode: the "
        "provider rejects recursive schemas in strict mode. Use another model or provider for "
        "the designer, or strict=False."
    )


class _EmptiesLaterRefs(JsonSchemaTransformer):
    """The F2 failure mode: every reference after the first to a definition becomes `{}`."""

    def __init__(self, schema: dict[str, Any], *, strict: bool | None = None) -> None:
        super().__init__(schema, strict=strict)
        self._seen: set[str] = set()

    def transform(self, schema: dict[str, Any]) -> dict[str, Any]:
        ref = schema.get("$ref")
        if isinstance(ref, str):
            if ref in self._seen:
                return {}
            self._seen.add(ref)
        return schema


class _OneOfBack(JsonSchemaTransformer):
    """Rewrites every `anyOf` to `oneOf` and claims strict compatibility."""

    def transform(self, schema: dict[str, Any]) -> dict[str, Any]:
        if "anyOf" in schema:
            schema["oneOf"] = schema.pop("anyOf")
        return schema


def test_broken_transforms_are_caught() -> None:
    with pytest.raises(SearchError) as exc:
        check_output_schema(_EmptiesLaterRefs)
    assert "an alternative without a kind" in str(exc.value)
    check_output_schema(_OneOfBack, strict=False)
    with pytest.raises(SearchError) as strict_exc:
        check_output_schema(_OneOfBack, strict=True)
    assert "`oneOf` remains, which strict mode rejects" in str(strict_exc.value)
