"""The diff-and-apply view: the structural change table, two coloured graphs, the JSON diff."""

from __future__ import annotations

from dataclasses import dataclass
from typing import cast

import pandas as pd

from core.ir import TopologySpec, assign_ids, to_dot
from core.ir.diff import diff_highlight, structural_diff, unified_json_diff

__all__ = ["CHANGE_COLUMNS", "DiffView", "diff_view"]

CHANGE_COLUMNS: tuple[str, ...] = (
    "change",
    "node_id",
    "kind",
    "path_before",
    "path_after",
    "fields_changed",
)
"""Columns of the structural change table."""


@dataclass(frozen=True, slots=True)
class DiffView:
    """Everything the diff page draws for one `before -> after` change.

    Attributes:
        changes: one row per added / removed / changed node (`CHANGE_COLUMNS`).
        before_dot: the current topology's graph, removed nodes red and changed ones orange
            ("" when there is no current topology).
        after_dot: the proposed topology's graph, added nodes green and changed ones orange.
        unified: the unified diff of the two JSON texts ("" when equal).
        changed: whether anything differs.
        counts: `{"added": n, "removed": n, "changed": n}`.
    """

    changes: pd.DataFrame
    before_dot: str
    after_dot: str
    unified: str
    changed: bool
    counts: dict[str, int]


def diff_view(
    before: TopologySpec | None,
    after: TopologySpec,
    *,
    before_label: str = "current",
    after_label: str = "proposed",
) -> DiffView:
    """Diff two topologies for display (both drawn with ids assigned so colours match).

    Args:
        before: the target's current topology, or None for a new target.
        after: the proposed topology.
        before_label: the graph title and `---` label of the current one.
        after_label: the graph title and `+++` label of the proposed one.
    """
    b = cast(TopologySpec, assign_ids(before)) if before is not None else None
    a = cast(TopologySpec, assign_ids(after))
    changes = structural_diff(b, a)
    colours_b, colours_a = diff_highlight(changes)
    table = pd.DataFrame(
        [
            {
                "change": c.change,
                "node_id": c.node_id,
                "kind": c.kind,
                "path_before": c.path_before or "",
                "path_after": c.path_after or "",
                "fields_changed": ", ".join(c.fields_changed),
            }
            for c in changes
        ],
        columns=list(CHANGE_COLUMNS),
    )
    unified = unified_json_diff(before, after, fromfile=before_label, tofile=after_label)
    counts = {k: sum(1 for c in changes if c.change == k) for k in ("added", "removed", "changed")}
    return DiffView(
        changes=table,
        before_dot=to_dot(b, highlight=colours_b, title=before_label) if b is not None else "",
        after_dot=to_dot(a, highlight=colours_a, title=after_label),
        unified=unified,
        changed=bool(unified) or bool(changes),
        counts=counts,
    )
