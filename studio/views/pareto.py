"""The Pareto scatter and its selection mapping.

A selection is mapped back to a candidate through the point's own data (`customdata`), never
through a point index: once points are split into traces (front / dominated / invalid) a point
index only counts within its own trace, so index-based mapping selects the wrong row (field case
F11).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd
import plotly.graph_objects as go

from core.search.pareto import DEFAULT_OBJECTIVES, hypervolume
from studio.views.tables import full_split

__all__ = [
    "FRONT_NAME",
    "HypervolumeSeries",
    "OBJECTIVES",
    "OBJECTIVE_LABELS",
    "hypervolume_series",
    "live_figure",
    "minibatch_name",
    "pareto_figure",
    "progress_figure",
    "progress_frame",
    "selected_candidates",
    "TEST_FRONT_LABEL",
    "WITHIN_NOISE_NAME",
    "HeldOutFrontView",
    "held_out_front_view",
    "KEEP_VIEW_JS",
    "view_revision",
]

OBJECTIVE_LABELS: dict[str, str] = {
    "accuracy": "accuracy (share correct)",
    "cost_usd": "cost per example (USD)",
    "latency_ms": "latency per example (ms)",
    "n_agents": "agents",
    "depth": "depth",
    "aggregate_score": "aggregate score",
}
"""Axis titles for the objectives a user can put on X and Y."""

OBJECTIVES: tuple[str, ...] = tuple(OBJECTIVE_LABELS)
"""The objectives a user can put on X and Y, in menu order."""

FRONT_NAME = f"Pareto front (over all {len(DEFAULT_OBJECTIVES)} objectives)"
"""The front trace's legend entry: the store's front counts every objective (accuracy, cost,
latency, agents, depth), so in a 2-D view a front point can look dominated."""

_FRONT = (FRONT_NAME, "#d62728", "circle")
WITHIN_NOISE_NAME = "front, within noise of the cheaper neighbour"
"""The legend entry of front candidates whose gain over the next cheaper one could be zero."""
_WITHIN_NOISE = (WITHIN_NOISE_NAME, "#f4a6a6", "circle-open")
_DOMINATED = ("dominated", "#7f7f7f", "circle")
_MINIBATCH_STYLE = ("#ff7f0e", "diamond-open")

_MAX_OBJECTIVES = frozenset({"accuracy", "aggregate_score"})
"""Objectives (of `OBJECTIVES`) where more is better; the others are costs."""

_HV_BOUNDED: dict[str, float] = {"accuracy": 0.0}
"""Hypervolume reference values for bounded objectives (as `core.search.Archive.hypervolume`)."""


def minibatch_name(n_examples: Sequence[float]) -> str:
    """The legend entry of minibatch-only points, e.g. `"minibatch estimate (20 problems)"` or
    `"minibatch estimate (5-20 problems)"` when minibatches differ in size."""
    ns = sorted({int(n) for n in n_examples if n == n})
    if not ns:
        return "minibatch estimate"
    size = str(ns[0]) if len(ns) == 1 else f"{ns[0]}-{ns[-1]}"
    return f"minibatch estimate ({size} {'problem' if size == '1' else 'problems'})"


def pareto_figure(
    archive: pd.DataFrame,
    x: str = "cost_usd",
    y: str = "accuracy",
    *,
    selected: int | None = None,
    log_x: bool = False,
    noise: pd.DataFrame | None = None,
    hide_within_noise: bool = False,
) -> go.Figure:
    """A scatter of the valid archive entries, coloured by front membership.

    Args:
        archive: one row per candidate with at least `candidate_idx`, `x`, `y`, `on_front` and
            `valid` columns (the run store's archive query). Invalid rows are not drawn.
        x, y: objective columns for the axes (see `OBJECTIVE_LABELS`).
        selected: a candidate to ring, if any.
        log_x: logarithmic X axis (useful for cost, which spans decades).
        noise: `studio.views.front_noise.front_noise_table` rows for the front; with `y` =
            accuracy each front point gets an error bar: its accuracy minus its gain over the
            cheaper neighbour plus the gain's interval, so the bar reaches below the cheaper
            neighbour's accuracy exactly when the point is within noise; those points form
            their own trace (`WITHIN_NOISE_NAME`).
        hide_within_noise: leave the within-noise front points out.

    Returns:
        A figure with one trace per group: `FRONT_NAME`, "dominated" (scored on the run's full
        split, off the front), and, when there are any, valid candidates scored only on a
        minibatch (hollow diamonds, `minibatch_name(...)`: `tables.full_split` is False for
        them; they are never on the front). Each point carries
        `customdata = [candidate_idx]`.

    Raises:
        KeyError: a required column is missing.
    """
    for col in ("candidate_idx", x, y, "on_front", "valid"):
        if col not in archive.columns:
            raise KeyError(f"archive has no column {col!r}; columns: {list(archive.columns)}")
    valid: pd.DataFrame = archive.loc[archive["valid"].astype(bool)]
    full = full_split(valid)
    on_front = valid["on_front"].astype(bool)
    minibatch: pd.DataFrame = valid.loc[~full & ~on_front]
    front: pd.DataFrame = valid.loc[on_front].sort_values(x)
    bars = noise is not None and not noise.empty and y == "accuracy"
    noisy: pd.DataFrame = front.iloc[0:0]
    if bars and noise is not None:
        front = front.merge(
            noise[["candidate_idx", "gain_vs_cheaper", "gain_low", "gain_high", "within_noise"]],
            on="candidate_idx",
            how="left",
        )
        inside = front["within_noise"].fillna(False).astype(bool)
        noisy, front = front.loc[inside], front.loc[~inside]
    groups: list[tuple[str, str, str, pd.DataFrame]] = [
        (*_FRONT, front),
        (*_DOMINATED, valid.loc[full & ~on_front]),
    ]
    if bars and not hide_within_noise and not noisy.empty:
        groups.insert(1, (*_WITHIN_NOISE, noisy))
    if not minibatch.empty:
        ns = minibatch["n_examples"].tolist() if "n_examples" in minibatch.columns else []
        groups.append((minibatch_name(ns), *_MINIBATCH_STYLE, minibatch))
    fig = go.Figure()
    for name, colour, symbol, rows in groups:
        fig.add_trace(
            go.Scatter(
                # numpy arrays: plotly validates them ~10x faster than lists (1,000 points in
                # ~15 ms, not ~160 ms), and sends them to the browser as typed arrays
                x=rows[x].to_numpy(dtype=np.float64),
                y=rows[y].to_numpy(dtype=np.float64),
                mode="markers",
                marker={
                    "color": colour,
                    "size": 11,
                    "symbol": symbol,
                    "opacity": 0.55 if name == "dominated" else 1.0,
                    "line": {"width": 2, "color": colour},
                },
                name=name,
                error_y=_error_bars(rows) if "gain_low" in rows.columns else None,
                customdata=rows["candidate_idx"].to_numpy(dtype=np.int64).reshape(-1, 1),
                hovertemplate=(
                    "candidate %{customdata[0]}<br>"
                    + f"{x}=%{{x}}<br>{y}=%{{y}}<extra>{name}</extra>"
                ),
            )
        )
    if selected is not None:
        row: pd.DataFrame = valid.loc[valid["candidate_idx"] == selected]
        if not row.empty:
            fig.add_trace(
                go.Scatter(
                    x=row[x].tolist(),
                    y=row[y].tolist(),
                    mode="markers",
                    marker={"size": 20, "color": "rgba(0,0,0,0)", "line": {"width": 2}},
                    name="selected",
                    customdata=[[int(selected)]],
                    hoverinfo="skip",
                )
            )
    fig.update_layout(
        xaxis_title=OBJECTIVE_LABELS.get(x, x),
        yaxis_title=OBJECTIVE_LABELS.get(y, y),
        legend={"orientation": "h", "y": -0.2},
        margin={"l": 10, "r": 10, "t": 30, "b": 10},
        clickmode="event+select",
    )
    if log_x:
        fig.update_xaxes(type="log")
    return fig


def _error_bars(rows: pd.DataFrame) -> dict[str, Any]:
    """Plotly `error_y` of front points: up `gain_high - gain`, down `gain - gain_low` (0 for
    the cheapest point, which has no interval)."""
    gain = rows["gain_vs_cheaper"].to_numpy(dtype=np.float64)
    up = np.nan_to_num(rows["gain_high"].to_numpy(dtype=np.float64) - gain)
    down = np.nan_to_num(gain - rows["gain_low"].to_numpy(dtype=np.float64))
    return {"type": "data", "symmetric": False, "array": up, "arrayminus": down, "width": 3}


def selected_candidates(selection: Mapping[str, Any] | None) -> list[int]:
    """Candidate indices of a Plotly selection event, read from each point's `customdata`.

    Args:
        selection: `event.selection` from `st.plotly_chart(..., on_select="rerun")`, i.e. a
            mapping with a `points` list whose items carry `customdata`: a list whose first
            item is the candidate index, or `{"0": index}` (how the browser encodes a
            typed-array row), or the index itself. None or an empty selection gives `[]`.

    Returns:
        Candidate indices in selection order, without duplicates.
    """
    if not selection:
        return []
    points: Sequence[Mapping[str, Any]] = selection.get("points", []) or []
    out: list[int] = []
    for point in points:
        data = point.get("customdata")
        if isinstance(data, list | tuple) and data:
            idx = int(data[0])
        elif isinstance(data, Mapping) and data:
            # a typed-array row (numpy customdata reaches plotly.js as a typed array) is
            # JSON-encoded by the browser as {"0": value}
            row: Mapping[str, Any] = data
            idx = int(row["0"] if "0" in row else next(iter(row.values())))
        elif isinstance(data, int | float):
            idx = int(data)
        else:
            continue
        if idx not in out:
            out.append(idx)
    return out


def progress_figure(snapshots: pd.DataFrame) -> go.Figure:
    """Best score and hypervolume over evaluations.

    Args:
        snapshots: one row per archive snapshot with `n_evaluations`, `best_score` and
            `hypervolume` columns (the run store's progress query).
    """
    fig = go.Figure()
    if not snapshots.empty:
        fig.add_trace(
            go.Scatter(
                x=snapshots["n_evaluations"].tolist(),
                y=snapshots["best_score"].tolist(),
                name="best aggregate score",
                mode="lines+markers",
                line={"shape": "hv"},
            )
        )
        if "hypervolume" in snapshots.columns:
            fig.add_trace(
                go.Scatter(
                    x=snapshots["n_evaluations"].tolist(),
                    y=snapshots["hypervolume"].tolist(),
                    name="hypervolume (accuracy, cost_usd; as stored by the search)",
                    mode="lines+markers",
                    line={"shape": "hv"},
                    yaxis="y2",
                )
            )
    fig.update_layout(
        xaxis_title="example runs",
        yaxis_title="best aggregate score",
        yaxis2={"title": "hypervolume", "overlaying": "y", "side": "right", "rangemode": "tozero"},
        legend={"orientation": "h", "y": -0.25},
        margin={"l": 10, "r": 10, "t": 30, "b": 10},
    )
    return fig


def progress_frame(snapshots: pd.DataFrame, progress: pd.DataFrame | None = None) -> pd.DataFrame:
    """The data of `progress_figure`: best score and hypervolume over example evaluations.

    Archive snapshots (one per generation) carry both figures; before the first snapshot, or
    for a store without snapshots, the per-result `progress` rows give the running best score
    (no hypervolume).

    Args:
        snapshots: `RunStore.snapshots(run_id)`.
        progress: `RunStore.progress(run_id)`, used when there are no snapshots.

    Returns:
        Columns `n_evaluations, best_score, hypervolume`, ordered by evaluations.
    """
    cols = ["n_evaluations", "best_score", "hypervolume"]
    if not snapshots.empty:
        df = snapshots.reindex(columns=cols)
    elif progress is not None and not progress.empty:
        df = progress.reindex(columns=cols)
    else:
        return pd.DataFrame({c: [] for c in cols})
    df = df.astype({"n_evaluations": "int64", "best_score": "float64", "hypervolume": "float64"})
    return df.sort_values("n_evaluations", kind="stable").reset_index(drop=True)


@dataclass(frozen=True, slots=True)
class HypervolumeSeries:
    """The hypervolume of the chosen axes over a run's snapshots.

    Attributes:
        frame: columns `n_evaluations, hypervolume`, one row per snapshot, by evaluations.
        objectives: the objectives it is computed over (the chart's X then Y; one if equal).
        reference: the fixed reference point, one value per objective (None: nothing to draw).
    """

    frame: pd.DataFrame
    objectives: tuple[str, ...]
    reference: tuple[float, ...] | None

    @property
    def label(self) -> str:
        """The legend entry, e.g. `"hypervolume (cost_usd, accuracy)"`."""
        return f"hypervolume ({', '.join(self.objectives)})"

    @property
    def reference_text(self) -> str:
        """The reference point in words, e.g. `"cost_usd = 0.5, accuracy = 0"`."""
        if self.reference is None:
            return ""
        return ", ".join(
            f"{o} = {v:g}" for o, v in zip(self.objectives, self.reference, strict=True)
        )


def hypervolume_series(
    snapshots: pd.DataFrame, archive: pd.DataFrame, x: str, y: str
) -> HypervolumeSeries:
    """The hypervolume of the chart's two objectives after each archive snapshot.

    Computed here, not read from the snapshot (which the search stores over accuracy and cost
    with a reference that moves as worse candidates arrive), so that it is over the objectives
    on screen and every snapshot uses the same reference point, hence comparable.

    Points are the candidates of each snapshot (`entries`) that are valid and scored on the
    run's full split (`tables.full_split`; minibatch estimates are left out), with their current
    values. The reference is fixed for the run: 0 for accuracy (as `Archive.hypervolume`), else
    the worst value among those candidates (a point at the worst value adds nothing along that
    axis). Directions: more is better for accuracy and aggregate score, less for the others.

    Args:
        snapshots: `RunStore.snapshots(run_id)` (`n_evaluations`, `entries` columns).
        archive: `RunStore.archive(run_id, ...)`.
        x, y: the chart's objectives.

    Returns:
        The series; an empty frame and no reference without snapshots or scored candidates.
    """
    objs = (x,) if x == y else (x, y)
    empty = HypervolumeSeries(pd.DataFrame({"n_evaluations": [], "hypervolume": []}), objs, None)
    need = ("candidate_idx", "valid", *objs)
    if snapshots.empty or "entries" not in snapshots.columns or archive.empty:
        return empty
    if any(c not in archive.columns for c in need):
        return empty
    valid = archive.loc[archive["valid"].astype(bool)]
    valid = valid.loc[full_split(valid)]
    values = valid[list(objs)].to_numpy(dtype=np.float64)
    keep = np.isfinite(values).all(axis=1)
    values = values[keep]
    ids = valid["candidate_idx"].to_numpy(dtype=np.int64)[keep]
    if values.shape[0] == 0:
        return empty
    dirs = ["max" if o in _MAX_OBJECTIVES else "min" for o in objs]
    ref: list[float] = []
    for j, o in enumerate(objs):
        if o in _HV_BOUNDED:
            ref.append(_HV_BOUNDED[o])
        else:
            col = values[:, j]
            ref.append(float(col.min() if dirs[j] == "max" else col.max()))
    evals: list[int] = []
    hvs: list[float] = []
    for n, entries in zip(
        snapshots["n_evaluations"].tolist(), snapshots["entries"].tolist(), strict=True
    ):
        members = np.isin(
            ids, np.asarray(list(entries if entries is not None else []), dtype=np.int64)
        )
        evals.append(int(n))
        hvs.append(hypervolume(values[members], ref, dirs) if members.any() else 0.0)
    frame = pd.DataFrame({"n_evaluations": evals, "hypervolume": hvs})
    frame = frame.sort_values("n_evaluations", kind="stable").reset_index(drop=True)
    return HypervolumeSeries(frame, objs, tuple(ref))


def _progress_mode(n: int) -> str:
    return "markers" if n == 1 else "lines"


def live_figure(
    archive: pd.DataFrame,
    frame: pd.DataFrame,
    x: str = "cost_usd",
    y: str = "accuracy",
    *,
    selected: int | None = None,
    log_x: bool = False,
    hv: HypervolumeSeries | None = None,
    noise: pd.DataFrame | None = None,
    hide_within_noise: bool = False,
) -> go.Figure:
    """The live page's one figure: the Pareto scatter (left); on the right the best score over
    evaluations (top) and the hypervolume of the chosen axes (bottom), each with its own axis.

    One figure rather than three: the browser sets up one plot, which is most of the live
    page's drawing time. Selection still maps through `customdata`: only the scatter's points
    carry it, so `selected_candidates` ignores a progress point. The progress series are drawn
    as lines (a marker only while a series has one point), so the chart's clickable markers
    are the candidates.

    Args:
        archive: as for `pareto_figure`.
        frame: `progress_frame(...)` (its best score is drawn).
        x, y, selected, log_x: as for `pareto_figure`.
        hv: `hypervolume_series(...)`; None or empty draws no hypervolume.
        noise, hide_within_noise: as for `pareto_figure` (error bars, the within-noise toggle).
    """
    fig = pareto_figure(
        archive,
        x,
        y,
        selected=selected,
        log_x=log_x,
        noise=noise,
        hide_within_noise=hide_within_noise,
    )
    title = {
        "showarrow": False,
        "xanchor": "left",
        "xref": "paper",
        "yref": "paper",
        "font": {"size": 14},
    }
    fig.update_layout(
        xaxis={"domain": [0.0, 0.56]},
        xaxis2={"domain": [0.68, 1.0], "anchor": "y2", "matches": "x3", "showticklabels": False},
        yaxis2={"anchor": "x2", "domain": [0.58, 1.0], "title": "best score"},
        xaxis3={"domain": [0.68, 1.0], "anchor": "y3", "title": "example runs"},
        yaxis3={"anchor": "x3", "domain": [0.0, 0.42], "title": "hypervolume",
                "rangemode": "tozero"},
        annotations=[
            {**title, "text": "Pareto front", "x": 0.0, "y": 1.08},
            {**title, "text": "Best aggregate score", "x": 0.68, "y": 1.08},
            # one word, as the title above: "hypervolume (cost_usd, accuracy)" ran past the
            # chart's edge at 1000 px; the legend and the caption below name the axes
            {**title, "text": "Hypervolume", "x": 0.68, "y": 0.47},
        ],
    )  # fmt: skip
    if not frame.empty:
        fig.add_trace(
            go.Scatter(
                x=frame["n_evaluations"].to_numpy(dtype=np.float64),
                y=frame["best_score"].to_numpy(dtype=np.float64),
                name="best aggregate score",
                mode=_progress_mode(len(frame)),
                line={"shape": "hv", "color": "#1f77b4"},
                xaxis="x2",
                yaxis="y2",
            )
        )
    if hv is not None and not hv.frame.empty:
        fig.add_trace(
            go.Scatter(
                x=hv.frame["n_evaluations"].to_numpy(dtype=np.float64),
                y=hv.frame["hypervolume"].to_numpy(dtype=np.float64),
                name=hv.label,
                mode=_progress_mode(len(hv.frame)),
                line={"shape": "hv", "color": "#9467bd"},
                xaxis="x3",
                yaxis="y3",
            )
        )
    return fig


TEST_FRONT_LABEL = "held-out test: reported only, never used for selection"
"""The label every view of test scores carries."""


@dataclass(frozen=True, slots=True)
class HeldOutFrontView:
    """The held-out test front as the Live page shows it beside the validation front.

    Attributes:
        title: e.g. `"Test front (held-out test: reported only, never used for selection)"`.
        caption: what the table is and how many front members were scored on test.
        table: one row per validation-front candidate: `candidate_idx`, validation
            `accuracy` and `cost_usd` (USD per example), then `test_accuracy`, `test_cost_usd`
            (USD per example), `test_latency_ms` (ms per example), `test_aggregate_score`,
            `on_test_front`; empty when nothing was scored on test.
    """

    title: str
    caption: str
    table: pd.DataFrame


_TEST_FRONT_SHOWN = (
    "candidate_idx",
    "accuracy",
    "cost_usd",
    "test_accuracy",
    "test_cost_usd",
    "test_latency_ms",
    "test_aggregate_score",
    "on_test_front",
)


def held_out_front_view(test_front: pd.DataFrame) -> HeldOutFrontView:
    """The Live page's test-front table from `RunStore.test_front` (works with one test
    score, as older runs have for their winner, and with many)."""
    title = f"Test front ({TEST_FRONT_LABEL})"
    if test_front.empty:
        return HeldOutFrontView(title, "No validation front yet.", pd.DataFrame())
    scored = test_front.loc[test_front["test_n_examples"].astype(int) > 0]
    if scored.empty:
        return HeldOutFrontView(
            title, "Not scored on the held-out test split (yet).", pd.DataFrame()
        )
    n = int(scored["test_n_examples"].max())
    caption = (
        f"{len(scored)} of {len(test_front)} validation-front candidates, each scored once on "
        f"the {n} held-out test problems. The front and the best are chosen on validation "
        "only; a test score never chooses. `on test front`: no other of them is at least as "
        "good on test on every objective and better on one."
    )
    table = pd.DataFrame(scored[list(_TEST_FRONT_SHOWN)]).reset_index(drop=True)
    return HeldOutFrontView(title, caption, table)


def view_revision(run_id: str, x: str, y: str, *, log_x: bool) -> str:
    """The live figure's `layout.uirevision`: one value per run and axes pair, so a zoom or pan
    is kept while they stay and dropped when they change."""
    return f"{run_id}|{x}|{y}|{'log' if log_x else 'linear'}"


KEEP_VIEW_JS = """
<script>
(() => {
  // Keeps a zoomed or panned Plotly chart's axis ranges across the Live page's refreshes.
  // uirevision alone is not enough in Streamlit: a chart with on_select gets a new element id
  // whenever its figure changes, so each refresh mounts a new plot, which starts from
  // autorange. The ranges are kept per uirevision (run and axes) in sessionStorage and set
  // again on the new plot; a double click (autorange) forgets them.
  const w = window;
  if (w.__tsKeepView) return;
  w.__tsKeepView = true;
  const PREFIX = "topology-studio-view:";
  const AXIS = /^([xy]axis[0-9]*)\\.(range|autorange)(\\[([01])\\])?$/;
  const load = (rev) => JSON.parse(w.sessionStorage.getItem(PREFIX + rev) || "{}");
  const save = (rev, v) => w.sessionStorage.setItem(PREFIX + rev, JSON.stringify(v));
  function attach(gd) {
    if (gd.__tsKeepView || !gd._fullLayout || !gd.layout || !w.Plotly) return;
    const rev = gd.layout.uirevision;
    if (rev === undefined || rev === null) return;
    gd.__tsKeepView = true;
    gd.on("plotly_relayout", (ev) => {
      const v = load(rev);
      for (const [k, val] of Object.entries(ev || {})) {
        const m = AXIS.exec(k);
        if (!m) continue;
        const axis = m[1];
        if (m[2] === "autorange") { if (val) delete v[axis]; continue; }
        const r = v[axis] || [null, null];
        if (m[4] !== undefined) r[Number(m[4])] = val; else if (Array.isArray(val)) r.splice(0, 2, ...val);
        v[axis] = r;
      }
      save(rev, v);
    });
    const v = load(rev);
    const update = {};
    for (const [axis, r] of Object.entries(v)) {
      if (r && r[0] !== null && r[1] !== null) update[axis + ".range"] = r;
    }
    if (Object.keys(update).length) w.Plotly.relayout(gd, update);
  }
  const scan = () => document.querySelectorAll(".js-plotly-plot").forEach(attach);
  new MutationObserver(scan).observe(document.body, { childList: true, subtree: true });
  w.setInterval(scan, 500);
  scan();
})();
</script>
"""
"""A script for `st.html(..., unsafe_allow_javascript=True)`: every Plotly chart with a
`layout.uirevision` keeps the axis ranges the user zoomed or panned to across remounts (per tab,
per uirevision), until a double click resets them."""
