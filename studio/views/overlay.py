"""Several runs on one page: their validation fronts overlaid, hypervolume
and best score against evaluations, and a table of the figures a researcher reports with their
spread across seeds. Pure functions over `RunStore.list_runs`, `archive` and `snapshots`.

Hypervolumes here share one reference point over every run shown (accuracy 0, the dearest
cost among the runs' full-split candidates), so runs are comparable; a run's own Live page
uses a reference fixed for that run only.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from core.vocab.pareto import hypervolume, pareto_front_mask
from studio.views.tables import full_split

__all__ = [
    "RunData",
    "common_reference",
    "front_points",
    "hypervolume_curves",
    "overlay_figure",
    "progress_overlay_figure",
    "run_colours",
    "run_summary",
    "spread_table",
]

PALETTE: tuple[str, ...] = (
    "#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd",
    "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22", "#17becf",
)  # fmt: skip
"""The runs' colours, in the page's run order (`run_colours`)."""


def run_colours(runs: Sequence[RunData]) -> dict[str, str]:
    """Run label -> its colour, by the runs' order: every chart of the page draws a run in the
    same colour (each chart coloured by its own row order gave the fronts' first run the
    progress charts' second run's colour, as their rows are sorted by label)."""
    return {r.label: PALETTE[k % len(PALETTE)] for k, r in enumerate(runs)}


def _colour(colours: Mapping[str, str] | None, run: object, k: int) -> str:
    """`run`'s colour in `colours`, else the k-th of the palette."""
    return (colours or {}).get(str(run), PALETTE[k % len(PALETTE)])


_DIRS = ("min", "max")
"""(cost_usd, accuracy): less cost, more accuracy."""


@dataclass(frozen=True, slots=True)
class RunData:
    """One run's stored data for the overlay.

    Attributes:
        run: its `list_runs` row (`run_id, problem, strategy, seed, n_candidates, ...`).
        archive: `RunStore.archive(run_id, include_unevaluated=False)`.
        snapshots: `RunStore.snapshots(run_id)`.
    """

    run: Mapping[str, Any]
    archive: pd.DataFrame
    snapshots: pd.DataFrame

    @property
    def label(self) -> str:
        """`evolutionary s1 (3f9a1c)`: strategy, seed and the run id's tail."""
        seed = self.run.get("seed")
        s = "" if seed is None or (isinstance(seed, float) and math.isnan(seed)) else f" s{seed}"
        return f"{self.run.get('strategy')}{s} ({str(self.run['run_id'])[-6:]})"


def _scored(archive: pd.DataFrame) -> pd.DataFrame:
    """Valid candidates scored on the run's full split, with finite cost and accuracy."""
    if archive.empty or "valid" not in archive.columns:
        return archive.iloc[0:0]
    valid = archive.loc[archive["valid"].astype(bool)]
    valid = valid.loc[full_split(valid)]
    ok = np.isfinite(valid[["cost_usd", "accuracy"]].to_numpy(dtype=np.float64)).all(axis=1)
    return valid.loc[ok]


def common_reference(runs: Sequence[RunData]) -> tuple[float, float]:
    """`(cost_usd, accuracy)` reference of every hypervolume on the page: the dearest scored
    candidate's cost over all runs, and accuracy 0 (as `Archive.hypervolume`)."""
    costs = [
        float(np.nanmax(_scored(r.archive)["cost_usd"].to_numpy(dtype=np.float64)))
        for r in runs
        if len(_scored(r.archive))
    ]
    return (max(costs) if costs else 1.0, 0.0)


def front_points(runs: Sequence[RunData]) -> pd.DataFrame:
    """Each run's validation front over (cost, accuracy): `run, candidate_idx, cost_usd,
    accuracy`, cheapest first within a run."""
    frames = []
    for r in runs:
        scored = _scored(r.archive)
        if scored.empty:
            continue
        pts = scored[["cost_usd", "accuracy"]].to_numpy(dtype=np.float64)
        front = scored.loc[pareto_front_mask(pts, _DIRS)]
        frames.append(
            pd.DataFrame(
                {
                    "run": r.label,
                    "candidate_idx": front["candidate_idx"].astype(int).to_numpy(),
                    "cost_usd": front["cost_usd"].to_numpy(dtype=np.float64),
                    "accuracy": front["accuracy"].to_numpy(dtype=np.float64),
                }
            ).sort_values("cost_usd", kind="stable")
        )
    if not frames:
        return pd.DataFrame(columns=["run", "candidate_idx", "cost_usd", "accuracy"])
    return pd.concat(frames, ignore_index=True)


def hypervolume_curves(runs: Sequence[RunData], reference: tuple[float, float]) -> pd.DataFrame:
    """Hypervolume (common reference) and best score after each archive snapshot of each run:
    `run, n_evaluations, hypervolume, best_score`."""
    rows: list[dict[str, Any]] = []
    for r in runs:
        scored = _scored(r.archive)
        snaps = r.snapshots
        if snaps.empty or "entries" not in snaps.columns:
            continue
        ids = scored["candidate_idx"].to_numpy(dtype=np.int64)
        pts = scored[["cost_usd", "accuracy"]].to_numpy(dtype=np.float64)
        for n, entries, best in zip(
            snaps["n_evaluations"].tolist(),
            snaps["entries"].tolist(),
            snaps["best_score"].tolist(),
            strict=True,
        ):
            members = np.isin(
                ids, np.asarray(list(entries if entries is not None else []), dtype=np.int64)
            )
            hv = hypervolume(pts[members], reference, _DIRS) if members.any() else 0.0
            rows.append(
                {"run": r.label, "n_evaluations": int(n), "hypervolume": hv, "best_score": best}
            )
    frame = pd.DataFrame(rows, columns=["run", "n_evaluations", "hypervolume", "best_score"])
    return frame.sort_values(["run", "n_evaluations"], kind="stable").reset_index(drop=True)


