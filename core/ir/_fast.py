"""The fast path's validators: the IR models' own core schema, rewritten so that
pydantic-core itself enforces the depth limit, with the models' Python checks made core rules or
done once around it.

`parse_topology` used to bound a text with a Python scan (`_bound.within_limits`, about a third
of validating a 31-node spec) and then ran the models' full validation, whose Python validators
(the unique-id check at every composite above all) cost as much again as pydantic-core's own work.
Here the same models are validated by a schema derived from theirs, one per `max_depth` (and
root: a topology or any node), that accepts a text only if the models accept it with the same
result (what is checked around it included, below):

- depth: the node union is unrolled into one copy per remaining level, and the copy at level 0
  holds only the atomic kinds, so a composite one past `max_depth` fails validation (a depth
  limit of pydantic-core's own, costing nothing per node); every node is an instance of its
  public class, as the models build it;
- ids: the composites' unique-id checks (Python, one per composite, each over the ids below
  it) are left out; instead every node's `id`, when it has one, is noted in the validation
  context (`IDS_MARK`, one Python call per id, none for a spec without ids) and the caller
  refuses the result if a noted id repeats: a topology's ids are unique iff every composite's
  subtree has unique ids, since the root's subtree holds them all;
- agent steps: "exactly one of agent_name and inline_spec" (a Python validator on every agent
  step) is a left-to-right union of two forms of the step, tried in order: `agent_name`
  required and `inline_spec` only ever null, then `inline_spec` required and `agent_name` only
  ever null (core rules); the second form's `id` is not noted, because it is tried only after
  the first has validated (and noted) the same `id`;
- classifiers and evaluators: `AgentSpec | name` is tried name first (a string is never an
  `AgentSpec`), so a name does not run `AgentSpec`'s Python before-validator;
- names: a name's `_not_blank` check (a Python call for each of a 31-node spec's 47 names) is
  the Rust regex `NOT_BLANK_PATTERN`, which matches exactly the strings `str.strip()` leaves
  non-empty, in place of the `\\S` pattern it implies.

What this schema does not enforce is checked around it (`core.ir.limits._validate_fast`): the
unique ids (`IDS_MARK`), the node count (a text too short to hold more nodes than the limit, else
its `"kind"` tokens), and, for a spec holding an inline `AgentSpec` (marked in the
validation context when one is validated), the container nesting, by `_bound.within_limits`.
Without an `AgentSpec` the nesting of a valid spec follows from its depth (at most 3 containers a
composite level and 1 for the leaf: `3 * depth + 1 <= json_nesting_cap(depth)`).

Any text this schema refuses takes the full path, which gives every error as before.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from functools import cache
from typing import Any, cast

from pydantic import TypeAdapter, ValidationInfo
from pydantic_core import SchemaValidator

from core.ir.agent_spec import AgentSpec
from core.ir.models import (
    ATOMIC_KINDS,
    COMPOSITE_KINDS,
    KINDS,
    NODE_TYPES,
    OperationSpec,
    PipelineStepEntry,
    RouterSpec,
    RouteSpec,
    StepConfigSpec,
    check_router_rules,
    ir_agent,
)

__all__ = ["AGENT_MARK", "IDS_MARK", "fast_validator"]

AGENT_MARK = "core.ir.fast.agent_seen"
"""Validation-context key set when the fast schema validates an inline `AgentSpec`."""
IDS_MARK = "core.ir.fast.ids"
"""Validation-context key: the list of the node ids the fast schema validated, in order."""

NODE_HELPER_TYPES = (*NODE_TYPES, PipelineStepEntry, RouteSpec, StepConfigSpec)
"""The classes the fast schema builds instances of with its own rules (`_build`)."""

_OP = "__ir_op__"  # placeholder ref for the node union inside a composite
_ID_CHECKS = frozenset(
    {"PipelineSpec._ids", "ParallelSpec._ids", "RefinementLoopSpec._ids", "RouterSpec._rules"}
)

Schema = dict[str, Any]


def _ir_agent_marked(spec: AgentSpec, info: ValidationInfo) -> AgentSpec:
    """`ir_agent`, and a mark in the validation context that an `AgentSpec` was validated."""
    spec = ir_agent(spec)
    context = info.context
    if isinstance(context, dict):
        cast(dict[str, Any], context)[AGENT_MARK] = True
    return spec


def _note_id(value: str, info: ValidationInfo) -> str:
    """A node id, noted in the validation context's `IDS_MARK` list (the caller checks them for
    repeats). Without a context dict the ids could not be checked, so the id is refused (the
    caller then takes the full path)."""
    context = info.context
    if not isinstance(context, dict):
        raise ValueError("node ids are checked only with a validation context")
    ids = cast(dict[str, Any], context).get(IDS_MARK)
    if ids is None:
        cast(dict[str, Any], context)[IDS_MARK] = [value]
    else:
        cast(list[str], ids).append(value)
    return value


NOT_BLANK_PATTERN = r"[^\s\x1c-\x1f]"
"""A character `str.strip()` keeps, as pydantic-core's Rust regex spells it: Python's
whitespace is the Unicode `White_Space` property (the regex's `\\s`) and U+001C..U+001F, so a
string matches iff `value.strip()` is not empty, which is the names' `_not_blank` check
(checked over every code point by the tests)."""
_NAME = "core.ir.fast.name"  # metadata key marking a name's schema (`_name_schema`)


def _name_schema(string: Schema, ref: str | None) -> Schema:
    """A name's `str` schema with its `_not_blank` check as `NOT_BLANK_PATTERN` (in place of
    the `\\S` pattern, which the check implies): the same strings, no Python call."""
    metadata = {**cast(Schema, string.get("metadata") or {}), _NAME: True}
    out: Schema = {**string, "pattern": NOT_BLANK_PATTERN, "metadata": metadata}
    if ref is not None:
        out["ref"] = ref
    return out


def _is_name(schema: Schema) -> bool:
    return bool(cast(Schema, schema.get("metadata") or {}).get(_NAME))


def _router_rules(spec: RouterSpec) -> RouterSpec:
    """`RouterSpec`'s rules without the unique-id check (ids are checked through `IDS_MARK`)."""
    check_router_rules(spec)
    return spec


