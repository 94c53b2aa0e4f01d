"""The topology editor's view data and edits: a node tree, per-node forms, pure structural edits.

Every function is pure: a spec (and form values) in, a new spec or view data out; nothing here
calls Streamlit. Edits go through `core.ir` (`replace_at`, `remove_at`, model validation), so an
edit that would break a model rule raises `SpecError` and leaves the caller's spec unchanged.
After every edit the result gets ids for its new nodes (`assign_ids`), so the tree, the diff
and the graph can keep addressing nodes by id.

Paths are the IR's JSON paths (`core.ir.nodes`): `$`, `$.steps[0].operation`, `$.steps[1]`
(a parallel branch), `$.routes[0].step`, `$.fallback_step`, `$.step`.

The cost figures the editor shows (static estimate, measured cost, accuracy interval) are in
`studio.views.editor_cost`, re-exported here.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from core.errors import SpecError
from core.evaluation.pricing import ModelPrice
from core.hydrate import AgentRegistry, CallableRegistry, validate_names
from core.ir import (
    AgentSpec,
    AgentStepSpec,
    AnyNode,
    FunctionStepSpec,
    ParallelSpec,
    PipelineSpec,
    RefinementLoopSpec,
    RouterSpec,
    SpecLimits,
    TopologySpec,
    assign_ids,
    iter_nodes,
    node_at,
    parse_operation,
    parse_topology,
    remove_at,
    replace_at,
    spec_metrics,
)
from core.ir.models import child_slots
from studio.views.editor_cost import (
    CostEstimate,
    MeasuredCost,
    accuracy_interval,
    calls_per_request,
    estimate_cost,
    measured_cost,
)

__all__ = [
    "EDITABLE_FIELDS",
    "WRAP_KINDS",
    "CostEstimate",
    "MeasuredCost",
    "TreeRow",
    "accuracy_interval",
    "calls_per_request",
    "compact_value",
    "delete_node",
    "edit_node",
    "estimate_cost",
    "follow_selection",
    "node_label",
    "insert_step",
    "measured_cost",
    "move_node",
    "new_atomic",
    "node_fields",
    "parent_path",
    "replace_node",
    "spec_to_text",
    "static_metrics",
    "tree_rows",
    "unknown_name_errors",
    "validate_text",
    "wrap_node",
]

WRAP_KINDS: tuple[str, ...] = ("pipeline", "parallel", "refinement_loop")
"""What a node can be wrapped in (a router needs route names and a classifier: build it in the
JSON tab)."""

EDITABLE_FIELDS: dict[str, tuple[str, ...]] = {
    "agent_step": ("id", "agent_name"),
    "function_step": ("id", "callable_name", "name"),
    "pipeline": ("id", "name"),
    "parallel": ("id", "name", "merge", "timeout"),
    "router": ("id", "name", "classifier"),
    "refinement_loop": (
        "id",
        "name",
        "evaluator",
        "state_updater_name",
        "max_iterations",
        "timeout",
        "confidence_threshold",
        "keep_best",
    ),
}
"""The scalar fields the node form edits, per kind (children are edited through the tree)."""

_SLOT = re.compile(
    r"^(?P<parent>\$.*?)(?:\.steps\[(?P<i>\d+)\](?P<op>\.operation)?|\.routes\[(?P<r>\d+)\]\.step"
    r"|\.fallback_step|\.step)$"
)


@dataclass(frozen=True, slots=True)
class TreeRow:
    """One line of the node tree.

    Attributes:
        path: the node's JSON path.
        depth: its nesting level (root 0), for indentation.
        kind: its kind.
        node_id: its id, if any.
        label: one line for people, e.g. `"agent_step [solve] agent: 6b_finetuning"`.
        slot: where it sits in its parent, e.g. `"step 2"`, `"route 'long'"`, `"fallback"`.
    """

    path: str
    depth: int
    kind: str
    node_id: str | None
    label: str
    slot: str


def _plural(n: int, word: str) -> str:
    """`"1 step"`, `"2 steps"`, `"1 branch"`, `"3 branches"`."""
    if n == 1:
        return f"{n} {word}"
    return f"{n} {word}es" if word.endswith(("ch", "sh", "s", "x")) else f"{n} {word}s"


def _summary(node: AnyNode) -> str:
    if isinstance(node, AgentStepSpec):
        if node.agent_name is not None:
            return f"agent: {node.agent_name}"
        inline = node.inline_spec
        return f"inline agent: {inline.name}" if inline is not None else "agent"
    if isinstance(node, FunctionStepSpec):
        return f"fn: {node.callable_name}"
    if isinstance(node, PipelineSpec):
        return f"{node.name}: {_plural(len(node.steps), 'step')}"
    if isinstance(node, ParallelSpec):
        return f"{node.name}: {_plural(len(node.steps), 'branch')}, merge {node.merge}"
    if isinstance(node, RouterSpec):
        clf = node.classifier
        who = "conditions" if clf is None else (clf if isinstance(clf, str) else clf.name)
        return f"{node.name}: {_plural(len(node.routes), 'route')} by {who}"
    ev = node.evaluator
    return f"{node.name}: up to {node.max_iterations}x, evaluator {ev if isinstance(ev, str) else ev.name}"


def _slot_name(parent: AnyNode, suffix: str) -> str:
    m = re.match(r"\.steps\[(\d+)\]", suffix)
    if m is not None:
        return f"{'step' if isinstance(parent, PipelineSpec) else 'branch'} {int(m.group(1)) + 1}"
    m = re.match(r"\.routes\[(\d+)\]", suffix)
    if m is not None and isinstance(parent, RouterSpec):
        return f"route {parent.routes[int(m.group(1))].name!r}"
    if suffix == ".fallback_step":
        return "fallback"
    return "body"


def tree_rows(spec: AnyNode) -> list[TreeRow]:
    """The spec's nodes in document order (pre-order), with depth and a label each."""
    rows: list[TreeRow] = []
    stack: list[tuple[str, AnyNode, int, str]] = [("$", spec, 0, "root")]
    while stack:
        path, node, depth, slot = stack.pop()
        head = node.node_kind if node.id is None else f"{node.node_kind} [{node.id}]"
        rows.append(
            TreeRow(path, depth, node.node_kind, node.id, f"{head}  {_summary(node)}", slot)
        )
        for suffix, child in reversed(child_slots(node)):
            stack.append((path + suffix, child, depth + 1, _slot_name(node, suffix)))
    return rows


