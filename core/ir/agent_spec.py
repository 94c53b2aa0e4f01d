"""Agent and tool specs: the serializable contracts a planner emits and the IR inlines.

Kept whole: the three specs and the schema checks their validators run are one contract, read
together; the checks are private to it.

`AgentSpec` is one agent: a name, a system prompt, exactly one output declaration
(`output_schema`, a JSON Schema, or `output_type`, a Pydantic class given in code), the tools it
may use, an optional model and free-text constraints. `ToolSpec` names a registered tool;
`GeneratedToolSpec` carries a tool's implementation, run only inside a sandbox
(`core.autonomy.DynamicToolFactory`). A mixed `tools` list dispatches by structure: an entry
with an `implementation` is a `GeneratedToolSpec` (a `ToolSpec` forbids that key).

Untrusted schemas (runtime contract, decision 1). An `output_schema` may come from a model or a
file, so it is checked against `SchemaLimits` *before* anything is built from it, iteratively
(no recursion on the input): nesting depth, properties per object, properties in total,
subschemas in total, string length, only the keywords and types in `SUPPORTED_KEYWORDS` and
`SUPPORTED_TYPES`, and `$ref` only to a local `#/$defs/<name>` (never remote, never recursive).
A violation names its JSON path, e.g. `$.output_schema.properties.x["$ref"]`: `check_schema`
and `parse_agent_spec` raise it as a `SpecError`; the model's own validator raises it inside
Pydantic's `ValidationError`, so no `AgentSpec` object ever holds a schema over the limits.

`output_type` (a Python class) is accepted only in code: JSON cannot carry it, and the IR
refuses it (`core.ir.models`). Dumping a spec with an `output_type` writes that class's JSON
Schema as `output_schema`, so a code-side spec serializes to the wire form.

The old four-field inline agent (`model`, `instructions`, `name`, `output`) still loads,
converted, with a `DeprecationWarning` naming the new fields (see `convert_legacy_agent_spec`).
"""

from __future__ import annotations

import json
import keyword
import re
import warnings
from collections.abc import Mapping, Sequence
from typing import Annotated, Any, Literal, Union, cast

from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Field,
    SerializerFunctionWrapHandler,
    ValidationInfo,
    create_model,
    field_validator,
    model_serializer,
    model_validator,
)
from pydantic.json_schema import SkipJsonSchema

from core.errors import SpecError

__all__ = [
    "LEGACY_AGENT_FIELDS",
    "SCHEMA_LIMITS_CONTEXT_KEY",
    "SUPPORTED_KEYWORDS",
    "SUPPORTED_TYPES",
    "AgentSpec",
    "GeneratedToolSpec",
    "SchemaLimits",
    "ToolSpec",
    "check_schema",
    "convert_legacy_agent_spec",
    "parse_agent_spec",
    "schema_to_type",
]

_CONFIG = ConfigDict(frozen=True, extra="forbid", use_attribute_docstrings=True)

SCHEMA_LIMITS_CONTEXT_KEY = "schema_limits"
"""Validation-context key holding the `SchemaLimits` an `AgentSpec`'s schema is checked against
(default `SchemaLimits()`)."""

SUPPORTED_TYPES: frozenset[str] = frozenset(
    {"object", "string", "number", "integer", "boolean", "array", "null"}
)
"""The JSON Schema `type` values an `output_schema` may use."""

SUPPORTED_KEYWORDS: frozenset[str] = frozenset(
    {
        "type",
        "properties",
        "required",
        "items",
        "enum",
        "const",
        "anyOf",
        "$defs",
        "$ref",
        "additionalProperties",
        "title",
        "description",
        "default",
        "examples",
        "format",
        "minimum",
        "maximum",
        "exclusiveMinimum",
        "exclusiveMaximum",
        "minLength",
        "maxLength",
        "minItems",
        "maxItems",
    }
)
"""The JSON Schema keywords an `output_schema` may use; any other key is refused (e.g. `oneOf`,
`allOf`, `pattern`, `if`, `$id`)."""

# keywords whose value is data, not a subschema (not descended into as schemas)
_DATA_KEYWORDS = frozenset({"default", "examples", "enum", "const"})
_NUMBER_KEYWORDS = frozenset({"minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum"})
_COUNT_KEYWORDS = frozenset({"minLength", "maxLength", "minItems", "maxItems"})
_TEXT_KEYWORDS = frozenset({"title", "description", "format"})
_LOCAL_REF = re.compile(r"#/\$defs/([A-Za-z0-9_.\-]+)\Z")
_IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")


