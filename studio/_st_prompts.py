"""The Live page's phase-2 section: for a prompt run, score against metric
calls (`studio.views.prompts_chart`), the candidates' table, and the prompts of the candidate
picked on the chart or in the picker below it. It refreshes with the page's other fragments
while the run goes on, and draws nothing for a run that is not a phase-2 run.

Drawn on a search's Live page when the search has a phase 2 (`studio.views.phases`: one run,
two phases), below the topology chart; and on a phase 2's own page when its search is not in
the store."""

from __future__ import annotations

from typing import Any

import pandas as pd
import streamlit as st

from studio._st_common import guard
from studio.views.pareto import selected_candidates
from studio.views.phases import phase_two_of
from studio.views.prompt_apply import prompt_run
from studio.views.prompts_chart import PROMPT_COLUMNS, prompt_figure, prompt_table

__all__ = ["prompt_section"]


def prompt_section(manager: Any, run_id: str, *, run_every: float | None) -> None:
    """Draw the phase-2 section of run `run_id`: its phase 2 when it is a search that has one,
    itself when it is a phase-2 run, else nothing.

    Args:
        manager: the page's `StudioManager`.
        run_id: the run the Live page shows.
        run_every: seconds between refreshes while phase 2 runs (None: updates are paused);
            a phase 2 that is not running is not refreshed.
    """
    record = None
    with guard():
        record = manager.store.get_run(run_id)
        run = prompt_run(run_id, record.strategy, record.config or {}) if record else None
        if record is not None and run is None:
            second = phase_two_of(manager.store.list_runs()).get(run_id)
            record = None
            if second is not None:
                record = manager.store.get_run(second)
                run = prompt_run(second, record.strategy, record.config or {}) if record else None
    if run is None or record is None:
        return
    run_id = run.run_id
    if record.status != "running":
        run_every = None
    pick_key = f"pc_pick_{run_id}"

    @st.fragment(run_every=run_every)
    def _view() -> None:
        with guard():
            archive = manager.store.archive(run_id, include_unevaluated=True)
            table = prompt_table(archive, manager.store.snapshots(run_id), run.genes)
            st.subheader("Phase 2: prompt candidates")
            parent = f" of run {run.parent_run_id}" if run.parent_run_id else ""
            st.caption(
                f"GEPA evolving the prompts of the search's winner{parent}: each point is a "
                "prompt candidate (0 = the starting prompts), its score on the validation split "
                "against the metric calls spent when it was found (one metric call = one run on "
                "one example); the dotted line is the best score so far, the star the best "
                "candidate. Click a point, or pick a candidate below, to read its prompts."
            )
            if table.empty:
                st.caption("No prompt candidate recorded yet.")
                return
            options = [int(i) for i in table["candidate_idx"].tolist()]
            best = [int(i) for i in table.loc[table["is_best"], "candidate_idx"].tolist()]
            if st.session_state.get(pick_key) not in options:
                st.session_state[pick_key] = best[0] if best else options[-1]
            fig = prompt_figure(table, selected=st.session_state[pick_key])
            fig.update_layout(height=360, margin={"t": 30}, uirevision=f"prompts-{run_id}")
            event = st.plotly_chart(
                fig,
                key=f"prompts_{run_id}",
                on_select="rerun",
                selection_mode=("points",),
                config={"displaylogo": False},
            )
            picked = selected_candidates(event.selection) if event else []
            last_key = f"pc_last_{run_id}"
            if picked and picked != st.session_state.get(last_key):
                st.session_state[last_key] = picked
                if picked[0] in options:
                    st.session_state[pick_key] = picked[0]
            unplaced = sum(1 for v in table["metric_calls"].tolist() if v is pd.NA)
            if unplaced:
                st.caption(
                    f"{unplaced} candidate(s) not on the chart: no archive snapshot gives the "
                    "metric calls spent when they were found (they are in the table)."
                )
            st.dataframe(
                table[list(PROMPT_COLUMNS)],
                hide_index=True,
                key=f"pc_table_{run_id}",
                column_config={
                    "score": st.column_config.NumberColumn(format="%.4f"),
                    "accuracy": st.column_config.NumberColumn(format="%.4f"),
                },
            )
            sel = st.selectbox(
                "Prompts of candidate",
                options,
                format_func=lambda i: f"{i}" + (" (best)" if i in best else ""),
                key=pick_key,
            )
            row = table.loc[table["candidate_idx"] == sel].iloc[0]
            for gene in run.genes:
                st.markdown(f"**`{gene}`**")
                text = str(row[gene])
                st.code(text or "(empty)", language=None, wrap_lines=True)

    _view()
