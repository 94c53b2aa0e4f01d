"""`TopologyDesign`, the meta agent's structured output (semantics section 8), and F2's check.

`TopologyDesign(thought, spec)` is what the designer agent returns: its reasoning, then a whole
topology. The `spec` field checks the structural limits (`SpecLimits`) on the raw data *before*
Pydantic descends into it, so a too-deep design fails with our `SpecLimitError` message (which
pydantic-ai feeds back to the model on a retry), never with a recursion message. The limits come
from the validation context key `"spec_limits"` (a `SpecLimits`), else the defaults. A spec
given as JSON text inside the object is accepted too (some models quote nested objects).

pydantic-ai validates tool-call arguments with its own JSON parser, which has a nesting limit of
its own (about 200 containers); `parse_design` parses design text with our pre-scan instead and
is the safe entry point for raw model text.

`check_output_schema(target)` (F2) runs the design's JSON schema through the JSON-schema
transformer pydantic-ai applies for a provider profile, exactly as a request would, and checks
that the result still works before any paid call: the transform finishes, every step position
still allows every kind, no `oneOf` remains when the schema is sent in strict mode, and the
provider accepts recursive schemas in that mode. Otherwise it raises `SearchError` with a clear
reason.
"""

from __future__ import annotations

import inspect
import json
from collections.abc import Mapping
from typing import Any, cast

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    TypeAdapter,
    ValidationError,
    ValidationInfo,
    field_validator,
)

from core.errors import SearchError, SpecError, SpecLimitError
from core.ir._paths import spec_error_from_validation
from core.ir._scan import normalize_raw, scan_json_text
from core.ir.limits import SpecLimits
from core.ir.models import ATOMIC_KINDS, COMPOSITE_KINDS, KINDS, TopologySpec

__all__ = [
    "SPEC_LIMITS_CONTEXT_KEY",
    "TopologyDesign",
    "check_output_schema",
    "design_output_schema",
    "parse_design",
]

SPEC_LIMITS_CONTEXT_KEY = "spec_limits"
"""Validation-context key holding the `SpecLimits` a design's spec is checked against."""


def _limits_from(info: ValidationInfo) -> SpecLimits:
    context = info.context
    if isinstance(context, Mapping):
        limits = cast(Mapping[str, Any], context).get(SPEC_LIMITS_CONTEXT_KEY)
        if isinstance(limits, SpecLimits):
            return limits
    return SpecLimits()


class TopologyDesign(BaseModel):
    """A proposed agent topology: first the reasoning behind it, then the topology itself."""

    model_config = ConfigDict(frozen=True, extra="forbid", use_attribute_docstrings=True)

    thought: str
    """Your reasoning: what the topology does and why it should beat the previous ones."""
    spec: TopologySpec = Field(
        description=(
            "The whole topology: a pipeline, parallel, router or refinement_loop whose steps may "
            "nest any kind. Use only the registered agent and function names you were given."
        )
    )

    @field_validator("spec", mode="before")
    @classmethod
    def _limits_first(cls, value: Any, info: ValidationInfo) -> Any:
        """Check the structural limits on the raw data before deep validation."""
        limits = _limits_from(info)
        if isinstance(value, str | bytes | bytearray):
            text = (
                value.decode("utf-8", "replace") if isinstance(value, bytes | bytearray) else value
            )
            scan_json_text(text, max_depth=limits.max_depth)
            try:
                value = json.loads(text)
            except ValueError as exc:
                raise SpecError(f"spec is not valid JSON: {exc}") from None
        if isinstance(value, Mapping):
            return normalize_raw(
                cast(Mapping[str, Any], value),
                max_depth=limits.max_depth,
                max_nodes=limits.max_nodes,
            )
        return value