class SchemaLimits(BaseModel):
    """Limits an untrusted `output_schema` is checked against before any model is built from it.

    The defaults are far beyond a useful structured output (a planner's specs use two or three
    levels and a handful of fields) and small enough that building the model costs
    milliseconds.
    """

    model_config = _CONFIG

    max_depth: int = Field(default=12, ge=1, le=64)
    """Most nested subschemas (the root is depth 1; each `properties` entry, `items`, `anyOf`
    member or `$defs` entry is one level deeper). A `$ref` counts as the schema it names, so a
    chain of `$defs` referring to each other is as deep as the nesting it spells out."""
    max_properties: int = Field(default=200, ge=1)
    """Most `properties` in one object schema."""
    max_total_properties: int = Field(default=2_000, ge=1)
    """Most `properties` over the whole schema, `$defs` included."""
    max_subschemas: int = Field(default=5_000, ge=1)
    """Most subschemas over the whole schema (every object that is a schema)."""
    max_string_length: int = Field(default=10_000, ge=1)
    """Longest string anywhere in the schema (keys, descriptions, enum values), in characters."""
    max_enum: int = Field(default=500, ge=1)
    """Most values in one `enum`."""
    max_union: int = Field(default=500, ge=1)
    """Most members in one `anyOf` (each becomes a member of a union, or of one `Literal` when
    it is a `const`)."""


def _join(path: str, key: str | int) -> str:
    if isinstance(key, int):
        return f"{path}[{key}]"
    if _IDENT.match(key):
        return f"{path}.{key}"
    return f"{path}[{json.dumps(key)}]"


def _violation(path: str, message: str) -> SpecError:
    return SpecError(f"output_schema refused at {path}: {message}", [(path, message)])


def _check_text(value: str, path: str, limits: SchemaLimits) -> None:
    if len(value) > limits.max_string_length:
        raise _violation(
            path,
            f"a string of {len(value)} characters, more than max_string_length="
            f"{limits.max_string_length}",
        )


def _check_data(value: Any, path: str, limits: SchemaLimits) -> None:
    """A data value (`default`, `enum` members, ...): JSON only, bounded, iteratively."""
    stack: list[tuple[Any, str, int]] = [(value, path, 1)]
    seen = 0
    while stack:
        item, where, depth = stack.pop()
        seen += 1
        if seen > limits.max_subschemas or depth > limits.max_depth:
            raise _violation(where, "a data value too large or too deeply nested")
        if isinstance(item, str):
            _check_text(item, where, limits)
        elif isinstance(item, Mapping):
            for k, v in cast(Mapping[Any, Any], item).items():
                if not isinstance(k, str):
                    raise _violation(where, "keys must be strings")
                _check_text(k, where, limits)
                stack.append((v, _join(where, k), depth + 1))
        elif isinstance(item, list | tuple):
            for i, v in enumerate(cast(Sequence[Any], item)):
                stack.append((v, _join(where, i), depth + 1))
        elif item is not None and not isinstance(item, bool | int | float):
            raise _violation(where, f"a {type(item).__name__} is not a JSON value")


