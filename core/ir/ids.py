"""Deterministic node ids, so diffs and traces can match nodes by id.

`assign_ids(spec)` gives every node without an `id` one of the form `<kind>_<n>`
(`pipeline_1`, `agent_step_2`, ...), numbered per kind from 1 in document order (pre-order),
skipping ids the spec already uses. Nodes that have an id keep it. The same spec always gets the
same ids; ids never change the spec's canonical hash.
"""

from __future__ import annotations

from core.ir.models import AnyNode, child_slots, walk
from core.ir.nodes import with_children

__all__ = ["assign_ids"]


def assign_ids(spec: AnyNode) -> AnyNode:
    """A copy of `spec` where every node has an id (existing ids kept). Pure.

    Returns the same object when every node already has an id. The result has the input's kind
    (a topology stays a topology).
    """
    order = list(walk(spec))
    used = {node.id for _, node in order if node.id is not None}
    if len(used) == len(order):
        return spec
    counters: dict[str, int] = {}
    new_ids: dict[str, str] = {}
    for path, node in order:
        if node.id is not None:
            continue
        kind = node.node_kind
        n = counters.get(kind, 0)
        while True:
            n += 1
            candidate = f"{kind}_{n}"
            if candidate not in used:
                break
        counters[kind] = n
        used.add(candidate)
        new_ids[path] = candidate
    # rebuild bottom-up: reverse pre-order visits every child before its parent
    rebuilt: dict[str, AnyNode] = {}
    for path, node in reversed(order):
        children = [rebuilt[path + suffix] for suffix, _ in child_slots(node)]
        new = with_children(node, children) if children else node
        if path in new_ids:
            new = new.model_copy(update={"id": new_ids[path]})
        rebuilt[path] = new
    return rebuilt["$"]
