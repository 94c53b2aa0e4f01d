"""Run overlay: several runs' validation fronts on one chart, hypervolume and best score
against evaluations, and the runs side by side with their spread across seeds."""

from __future__ import annotations

import streamlit as st

from studio._st_common import get_manager, guard, load_runs, store_banner
from studio.views.overlay import (
    RunData,
    common_reference,
    front_points,
    hypervolume_curves,
    overlay_figure,
    progress_overlay_figure,
    run_summary,
    spread_table,
)
from studio.views.tables import run_label

st.title("Run overlay")
manager = get_manager()
store_banner(manager)

runs = None
with guard():
    runs = load_runs(manager)
if runs is None or runs.empty:
    st.info("No runs yet.")
    st.stop()

records = {str(r["run_id"]): r for r in runs.to_dict("records")}
ids = list(records)
problems = sorted({str(r["problem"]) for r in records.values()})
problem = st.selectbox("Problem", problems, key="ov_problem")
mine = [i for i in ids if str(records[i]["problem"]) == problem]
wanted = [i for i in str(st.query_params.get("runs", "")).split(",") if i in mine]
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

with guard():
    data = [
        RunData(
            records[r],
            manager.store.archive(r, include_unevaluated=False),
            manager.store.snapshots(r),
        )
        for r in chosen
    ]
    ref = common_reference(data)
    st.plotly_chart(overlay_figure(front_points(data)), key="ov_fronts", width="stretch")
    st.plotly_chart(
        progress_overlay_figure(hypervolume_curves(data, ref)), key="ov_progress", width="stretch"
    )
    st.caption(
        f"Hypervolume over (cost per example, accuracy) with one reference point for every run "
        f"shown: cost ${ref[0]:.4f} (the dearest scored candidate among them), accuracy 0; so "
        "the runs' numbers compare (each run's Live page uses its own reference)."
    )
    summary = run_summary(data, ref)
    st.subheader("Runs side by side")
    st.dataframe(summary, hide_index=True, key="ov_summary")
    st.subheader("Spread across seeds")
    st.dataframe(spread_table(summary), hide_index=True, key="ov_spread")