def check_schema(schema: object, *, limits: SchemaLimits | None = None, path: str = "$") -> None:
    """Check an untrusted JSON Schema against `limits` before anything is built from it.

    Iterative over the input (a schema nested 100,000 levels deep fails at the limit with its
    path, never with `RecursionError`), and it stops at the first violation, so its cost is
    bounded by the limits, not by the schema's size.

    Args:
        schema: the schema (a mapping, as decoded JSON).
        limits: the limits; default `SchemaLimits()`.
        path: the JSON path of `schema` in the enclosing document, used in messages.

    Raises:
        SpecError: the first violation, with `errors == [(json_path, message)]`, e.g. a remote
            `$ref` at `$.output_schema.properties.x["$ref"]`, a 10,000-key `properties` at
            `$.output_schema.properties`, or nesting past `max_depth`.
    """
    lim = limits if limits is not None else SchemaLimits()
    if not isinstance(schema, Mapping):
        raise _violation(path, f"a schema must be an object, got {type(schema).__name__}")
    root = cast(Mapping[str, Any], schema)
    defs_raw = root.get("$defs", {})
    defs: Mapping[str, Any] = (
        cast(Mapping[str, Any], defs_raw) if isinstance(defs_raw, Mapping) else {}
    )
    total_props = 0
    subschemas = 0
    # (holder def name or "", target name, path, depth of the node holding the $ref)
    refs: list[tuple[str, str, str, int]] = []
    heights: dict[str, int] = {}  # def name -> its own depth, not counting $ref (body is 1)
    # (schema, path, depth, def name the schema sits in, or "")
    stack: list[tuple[Any, str, int, str]] = [(root, path, 1, "")]
    while stack:
        node, where, depth, owner = stack.pop()
        subschemas += 1
        if subschemas > lim.max_subschemas:
            raise _violation(where, f"more than max_subschemas={lim.max_subschemas} subschemas")
        if depth > lim.max_depth:
            raise _violation(where, f"nesting deeper than max_depth={lim.max_depth}")
        if isinstance(node, bool):
            continue  # `true` / `false` schemas (e.g. additionalProperties)
        if not isinstance(node, Mapping):
            raise _violation(where, f"a subschema must be an object, got {type(node).__name__}")
        sub = cast(Mapping[Any, Any], node)
        for key in sub:
            if not isinstance(key, str):
                raise _violation(where, "keys must be strings")
            if key not in SUPPORTED_KEYWORDS:
                raise _violation(
                    _join(where, key),
                    f"keyword {key!r} is not supported (supported: "
                    f"{', '.join(sorted(SUPPORTED_KEYWORDS))})",
                )
        if "$defs" in sub and where != path:
            raise _violation(_join(where, "$defs"), "$defs is allowed only at the root")
        for key, value in sub.items():
            kpath = _join(where, key)
            if key == "type":
                kinds: list[Any] = (
                    list(cast(Sequence[Any], value)) if isinstance(value, list) else [value]
                )
                non_null = [k for k in kinds if k != "null"]
                if not kinds or len(non_null) > 1:
                    raise _violation(kpath, "one type (optionally with 'null'); use anyOf")
                for kind in kinds:
                    if kind not in SUPPORTED_TYPES:
                        raise _violation(kpath, f"type {kind!r} is not supported")
            elif key == "properties":
                if not isinstance(value, Mapping):
                    raise _violation(kpath, "properties must be an object")
                props = cast(Mapping[Any, Any], value)
                if len(props) > lim.max_properties:
                    raise _violation(
                        kpath,
                        f"{len(props)} properties, more than max_properties={lim.max_properties}",
                    )
                total_props += len(props)
                if total_props > lim.max_total_properties:
                    raise _violation(
                        kpath,
                        f"more than max_total_properties={lim.max_total_properties} in all",
                    )
                for name, prop in props.items():
                    if not isinstance(name, str) or not name:
                        raise _violation(kpath, "property names must be non-empty strings")
                    _check_text(name, kpath, lim)
                    stack.append((prop, _join(kpath, name), depth + 1, owner))
            elif key == "$defs":
                if not isinstance(value, Mapping):
                    raise _violation(kpath, "$defs must be an object")
                for name, sub_def in cast(Mapping[Any, Any], value).items():
                    if not isinstance(name, str) or not _LOCAL_REF.match(f"#/$defs/{name}"):
                        raise _violation(kpath, f"invalid $defs name {name!r}")
                    stack.append((sub_def, _join(kpath, name), depth + 1, name))
            elif key == "items" or key == "additionalProperties":
                if key == "additionalProperties" and isinstance(value, bool):
                    continue
                stack.append((value, kpath, depth + 1, owner))
            elif key == "anyOf":
                if not isinstance(value, list) or not value:
                    raise _violation(kpath, "anyOf must be a non-empty list")
                if len(cast(list[Any], value)) > lim.max_union:
                    raise _violation(
                        kpath,
                        f"{len(cast(list[Any], value))} members, more than "
                        f"max_union={lim.max_union}",
                    )
                for i, member in enumerate(cast(list[Any], value)):
                    stack.append((member, _join(kpath, i), depth + 1, owner))
            elif key == "required":
                if not isinstance(value, list) or not all(
                    isinstance(r, str) for r in cast(list[Any], value)
                ):
                    raise _violation(kpath, "required must be a list of strings")
                for r in cast(list[str], value):
                    _check_text(r, kpath, lim)
            elif key == "$ref":
                if not isinstance(value, str):
                    raise _violation(kpath, "$ref must be a string")
                _check_text(value, kpath, lim)
                match = _LOCAL_REF.match(value)
                if match is None:
                    raise _violation(
                        kpath,
                        f"$ref {value!r} refused: only local '#/$defs/<name>' references are "
                        "allowed (no remote or file references)",
                    )
                if match.group(1) not in defs:
                    raise _violation(kpath, f"$ref {value!r} names no entry of $defs")
                refs.append((owner, match.group(1), kpath, depth))
            elif key in _TEXT_KEYWORDS:
                if not isinstance(value, str):
                    raise _violation(kpath, f"{key} must be a string")
                _check_text(value, kpath, lim)
            elif key in _NUMBER_KEYWORDS:
                if isinstance(value, bool) or not isinstance(value, int | float):
                    raise _violation(kpath, f"{key} must be a number")
            elif key in _COUNT_KEYWORDS:
                if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                    raise _violation(kpath, f"{key} must be a non-negative integer")
            elif key in _DATA_KEYWORDS:
                if key == "enum":
                    if not isinstance(value, list) or not value:
                        raise _violation(kpath, "enum must be a non-empty list")
                    if len(cast(list[Any], value)) > lim.max_enum:
                        raise _violation(kpath, f"more than max_enum={lim.max_enum} values")
                    for i, member in enumerate(cast(list[Any], value)):
                        _check_literal(member, _join(kpath, i))
                elif key == "const":
                    _check_literal(value, kpath)
                _check_data(value, kpath, lim)
        if owner:
            heights[owner] = max(heights.get(owner, 1), depth - 1)
    _check_ref_cycles([(o, t, w) for o, t, w, _ in refs])
    _check_ref_depth(refs, heights, lim)


