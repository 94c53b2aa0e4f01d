"""View data of the Agents page: the roster and each recorded solve's subtask tree.

Pure functions over memory entries (`core.memory.MemoryEntry`) and recorded `ExecutionResult`
dumps (what `topology-studio solve` stores), so the page only wires widgets.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any

import pandas as pd

from core.memory import MemoryEntry
from studio.cli.solve import SOLVE_KEY_PREFIX

__all__ = [
    "ROSTER_COLUMNS",
    "SUBTASK_COLUMNS",
    "hook_rows",
    "roster_table",
    "solves",
    "subtask_rows",
]


ROSTER_COLUMNS = ("trigger", "agent", "reliability", "uses", "successes", "tools", "updated")
"""The roster table's columns."""

SUBTASK_COLUMNS = (
    "subtask",
    "depth",
    "outcome",
    "agent",
    "from",
    "hook",
    "confidence",
    "ms",
    "cost_usd",
    "output",
)
"""The subtask tree table's columns (the tree is shown by indenting `subtask` per depth)."""


def _when(ts: float) -> str:
    return datetime.fromtimestamp(ts, UTC).strftime("%Y-%m-%d %H:%M:%S")


def roster_table(entries: Sequence[MemoryEntry]) -> pd.DataFrame:
    """One row per procedural entry (a specialist), by trigger."""
    rows: list[dict[str, Any]] = []
    for e in sorted(entries, key=lambda e: e.key):
        spec: dict[str, Any] = e.metadata.get("agent_spec", {})
        rows.append(
            {
                "trigger": e.key,
                "agent": spec.get("name", ""),
                "reliability": round(e.reliability, 3),
                "uses": e.uses,
                "successes": e.successes,
                "tools": ", ".join(str(t.get("name")) for t in spec.get("tools", [])),
                "updated": _when(e.updated_at),
            }
        )
    return pd.DataFrame(rows, columns=list(ROSTER_COLUMNS))


def solves(entries: Sequence[MemoryEntry]) -> list[tuple[str, dict[str, Any]]]:
    """The recorded solves, newest first: `(label, execution result dump)`."""
    out: list[tuple[float, str, dict[str, Any]]] = []
    for e in entries:
        result = e.metadata.get("execution_result")
        if not e.key.startswith(SOLVE_KEY_PREFIX) or not isinstance(result, dict):
            continue
        mark = "ok" if result.get("success") else "failed"
        label = f"{_when(e.created_at)}  {mark}  {result.get('goal', '')}"
        out.append((e.created_at, label, dict(result)))  # pyright: ignore[reportUnknownArgumentType]
    out.sort(key=lambda t: -t[0])
    return [(label, result) for _, label, result in out]


def subtask_rows(result: dict[str, Any]) -> pd.DataFrame:
    """The subtask tree, depth first, one row per subtask (children indented under theirs)."""
    rows: list[dict[str, Any]] = []

    def visit(item: dict[str, Any]) -> None:
        depth = int(item.get("depth", 1))
        output = item.get("output")
        rows.append(
            {
                "subtask": "    " * (depth - 1) + str(item.get("subtask_name")),
                "depth": depth,
                "outcome": "ok" if item.get("success") else f"failed: {item.get('error')}",
                "agent": item.get("agent_name") or "",
                "from": item.get("agent_source") or "",
                "hook": item.get("hook_decision", ""),
                "confidence": item.get("confidence"),
                "ms": round(float(item.get("duration_ms", 0.0)), 1),
                "cost_usd": item.get("cost_usd", 0.0),
                "output": "" if output is None else json.dumps(output)[:300],
            }
        )
        for child in item.get("children", []):
            visit(child)

    for top in result.get("subtask_results", []):
        visit(top)
    return pd.DataFrame(rows, columns=list(SUBTASK_COLUMNS))


def hook_rows(result: dict[str, Any]) -> pd.DataFrame:
    """Every hook decision of a solve: subtask, decision, detail (JSON)."""
    rows = [
        {
            "subtask": h.get("subtask"),
            "decision": h.get("decision"),
            "detail": json.dumps(h.get("detail", {})),
        }
        for h in result.get("hook_decisions", [])
    ]
    return pd.DataFrame(rows, columns=["subtask", "decision", "detail"])
