"""Runs: every recorded run; start a new search; stop, pause or resume one this studio runs."""

from __future__ import annotations

import streamlit as st

from core.search.strategies import STRATEGY_NAMES
from studio._st_common import get_manager, guard, load_runs, page, store_banner
from studio.manager import SearchRequest
from studio.views.tables import runs_table

st.title("Runs")
manager = get_manager()
store_banner(manager)

with guard():
    runs = load_runs(manager)
    table = runs_table(runs)
    if table.empty:
        st.info("No runs yet: start a search below, or run `topology-studio search PROBLEM`.")
    else:
        st.dataframe(
            table,
            hide_index=True,
            key="runs_table",
            column_config={
                "status_label": st.column_config.TextColumn("status"),
                "cost_usd": st.column_config.NumberColumn("cost (USD)", format="%.4f"),
                "best_score": st.column_config.NumberColumn("best score", format="%.4f"),
            },
        )
        st.page_link(
            page("live"),
            label="Open the newest run's live view",
            query_params={"run": str(table["run_id"].iloc[0])},
        )

with guard():
    searches = manager.searches()
    if searches:
        st.subheader("Searches started here")
        for s in searches:
            cols = st.columns([4, 2, 1, 1, 1])
            cols[0].markdown(f"`{s.run_id}` {s.request.problem} / {s.request.strategy}")
            cols[1].markdown(f"**{s.state}**" + (f": {s.error}" if s.error else ""))
            alive = s.alive
            if cols[2].button(
                "Pause", key=f"pause_{s.run_id}", disabled=not alive or s.state == "paused"
            ):
                manager.pause(s.run_id)
                st.rerun()
            if cols[3].button(
                "Resume", key=f"resume_{s.run_id}", disabled=not alive or s.state != "paused"
            ):
                manager.resume(s.run_id)
                st.rerun()
            if cols[4].button("Stop", key=f"stop_{s.run_id}", disabled=not alive):
                manager.stop(s.run_id)
                st.rerun()

st.subheader("Start a search")
with guard():
    problems = manager.problem_names()
    with st.form("new_search"):
        c1, c2, c3 = st.columns(3)
        problem = c1.selectbox("Problem", problems or ["gsm8k_replay"], key="f_problem")
        strategy = c2.selectbox("Strategy", list(STRATEGY_NAMES), key="f_strategy")
        seed = c3.number_input("Seed", value=42, step=1, key="f_seed")
        c4, c5, c6 = st.columns(3)
        max_evals = c4.number_input(
            "Budget: candidates", min_value=1, value=20, step=1, key="f_evals"
        )
        max_usd = c5.number_input(
            "Budget: USD (0 = problem default)", min_value=0.0, value=0.0, key="f_usd"
        )
        max_wall = c6.number_input(
            "Budget: seconds (0 = problem default)", min_value=0.0, value=0.0, key="f_wall"
        )
        c7, c8 = st.columns(2)
        model = c7.text_input("Designer model (meta_agent only), provider:model", key="f_model")
        time_scale = c8.number_input(
            "Replay time scale (latency slept x this)", min_value=0.0, value=0.0, key="f_ts"
        )
        submitted = st.form_submit_button("Start search", type="primary")
    if submitted:
        request = SearchRequest(
            problem=str(problem),
            strategy=str(strategy),
            seed=int(seed),
            max_evaluations=int(max_evals),
            max_usd=float(max_usd) or None,
            max_wall_s=float(max_wall) or None,
            meta_model=model.strip() or None,
            time_scale=float(time_scale),
        )
        with st.spinner("Loading the problem and starting the search..."):
            run_id = manager.start_search(request)
        st.success(f"Started run {run_id}.")
        st.page_link(page("live"), label="Watch it live", query_params={"run": run_id})
