"""Node addressing: iterate nodes with their JSON paths, and pure edits by path.

A node's path is the JSON path of its object in the spec's JSON, starting at `$`:
`$.steps[0].operation` (a pipeline step), `$.steps[1]` (a parallel branch), `$.routes[0].step`
(a route's step), `$.fallback_step`, `$.step` (a loop's step). The editor, mutation operators,
diffs and traces address nodes this way (or by `id`, see `core.ir.assign_ids`).

Edits never mutate: they return a new spec that shares every untouched sub-tree with the old one,
and re-run the model rules on each rebuilt node (so an edit that would duplicate an id or empty a
list fails with a `SpecError`).
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

from pydantic import BaseModel, ValidationError

from core.errors import SpecError
from core.ir.models import (
    COMPOSITE_KINDS,
    AnyNode,
    ParallelSpec,
    PipelineSpec,
    RefinementLoopSpec,
    RouterSpec,
    child_slots,
    walk,
)

__all__ = ["iter_nodes", "node_at", "remove_at", "replace_at", "with_children"]

_SLOT = re.compile(
    r"^(?P<parent>\$.*?)(?:"
    r"\.steps\[(?P<pipe>\d+)\]\.operation"
    r"|\.steps\[(?P<par>\d+)\]"
    r"|\.routes\[(?P<route>\d+)\]\.step"
    r"|(?P<fallback>\.fallback_step)"
    r"|(?P<loop>\.step))$"
)


def iter_nodes(spec: AnyNode) -> Iterator[tuple[str, AnyNode]]:
    """Yield `(json_path, node)` for every node, in document order (pre-order), root `"$"`.

    Iterative, so any depth works. Example paths: `"$"`, `"$.steps[0].operation"`,
    `"$.steps[0].operation.routes[1].step"`.
    """
    return walk(spec)


def node_at(spec: AnyNode, path: str) -> AnyNode:
    """The node at `path`.

    Raises:
        SpecError: no node has that path.
    """
    for node_path, node in walk(spec):
        if node_path == path:
            return node
    raise SpecError(f"no node at {path}", [(path, "no node at this path")])


def _rebuild(model: BaseModel, updates: dict[str, Any]) -> Any:
    """`model` with `updates`, validated again (fields set stay set, nothing new is set)."""
    data = {name: getattr(model, name) for name in model.model_fields_set}
    data.update(updates)
    try:
        return type(model).model_validate(data)
    except ValidationError as exc:
        problems = [(str(e["loc"]), e["msg"].removeprefix("Value error, ")) for e in exc.errors()]
        raise SpecError(
            "edit makes the spec invalid: " + "; ".join(m for _, m in problems), problems
        ) from None


def with_children(node: AnyNode, children: list[AnyNode]) -> AnyNode:
    """`node` with its children (in `child_slots` order) replaced by `children`.

    Raises:
        SpecError: wrong number of children, or the result breaks a model rule.
    """
    slots = child_slots(node)
    if len(children) != len(slots):
        raise SpecError(f"{node.node_kind} has {len(slots)} children, got {len(children)}")
    if all(new is old for new, (_, old) in zip(children, slots, strict=True)):
        return node
    if isinstance(node, PipelineSpec):
        steps = [
            e if e.operation is c else _rebuild(e, {"operation": c})
            for e, c in zip(node.steps, children, strict=True)
        ]
        return _rebuild(node, {"steps": steps})
    if isinstance(node, ParallelSpec):
        return _rebuild(node, {"steps": list(children)})
    if isinstance(node, RouterSpec):
        routes = [
            r if r.step is c else _rebuild(r, {"step": c})
            for r, c in zip(node.routes, children[: len(node.routes)], strict=True)
        ]
        updates: dict[str, Any] = {"routes": routes}
        if node.fallback_step is not None:
            updates["fallback_step"] = children[-1]
        return _rebuild(node, updates)
    if isinstance(node, RefinementLoopSpec):
        return _rebuild(node, {"step": children[0]})
    return node  # pragma: no cover - atomic nodes have no slots


def _parent_of(path: str) -> tuple[str, re.Match[str]]:
    m = _SLOT.match(path)
    if m is None or path == "$":
        raise SpecError(f"no node at {path}", [(path, "no node at this path")])
    return m.group("parent"), m


def _replace_child(parent: AnyNode, m: re.Match[str], new: AnyNode | None, path: str) -> AnyNode:
    """`parent` with the child that `m` addresses replaced by `new` (None = removed)."""
    if m.group("pipe") is not None and isinstance(parent, PipelineSpec):
        i = int(m.group("pipe"))
        if i < len(parent.steps):
            steps = list(parent.steps)
            if new is None:
                del steps[i]
                if not steps:
                    raise SpecError(f"cannot remove {path}: a pipeline needs at least one step")
            else:
                steps[i] = _rebuild(steps[i], {"operation": new})
            return _rebuild(parent, {"steps": steps})
    elif m.group("par") is not None and isinstance(parent, ParallelSpec):
        i = int(m.group("par"))
        if i < len(parent.steps):
            branches = list(parent.steps)
            if new is None:
                del branches[i]
                if not branches:
                    raise SpecError(f"cannot remove {path}: a parallel needs at least one step")
            else:
                branches[i] = new
            return _rebuild(parent, {"steps": branches})
    elif m.group("route") is not None and isinstance(parent, RouterSpec):
        i = int(m.group("route"))
        if i < len(parent.routes):
            routes = list(parent.routes)
            if new is None:
                del routes[i]
                if not routes:
                    raise SpecError(f"cannot remove {path}: a router needs at least one route")
            else:
                routes[i] = _rebuild(routes[i], {"step": new})
            return _rebuild(parent, {"routes": routes})
    elif m.group("fallback") is not None and isinstance(parent, RouterSpec):
        if parent.fallback_step is not None:
            return _rebuild(parent, {"fallback_step": new})
    elif m.group("loop") is not None and isinstance(parent, RefinementLoopSpec):
        if new is None:
            raise SpecError(f"cannot remove {path}: a refinement loop needs its step")
        return _rebuild(parent, {"step": new})
    raise SpecError(f"no node at {path}", [(path, "no node at this path")])


def _edit(spec: AnyNode, path: str, new: AnyNode | None) -> AnyNode:
    nodes = dict(walk(spec))
    if path not in nodes:
        raise SpecError(f"no node at {path}", [(path, "no node at this path")])
    current_path = path
    current: AnyNode | None = new
    first = True
    while current_path != "$":
        parent_path, m = _parent_of(current_path)
        parent = nodes[parent_path]
        if first or current is not None:
            current = _replace_child(parent, m, current, current_path)
        first = False
        current_path = parent_path
    if current is None:  # pragma: no cover - the loop always rebuilds the root
        raise SpecError("cannot remove the root node")
    return current


def replace_at(spec: AnyNode, path: str, new_node: AnyNode) -> AnyNode:
    """A new spec with the node at `path` replaced by `new_node` (pure).

    Replacing the root (`"$"`) returns `new_node`; a composite root can only be replaced by a
    composite (a topology stays a topology).

    Raises:
        SpecError: no node at `path`, or the result breaks a model rule (e.g. a duplicate id).
    """
    if path == "$":
        if spec.node_kind in COMPOSITE_KINDS and new_node.node_kind not in COMPOSITE_KINDS:
            raise SpecError(
                f"cannot replace a topology's root with the atomic kind {new_node.node_kind!r}",
                [("$", "the root of a topology must be a composite")],
            )
        return new_node
    return _edit(spec, path, new_node)


def remove_at(spec: AnyNode, path: str) -> AnyNode:
    """A new spec without the node at `path` (pure).

    What is removed: a pipeline entry (`...steps[i].operation`, with its config), a parallel
    branch (`...steps[i]`), a whole route (`...routes[i].step`), or the fallback
    (`...fallback_step`, which becomes None).

    Raises:
        SpecError: `path` is the root or a loop's step (those cannot be removed), no node has that
            path, a list would become empty, or the result breaks a model rule (e.g. a router
            left with neither a classifier nor a condition).
    """
    if path == "$":
        raise SpecError("cannot remove the root node", [("$", "the root cannot be removed")])
    return _edit(spec, path, None)