def _check_literal(value: Any, path: str) -> None:
    """A `const` or `enum` value becomes a `Literal` member: it must be a JSON scalar."""
    if value is not None and not isinstance(value, str | bool | int | float):
        raise _violation(path, "const and enum values must be strings, numbers, booleans or null")


def _check_ref_depth(
    refs: list[tuple[str, str, str, int]], heights: dict[str, int], lim: SchemaLimits
) -> None:
    """Refuse nesting past `max_depth` reached through `$ref` (a `$ref` counts as the schema it
    names). `heights[d]` is the depth of definition `d` on its own (its body is depth 1);
    computed iteratively, in dependency order (cycles were refused before)."""
    inside: dict[str, list[tuple[str, int]]] = {}
    for owner, target, _where, depth in refs:
        if owner:
            inside.setdefault(owner, []).append((target, depth - 1))
    total: dict[str, int] = {}

    def height(start: str) -> int:
        stack = [start]
        while stack:
            name = stack[-1]
            if name in total:
                stack.pop()
                continue
            pending = [t for t, _ in inside.get(name, []) if t not in total]
            if pending:
                stack.extend(pending)
                continue
            total[name] = max(
                [heights.get(name, 1)] + [d + total[t] - 1 for t, d in inside.get(name, [])]
            )
            stack.pop()
        return total[start]

    for owner, target, where, depth in refs:
        if owner:
            continue
        reached = depth + height(target) - 1
        if reached > lim.max_depth:
            raise _violation(
                where.removesuffix('["$ref"]') + '["$ref"]',
                f"nesting through $ref '#/$defs/{target}' reaches depth {reached}, deeper "
                f"than max_depth={lim.max_depth}",
            )


def _check_ref_cycles(refs: list[tuple[str, str, str]]) -> None:
    """Refuse a `$ref` that leads back to the definition it sits in (a recursive schema)."""
    edges: dict[str, list[tuple[str, str]]] = {}
    for owner, target, where in refs:
        edges.setdefault(owner, []).append((target, where))
    for start in edges:
        if not start:
            continue
        stack = [start]
        seen: set[str] = set()
        while stack:
            current = stack.pop()
            for target, where in edges.get(current, []):
                if target == start:
                    raise _violation(where, f"recursive $ref to {target!r} is not supported")
                if target not in seen:
                    seen.add(target)
                    stack.append(target)


_SCALARS: dict[str, Any] = {
    "string": str,
    "number": float,
    "integer": int,
    "boolean": bool,
    "null": type(None),
}


def _safe_field_name(name: str, taken: set[str]) -> str:
    ok = (
        _IDENT.match(name) is not None
        and not keyword.iskeyword(name)
        and not name.startswith("_")
        and not hasattr(BaseModel, name)
    )
    candidate = name if ok else "field_" + re.sub(r"\W", "_", name)
    while candidate in taken or hasattr(BaseModel, candidate):
        candidate += "_"
    taken.add(candidate)
    return candidate


