"""Tables the studio shows: the runs list, the archive (sort and filter), a candidate's examples.

Pure functions over the run store's DataFrames (`RunStore.list_runs`, `RunStore.archive`,
`RunStore.candidate_examples`); they choose, order and format columns, never query.
"""

from __future__ import annotations

import math
import time
from collections.abc import Sequence
from typing import Any

import pandas as pd

from core.storage.queries import status_label

__all__ = [
    "ARCHIVE_COLUMNS",
    "ARCHIVE_SORTS",
    "RUN_COLUMNS",
    "archive_table",
    "candidate_options",
    "evaluation_table",
    "example_table",
    "format_time",
    "live_status",
    "run_label",
    "runs_table",
]

RUN_COLUMNS: tuple[str, ...] = (
    "run_id",
    "problem",
    "strategy",
    "seed",
    "status_label",
    "n_candidates",
    "n_evaluations",
    "cost_usd",
    "best_idx",
    "best_score",
    "started",
)
"""Columns of the runs list, in order."""

ARCHIVE_COLUMNS: tuple[str, ...] = (
    "candidate_idx",
    "generation",
    "operator",
    "on_front",
    "is_best",
    "valid",
    "accuracy",
    "cost_usd",
    "latency_ms",
    "n_agents",
    "depth",
    "aggregate_score",
    "objective_split",
    "n_examples",
    "error_rate",
    "invalid_reason",
    "parent_idx",
)
"""Columns of the archive table, in order."""

ARCHIVE_SORTS: tuple[str, ...] = (
    "aggregate_score",
    "accuracy",
    "cost_usd",
    "latency_ms",
    "n_agents",
    "depth",
    "candidate_idx",
    "generation",
)
"""Columns the archive can be sorted by."""


def format_time(ts: float | None) -> str:
    """Unix seconds as `"2025-01-01 12:00:03 UTC"`, or `""` when missing."""
    if ts is None or (isinstance(ts, float) and not math.isfinite(ts)):
        return ""
    return time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(ts))


def _opt(value: Any) -> Any:
    return None if value is None or (isinstance(value, float) and math.isnan(value)) else value


def runs_table(runs: pd.DataFrame) -> pd.DataFrame:
    """The runs list for display: `RUN_COLUMNS`, newest first as the store gives it.

    Args:
        runs: `RunStore.list_runs()`.
    """
    if runs.empty:
        return pd.DataFrame({c: [] for c in RUN_COLUMNS})
    out = runs.copy()
    out["started"] = [format_time(_opt(t)) for t in out["started_at"].tolist()]
    return pd.DataFrame(out[list(RUN_COLUMNS)]).reset_index(drop=True)


def run_label(row: pd.Series | dict[str, Any]) -> str:
    """One line naming a run for a picker, e.g. `"2025...-3f9a1c  gsm8k_replay  evolutionary
    (completed)"`."""
    get = row.get
    status = get("status") or ""
    return f"{get('run_id')}  {get('problem') or '?'}  {get('strategy') or '?'}  ({status})"


def live_status(
    status: str, reason: str | None, last_event_at: float | None, search_state: str | None = None
) -> str:
    """A run's status line for the live page, agreeing with the Runs page.

    The store only knows `running` for a search this studio has paused: the pause lives in the
    manager's in-process state (`BackgroundSearch.state`, which the Runs page shows). That
    state wins while the store still says `running`.

    Args:
        status, reason, last_event_at: the run's record (`RunRecord`).
        search_state: the studio's background search state, or None when this studio does not
            run the search.

    Returns:
        e.g. `"paused, data as of 2025-01-02 00:00:09 UTC"`, else `status_label(...)`.
    """
    label = status_label(status, reason, last_event_at)
    if status == "running" and search_state in ("paused", "stopping"):
        return search_state + label.removeprefix("running")
    return label


def archive_table(
    archive: pd.DataFrame,
    *,
    text: str = "",
    only_front: bool = False,
    only_valid: bool = False,
    sort_by: str = "aggregate_score",
    descending: bool = True,
) -> pd.DataFrame:
    """The archive filtered and sorted for the table.

    Args:
        archive: `RunStore.archive(run_id, include_unevaluated=True)`.
        text: keep rows whose operator, thought, invalid reason or candidate number contains
            this text (case-insensitive); "" keeps all.
        only_front: keep Pareto-front rows only.
        only_valid: keep valid rows only.
        sort_by: one of `ARCHIVE_SORTS`; NaN values sort last either way.
        descending: sort direction.

    Returns:
        `ARCHIVE_COLUMNS` (those present), rows sorted, index reset.

    Raises:
        ValueError: `sort_by` is not a column of the archive.
    """
    cols = [c for c in ARCHIVE_COLUMNS if c in archive.columns]
    if archive.empty:
        return pd.DataFrame({c: [] for c in cols})
    if sort_by not in archive.columns:
        raise ValueError(f"cannot sort by {sort_by!r}; choose one of {list(ARCHIVE_SORTS)}")
    df = archive
    if only_front:
        df = df.loc[df["on_front"].astype(bool)]
    if only_valid:
        df = df.loc[df["valid"].astype(bool)]
    needle = text.strip().casefold()
    if needle:
        keep = [
            needle in " ".join(str(v) for v in values if v is not None and v == v).casefold()
            for values in zip(
                *(
                    df[c].tolist() if c in df.columns else [None] * len(df)
                    for c in ("candidate_idx", "operator", "thought", "invalid_reason")
                ),
                strict=True,
            )
        ]
        df = df.loc[keep]
    df = df.sort_values(
        [sort_by, "candidate_idx"], ascending=[not descending, True], na_position="last"
    )
    return pd.DataFrame(df[cols]).reset_index(drop=True)


def candidate_options(archive: pd.DataFrame, *, valid_only: bool = False) -> list[int]:
    """Candidate numbers for a picker, front first, then by aggregate score (best first)."""
    if archive.empty:
        return []
    df = archive
    if valid_only:
        df = df.loc[df["valid"].astype(bool)]
    df = df.sort_values(
        ["on_front", "aggregate_score", "candidate_idx"],
        ascending=[False, False, True],
        na_position="last",
    )
    return [int(i) for i in df["candidate_idx"].tolist()]


def example_table(examples: pd.DataFrame, *, columns: Sequence[str] | None = None) -> pd.DataFrame:
    """A candidate's per-example results for display (split, example, score, cost, latency,
    status, error, output), ordered as the store gives them."""
    cols = list(
        columns
        or (
            "split",
            "example_id",
            "trial",
            "accuracy",
            "cost_usd",
            "latency_ms",
            "status",
            "error",
            "output_summary",
            "cached",
        )
    )
    present = [c for c in cols if c in examples.columns]
    return pd.DataFrame(examples[present]).reset_index(drop=True)


def evaluation_table(results: Sequence[Any]) -> pd.DataFrame:
    """Per-example rows of an evaluation made in the studio (`CandidateEvaluation.results`),
    with the same columns as `example_table`."""
    rows = [
        {
            "split": r.split,
            "example_id": r.example_id,
            "trial": r.trial,
            "accuracy": r.accuracy,
            "cost_usd": r.cost_usd,
            "latency_ms": r.latency_ms,
            "status": r.status,
            "error": r.error,
            "output_summary": r.output_summary,
            "cached": r.cached,
        }
        for r in results
    ]
    return example_table(pd.DataFrame(rows)) if rows else pd.DataFrame()