def parent_path(path: str) -> str | None:
    """The JSON path of the node's parent node (None for the root)."""
    if path == "$":
        return None
    m = _SLOT.match(path)
    return None if m is None else m.group("parent")


def _finish(spec: AnyNode) -> TopologySpec:
    """Give new nodes ids and check the result is still a whole topology."""
    out = assign_ids(spec)
    if not isinstance(out, PipelineSpec | ParallelSpec | RouterSpec | RefinementLoopSpec):
        raise SpecError(
            "a topology's root must be a composite (pipeline, parallel, router or loop)",
            [("$", "the root of a topology must be a composite")],
        )
    return out


def new_atomic(kind: str, name: str, *, node_id: str | None = None) -> AnyNode:
    """A new atomic node: `agent_step` naming agent `name`, or `function_step` calling `name`.

    Raises:
        SpecError: an unknown kind or an empty name.
    """
    data: dict[str, Any] = {"kind": kind, "id": node_id or None}
    if kind == "agent_step":
        data["agent_name"] = name
    elif kind == "function_step":
        data["callable_name"] = name
    else:
        raise SpecError(f"new steps are agent_step or function_step, not {kind!r}")
    return parse_operation({k: v for k, v in data.items() if v is not None})


def insert_step(
    spec: TopologySpec, path: str, node: AnyNode, *, where: str = "after"
) -> TopologySpec:
    """Insert `node` next to the node at `path`, or inside it.

    Args:
        spec: the topology.
        path: the reference node.
        node: the node to insert (e.g. from `new_atomic`).
        where: `"before"` / `"after"` the reference node (its parent must be a pipeline or a
            parallel), or `"inside"`: appended as the last step of the reference node (a pipeline
            or a parallel).

    Raises:
        SpecError: the position cannot take a step, or the result breaks a model rule.
    """
    if where == "inside":
        target = node_at(spec, path)
        if isinstance(target, PipelineSpec):
            entry = {"operation": node}
            steps = [*target.steps, entry]
            return _finish(replace_at(spec, path, _rebuild(target, steps=steps)))
        if isinstance(target, ParallelSpec):
            return _finish(replace_at(spec, path, _rebuild(target, steps=[*target.steps, node])))
        raise SpecError(
            f"cannot insert inside a {target.node_kind}: pick a pipeline or a parallel",
            [(path, f"a {target.node_kind} has no list of steps")],
        )
    if where not in ("before", "after"):
        raise SpecError(f"where must be before, after or inside, not {where!r}")
    parent_p = parent_path(path)
    if parent_p is None:
        raise SpecError(
            "the root has no siblings: insert inside it, or wrap it first",
            [(path, "the root has no parent")],
        )
    parent = node_at(spec, parent_p)
    index = _index_in(path)
    if index is None or not isinstance(parent, PipelineSpec | ParallelSpec):
        raise SpecError(
            f"a step can be inserted only next to a step of a pipeline or parallel (this node "
            f"sits in a {parent.node_kind})",
            [(path, "not in a list of steps")],
        )
    at = index if where == "before" else index + 1
    if isinstance(parent, PipelineSpec):
        steps: list[Any] = list(parent.steps)
        steps.insert(at, {"operation": node})
    else:
        steps = list(parent.steps)
        steps.insert(at, node)
    return _finish(replace_at(spec, parent_p, _rebuild(parent, steps=steps)))


