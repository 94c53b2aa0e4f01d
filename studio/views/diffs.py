"""The diff-and-apply view: the structural change table, two coloured graphs, the JSON diff."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, cast

import pandas as pd

from core.ir import TopologySpec, assign_ids, strip_node_ids, to_dot
from core.ir.diff import diff_highlight, structural_diff, unified_json_diff
from core.search.registry import VersionRecord
from studio.views.compare import distinct_dot

__all__ = [
    "CHANGE_COLUMNS",
    "DiffView",
    "diff_view",
    "history_table",
    "proposal_label",
    "proposal_order",
    "registry_moved_note",
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
        unified: the unified diff of the two JSON texts, node ids included ("" when equal).
        unified_no_ids: the same diff with every node's `id` left out ("" when the two differ
            only in ids): the change to the topology itself, since its canonical form (what
            the run store and the cache key on, `core.ir.canonical`) ignores ids.
        id_lines: how many `+`/`-` lines of `unified` the ids alone account for (ids the
            editor or `assign_ids` gave nodes; cosmetic).
        changed: whether anything differs.
        counts: `{"added": n, "removed": n, "changed": n}`.
    """

    changes: pd.DataFrame
    before_dot: str
    after_dot: str
    unified: str
    unified_no_ids: str
    id_lines: int
    changed: bool
    counts: dict[str, int]


def _without_ids(spec: TopologySpec | None) -> dict[str, Any] | None:
    """The spec's set fields (as `unified_json_diff` dumps them) without any node `id`."""
    if spec is None:
        return None
    return strip_node_ids(spec.model_dump(mode="json", exclude_defaults=True))


def _changed_lines(unified: str) -> int:
    return sum(
        1
        for line in unified.splitlines()
        if line[:1] in "+-" and not line.startswith(("+++", "---"))
    )


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
    no_ids = (
        unified_json_diff(
            _without_ids(before), _without_ids(after), fromfile=before_label, tofile=after_label
        )
        if unified
        else ""
    )
    counts = {k: sum(1 for c in changes if c.change == k) for k in ("added", "removed", "changed")}
    return DiffView(
        changes=table,
        before_dot=(
            distinct_dot(to_dot(b, highlight=colours_b, title=before_label))
            if b is not None
            else ""
        ),
        after_dot=distinct_dot(to_dot(a, highlight=colours_a, title=after_label)),
        unified=unified,
        unified_no_ids=no_ids,
        id_lines=_changed_lines(unified) - _changed_lines(no_ids),
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


def registry_moved_note(name: str, base_version: int | None, current: int | None) -> str | None:
    """A warning for a pending proposal whose registry topology moved since it was proposed.

    Args:
        name: the registry topology.
        base_version: the version current when the proposal was made (None: `name` did not
            exist then), as the proposal record keeps it.
        current: the version current now (None: `name` does not exist).

    Returns:
        None when the two are the same, else one sentence saying what the diff is against.
    """
    if base_version == current:
        return None
    if base_version is None:
        return (
            f"The registry had no {name} when this was proposed; it is now at version "
            f"{current}: the diff below is against version {current}, not against nothing."
        )
    if current is None:
        return (
            f"This was proposed against {name} version {base_version}, but the registry has "
            f"no {name} now: applying it creates the topology."
        )
    return (
        f"The registry moved from version {base_version} (when proposed) to {current}: the "
        "diff below is against the current version."
    )


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
