"""The diff-and-apply view: the structural change table, two coloured graphs, the JSON diff."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, cast

import pandas as pd

from core.ir import TopologySpec, assign_ids, to_dot
from core.ir.diff import diff_highlight, structural_diff, unified_json_diff
from core.search.registry import VersionRecord

__all__ = [
    "CHANGE_COLUMNS",
    "DiffView",
    "diff_view",
    "history_table",
    "proposal_label",
    "proposal_order",
]

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


def proposal_label(rec: Mapping[str, Any], registry_prefix: str = "") -> str:
    """One line naming a proposal (a `RunStore.list_proposals` row) for a picker, e.g.
    `"#3 solver (pending, from run 2025...-abc123 #7, by ann)"`."""
    state = rec["decision"] if isinstance(rec.get("decision"), str) else "pending"
    target = str(rec["target"]).removeprefix(registry_prefix)
    run = rec.get("run_id")
    src = f"run {run} #{rec.get('candidate_idx')}" if isinstance(run, str) else "editor"
    return f"#{rec['proposal_id']} {target} ({state}, from {src}, by {rec.get('proposed_by')})"


def proposal_order(rows: Sequence[Mapping[str, Any]]) -> list[int]:
    """Proposal ids for a picker: pending ones first, newest first within each group."""
    return [
        int(r["proposal_id"])
        for r in sorted(
            rows, key=lambda r: (isinstance(r.get("decision"), str), -int(r["proposal_id"]))
        )
    ]


def history_table(records: Sequence[VersionRecord]) -> pd.DataFrame:
    """A registry topology's versions, newest first, with who approved each and why."""
    return pd.DataFrame(
        [
            {
                "version": h.version,
                "created_at": h.created_at,
                "base_version": h.base_version,
                "approved_by": h.approval.by if h.approval else "",
                "comment": h.approval.comment if h.approval else "",
                "note": h.note,
            }
            for h in reversed(records)
        ],
        columns=["version", "created_at", "base_version", "approved_by", "comment", "note"],
    )
