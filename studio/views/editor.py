"""The topology editor's view data and edits: a node tree, per-node forms, pure structural edits.

Every function is pure: a spec (and form values) in, a new spec or view data out; nothing here
calls Streamlit. Edits go through `core.ir` (`replace_at`, `remove_at`, model validation), so an
edit that would break a model rule raises `SpecError` and leaves the caller's spec unchanged.
After every edit the result gets ids for its new nodes (`assign_ids`), so the tree, the diff
and the graph can keep addressing nodes by id.

Paths are the IR's JSON paths (`core.ir.nodes`): `$`, `$.steps[0].operation`, `$.steps[1]`
(a parallel branch), `$.routes[0].step`, `$.fallback_step`, `$.step`.
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

__all__ = [
    "EDITABLE_FIELDS",
    "WRAP_KINDS",
    "CostEstimate",
    "TreeRow",
    "delete_node",
    "edit_node",
    "estimate_cost",
    "insert_step",
    "move_node",
    "new_atomic",
    "node_fields",
    "parent_path",
    "replace_node",
    "spec_to_text",
    "static_metrics",
    "tree_rows",
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


def _summary(node: AnyNode) -> str:
    if isinstance(node, AgentStepSpec):
        if node.agent_name is not None:
            return f"agent: {node.agent_name}"
        inline = node.inline_spec
        return f"inline agent: {inline.name or inline.model}" if inline is not None else "agent"
    if isinstance(node, FunctionStepSpec):
        return f"fn: {node.callable_name}"
    if isinstance(node, PipelineSpec):
        return f"{node.name}: {len(node.steps)} steps"
    if isinstance(node, ParallelSpec):
        return f"{node.name}: {len(node.steps)} branches, merge {node.merge}"
    if isinstance(node, RouterSpec):
        clf = node.classifier
        who = "conditions" if clf is None else (clf if isinstance(clf, str) else clf.model)
        return f"{node.name}: {len(node.routes)} routes by {who}"
    ev = node.evaluator
    return f"{node.name}: up to {node.max_iterations}x, evaluator {ev if isinstance(ev, str) else ev.model}"


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


def validate_text(
    text: str, limits: SpecLimits | None = None
) -> tuple[TopologySpec | None, list[tuple[str, str]]]:
    """Parse the JSON tab's text.

    Returns:
        `(spec, [])` when valid, else `(None, errors)` with one `(json path, message)` per
        problem (a JSON syntax error points at `$` with its line and column).
    """
    try:
        data = json.loads(text)
    except ValueError as exc:
        return None, [("$", f"not JSON: {exc}")]
    try:
        return parse_topology(data, limits), []
    except SpecError as exc:
        return None, list(exc.errors) or [("$", str(exc))]


@dataclass(frozen=True, slots=True)
class CostEstimate:
    """A static estimate of a topology's model cost per example, from a price table.

    Attributes:
        usd_per_example: the estimate (NaN when a model has no price).
        calls: agent calls counted, per model name.
        unpriced: agents or models with no price (sorted).
        assumptions: the rule, in words, for the page.
    """

    usd_per_example: float
    calls: dict[str, float]
    unpriced: tuple[str, ...]
    assumptions: str


def _model_of(ref: str | AgentSpec, prices: Mapping[str, ModelPrice]) -> str:
    """The price-table model name of an agent reference: an inline agent's model, or the one
    table entry named `<provider>:<ref>` (how replay agents are priced), else the name itself."""
    if isinstance(ref, AgentSpec):
        return ref.model
    if ref in prices:
        return ref
    matches = [m for m in prices if m.split(":", 1)[-1] == ref]
    return matches[0] if len(matches) == 1 else ref


def estimate_cost(
    spec: AnyNode,
    prices: Mapping[str, ModelPrice],
    *,
    input_tokens: int = 200,
    output_tokens: int = 300,
    agent_names: Sequence[str] | None = None,
) -> CostEstimate:
    """An upper-bound cost per example: every agent call once, at the table's prices.

    Rule: a pipeline and a parallel run all their steps; a router runs its most expensive route
    (or the fallback) plus its classifier; a refinement loop runs its step and evaluator
    `max_iterations` times. Each agent call is priced at `input_tokens` in and `output_tokens`
    out with the price of its model (`_model_of`). String classifiers and evaluators count as
    agents only when named in `agent_names` (when given).

    Args:
        spec: the topology.
        prices: model name -> `ModelPrice` (a problem's `prices`).
        input_tokens: assumed prompt tokens per call.
        output_tokens: assumed completion tokens per call.
        agent_names: the registered agent names, if known.
    """
    unpriced: set[str] = set()

    def call(ref: str | AgentSpec) -> tuple[float, dict[str, float]]:
        model = _model_of(ref, prices)
        price = prices.get(model)
        if price is None:
            unpriced.add(model)
            return math.nan, {model: 1.0}
        usd = (
            input_tokens * price.input_usd_per_1k + output_tokens * price.output_usd_per_1k
        ) / 1000
        return usd, {model: 1.0}

    def is_agent(ref: str | AgentSpec | None) -> bool:
        if ref is None:
            return False
        return isinstance(ref, AgentSpec) or agent_names is None or ref in agent_names

    def add(a: dict[str, float], b: dict[str, float], k: float = 1.0) -> dict[str, float]:
        out = dict(a)
        for m, n in b.items():
            out[m] = out.get(m, 0.0) + n * k
        return out

    def cost(node: AnyNode) -> tuple[float, dict[str, float]]:
        if isinstance(node, AgentStepSpec):
            ref: str | AgentSpec = (
                node.agent_name if node.agent_name is not None else node.inline_spec
            )  # type: ignore[assignment]
            return call(ref)
        if isinstance(node, FunctionStepSpec):
            return 0.0, {}
        if isinstance(node, PipelineSpec | ParallelSpec):
            total, calls = 0.0, {}
            for _, child in child_slots(node):
                c, n = cost(child)
                total += c
                calls = add(calls, n)
            return total, calls
        if isinstance(node, RouterSpec):
            best = (0.0, {})
            for _, child in child_slots(node):
                c, n = cost(child)
                if math.isnan(c) or c >= best[0]:
                    best = (c, n)
            total, calls = best
            if is_agent(node.classifier):
                c, n = call(node.classifier)  # type: ignore[arg-type]
                total += c
                calls = add(calls, n)
            return total, calls
        assert isinstance(node, RefinementLoopSpec)
        c, n = cost(node.step)
        total, calls = c, dict(n)
        if is_agent(node.evaluator):
            ce, ne = call(node.evaluator)
            total += ce
            calls = add(calls, ne)
        return total * node.max_iterations, {m: k * node.max_iterations for m, k in calls.items()}

    usd, calls = cost(spec)
    return CostEstimate(
        usd_per_example=math.nan if unpriced else usd,
        calls=dict(sorted(calls.items())),
        unpriced=tuple(sorted(unpriced)),
        assumptions=(
            f"upper bound: every agent call once ({input_tokens} tokens in, {output_tokens} out), "
            "a router's dearest route, loops to max_iterations"
        ),
    )


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