def _qualname(schema: Schema) -> str:
    function = cast(dict[str, Any], schema.get("function") or {}).get("function")
    return getattr(function, "__qualname__", "")


def _flatten(schema: Any, defs: dict[str, Schema]) -> Any:
    """A copy of `schema` with every inline definition (`ref`) moved into `defs` and referred to,
    and the node union (all six kinds) replaced by a reference to `_OP`."""
    if isinstance(schema, list):
        return [_flatten(item, defs) for item in cast(list[Any], schema)]
    if not isinstance(schema, dict):
        return schema
    source = cast(Schema, schema)
    kind = source.get("type")
    if kind == "definitions":
        for definition in cast(list[Schema], source["definitions"]):
            _flatten(definition, defs)
        return _flatten(source["schema"], defs)
    if kind == "tagged-union" and set(cast(Schema, source["choices"])) == set(KINDS):
        defs.setdefault(_OP, {k: v for k, v in source.items() if k != "choices"})
        return {"type": "definition-ref", "schema_ref": _OP}
    out: Schema = {key: _flatten(value, defs) for key, value in source.items()}
    ref = out.get("ref")
    if isinstance(ref, str) and kind != "definition-ref":
        defs[ref] = out
        return {"type": "definition-ref", "schema_ref": ref}
    return out


def _refs(schema: Any) -> set[str]:
    """The definitions `schema` refers to (directly)."""
    found: set[str] = set()
    stack: list[Any] = [schema]
    while stack:
        current = stack.pop()
        if isinstance(current, list):
            stack.extend(cast(list[Any], current))
        elif isinstance(current, dict):
            source = cast(Schema, current)
            if source.get("type") == "definition-ref":
                found.add(cast(str, source["schema_ref"]))
            else:
                stack.extend(source.values())
    return found


def _rewrite(schema: Any, edit: Callable[[Schema], Schema | None]) -> Any:
    """A copy of `schema` where `edit` may replace any dict (bottom-up)."""
    if isinstance(schema, list):
        return [_rewrite(item, edit) for item in cast(list[Any], schema)]
    if not isinstance(schema, dict):
        return schema
    out: Schema = {key: _rewrite(value, edit) for key, value in cast(Schema, schema).items()}
    replaced = edit(out)
    return out if replaced is None else replaced


