"""The Live page's second chart, for a phase-2 (prompt) run: score against metric calls.

A phase-2 run (`studio.views.prompt_apply.prompt_run`) has one candidate per GEPA prompt set
(0 = the starting prompts), each scored on the validation split, its prompt texts in its
`thought`. Its metric calls (one = one run of the topology on one example) are read from the
run's archive snapshots: a candidate's `metric_calls` is the `n_evaluations` of the first
snapshot that lists it among its `entries` (GEPA's budget spent when it was found); a candidate
that no snapshot lists yet has none, and is left off the chart (it is still in the table).

`prompt_table(...)` is the data (one row a candidate), `prompt_figure(...)` the Plotly figure:
one point a candidate (its index as `customdata`, so `studio.views.pareto.selected_candidates`
reads a click), the best score so far as a step line, the winner starred.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import pandas as pd
import plotly.graph_objects as go

from studio.views.prompt_apply import candidate_prompts

__all__ = ["PROMPT_COLUMNS", "prompt_figure", "prompt_table"]

PROMPT_COLUMNS: tuple[str, ...] = (
    "candidate_idx",
    "metric_calls",
    "score",
    "accuracy",
    "parent_idx",
    "operator",
    "is_best",
)
"""`prompt_table`'s columns before its one column of text per prompt gene."""


def _first_listed(snapshots: pd.DataFrame) -> dict[int, int]:
    """Candidate -> the `n_evaluations` of the first snapshot listing it."""
    found: dict[int, int] = {}
    if snapshots.empty:
        return found
    for entries, n in zip(snapshots["entries"], snapshots["n_evaluations"], strict=True):
        for idx in list(entries) if entries is not None else []:
            found.setdefault(int(idx), int(n))
    return found


def _num(value: Any) -> float:
    try:
        out = float(value)
    except (TypeError, ValueError):
        return math.nan
    return out


def prompt_table(
    archive: pd.DataFrame, snapshots: pd.DataFrame, genes: Sequence[str]
) -> pd.DataFrame:
    """One row a phase-2 candidate, in candidate order.

    Args:
        archive: `RunStore.archive(run_id, include_unevaluated=True)` of the phase-2 run.
        snapshots: `RunStore.snapshots(run_id)`.
        genes: the run's prompt genes (`PromptRun.genes`).

    Returns:
        `PROMPT_COLUMNS` then one column per gene holding that candidate's text: `metric_calls`
        (nullable int: none until a snapshot lists it), `score` (aggregate score on the
        validation split) and `accuracy` (0..1) as floats (NaN when not scored yet),
        `parent_idx` nullable, `is_best` bool. A candidate whose recorded prompts cannot be
        read has `""` texts.
    """
    listed = _first_listed(snapshots)
    rows: list[dict[str, Any]] = []
    for rec in archive.sort_values("candidate_idx").to_dict("records"):
        idx = int(rec["candidate_idx"])
        try:
            texts = candidate_prompts(str(rec.get("thought") or ""), genes)
        except ValueError:
            texts = dict.fromkeys(genes, "")
        parent = rec.get("parent_idx")
        rows.append(
            {
                "candidate_idx": idx,
                "metric_calls": listed.get(idx),
                "score": _num(rec.get("aggregate_score")),
                "accuracy": _num(rec.get("accuracy")),
                "parent_idx": None if parent is None or parent != parent else int(parent),
                "operator": str(rec.get("operator") or ""),
                "is_best": bool(rec.get("is_best")) if rec.get("is_best") is not None else False,
                **texts,
            }
        )
    table = pd.DataFrame(rows, columns=[*PROMPT_COLUMNS, *genes])
    table["metric_calls"] = table["metric_calls"].astype("Int64")
    table["parent_idx"] = table["parent_idx"].astype("Int64")
    table["is_best"] = table["is_best"].astype(bool)
    return table


def prompt_figure(table: pd.DataFrame, *, selected: int | None = None) -> go.Figure:
    """Score against metric calls: a point per candidate placed on the chart (`metric_calls`
    and `score` known), the best score so far as a step line, the best candidate a star and
    `selected` ringed. Hover shows the candidate, its parent and accuracy."""
    placed = table.loc[table["metric_calls"].notna() & table["score"].notna()].sort_values(
        ["metric_calls", "candidate_idx"]
    )
    fig = go.Figure()
    xs = [int(v) for v in placed["metric_calls"].tolist()]
    ys = [float(v) for v in placed["score"].tolist()]
    idxs = [int(v) for v in placed["candidate_idx"].tolist()]
    best_so_far: list[float] = []
    for y in ys:
        best_so_far.append(y if not best_so_far else max(best_so_far[-1], y))
    if xs:
        fig.add_trace(
            go.Scatter(
                x=xs,
                y=best_so_far,
                mode="lines",
                line={"shape": "hv", "color": "#9aa0a6", "dash": "dot"},
                name="best so far",
                hoverinfo="skip",
            )
        )
    best = [bool(v) for v in placed["is_best"].tolist()]
    parents = ["-" if pd.isna(p) else str(int(p)) for p in placed["parent_idx"].tolist()]
    fig.add_trace(
        go.Scatter(
            x=xs,
            y=ys,
            mode="markers+text",
            text=[str(i) for i in idxs],
            textposition="top center",
            customdata=[
                [i, p, a] for i, p, a in zip(idxs, parents, placed["accuracy"], strict=True)
            ],
            marker={
                "size": [16 if b else 11 for b in best],
                "symbol": ["star" if b else "circle" for b in best],
                "color": ["#d62728" if b else "#1f77b4" for b in best],
                "line": {
                    "width": [3 if i == selected else 0 for i in idxs],
                    "color": "#111111",
                },
            },
            name="prompt candidates",
            hovertemplate="candidate %{customdata[0]} (from %{customdata[1]})<br>"
            "metric calls %{x}<br>score %{y:.4f}<br>accuracy %{customdata[2]:.4f}<extra></extra>",
        )
    )
    fig.update_layout(
        xaxis_title="metric calls (one run on one validation example)",
        yaxis_title="score (validation)",
        showlegend=False,
        clickmode="event+select",
    )
    return fig