def parse_design(
    data: str | bytes | Mapping[str, Any], limits: SpecLimits | None = None
) -> TopologyDesign:
    """Parse a design from JSON text or a mapping, with the spec limits checked first.

    Raises:
        SpecLimitError: the spec is too deep or too big (path prefixed with `$.spec`).
        SpecError: anything else, one `(json_path, message)` per problem.
    """
    lim = limits or SpecLimits()
    if isinstance(data, str | bytes | bytearray):
        try:
            text = bytes(data).decode("utf-8-sig") if not isinstance(data, str) else data
        except UnicodeDecodeError as exc:
            raise SpecError(f"invalid design: not UTF-8 text ({exc.reason})") from None
        scan_json_text(text, max_depth=lim.max_depth)
        try:
            data = json.loads(text)
        except ValueError as exc:
            raise SpecError(f"invalid JSON: {exc}", [("$", f"invalid JSON: {exc}")]) from None
    if not isinstance(data, Mapping):
        msg = f"a design must be a JSON object, got {type(data).__name__}"
        raise SpecError(f"invalid design: {msg}", [("$", msg)])
    try:
        return TopologyDesign.model_validate(data, context={SPEC_LIMITS_CONTEXT_KEY: lim})
    except ValidationError as exc:
        for err in exc.errors():
            cause = (err.get("ctx") or {}).get("error")
            if isinstance(cause, SpecLimitError):
                path = "$.spec" + cause.path[1:]
                raise SpecLimitError(
                    str(cause).replace(cause.path, path),
                    limit=cause.limit,
                    value=cause.value,
                    path=path,
                ) from None
        raise spec_error_from_validation(exc, data, what="design", topology=False) from None


# --- F2: the output schema through pydantic-ai's per-provider transformers --------------------


def design_output_schema() -> dict[str, Any]:
    """The JSON schema pydantic-ai builds for `output_type=TopologyDesign` (tool and native
    output): the model's schema from pydantic-ai's `GenerateToolJsonSchema`, description removed
    (pydantic-ai moves it into the tool description)."""
    from pydantic_ai.tools import GenerateToolJsonSchema

    schema = TypeAdapter(TopologyDesign).json_schema(schema_generator=GenerateToolJsonSchema)
    schema.pop("description", None)
    return schema


def _resolve(root: dict[str, Any], node: Any) -> Any:
    """Follow `$ref`s (`#`, `#/$defs/X`, any local JSON pointer) to the schema they name."""
    seen: set[str] = set()
    current: Any = node
    while isinstance(current, dict) and "$ref" in current:
        obj = cast(dict[str, Any], current)
        ref = obj["$ref"]
        if not isinstance(ref, str) or ref in seen or not ref.startswith("#"):
            return None
        seen.add(ref)
        target: Any = root
        for token in ref[1:].split("/")[1:]:
            token = token.replace("~1", "/").replace("~0", "~")
            if isinstance(target, dict):
                target = cast(dict[str, Any], target).get(token)
            elif isinstance(target, list) and token.isdigit():
                items = cast(list[Any], target)
                target = items[int(token)] if int(token) < len(items) else None
            else:
                return None
        siblings = {k: v for k, v in obj.items() if k != "$ref"}
        if siblings and isinstance(target, dict):
            target = {**cast(dict[str, Any], target), **siblings}
        current = target
    return cast(Any, current)


def _variants(root: dict[str, Any], node: Any) -> list[Any]:
    """The alternatives a schema node allows, with refs resolved and unions flattened.

    `null` alternatives are dropped; an empty or unresolvable alternative is kept as `{}`.
    """
    out: list[Any] = []
    stack: list[Any] = [node]
    while stack:
        current = _resolve(root, stack.pop())
        if not isinstance(current, dict):
            out.append({})
            continue
        schema = cast(dict[str, Any], current)
        union = schema.get("anyOf") or schema.get("oneOf")
        if isinstance(union, list):
            stack.extend(reversed(cast(list[Any], union)))
            continue
        all_of = schema.get("allOf")
        if isinstance(all_of, list) and len(cast(list[Any], all_of)) == 1:
            stack.append(cast(list[Any], all_of)[0])
            continue
        if schema.get("type") == "null":
            continue
        out.append(schema)
    return out


def _kind_of(variant: dict[str, Any]) -> str | None:
    props = variant.get("properties")
    if not isinstance(props, dict):
        return None
    kind = cast(dict[str, Any], props).get("kind")
    if not isinstance(kind, dict):
        return None
    kind_schema = cast(dict[str, Any], kind)
    if isinstance(kind_schema.get("const"), str):
        return cast(str, kind_schema["const"])
    enum = kind_schema.get("enum")
    if isinstance(enum, list) and len(cast(list[Any], enum)) == 1:
        value = cast(list[Any], enum)[0]
        return value if isinstance(value, str) else None
    return None