def _index_in(path: str) -> int | None:
    m = _SLOT.match(path)
    if m is None or m.group("i") is None:
        return None
    return int(m.group("i"))


def _rebuild(node: AnyNode, **updates: Any) -> AnyNode:
    """`node` with `updates`, validated again (raises `SpecError` with the model's message)."""
    data = node.model_dump(mode="json", exclude_unset=True)
    for key, value in updates.items():
        data[key] = value
    data["kind"] = node.node_kind
    return parse_operation(_plain(data), SpecLimits(max_depth=64, max_nodes=100_000))


def _plain(value: Any) -> Any:
    """Models to JSON-like data (so a mixed list of dicts and models validates)."""
    if isinstance(value, list):
        return [_plain(v) for v in value]
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    dump = getattr(value, "model_dump", None)
    if callable(dump):
        return dump(mode="json")
    return value


def wrap_node(
    spec: TopologySpec,
    path: str,
    kind: str,
    *,
    evaluator: str = "",
    state_updater: str = "",
) -> TopologySpec:
    """Wrap the node at `path` in a new composite of `kind` (see `WRAP_KINDS`).

    A pipeline or parallel gets the node as its one step; a refinement loop needs the
    `evaluator` and `state_updater` names.

    Raises:
        SpecError: an unknown kind, missing loop names, or the result breaks a rule.
    """
    node = node_at(spec, path)
    if kind == "pipeline":
        wrapper: AnyNode = PipelineSpec.model_validate({"steps": [{"operation": node}]})
    elif kind == "parallel":
        wrapper = ParallelSpec.model_validate({"steps": [node]})
    elif kind == "refinement_loop":
        if not evaluator.strip() or not state_updater.strip():
            raise SpecError(
                "a refinement loop needs an evaluator and a state updater name",
                [(path, "evaluator and state_updater_name are required")],
            )
        wrapper = RefinementLoopSpec.model_validate(
            {
                "step": node,
                "evaluator": evaluator.strip(),
                "state_updater_name": state_updater.strip(),
            }
        )
    else:
        raise SpecError(f"cannot wrap in {kind!r}; choose one of {', '.join(WRAP_KINDS)}")
    return _finish(replace_at(spec, path, wrapper))


def replace_node(spec: TopologySpec, path: str, node: AnyNode) -> TopologySpec:
    """The spec with the node at `path` replaced by `node` (ids assigned to new nodes).

    Raises:
        SpecError: no such node, or the result breaks a rule (e.g. an atomic root).
    """
    return _finish(replace_at(spec, path, node))


def delete_node(spec: TopologySpec, path: str) -> TopologySpec:
    """The spec without the node at `path` (see `core.ir.remove_at` for what can go).

    Raises:
        SpecError: the root, a loop's step, the last step of a list, or a rule broken.
    """
    return _finish(remove_at(spec, path))


def move_node(spec: TopologySpec, path: str, delta: int) -> TopologySpec:
    """Move a pipeline step, parallel branch or route `delta` places (-1 up, +1 down).

    Moving past either end leaves the spec unchanged.

    Raises:
        SpecError: the node is not in a list (the root, a fallback, a loop's step).
    """
    parent_p = parent_path(path)
    m = _SLOT.match(path)
    if parent_p is None or m is None:
        raise SpecError("the root cannot be moved", [(path, "the root has no siblings")])
    parent = node_at(spec, parent_p)
    if m.group("i") is not None and isinstance(parent, PipelineSpec | ParallelSpec):
        items: list[Any] = list(parent.steps)
        field = "steps"
        i = int(m.group("i"))
    elif m.group("r") is not None and isinstance(parent, RouterSpec):
        items = list(parent.routes)
        field = "routes"
        i = int(m.group("r"))
    else:
        raise SpecError(
            "only pipeline steps, parallel branches and routes can be reordered",
            [(path, "not in an ordered list")],
        )
    j = i + delta
    if j < 0 or j >= len(items):
        return spec
    items[i], items[j] = items[j], items[i]
    return _finish(replace_at(spec, parent_p, _rebuild(parent, **{field: items})))