class _Builder:
    """Builds Python types from a checked schema (recursion is bounded by `max_depth`)."""

    def __init__(self, root: Mapping[str, Any], name: str) -> None:
        defs = root.get("$defs", {})
        empty: dict[str, Any] = {}
        self.defs: Mapping[str, Any] = (
            cast(Mapping[str, Any], defs) if isinstance(defs, Mapping) else empty
        )
        self.built: dict[str, Any] = {}
        self.name = name

    def build(self, schema: Any, name: str) -> Any:
        if isinstance(schema, bool):
            return Any
        sub = cast(Mapping[str, Any], schema)
        if "$ref" in sub:
            target = str(sub["$ref"]).rsplit("/", 1)[-1]
            if target not in self.built:
                self.built[target] = self.build(self.defs[target], target)
            return self.built[target]
        if "const" in sub:
            return Literal[sub["const"]]  # type: ignore[valid-type]
        if "enum" in sub:
            values = tuple(cast(list[Any], sub["enum"]))
            return Literal[values]  # type: ignore[valid-type]
        if "anyOf" in sub:
            # built in one step (repeated `|` is quadratic in the member count); the `const`
            # members become one `Literal`
            consts: list[Any] = []
            members: list[Any] = []
            for i, member in enumerate(cast(list[Any], sub["anyOf"])):
                if isinstance(member, Mapping) and set(cast(Mapping[str, Any], member)) == {
                    "const"
                }:
                    consts.append(cast(Mapping[str, Any], member)["const"])
                else:
                    members.append(self.build(member, f"{name}_{i}"))
            if consts:
                members.insert(0, Literal[tuple(consts)])  # type: ignore[valid-type]
            return members[0] if len(members) == 1 else Union[tuple(members)]  # noqa: UP007
        kind = sub.get("type")
        nullable = False
        if isinstance(kind, list):
            kinds = cast(list[str], kind)
            nullable = "null" in kinds
            rest = [k for k in kinds if k != "null"]
            kind = rest[0] if rest else "null"
        if kind is None:
            kind = "object" if "properties" in sub else None
        out: Any
        if kind is None:
            out = Any
        elif kind == "array":
            item = self.build(sub["items"], f"{name}_item") if "items" in sub else Any
            out = list[item]
        elif kind == "object":
            out = self._object(sub, name)
        else:
            out = _SCALARS[str(kind)]
        return out | None if nullable else out

    def _object(self, sub: Mapping[str, Any], name: str) -> Any:
        props = cast(Mapping[str, Any], sub.get("properties", {}))
        if not props:
            return dict[str, Any]
        required = set(cast(list[str], sub.get("required", [])))
        taken: set[str] = set()
        fields: dict[str, Any] = {}
        for prop_name, prop in props.items():
            field_name = _safe_field_name(prop_name, taken)
            annotation = self.build(prop, f"{name}_{field_name}")
            no_map: dict[str, Any] = {}
            prop_map: Mapping[str, Any] = (
                cast(Mapping[str, Any], prop) if isinstance(prop, Mapping) else no_map
            )
            extra: dict[str, Any] = {}
            if "description" in prop_map:
                extra["description"] = prop_map["description"]
            if field_name != prop_name:
                extra["alias"] = prop_name
            if prop_name in required:
                fields[field_name] = (annotation, Field(**extra))
            else:
                fields[field_name] = (
                    annotation | None,
                    Field(default=prop_map.get("default"), **extra),
                )
        title = sub.get("title")
        model_name = str(title) if isinstance(title, str) and _IDENT.match(title) else name
        forbid = sub.get("additionalProperties") is False
        config = ConfigDict(extra="forbid" if forbid else "ignore", populate_by_name=True)
        model: type[BaseModel] = create_model(model_name, __config__=config, **fields)
        if isinstance(sub.get("description"), str):
            model.__doc__ = str(sub["description"])
        return model