def _prop(root: dict[str, Any], schema: dict[str, Any], *names: str) -> Any:
    """Descend through `properties` / `items` (name `"[]"`), resolving refs on the way."""
    node: Any = schema
    for name in names:
        node = _resolve(root, node)
        if not isinstance(node, dict):
            return None
        typed = cast(dict[str, Any], node)
        if name == "[]":
            node = typed.get("items")
        else:
            props = typed.get("properties")
            node = cast(dict[str, Any], props).get(name) if isinstance(props, dict) else None
    return node


_STEP_POSITIONS: dict[str, list[tuple[str, ...]]] = {
    "pipeline": [("steps", "[]", "operation")],
    "parallel": [("steps", "[]")],
    "router": [("routes", "[]", "step"), ("fallback_step",)],
    "refinement_loop": [("step",)],
}


def _check_positions(root: dict[str, Any]) -> list[str]:
    """Every step position in a transformed design schema, and what is wrong with it."""
    problems: list[str] = []
    spec_node = _prop(root, root, "spec")
    todo: list[tuple[str, Any, tuple[str, ...]]] = [("spec", spec_node, COMPOSITE_KINDS)]
    seen: set[int] = set()
    while todo:
        where, node, expected = todo.pop()
        if node is None:
            problems.append(f"{where}: missing from the schema")
            continue
        variants = _variants(root, node)
        kinds: dict[str, dict[str, Any]] = {}
        for variant in variants:
            kind = _kind_of(variant)
            if kind is None:
                problems.append(
                    f"{where}: an alternative without a kind ({json.dumps(variant)[:80]})"
                )
            else:
                kinds[kind] = variant
        missing = [k for k in expected if k not in kinds]
        if missing:
            problems.append(f"{where}: no longer allows {', '.join(missing)}")
        for kind, variant in kinds.items():
            if kind in ATOMIC_KINDS or id(variant) in seen:
                continue
            seen.add(id(variant))
            for position in _STEP_POSITIONS.get(kind, []):
                label = f"{kind}." + ".".join(p for p in position if p != "[]")
                todo.append((label, _prop(root, variant, *position), KINDS))
    return problems


def _has_key(node: Any, key: str) -> bool:
    stack: list[Any] = [node]
    while stack:
        current = stack.pop()
        if isinstance(current, dict):
            obj = cast(dict[str, Any], current)
            if key in obj:
                return True
            stack.extend(obj.values())
        elif isinstance(current, list):
            stack.extend(cast(list[Any], current))
    return False


def _is_recursive(schema: dict[str, Any]) -> bool:
    """Whether a `$ref` cycle is reachable from the root."""
    children: dict[str, list[str]] = {}

    def refs(node: Any) -> list[str]:
        out: list[str] = []
        stack: list[Any] = [node]
        while stack:
            current = stack.pop()
            if isinstance(current, dict):
                obj = cast(dict[str, Any], current)
                ref = obj.get("$ref")
                if isinstance(ref, str):
                    out.append(ref)
                stack.extend(v for k, v in obj.items() if k not in ("$defs", "definitions"))
            elif isinstance(current, list):
                stack.extend(cast(list[Any], current))
        return out

    children["#"] = refs(schema)
    for group in ("$defs", "definitions"):
        defs = schema.get(group)
        if isinstance(defs, dict):
            for name, value in cast(dict[str, Any], defs).items():
                children[f"#/{group}/{name}"] = refs(value)
    # iterative DFS cycle detection (white/grey/black)
    state: dict[str, int] = {}
    for start in children:
        if state.get(start):
            continue
        stack: list[tuple[str, int]] = [(start, 0)]
        state[start] = 1
        while stack:
            ref, index = stack[-1]
            kids = children.get(ref, [])
            if index >= len(kids):
                state[ref] = 2
                stack.pop()
                continue
            stack[-1] = (ref, index + 1)
            kid = kids[index]
            if kid not in children:
                continue
            if state.get(kid) == 1:
                return True
            if not state.get(kid):
                state[kid] = 1
                stack.append((kid, 0))
    return False


