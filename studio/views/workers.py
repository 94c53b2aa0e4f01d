"""Where runs execute and how their workers are: the Runs page's workers panel.

Pure functions over `RunStore.list_runs()` rows and a run's `HealthSnapshot`
(`core.storage.health`, written by the search's driver every few seconds while it runs on a
remote executor, `core.search.subscribers.HealthRecorder`).
"""

from __future__ import annotations

import math

import pandas as pd

from core.vocab.health import HealthSnapshot

__all__ = ["STALE_AFTER_S", "WORKER_COLUMNS", "health_caption", "remote_running", "worker_table"]

WORKER_COLUMNS: tuple[str, ...] = (
    "worker",
    "state",
    "node",
    "pid",
    "runs_done",
    "in_flight",
    "batches",
    "restarts",
    "last_seen",
)
"""Columns of the workers table, in order (one row per `WorkerHealth`)."""

STALE_AFTER_S = 30.0
"""A snapshot older than this is said to be stale (the driver writes one every 3 s while the
search runs: `core.search.subscribers.HEALTH_INTERVAL_S`)."""


def remote_running(runs: pd.DataFrame) -> list[str]:
    """Run ids of the running runs (store status `running`) that execute on a remote executor
    (`executor` not `"local"`), in the frame's order (newest first).

    Args:
        runs: `RunStore.list_runs()` rows (a frame without `executor` has none).
    """
    if runs.empty or "executor" not in runs.columns:
        return []
    return [
        str(r)
        for r, s, e in zip(runs["run_id"], runs["status"], runs["executor"], strict=True)
        if str(s) == "running" and isinstance(e, str) and e and e != "local"
    ]


def _ago(seconds: float) -> str:
    if not math.isfinite(seconds):
        return ""
    if seconds < 60:
        return f"{int(seconds)} s ago"
    if seconds < 3600:
        return f"{int(seconds // 60)} min ago"
    return f"{seconds / 3600:.1f} h ago"


def worker_table(snapshot: HealthSnapshot, now: float) -> pd.DataFrame:
    """One row per worker (`WORKER_COLUMNS`): name, state (alive / unreachable / dead), node,
    pid, runs (example x trial) done, runs in flight, batches done, restarts, and when it
    last answered as an age (`"2 s ago"`; "" when never).

    Args:
        snapshot: the run's latest `HealthSnapshot`.
        now: Unix seconds the ages are counted to.
    """
    rows = [
        {
            "worker": w.name,
            "state": w.state,
            "node": w.node or "",
            "pid": "" if w.pid is None else str(w.pid),
            "runs_done": w.runs,
            "in_flight": w.in_flight,
            "batches": w.batches,
            "restarts": w.restarts,
            "last_seen": "" if w.last_seen is None else _ago(max(0.0, now - w.last_seen)),
        }
        for w in snapshot.workers
    ]
    return pd.DataFrame(rows, columns=list(WORKER_COLUMNS))


def health_caption(snapshot: HealthSnapshot, now: float) -> str:
    """What the snapshot is: where the run executes, how many workers are alive, and its age,
    e.g. `"ray: 2 workers, local 127.0.0.1: 2 of 2 workers alive; snapshot taken 4 s ago by
    the search's driver"`, with `" (stale: the search may have stopped recording)"` after
    `STALE_AFTER_S`."""
    alive = sum(w.state == "alive" for w in snapshot.workers)
    age = snapshot.age_s(now)
    text = (
        f"{snapshot.executor}: {alive} of {len(snapshot.workers)} workers alive; snapshot "
        f"taken {_ago(age)} by the search's driver"
    )
    if age > STALE_AFTER_S:
        text += " (stale: the search may have stopped recording)"
    return text