def _edit() -> Callable[[Schema], Schema | None]:
    def edit(schema: Schema) -> Schema | None:
        kind = schema.get("type")
        if kind == "union":
            return _name_first(schema)
        if kind == "model" and schema.get("cls") in NODE_TYPES:
            return _id_noted(schema)
        if kind == "function-after":
            name = _qualname(schema)
            inner = cast(Schema, schema["schema"])
            if name.endswith("_not_blank") and inner.get("type") == "str":
                return _name_schema(inner, schema.get("ref"))
            if name == "_ir_agent":
                schema["function"] = {"type": "with-info", "function": _ir_agent_marked}
                return schema
            if name in _ID_CHECKS:
                if name == "RouterSpec._rules":
                    schema["function"] = {"type": "no-info", "function": _router_rules}
                    return schema
                return {**inner, "ref": schema["ref"]} if "ref" in schema else inner
            if name == "AgentStepSpec._exactly_one":
                return _exactly_one(inner, schema.get("ref"))
        return None

    return edit


def _name_first(union: Schema) -> Schema | None:
    """A classifier's or evaluator's `AgentSpec | name` union tried name first, left to right: a
    string is never an `AgentSpec` nor an object a name, so the result is the same, and a name
    no longer runs `AgentSpec`'s Python before-validator first."""
    choices = cast(list[Any], union["choices"])
    if len(choices) != 2 or not all(isinstance(c, dict) for c in choices):
        return None
    agent, name = cast(list[Schema], choices)
    if not (_qualname(agent) == "_ir_agent_marked" and _is_name(name)):
        return None
    return {**union, "choices": [name, agent], "mode": "left_to_right"}


def _id_noted(model: Schema) -> Schema:
    """A node's model schema with its `id` (`Name | None`, a `_name_schema`) noted by
    `_note_id`."""
    fields = cast(Schema, cast(Schema, model["schema"])["fields"])
    default = cast(Schema, cast(Schema, fields["id"])["schema"])
    nullable = cast(Schema, default["schema"])
    name = cast(Schema, nullable["schema"])
    assert (default["type"], nullable["type"], _is_name(name)) == ("default", "nullable", True)
    nullable["schema"] = {
        "type": "function-after",
        "function": {"type": "with-info", "function": _note_id},
        "schema": name,
    }
    return model


def _exactly_one(model: Schema, ref: str | None) -> Schema:
    """`AgentStepSpec`'s model schema (its `id` noted) with "exactly one of agent_name and
    inline_spec" as core rules: the union of the step with `agent_name` (and `inline_spec` only
    ever null) and, tried only when that fails, the step with `inline_spec` (and `agent_name`
    only ever null), whose `id` the first already noted."""
    fields = cast(Schema, cast(Schema, model["schema"])["fields"])

    def form(required: str, null: str, id_field: Schema) -> Schema:
        present = cast(Schema, fields[required])
        nullable = cast(Schema, cast(Schema, present["schema"])["schema"])
        assert nullable["type"] == "nullable", present
        absent = cast(Schema, fields[null])
        return {
            **model,
            "schema": {
                **cast(Schema, model["schema"]),
                "fields": {
                    **fields,
                    "id": id_field,
                    required: {**present, "schema": nullable["schema"]},
                    null: {
                        **absent,
                        "schema": {"type": "default", "default": None, "schema": {"type": "none"}},
                    },
                },
            },
        }

    noted = cast(Schema, fields["id"])
    default = cast(Schema, noted["schema"])
    nullable = cast(Schema, default["schema"])
    after = cast(Schema, nullable["schema"])
    assert _qualname(after) == "_note_id", noted
    unnoted = {**noted, "schema": {**default, "schema": {**nullable, "schema": after["schema"]}}}
    union: Schema = {
        "type": "union",
        "mode": "left_to_right",
        "choices": [
            form("agent_name", "inline_spec", noted),
            form("inline_spec", "agent_name", unnoted),
        ],
    }
    if ref is not None:
        union["ref"] = ref
    return union


