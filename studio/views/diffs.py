"""The diff-and-apply view: the structural change table, two coloured graphs, the JSON diff."""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, cast

import pandas as pd

from core.ir import AnyNode, TopologySpec, assign_ids, iter_nodes, node_at, strip_node_ids, to_dot
from core.ir.diff import NodeChange, diff_highlight, structural_diff, unified_json_diff
from core.search.registry import VersionRecord
from studio.views.compare import distinct_dot
from studio.views.editor import parent_path

__all__ = [
    "CHANGE_COLUMNS",
    "MOVED_COLOUR",
    "DiffView",
    "is_rollback",
    "moved_nodes",
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

MOVED_COLOUR = "#1f77b4"
"""A moved node on both graphs (blue beside added green, removed red, changed orange)."""

ROLLBACK_PREFIX = "rollback to v"
"""How a rollback's recorded comment starts (`StudioManager.rollback`), e.g. `rollback to v2`."""


def _location(spec: AnyNode, path: str) -> tuple[str | None, str]:
    """Where a node sits: its parent's id and its slot there with list indices dropped
    (`.steps[].operation`, `.routes[].step`, `.fallback_step`, `.step`), so a sibling that only
    shifted (a step inserted before it) or a reordered route is not a move."""
    parent = parent_path(path)
    if parent is None:
        return None, "root"
    return node_at(spec, parent).id, re.sub(r"\[\d+\]", "[]", path[len(parent) :])


def _content(node: AnyNode) -> str:
    """A node's content with every id left out (its identity when auto ids differ)."""
    return json.dumps(
        strip_node_ids(node.model_dump(mode="json", exclude_defaults=True)), sort_keys=True
    )


def moved_nodes(
    before: TopologySpec, after: TopologySpec, changes: Sequence[NodeChange]
) -> list[dict[str, Any]]:
    """The change rows of `structural_diff` with moved nodes found and listed as moved.

    `structural_diff` matches nodes by id only, so a node that kept its id but moved to another
    parent or slot was not listed at all, and one whose auto-assigned id changed showed as
    removed + added (seen: `6b_verification` moved from a router's fallback into
    a parallel branch, and the table said nothing). Here:

    - a node with the same id whose parent or slot differs is `moved` (`moved, changed` when its
      own fields changed too);
    - a removed and an added node of the same kind and the same content (ids left out) are one
      `moved` row, `node_id` reading `old -> new`.

    Args:
        before, after: the two topologies, ids assigned.
        changes: `structural_diff(before, after)`.

    Returns:
        Rows with the `CHANGE_COLUMNS` keys, in the order of `changes` (moves by id where the
        node sits in `after`'s order, after the changes).
    """
    rows: list[dict[str, Any]] = [
        {
            "change": c.change,
            "node_id": c.node_id,
            "kind": c.kind,
            "path_before": c.path_before or "",
            "path_after": c.path_after or "",
            "fields_changed": ", ".join(c.fields_changed),
        }
        for c in changes
    ]
    by_id = {r["node_id"]: r for r in rows if r["change"] == "changed"}
    old = {n.id: (p, n) for p, n in iter_nodes(before) if n.id is not None}
    for path, node in iter_nodes(after):
        if node.id is None or node.id not in old:
            continue
        old_path, _ = old[node.id]
        if _location(before, old_path) == _location(after, path):
            continue
        row = by_id.get(node.id)
        if row is not None:
            row["change"] = "moved, changed"
        else:
            rows.append(
                {
                    "change": "moved",
                    "node_id": node.id,
                    "kind": node.node_kind,
                    "path_before": old_path,
                    "path_after": path,
                    "fields_changed": "",
                }
            )
    removed = [r for r in rows if r["change"] == "removed"]
    added = [r for r in rows if r["change"] == "added"]
    for r in removed:
        content = _content(node_at(before, r["path_before"]))
        for a in added:
            if a["kind"] == r["kind"] and _content(node_at(after, a["path_after"])) == content:
                a.update(
                    change="moved",
                    node_id=f"{r['node_id']} -> {a['node_id']}",
                    path_before=r["path_before"],
                )
                rows.remove(r)
                added.remove(a)
                break
    return rows


def is_rollback(rec: Mapping[str, Any]) -> bool:
    """Whether a proposal row (`RunStore.list_proposals`) records a rollback."""
    comment = rec.get("comment")
    return isinstance(comment, str) and comment.startswith(ROLLBACK_PREFIX)


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
        counts: `{"added": n, "removed": n, "changed": n, "moved": n}` (a node moved and
            changed counts as moved).
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
    rows = moved_nodes(b, a, changes) if b is not None else moved_nodes(a, a, changes)
    for r in rows:
        if r["change"] == "moved":
            old_id, _, new_id = str(r["node_id"]).partition(" -> ")
            colours_b[old_id] = MOVED_COLOUR
            colours_a[new_id or old_id] = MOVED_COLOUR
    table = pd.DataFrame(rows, columns=list(CHANGE_COLUMNS))
    unified = unified_json_diff(before, after, fromfile=before_label, tofile=after_label)
    no_ids = (
        unified_json_diff(
            _without_ids(before), _without_ids(after), fromfile=before_label, tofile=after_label
        )
        if unified
        else ""
    )
    counts = {
        k: sum(1 for r in rows if str(r["change"]).split(",")[0] == k)
        for k in ("added", "removed", "changed", "moved")
    }
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
        changed=bool(unified) or bool(rows),
        counts=counts,
    )


def proposal_label(rec: Mapping[str, Any], registry_prefix: str = "") -> str:
    """One line naming a proposal (a `RunStore.list_proposals` row) for a picker, e.g.
    `"#3 solver (pending, from run 2025...-abc123 #7, by ann)"`."""
    state = rec["decision"] if isinstance(rec.get("decision"), str) else "pending"
    target = str(rec["target"]).removeprefix(registry_prefix)
    run = rec.get("run_id")
    if is_rollback(rec):
        what = str(rec["comment"]).split(":", 1)[0]
        return f"#{rec['proposal_id']} {target} ({what}, by {rec.get('proposed_by')})"
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
