"""Agents: the roster of persisted specialists, and each recorded solve's subtask tree."""

from __future__ import annotations

import streamlit as st

from core.memory import DuckDBMemoryStore
from studio._st_common import db_path, guard
from studio.views.agents import hook_rows, roster_table, solves, subtask_rows

st.title("Agents")

with guard():
    with DuckDBMemoryStore(db_path()) as memory:
        specialists = memory.entries("procedural")
        episodes = memory.entries("episodic")

    st.subheader("Roster")
    table = roster_table(specialists)
    if table.empty:
        st.info('No specialists yet: `topology-studio solve "GOAL" --planner ...` adds them.')
    else:
        st.dataframe(table, hide_index=True, key="roster_table")
        trigger = st.selectbox("Specialist", list(table["trigger"]), key="specialist")
        chosen = next(e for e in specialists if e.key == trigger)
        st.json(chosen.metadata.get("agent_spec", {}), expanded=False)

    st.subheader("Solves")
    recorded = solves(episodes)
    if not recorded:
        st.info("No solves recorded yet.")
    else:
        labels = [label for label, _ in recorded]
        label = st.selectbox("Solve", labels, key="solve")
        result = dict(recorded)[label]
        cols = st.columns(4)
        cols[0].metric("subtasks", len(result.get("subtask_results", [])))
        cols[1].metric("cost (USD)", f"{float(result.get('cost_usd', 0.0)):.6f}")
        cols[2].metric(
            "tokens", int(result.get("input_tokens", 0)) + int(result.get("output_tokens", 0))
        )
        cols[3].metric("ms", f"{float(result.get('total_duration_ms', 0.0)):.0f}")
        st.caption(str(result.get("summary", "")))
        st.dataframe(subtask_rows(result), hide_index=True, key="subtask_tree")
        hooks = hook_rows(result)
        if not hooks.empty:
            st.markdown("**Hook decisions**")
            st.dataframe(hooks, hide_index=True, key="hook_decisions")
        dropped = result.get("dropped_subtasks", [])
        if dropped:
            st.warning(f"Dropped over max_subtasks: {', '.join(dropped)}")