def schema_to_type(
    schema: Mapping[str, Any], *, name: str = "Output", limits: SchemaLimits | None = None
) -> Any:
    """The Python type an output schema describes: a Pydantic model for an object schema.

    The schema is checked first (`check_schema`), so this never builds from an unchecked
    schema. Mapping: `object` with `properties` -> a model named by its `title` (or `name`),
    required properties required, the others optional with their `default` (else None),
    `additionalProperties: false` -> extra keys forbidden; `string`/`number`/`integer`/
    `boolean`/`null` -> `str`/`float`/`int`/`bool`/`None`; `array` -> `list[items]`; `enum`
    and `const` -> `Literal`; `anyOf` -> a union; `$ref` -> the built `$defs` entry. A property
    whose name is not a usable identifier gets a field name with that name as its alias.

    Raises:
        SpecError: the schema is over the limits or uses something unsupported (with its path).
    """
    check_schema(schema, limits=limits)
    return _Builder(schema, name).build(schema, name)


def _not_blank(value: str) -> str:
    if not value.strip():
        raise ValueError("must not be blank (whitespace only)")
    return value


_Name = Annotated[str, Field(min_length=1, pattern=r"\S"), AfterValidator(_not_blank)]
_Seconds = Annotated[float, Field(gt=0, le=600, allow_inf_nan=False)]


class ToolSpec(BaseModel):
    """A reference to a registered tool, resolved by name against a `ToolRegistry` at spawn."""

    model_config = _CONFIG

    name: _Name
    """The tool's registered name."""
    description: str = ""
    """What the tool does (for the planner and for discovery; the registered tool's own
    description is what the agent sees)."""


class GeneratedToolSpec(BaseModel):
    """A tool whose implementation comes with the spec; it runs only inside a sandbox.

    The implementation is the body of a function of one argument, `args` (a dict matching
    `parameters`), returning a JSON-serializable value. Its imports must be in
    `allowed_imports` (empty: none at all); `dependencies` are refused unless the sandbox has
    an allowlist naming them (`BubblewrapSandbox` has none: a spec with dependencies is
    refused at spawn).
    """

    model_config = _CONFIG

    name: _Name
    """The tool's name, as the agent calls it."""
    description: str = ""
    """What the tool does (shown to the agent)."""
    parameters: dict[str, Any] = Field(default_factory=dict[str, Any])
    """Parameter name -> JSON Schema of that parameter (checked like an `output_schema`)."""
    implementation: str = Field(min_length=1)
    """The function body (Python source); `args` holds the call's arguments."""
    allowed_imports: frozenset[str] = frozenset()
    """Top-level module names the body may import; empty refuses every import."""
    dependencies: tuple[str, ...] = ()
    """Package specifiers the body needs; refused unless the sandbox allowlists them."""
    timeout_s: _Seconds = 5.0
    """Wall and CPU limit of one call, in seconds (at most 600)."""
    memory_mb: int = Field(default=128, ge=16, le=4096)
    """Address-space limit of one call, in MiB."""

    @field_validator("parameters")
    @classmethod
    def _check_parameters(cls, value: dict[str, Any]) -> dict[str, Any]:
        if value:
            check_schema({"type": "object", "properties": value}, path="$.parameters")
        return value

    def parameters_schema(self) -> dict[str, Any]:
        """The JSON Schema of the `args` object: every parameter, all required."""
        return {
            "type": "object",
            "properties": dict(self.parameters),
            "required": list(self.parameters),
            "additionalProperties": False,
        }


LEGACY_AGENT_FIELDS: frozenset[str] = frozenset({"model", "instructions", "name", "output"})
"""The fields of the old inline agent (before the docs' `AgentSpec`)."""

_LEGACY_OUTPUTS: dict[str, dict[str, Any]] = {
    "text": {"type": "string"},
    "route": {"type": "string", "description": "the name of the route to take"},
    "eval": {
        "type": "object",
        "properties": {
            "passed": {"type": "boolean"},
            "feedback": {"type": "string"},
            "score": {"type": "number"},
        },
        "required": ["passed"],
    },
}
_NEW_ONLY = frozenset({"system_prompt", "output_schema", "output_type", "tools", "constraints"})