def run_summary(runs: Sequence[RunData], reference: tuple[float, float]) -> pd.DataFrame:
    """One row per run with the figures a researcher reports, first (in view at 1000 px, where
    they were off screen behind the run's description): `run, best_accuracy, best_score,
    hypervolume` (common reference), `front_size, cost_usd` (the whole run's model cost),
    `evaluations, candidates, strategy, seed, problem`."""
    rows = []
    for r in runs:
        scored = _scored(r.archive)
        pts = scored[["cost_usd", "accuracy"]].to_numpy(dtype=np.float64)
        front = pareto_front_mask(pts, _DIRS) if len(pts) else np.zeros(0, dtype=bool)
        rows.append(
            {
                "run": r.label,
                "best_accuracy": _top(scored, "accuracy"),
                "best_score": _top(scored, "aggregate_score"),
                "hypervolume": hypervolume(pts, reference, _DIRS) if len(pts) else 0.0,
                "front_size": int(front.sum()),
                "cost_usd": r.run.get("cost_usd"),
                "evaluations": r.run.get("n_evaluations"),
                "candidates": int(len(r.archive)),
                "strategy": r.run.get("strategy"),
                "seed": r.run.get("seed"),
                "problem": r.run.get("problem"),
            }
        )
    return pd.DataFrame(rows)


def _top(frame: pd.DataFrame, column: str) -> float:
    """The largest finite value of a column, NaN when there is none."""
    vals = frame[column].to_numpy(dtype=np.float64) if column in frame.columns else np.zeros(0)
    vals = vals[np.isfinite(vals)]
    return float(vals.max()) if vals.size else math.nan


def _mean_sd(values: Sequence[float]) -> str:
    vals = [v for v in values if isinstance(v, int | float) and math.isfinite(v)]
    if not vals:
        return "-"
    if len(vals) == 1:
        return f"{vals[0]:.4f}"
    return f"{statistics.fmean(vals):.4f} ± {statistics.stdev(vals):.4f}"


def spread_table(summary: pd.DataFrame) -> pd.DataFrame:
    """Per (problem, strategy): how many runs (seeds) and mean ± sample stdev of best accuracy,
    best score and hypervolume across them (a single run shows its value alone)."""
    if summary.empty:
        return pd.DataFrame(
            columns=["problem", "strategy", "runs", "best_accuracy", "best_score", "hypervolume"]
        )
    out = []
    for key, g in summary.groupby(["problem", "strategy"], sort=True, dropna=False):
        problem, strategy = key  # type: ignore[misc]
        out.append(
            {
                "problem": problem,
                "strategy": strategy,
                "runs": int(len(g)),
                "best_accuracy": _mean_sd(g["best_accuracy"].tolist()),
                "best_score": _mean_sd(g["best_score"].tolist()),
                "hypervolume": _mean_sd(g["hypervolume"].tolist()),
            }
        )
    return pd.DataFrame(out)


def overlay_figure(fronts: pd.DataFrame, colours: Mapping[str, str] | None = None) -> go.Figure:
    """The runs' validation fronts on one chart: a step line and markers per run (cost on x,
    accuracy on y) in its colour of `colours` (`run_colours`); each point's customdata is
    `[candidate_idx]`."""
    fig = go.Figure()
    for k, (run, g) in enumerate(fronts.groupby("run", sort=False)):
        fig.add_trace(
            go.Scatter(
                x=g["cost_usd"],
                y=g["accuracy"],
                mode="lines+markers",
                line={"shape": "hv", "color": _colour(colours, run, k)},
                name=str(run),
                customdata=g[["candidate_idx"]].to_numpy(),
                hovertemplate="%{fullData.name}<br>#%{customdata[0]}: $%{x:.4f}, %{y:.1%}<extra></extra>",
            )
        )
    fig.update_layout(
        title="Validation fronts",
        xaxis_title="cost per example (USD)",
        yaxis_title="accuracy",
        height=420,
        margin={"l": 50, "r": 20, "t": 50, "b": 40},
        legend={"orientation": "h", "y": -0.2},
    )
    return fig


def progress_overlay_figure(
    curves: pd.DataFrame, colours: Mapping[str, str] | None = None
) -> go.Figure:
    """Hypervolume and best score against evaluations, one line per run in each panel, in its
    colour of `colours` (`run_colours`)."""
    fig = make_subplots(
        rows=1, cols=2, subplot_titles=("hypervolume (common reference)", "best score")
    )
    for k, (run, g) in enumerate(curves.groupby("run", sort=False)):
        colour = _colour(colours, run, k)
        fig.add_trace(
            go.Scatter(
                x=g["n_evaluations"],
                y=g["hypervolume"],
                mode="lines",
                line={"shape": "hv", "color": colour},
                name=str(run),
                legendgroup=str(run),
            ),
            row=1,
            col=1,
        )
        fig.add_trace(
            go.Scatter(
                x=g["n_evaluations"],
                y=g["best_score"],
                mode="lines",
                line={"shape": "hv", "color": colour},
                name=str(run),
                legendgroup=str(run),
                showlegend=False,
            ),
            row=1,
            col=2,
        )
    fig.update_xaxes(title_text="example runs")
    fig.update_layout(
        height=360,
        margin={"l": 50, "r": 20, "t": 50, "b": 40},
        legend={"orientation": "h", "y": -0.3},
    )
    return fig