def _describe(target: Any) -> str:
    if inspect.isclass(target):
        return cast(type, target).__name__
    name = getattr(target, "model_name", None)
    system = getattr(target, "system", None)
    if isinstance(name, str):
        return f"{system}:{name}" if isinstance(system, str) else name
    return "this provider profile"


def _profile_of(target: Any) -> tuple[Mapping[str, Any], type[Any] | None]:
    """(profile, transformer class) for a transformer class, a profile mapping or a model."""
    from pydantic_ai.profiles import JsonSchemaTransformer

    if inspect.isclass(target) and issubclass(target, JsonSchemaTransformer):
        return {}, cast(type[Any], target)
    if target is None:
        return {}, None
    profile: object = getattr(target, "profile", None)
    if isinstance(target, Mapping):
        profile = cast(Mapping[str, Any], target)
    if not isinstance(profile, Mapping):
        kind = type(cast(object, target)).__name__
        raise TypeError(
            "check_output_schema needs a pydantic-ai Model, a ModelProfile or a "
            f"JsonSchemaTransformer class, got {kind}"
        )
    prof = cast(Mapping[str, Any], profile)
    transformer = prof.get("json_schema_transformer")
    return prof, cast(type[Any] | None, transformer)


def check_output_schema(target: Any, *, strict: bool | None = None) -> None:
    """Check that the design schema survives `target`'s schema transform (F2), before any call.

    The schema is transformed the way pydantic-ai's `Model.customize_request_parameters` does it
    for an output tool and for a native output object (`transformer(schema, strict=...).walk()`,
    with the output-object override where a profile has one), then checked: every step position
    (the design's `spec`, pipeline entries, parallel branches, route steps, the fallback, a
    loop's step) still allows every kind (the four composites at `spec`); if the schema would be
    sent strict (`strict=True`, or `None` when the transformer reports the schema
    strict-compatible) no `oneOf` remains; a profile that rejects recursive strict schemas
    (`anthropic_enforces_strict_schema_limits`) is refused in strict mode.

    Args:
        target: a pydantic-ai `Model` (its `profile` is used), a `ModelProfile` mapping, or a
            `JsonSchemaTransformer` subclass. A profile without a transformer sends the schema
            unchanged (still checked).
        strict: the `strict` setting the designer will use for its output (pydantic-ai's
            default is None).

    Raises:
        SearchError: the designer cannot use this provider with this schema; the message names
            the provider or transformer and the reason.
        TypeError: `target` is none of the above.
    """
    from pydantic_ai.exceptions import UserError
    from pydantic_ai.profiles import JsonSchemaTransformer

    profile, transformer = _profile_of(target)
    name = _describe(target)
    schema = design_output_schema()
    transformers: list[type[Any] | None] = [transformer]
    override = getattr(transformer, "output_object_transformer", None)
    if inspect.isclass(override) and issubclass(override, JsonSchemaTransformer):
        transformers.append(cast(type[Any], override))
    for cls in transformers:
        label = name if cls is None or cls is transformer else f"{name} ({cls.__name__})"
        if cls is None:
            result, effective_strict = schema, bool(strict)
        else:
            try:
                walker = cls(schema, strict=strict)
                result = cast(dict[str, Any], walker.walk())
            except (UserError, RecursionError, ValueError, KeyError) as exc:
                raise SearchError(
                    f"{label} cannot take the meta agent's output schema (the recursive "
                    f"TopologyDesign): {exc}. Use another model or provider for the designer."
                ) from exc
            effective_strict = strict is True or (
                strict is None and bool(getattr(walker, "is_strict_compatible", False))
            )
        problems = _check_positions(result)
        if effective_strict and _has_key(result, "oneOf"):
            problems.append("`oneOf` remains, which strict mode rejects")
        if (
            effective_strict
            and profile.get("anthropic_enforces_strict_schema_limits", False)
            and _is_recursive(result)
        ):
            problems.append("the provider rejects recursive schemas in strict mode")
        if problems:
            mode = " in strict mode" if effective_strict else ""
            raise SearchError(
                f"{label} breaks the meta agent's output schema{mode}: "
                + "; ".join(problems)
                + ". Use another model or provider for the designer, or strict=False."
            )