@cache
def _flat() -> tuple[dict[str, Schema], dict[str, str]]:
    """The node union's definitions, flattened, and each kind's definition ref."""
    adapter: TypeAdapter[OperationSpec] = TypeAdapter(OperationSpec)
    defs: dict[str, Schema] = {}
    root = _flatten(adapter.core_schema, defs)
    assert root == {"type": "definition-ref", "schema_ref": _OP}, root
    kinds: dict[str, str] = {}
    for kind in KINDS:
        choice = cast(Schema, cast(Schema, adapter.core_schema)["schema"])["choices"][kind]
        kinds[kind] = cast(str, choice["schema_ref"])
    return defs, kinds


def _level_dependent(defs: dict[str, Schema]) -> set[str]:
    """The definitions that reach the node union (composites and their entry/route objects)."""
    direct = {ref: _refs(schema) for ref, schema in defs.items()}
    found = {_OP}
    changed = True
    while changed:
        changed = False
        for ref, targets in direct.items():
            if ref not in found and targets & found:
                found.add(ref)
                changed = True
    found.discard(_OP)
    return found


@cache
def fast_validator(max_depth: int, *, topology: bool) -> Any:
    """The fast schema's `SchemaValidator` (see the module docstring), cached per shape."""
    defs, kinds = _flat()
    edited = {ref: _rewrite(schema, _edit()) for ref, schema in defs.items()}
    union = edited.pop(_OP)
    dependent = _level_dependent(defs)

    def at_level(schema: Any, level: int) -> Any:
        def rename(node: Schema) -> Schema | None:
            if node.get("type") == "definition-ref":
                target = cast(str, node["schema_ref"])
                if target == _OP:
                    return {"type": "definition-ref", "schema_ref": f"{_OP}@{level - 1}"}
                if target in dependent:
                    return {"type": "definition-ref", "schema_ref": f"{target}@{level}"}
            return None

        return _rewrite(schema, rename)

    definitions: list[Schema] = [schema for ref, schema in edited.items() if ref not in dependent]
    for level in range(1, max_depth + 1):
        for ref in dependent:
            copy = cast(Schema, at_level(edited[ref], level))
            copy["ref"] = f"{ref}@{level}"
            definitions.append(copy)
    for level in range(max_depth + 1):
        choices: dict[str, Any] = {
            kind: {"type": "definition-ref", "schema_ref": kinds[kind]} for kind in ATOMIC_KINDS
        }
        if level >= 1:
            for kind in COMPOSITE_KINDS:
                choices[kind] = {"type": "definition-ref", "schema_ref": f"{kinds[kind]}@{level}"}
        definitions.append({**union, "choices": choices, "ref": f"{_OP}@{level}"})
    if topology:
        root: Schema = {
            **union,
            "choices": {
                kind: {"type": "definition-ref", "schema_ref": f"{kinds[kind]}@{max_depth}"}
                for kind in COMPOSITE_KINDS
            },
        }
    else:
        root = {"type": "definition-ref", "schema_ref": f"{_OP}@{max_depth}"}
    return _build(cast(Any, {"type": "definitions", "schema": root, "definitions": definitions}))


def _build(schema: Any) -> SchemaValidator:
    """`SchemaValidator(schema)` built from the schema itself.

    pydantic-core reuses a complete model class's own `__pydantic_validator__` for any `model`
    schema naming that class (its "prebuilt" validators), which would put back every rule left
    out here and lift the depth limit; so the node classes are marked incomplete while it builds
    (and only then: the flag is read at build time).
    """
    with _BUILD_LOCK:  # two builds at once (studio threads): the second would see the flags
        # already cleared, restore nothing, and could build (and cache) the models' own rules
        classes = [c for c in NODE_HELPER_TYPES if c.__dict__.get("__pydantic_complete__")]
        for cls in classes:
            type.__setattr__(cls, "__pydantic_complete__", False)
        try:
            return SchemaValidator(schema)
        finally:
            for cls in classes:
                type.__setattr__(cls, "__pydantic_complete__", True)


_BUILD_LOCK = threading.Lock()
"""Serialises `_build`: its flag toggling is process-wide state."""