def convert_legacy_agent_spec(data: Mapping[str, Any]) -> dict[str, Any] | None:
    """The docs' `AgentSpec` fields for an old-shape inline agent, or None if `data` is not one.

    Old shape: only keys of `LEGACY_AGENT_FIELDS`, no output declaration (a new-shape spec
    always has `output_schema` or `output_type`), and `instructions` or `output` (the keys
    only the old shape has) or no `name` (which only the old shape may omit). So
    `{"model": "m"}` is old (a string output), while `{"name": "c"}` or
    `{"name": "c", "model": "m"}` is a new-shape spec declaring no output, refused. Conversion: `instructions` -> `system_prompt`;
    `name` kept (None or missing -> `"inline_agent"`); `model` kept; `output` -> an
    `output_schema`: `"text"` and `"route"` a string, `"eval"` an object with `passed`
    (boolean, required), `feedback` (string) and `score` (number), the runtime `EvalResult`.
    """
    keys = set(data)
    if not keys <= LEGACY_AGENT_FIELDS or keys & _NEW_ONLY:
        return None
    if not keys & {"instructions", "output"} and data.get("name") is not None:
        return None  # a named spec without them is a new-shape spec missing its output
    output = data.get("output", "text")
    if not isinstance(output, str) or output not in _LEGACY_OUTPUTS:
        return None
    name = data.get("name")
    out: dict[str, Any] = {
        "name": name if isinstance(name, str) and name.strip() else "inline_agent",
        "system_prompt": data.get("instructions", ""),
        "output_schema": json.loads(json.dumps(_LEGACY_OUTPUTS[output])),
    }
    if "model" in data:
        out["model"] = data["model"]
    return out


def _check_tool_names(names: Sequence[object]) -> None:
    """Refuse two tools of one name (the later would silently replace the earlier at spawn)."""
    first: dict[str, int] = {}
    for i, name in enumerate(names):
        if not isinstance(name, str):
            continue
        if name in first:
            earlier = f"$.tools[{first[name]}]"
            raise SpecError(
                f"duplicate tool name {name!r} at {earlier} and $.tools[{i}]",
                [(f"$.tools[{i}].name", f"duplicate tool name {name!r}, also at {earlier}")],
            )
        first[name] = i


def _limits_from(info: ValidationInfo) -> SchemaLimits | None:
    context = info.context
    if isinstance(context, Mapping):
        limits = cast(Mapping[str, Any], context).get(SCHEMA_LIMITS_CONTEXT_KEY)
        if isinstance(limits, SchemaLimits):
            return limits
    return None