def node_fields(node: AnyNode) -> dict[str, Any]:
    """The node's editable scalar fields (`EDITABLE_FIELDS`) and their current values.

    Classifiers and evaluators that are inline agents show as their JSON text.
    """
    out: dict[str, Any] = {}
    for name in EDITABLE_FIELDS[node.node_kind]:
        value = getattr(node, name, None)
        if isinstance(value, AgentSpec):
            value = value.model_dump_json()
        out[name] = value
    return out


def _coerce(name: str, value: Any) -> Any:
    if isinstance(value, str):
        text = value.strip()
        if text == "" and name in ("id", "name", "timeout", "confidence_threshold", "classifier"):
            return None
        if name in ("classifier", "evaluator") and text.startswith("{"):
            try:
                return json.loads(text)
            except ValueError as exc:
                raise SpecError(f"{name}: not JSON: {exc}", [(f"$.{name}", str(exc))]) from exc
        return text
    if isinstance(value, float) and name in ("timeout", "confidence_threshold") and value <= 0:
        return None
    return value


def edit_node(spec: TopologySpec, path: str, values: Mapping[str, Any]) -> TopologySpec:
    """The spec with the node at `path` given new scalar field values (a form's submission).

    Blank optional fields (`id`, `name`, timeouts, thresholds, classifier) mean "unset"; a
    `name` left blank falls back to the kind's default.

    Raises:
        SpecError: an unknown field for the kind, or a value that breaks a rule; `.errors` has
            one `(json path, message)` per problem, the path pointing into the whole spec.
    """
    node = node_at(spec, path)
    allowed = set(EDITABLE_FIELDS[node.node_kind])
    unknown = sorted(set(values) - allowed)
    if unknown:
        raise SpecError(f"{node.node_kind} has no editable field(s) {unknown}")
    data = node.model_dump(mode="json", exclude_none=True)
    for name, value in values.items():
        v = _coerce(name, value)
        if v is None:
            data.pop(name, None)
        else:
            data[name] = v
    try:
        new = parse_operation(data, SpecLimits(max_depth=64, max_nodes=100_000))
    except SpecError as exc:
        raise SpecError(str(exc), [(_join(path, p), m) for p, m in exc.errors]) from None
    return _finish(replace_at(spec, path, new))


def _join(base: str, rel: str) -> str:
    return base + rel[1:] if rel.startswith("$") else f"{base} {rel}"


def spec_to_text(spec: TopologySpec) -> str:
    """The spec as the JSON tab shows it: indented, `None` fields left out, ids kept."""
    return json.dumps(spec.model_dump(mode="json", exclude_none=True), indent=2) + "\n"


def unknown_name_errors(
    spec: AnyNode, *, callable_registry: CallableRegistry, agent_registry: AgentRegistry
) -> list[tuple[str, str]]:
    """Every name in `spec` the problem's registries do not know, as `(json path, message)`.

    The same check hydration makes before building (`core.hydrate.validate_names`, F4), so a
    topology the editor calls valid is one `topology_from_spec` accepts by name.

    Returns:
        One pair per unknown name in document order, e.g.
        `("$.steps[0].operation.agent_name", "unknown agent 'gpt-17'; registered: a, b")`;
        empty when every name resolves.
    """
    known = {
        "agent": agent_registry.names(),
        "callable": callable_registry.names(),
        "agent_or_callable": [*agent_registry.names(), *callable_registry.names()],
    }
    out: list[tuple[str, str]] = []
    for path, kind, name in validate_names(
        spec, callable_registry=callable_registry, agent_registry=agent_registry
    ):
        names = sorted(known.get(kind, callable_registry.names()))
        what = kind.replace("_", " ")
        out.append((path, f"unknown {what} {name!r}; registered: {', '.join(names) or '(none)'}"))
    return out


def validate_text(
    text: str,
    limits: SpecLimits | None = None,
    *,
    callable_registry: CallableRegistry | None = None,
    agent_registry: AgentRegistry | None = None,
) -> tuple[TopologySpec | None, list[tuple[str, str]]]:
    """Parse the JSON tab's text and, given the problem's registries, check every name.

    Args:
        text: the JSON text.
        limits: the spec limits (the IR's defaults when None).
        callable_registry: the problem's functions; with `agent_registry`, unknown names are
            errors too (`unknown_name_errors`).
        agent_registry: the problem's agents.

    Returns:
        `(spec, [])` when valid, else `(None, errors)` with one `(json path, message)` per
        problem (a JSON syntax error points at `$` with its line and column).
    """
    try:
        data = json.loads(text)
    except ValueError as exc:
        return None, [("$", f"not JSON: {exc}")]
    try:
        spec = parse_topology(data, limits)
    except SpecError as exc:
        return None, list(exc.errors) or [("$", str(exc))]
    if callable_registry is not None and agent_registry is not None:
        unknown = unknown_name_errors(
            spec, callable_registry=callable_registry, agent_registry=agent_registry
        )
        if unknown:
            return None, unknown
    return spec, []


