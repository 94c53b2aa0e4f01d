"""Run overlay: several runs' validation fronts on one chart, hypervolume and best score
against evaluations, and the runs side by side with their spread across seeds."""

from __future__ import annotations

from typing import Any, cast

import pandas as pd
import streamlit as st

from studio._st_common import db_path, get_manager, guard, open_runs_page
from studio.cli.sweep import sweep_groups
from studio.views.overlay import (
    RunData,
    common_reference,
    front_points,
    hypervolume_curves,
    overlay_figure,
    progress_overlay_figure,
    run_colours,
    run_summary,
    spread_table,
)
from studio.views.tables import run_label, split_editor_runs

manager, runs = open_runs_page("Run overlay", "No runs yet.")
searches, n_editor = split_editor_runs(runs)
if n_editor:
    # an editor evaluation is one candidate, not a search: left out unless asked for
    if not st.toggle(
        f"Include editor evaluations ({n_editor})",
        value=False,
        key="ov_editor",
        help="runs recorded by the Topology editor's Evaluate: one topology each, no search",
    ):
        runs = searches
if runs.empty:
    st.info("No search runs yet: only editor evaluations (switch them on above).")
    st.stop()

records = {str(r["run_id"]): r for r in runs.to_dict("records")}
ids = list(records)
groups = sweep_groups(db_path())
if groups:
    # a sweep (`topology-studio sweep`) is a named group of runs: one click opens them all
    with st.expander(f"Sweeps ({len(groups)})", expanded=not st.query_params.get("runs")):
        for g in groups:
            members = [str(r) for r in cast(list[object], g["runs"]) if str(r) in records]
            label = f"Open sweep {g['name']}: {len(members)} runs of {g['problem']}"
            if st.button(label, key=f"ov_sweep_{g['name']}", disabled=not members):
                for key in [k for k in st.session_state if str(k).startswith("ov_")]:
                    del st.session_state[key]
                st.query_params["runs"] = ",".join(members)
                st.rerun()
problems = sorted({str(r["problem"]) for r in records.values()})
linked = [i for i in str(st.query_params.get("runs", "")).split(",") if i in records]
if linked and "ov_problem" not in st.session_state:
    # a link (the Runs page's "Overlay") opens on its runs' problem
    st.session_state["ov_problem"] = str(records[linked[0]]["problem"])
problem = st.selectbox("Problem", problems, key="ov_problem")
mine = [i for i in ids if str(records[i]["problem"]) == problem]
wanted = [i for i in linked if i in mine]
chosen = st.multiselect(
    "Runs (strategies, seeds)",
    mine,
    default=wanted or mine[:10],
    format_func=lambda r: str(run_label(records[r])),
    key=f"ov_runs_{problem}",
)
st.query_params["runs"] = ",".join(chosen)
if not chosen:
    st.info("Pick one or more runs.")
    st.stop()


@st.cache_data(max_entries=32, show_spinner=False)
def _views(
    keys: tuple[tuple[str, int, str], ...],
) -> tuple[Any, Any, pd.DataFrame, pd.DataFrame, tuple[float, float]]:
    """The page's figures and tables for runs `(run_id, n_events, last_event_at)`: cached, so
    opening the page again (or a widget change elsewhere) reads nothing while no run moved."""
    store = get_manager().store
    data = [
        RunData(records[r], store.archive(r, include_unevaluated=False), store.snapshots(r))
        for r, _, _ in keys
    ]
    ref = common_reference(data)
    summary = run_summary(data, ref)
    colours = run_colours(data)  # one colour per run in both charts
    return (
        overlay_figure(front_points(data), colours),
        progress_overlay_figure(hypervolume_curves(data, ref), colours),
        summary,
        spread_table(summary),
        ref,
    )


with guard():
    keys = tuple(
        (r, int(records[r].get("n_events") or 0), str(records[r].get("last_event_at")))
        for r in chosen
    )
    fronts_fig, progress_fig, summary, spread, ref = _views(keys)
    st.plotly_chart(fronts_fig, key="ov_fronts", width="stretch")
    st.plotly_chart(progress_fig, key="ov_progress", width="stretch")
    st.caption(
        f"Hypervolume over (cost per example, accuracy) with one reference point for every run "
        f"shown: cost ${ref[0]:.4f} (the dearest scored candidate among them), accuracy 0; so "
        "the runs' numbers compare (each run's Live page uses its own reference)."
    )
    st.subheader("Runs side by side")
    figure = st.column_config.NumberColumn(format="%.4f")
    st.dataframe(
        summary,
        hide_index=True,
        key="ov_summary",
        column_config={
            "best_accuracy": figure,
            "best_score": figure,
            "hypervolume": figure,
            "cost_usd": st.column_config.NumberColumn("cost (USD)", format="%.2f"),
        },
    )
    st.subheader("Spread across seeds")
    st.dataframe(spread, hide_index=True, key="ov_spread")