class AgentSpec(BaseModel):
    """One agent as data: what a planner emits, the roster persists and the IR inlines.

    Exactly one of `output_schema` and `output_type` must be set. `model` None means the
    spawning factory's `default_model` (the docs give `"openai:gpt-4.1"` as that default).
    `constraints` are appended to the system prompt in their own block at spawn
    (`core.autonomy.AgentFactory`), so they survive edits of the prompt.
    """

    model_config = _CONFIG

    name: _Name
    """Unique name of the agent: its roster key in memory and its name in traces."""
    system_prompt: str = ""
    """The agent's role and instructions."""
    output_schema: dict[str, Any] | None = None
    """JSON Schema of the structured output (checked against `SchemaLimits`, then built into a
    Pydantic model at spawn). A non-object schema (e.g. `{"type": "string"}`) gives that type."""
    output_type: SkipJsonSchema[type[BaseModel] | None] = Field(default=None, exclude=True)
    """A Pydantic class for the output; accepted only in code (not in JSON, not in the IR)."""
    tools: list[ToolSpec | GeneratedToolSpec] = Field(
        default_factory=list[ToolSpec | GeneratedToolSpec]
    )
    """Tools by name (`ToolSpec`, resolved in the registry) or generated (`GeneratedToolSpec`,
    built by the factory's `tool_factory`), dispatched by structure. Names are unique: a
    second tool of one name is refused (naming both paths), never a silent replacement."""
    model: _Name | None = None
    """`"provider:model"`, or None for the factory's default model."""
    constraints: list[str] = Field(default_factory=list[str])
    """Free-text rules appended to the system prompt in a separate block."""

    @model_validator(mode="before")
    @classmethod
    def _legacy(cls, data: Any) -> Any:
        if isinstance(data, Mapping):
            converted = convert_legacy_agent_spec(cast(Mapping[str, Any], data))
            if converted is not None:
                warnings.warn(
                    "the old inline agent shape (model, instructions, name, output) is "
                    "deprecated: use AgentSpec(name=..., system_prompt=..., output_schema=..., "
                    "model=...); this one was converted",
                    DeprecationWarning,
                    stacklevel=2,
                )
                return converted
        return cast(Any, data)

    @field_validator("output_schema", mode="before")
    @classmethod
    def _check_output_schema(cls, value: Any, info: ValidationInfo) -> Any:
        if value is not None:
            check_schema(value, limits=_limits_from(info), path="$.output_schema")
        return value

    @field_validator("tools")
    @classmethod
    def _unique_tool_names(
        cls, value: list[ToolSpec | GeneratedToolSpec]
    ) -> list[ToolSpec | GeneratedToolSpec]:
        _check_tool_names([t.name for t in value])
        return value

    @field_validator("output_type", mode="before")
    @classmethod
    def _output_type_in_code_only(cls, value: Any) -> Any:
        if value is not None and not (isinstance(value, type) and issubclass(value, BaseModel)):
            raise ValueError(
                "output_type must be a Pydantic model class and is accepted only in code; "
                "in JSON or the IR declare the output with output_schema"
            )
        return value

    @model_validator(mode="after")
    def _exactly_one_output(self) -> AgentSpec:
        if (self.output_schema is None) == (self.output_type is None):
            raise ValueError(
                "an AgentSpec needs exactly one of output_schema and output_type"
                + (" (both given)" if self.output_schema is not None else " (neither given)")
            )
        return self

    @model_serializer(mode="wrap")
    def _serialize(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        """Write the wire form: an `output_type` becomes its JSON Schema as `output_schema`."""
        data: dict[str, Any] = handler(self)
        if self.output_type is not None:
            data["output_schema"] = self.output_type.model_json_schema()
        return data

    def output_spec(self) -> Any:
        """The output type this spec declares: `output_type`, or the type `output_schema`
        describes (`schema_to_type`, a fresh class each call)."""
        if self.output_type is not None:
            return self.output_type
        assert self.output_schema is not None  # noqa: S101 (the validator guarantees it)
        return schema_to_type(self.output_schema, name=_model_name(self.name))


def _model_name(name: str) -> str:
    parts = re.split(r"[\W_]+", name)
    out = "".join(p[:1].upper() + p[1:] for p in parts if p) or "Output"
    return out + "Output" if _IDENT.match(out) else "Output"


def parse_agent_spec(
    data: Mapping[str, Any] | str | bytes, *, limits: SchemaLimits | None = None
) -> AgentSpec:
    """Parse an untrusted agent spec (a mapping or JSON text), checking its schemas first.

    Args:
        data: the spec, decoded or as JSON text.
        limits: the schema limits; default `SchemaLimits()`.

    Raises:
        SpecError: the JSON is invalid, a schema is over the limits (path relative to the
            spec, e.g. `$.output_schema.properties`), `output_type` is given, or the spec is
            otherwise invalid (one `(path, message)` per problem).
    """
    from pydantic import ValidationError

    raw: Any = data
    if isinstance(data, str | bytes):
        try:
            raw = json.loads(data)
        except (ValueError, RecursionError) as exc:
            raise SpecError(f"agent spec is not valid JSON: {exc}") from None
    if not isinstance(raw, Mapping):
        raise SpecError(f"an agent spec must be a JSON object, got {type(raw).__name__}")
    mapping = cast(Mapping[str, Any], raw)
    if "output_type" in mapping:
        raise SpecError(
            "output_type is accepted only in code; a spec from JSON declares output_schema",
            [("$.output_type", "not allowed outside code")],
        )
    if "output_schema" in mapping and mapping["output_schema"] is not None:
        check_schema(mapping["output_schema"], limits=limits, path="$.output_schema")
    raw_tools: Any = mapping.get("tools", [])
    if isinstance(raw_tools, list):
        _check_tool_names(
            [
                cast(Mapping[str, Any], t).get("name") if isinstance(t, Mapping) else None
                for t in cast(list[Any], raw_tools)
            ]
        )
    for i, tool in enumerate(cast(Sequence[Any], mapping.get("tools", []) or [])):
        if isinstance(tool, Mapping) and "parameters" in tool:
            params: Any = cast(Mapping[str, Any], tool)["parameters"]
            if isinstance(params, Mapping):
                params = cast(Mapping[str, Any], params)
                check_schema(
                    {"type": "object", "properties": params},
                    limits=limits,
                    path=f"$.tools[{i}].parameters",
                )
    try:
        return AgentSpec.model_validate(mapping, context={SCHEMA_LIMITS_CONTEXT_KEY: limits})
    except ValidationError as exc:
        errors = [("$" + "".join(_join("", p) for p in e["loc"]), e["msg"]) for e in exc.errors()]
        raise SpecError(f"invalid agent spec: {exc}", errors) from None