def compact_value(name: str, value: Any) -> str:
    """A metric short enough for a narrow tile: `$0.812`, `$12.3`, `5.4 s`, `55.0%`, `0.458`.

    Costs keep three significant digits (`$0.00798`), latencies over a second are seconds with
    one decimal (`5,420 ms` -> `5.4 s`), shares are percentages with one decimal.
    """
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "-"
    if isinstance(value, bool) or not isinstance(value, int | float):
        return str(value)
    v = float(value)
    if "usd" in name:
        if v == 0:
            return "$0"
        if abs(v) >= 100:
            return f"${v:,.0f}"
        if abs(v) < 1e-6:
            return "<$0.000001" if v > 0 else "-<$0.000001"
        decimals = min(6, max(0, 2 - math.floor(math.log10(abs(v)))))
        return f"${v:.{decimals}f}"
    if name in ("accuracy", "error_rate", "blank_rate"):
        return f"{v:.1%}"
    if name.endswith("_ms"):
        return f"{v:,.0f} ms" if abs(v) < 1000 else f"{v / 1000:,.1f} s"
    if isinstance(value, float) and not v.is_integer():
        return f"{v:.3f}"
    return f"{int(v)}"


def static_metrics(
    spec: AnyNode,
    prices: Mapping[str, ModelPrice] | None = None,
    *,
    agent_names: Sequence[str] | None = None,
) -> dict[str, Any]:
    """What the editor shows beside the graph: `n_agents`, `depth`, `n_nodes` and, with a price
    table, `est_cost_usd` (see `estimate_cost`, NaN if a model is unpriced)."""
    m = spec_metrics(spec, agent_names=agent_names)
    out: dict[str, Any] = {"n_agents": m.n_agents, "depth": m.depth, "n_nodes": m.n_nodes}
    if prices is not None:
        out["est_cost_usd"] = estimate_cost(spec, prices, agent_names=agent_names).usd_per_example
    return out


def node_paths(spec: AnyNode) -> list[str]:
    """Every node's path, in document order."""
    return [p for p, _ in iter_nodes(spec)]


def node_label(spec: AnyNode, path: str) -> str:
    """A node named for a message: its kind and id, e.g. `"agent_step [b]"` (the path alone
    does not say which node an edit touched once paths shift)."""
    try:
        node = node_at(spec, path)
    except SpecError:
        return path
    return node.node_kind if node.id is None else f"{node.node_kind} [{node.id}]"


def follow_selection(before: AnyNode, after: AnyNode, path: str, action: str) -> str:
    """Where the editor's selection goes after an edit of the node at `path`.

    The selection follows the node by id, not by path or by its tree label (both change under
    an edit; a selection kept by label fell back to the root after a rename, so the next action
    hit the root):

    - `edit`, `move`: the same node (the id typed in the form, if the edit changed it);
    - `insert`, `replace`, `wrap`: the node the edit made (the one new id);
    - `delete`: the deleted node's parent.

    Returns:
        A path in `after`; the nearest existing ancestor of `path` when nothing matches, `$` at
        worst.
    """
    ids_before = {n.id: p for p, n in iter_nodes(before) if n.id is not None}
    ids_after = {n.id: p for p, n in iter_nodes(after) if n.id is not None}
    paths_after = set(ids_after.values()) | {p for p, _ in iter_nodes(after)}
    try:
        old = node_at(before, path)
    except SpecError:
        old = None
    if action in ("insert", "replace", "wrap"):
        fresh = [p for i, p in ids_after.items() if i not in ids_before]
        if fresh:
            return min(fresh, key=len) if action == "wrap" else fresh[0]
    elif action == "delete":
        parent = parent_path(path)
        pnode = node_at(before, parent) if parent is not None else None
        if pnode is not None and pnode.id in ids_after:
            return ids_after[pnode.id]
        path = parent or "$"
    elif old is not None and old.id in ids_after:
        return ids_after[old.id]
    probe: str | None = path
    while probe is not None:
        if probe in paths_after:
            return probe
        probe = parent_path(probe)
    return "$"
