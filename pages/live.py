"""Live search: the Pareto front, progress, the archive and a candidate inspector, refreshing
on their own while the run goes on (a fragment with `run_every`, and a pause switch)."""

from __future__ import annotations

import time
import zlib

import pandas as pd
import streamlit as st

from core.search.pareto import DEFAULT_OBJECTIVES
from studio._st_common import (
    guard,
    open_runs_page,
    page,
    pick_run,
)
from studio._st_prompts import prompt_section
from studio._st_render import drilldown, format_value, inspector
from studio.views.candidate import candidate_view
from studio.views.drilldown import answer_row, gold_cases, trace_detail
from studio.views.front_noise import front_noise_table
from studio.views.links import compare_selection, parse_live_link, table_pick
from studio.views.pareto import (
    KEEP_VIEW_JS,
    OBJECTIVE_LABELS,
    OBJECTIVES,
    held_out_front_view,
    hypervolume_series,
    live_figure,
    progress_frame,
    selected_candidates,
    view_revision,
)
from studio.views.phases import phase_two_of
from studio.views.progress import run_progress
from studio.views.tables import (
    ARCHIVE_SORTS,
    SHOWN_FORMATS,
    archive_table,
    candidate_options,
    full_split,
    live_status,
    names_in_spec,
    status_word,
)

REFRESH_S = 2.0
"""Seconds between live refreshes."""

CONTROL_WIDTH = 240
"""Pixels of a picker in the page's wrapping rows of controls: its longest choice in full."""

TAB_ARCHIVE, TAB_INSPECT = "Archive", "Inspector"
"""The tabs right below the chart: the archive table, and the inspected candidate (a click on
the chart or on a row opens it, so it is never a long scroll away)."""

manager, runs = open_runs_page(
    "Live search", "No runs yet: start one on the Runs page or with `topology-studio search`."
)

# one run, two phases (`studio.views.phases`): a search's phase 2 is drawn on the search's page,
# not picked on its own; a link to it opens its search
second = phase_two_of(runs)
search_of_phase2 = {child: parent for parent, child in second.items()}
if st.query_params.get("run") in search_of_phase2:
    st.query_params["run"] = search_of_phase2[str(st.query_params.get("run"))]
runs = runs.loc[~runs["run_id"].astype(str).isin(search_of_phase2)].reset_index(drop=True)

link = parse_live_link(
    st.query_params.to_dict(), runs=[str(r) for r in runs["run_id"]], objectives=OBJECTIVES
)
search_states = {s.run_id: s.state for s in manager.searches() if s.alive}
picked_run = pick_run(runs, key="live_run", search_states=search_states)
if picked_run is None:
    st.stop()
run_id: str = str(picked_run)
# the state word the picker shows for this run: when the status line below finds another one
# (the run ended, was paused), the whole page runs again, so the two never disagree (one
# source: the store's record, with this studio's search state)
picked_row = runs.loc[runs["run_id"].astype(str) == run_id]
picker_word = status_word(
    str(picked_row["status"].tolist()[0]) if not picked_row.empty else "",
    search_states.get(run_id),
)

# the inspected candidate: from the deep link when the run or the link's candidate changes (the
# URL edited, browser back or forward), else from the chart, table or picker
link_moved = st.session_state.get("live_link_cand", link.candidate) != link.candidate
st.session_state["live_link_cand"] = link.candidate
if st.session_state.get("live_sel_run") != run_id:
    st.session_state["live_sel_run"] = run_id
    st.session_state["live_sel"] = link.candidate
    st.session_state["live_last_pick"] = None
    st.session_state["live_last_row"] = None
    st.session_state["live_tab_next"] = TAB_INSPECT if link.candidate is not None else TAB_ARCHIVE
elif link_moved and link.candidate is not None:
    st.session_state["live_sel"] = link.candidate
    st.session_state["live_tab_next"] = TAB_INSPECT


def _select(idx: int | None) -> None:
    st.session_state["live_sel"] = idx
    st.session_state["live_link_cand"] = idx  # the URL says it too: not a link that moved
    if idx is None:
        st.query_params.pop("candidate", None)
    else:
        st.query_params["candidate"] = str(idx)
        # the inspector's tab opens on the next run (the tabs may already be drawn in this one)
        st.session_state["live_tab_next"] = TAB_INSPECT


# the axes and switches in a wrapping row: four fixed columns cut
# "Live updates" to "L..." and the axes' names to "cost per example (US" at 1000 px
controls = st.container(horizontal=True, vertical_alignment="bottom", key="live_controls")
x = controls.selectbox(
    "X objective",
    OBJECTIVES,
    index=OBJECTIVES.index(link.x or "cost_usd"),
    format_func=lambda o: str(OBJECTIVE_LABELS.get(o, o)),
    key="live_x",
    width=CONTROL_WIDTH,
)
y = controls.selectbox(
    "Y objective",
    OBJECTIVES,
    index=OBJECTIVES.index(link.y or "accuracy"),
    format_func=lambda o: str(OBJECTIVE_LABELS.get(o, o)),
    key="live_y",
    width=CONTROL_WIDTH,
)
log_x = controls.checkbox("log X", key="live_logx", width="content")
hide_noise = controls.checkbox(
    "Hide within noise",
    key="live_hide_noise",
    width="content",
    help=(
        "Hide front candidates whose accuracy gain over the next cheaper front candidate could "
        "be zero (paired bootstrap on the same validation problems, 95%)."
    ),
)
live = controls.toggle(
    "Live updates", value=True, key="live_on", help="Pause to stop refreshing.", width="content"
)
st.query_params["x"] = x
st.query_params["y"] = y

record_now = None
with guard():
    record_now = manager.store.get_run(run_id)
# only a running run refreshes (a finished one cannot change; the switch pauses a running one)
running = record_now is None or record_now.status == "running"


SHARED_FOR_S = 1.0
"""How old (s) an archive read by the chart may be for the table to show it too: the two
fragments refresh on the same 2 s timer (and a full run draws both), so one read serves both
and the table shows the chart's candidates, never a read from an earlier refresh."""


def _read_archive() -> pd.DataFrame:
    """The run's archive (unevaluated candidates included, `comparable` added), read from the
    store and kept for the table and the inspector of this refresh."""
    archive = manager.store.archive(run_id, include_unevaluated=True)
    archive = archive.assign(comparable=full_split(archive))
    st.session_state["live_archive"] = (run_id, archive)
    st.session_state["live_archive_at"] = time.monotonic()
    return archive


def _shared_archive() -> pd.DataFrame:
    """The archive the chart read in this refresh (at most `SHARED_FOR_S` old), else a new read."""
    cached = st.session_state.get("live_archive")
    at = st.session_state.get("live_archive_at", 0.0)
    if cached is not None and cached[0] == run_id and time.monotonic() - at <= SHARED_FOR_S:
        return cached[1]
    return _read_archive()


def _front_noise(archive: pd.DataFrame) -> pd.DataFrame:
    """The validation front's paired intervals (`front_noise_table`), computed once per front:
    kept in the session under the run and the front's candidates and costs."""
    if archive.empty:
        return pd.DataFrame()
    valid = archive.loc[archive["valid"].astype(bool) & archive["on_front"].astype(bool)]
    front = valid.loc[full_split(valid)]
    key = (run_id, tuple(front["candidate_idx"].tolist()), tuple(front["cost_usd"].tolist()))
    cached = st.session_state.get("live_noise")
    if cached is not None and cached[0] == key:
        return cached[1]
    table = front_noise_table(manager.store, run_id, front)
    st.session_state["live_noise"] = (key, table)
    return table


@st.fragment(run_every=REFRESH_S if live and running else None)
def live_view() -> None:
    """Everything that refreshes: status, Pareto chart, progress, archive table."""
    with guard():
        store = manager.store
        record = store.get_run(run_id)
        # results before the archive: the budget's evaluations never outrun the candidates
        # read just after (the journal is ingested between the two reads)
        results = store.progress(run_id)
        archive = _read_archive()
        search = manager.search(run_id)  # a search this studio runs: paused lives there
        label = (
            live_status(
                record.status,
                record.reason,
                record.last_event_at,
                search.state if search is not None else None,
            )
            if record is not None
            else "unknown run"
        )
        st.markdown(f"**{label}**" + ("" if live or not running else "  (live updates paused)"))
        if record is not None:
            now_word = status_word(record.status, search.state if search is not None else None)
            if now_word != picker_word and st.session_state.get("live_word_rerun") != (
                run_id,
                now_word,
            ):
                st.session_state["live_word_rerun"] = (run_id, now_word)
                st.rerun()  # the whole page: the picker's label follows the status line
        if record is not None:
            prog = run_progress(
                status=record.status,
                config=record.config,
                started_at=record.started_at,
                finished_at=record.finished_at,
                cost_usd=float(results["cost_usd"].tolist()[-1]) if not results.empty else 0.0,
                logs=store.logs(run_id),
                results=results,
                now=time.time(),
            )
            eta = f" · ends in {prog.eta_text}" if prog.eta_text else ""
            st.markdown(f"**Phase:** {prog.phase_text}{eta}")
            st.caption(
                "**Budget used**: "
                + " · ".join(f"{line.name} {line.text()}" for line in prog.budget)
            )
        valid = archive.loc[archive["valid"].astype(bool)] if not archive.empty else archive
        best = valid.loc[valid["is_best"].astype(bool)] if not valid.empty else valid
        best_score = (
            format_value("aggregate_score", float(best["aggregate_score"].tolist()[0]))
            if not best.empty
            else "-"
        )
        # tiles as wide as their numbers, wrapping on a narrow screen (five equal columns cut
        # the values to "0.4..." at 1000 px)
        with st.container(horizontal=True, key="live_tiles"):
            for label_, value_ in (
                ("candidates", len(archive)),
                ("valid", len(valid)),
                ("on the front", sum(bool(v) for v in valid["on_front"].tolist())),
                ("best score", best_score),
                (
                    "best candidate",
                    str(best["candidate_idx"].tolist()[0]) if not best.empty else "-",
                ),
            ):
                st.metric(label_, value_, width="content")

        snaps = store.snapshots(run_id)
        frame = progress_frame(snaps, results if snaps.empty else None)
        hv = hypervolume_series(snaps, archive, x, y)
        fig = live_figure(
            archive,
            frame,
            x,
            y,
            selected=st.session_state.get("live_sel"),
            log_x=log_x,
            hv=hv,
            noise=_front_noise(archive),
            hide_within_noise=hide_noise,
        )
        # a zoom or pan survives the refreshes: uirevision changes only
        # with the run or the axes, and KEEP_VIEW_JS (below) sets the kept ranges on each new
        # plot (Streamlit mounts one per refresh: the element id follows the figure)
        fig.update_layout(
            height=440, margin={"t": 50}, uirevision=view_revision(run_id, x, y, log_x=log_x)
        )
        event = st.plotly_chart(
            fig,
            key=f"pareto_{run_id}",
            on_select="rerun",
            selection_mode=("points", "box", "lasso"),
            config={"displaylogo": False},
        )
        front_objs = ", ".join(o.name for o in DEFAULT_OBJECTIVES)
        st.caption(
            f"**Pareto front**: not dominated on {front_objs} among the candidates scored on "
            "the full validation split (in this 2-D view a front point can look dominated). "
            "**Hollow diamonds**: minibatch estimates, never on the front. **Error bars** "
            "(accuracy on Y): the 95% paired interval of a front point's gain over the next "
            "cheaper one; pale open circles are **within noise**. "
            + (
                f"**{hv.label}**: over the validated candidates of each archive snapshot, "
                f"reference point {hv.reference_text} (fixed for the run: 0 for accuracy, "
                "else the worst value among the validated candidates)."
                if hv.reference is not None
                else "No hypervolume yet: no archive snapshot with validated candidates."
            )
        )
        picked = selected_candidates(event.selection) if event else []
        if picked and picked != st.session_state.get("live_last_pick"):
            st.session_state["live_last_pick"] = picked
            # several points (box, lasso, shift-click): kept for "Compare selected" below,
            # which stays through the refreshes until another pick
            st.session_state["live_multi"] = (run_id, picked)
            _select(picked[0])
            st.rerun()
        multi = st.session_state.get("live_multi")
        chosen = compare_selection(run_id, multi[1]) if multi and multi[0] == run_id else None
        if chosen is not None:
            with st.container(horizontal=True, key="live_compare_sel"):
                st.page_link(
                    page("compare"), label=chosen.label, query_params={"items": chosen.items}
                )
                st.caption(chosen.caption)
        else:
            st.caption(
                "Select several points (box or lasso select in the chart's toolbar, or "
                "shift-click) to compare them."
            )


@st.fragment(run_every=REFRESH_S if live and running else None)
def archive_view(text: str, only_front: bool, sort_by: str, descending: bool) -> None:
    """The archive table (the inspected candidate's row selected) and the held-out test front,
    refreshing with the chart."""
    with guard():
        store = manager.store
        archive = _shared_archive()
        spec_names: dict[str, str] = {}
        if text.strip():
            # specs are content-addressed (never change): read each once per session
            cache = st.session_state.setdefault("live_spec_names", {})
            for h in {str(h) for h in archive["spec_hash"].tolist() if h}:
                if h not in cache:
                    cache[h] = names_in_spec(store.get_spec(h))
                spec_names[h] = cache[h]
        table = archive_table(
            archive,
            text=text,
            only_front=only_front,
            sort_by=sort_by,
            descending=descending,
            spec_names=spec_names,
        )
        st.caption(
            f"Archive: {len(table)} of {len(archive)} candidates shown; select a row to inspect "
            "it, several rows (ctrl- or shift-click) to compare them. Ranked by a score, "
            "candidates scored on the full validation split come first, minibatch estimates "
            "(`scored on` minibatch) after them."
        )
        sel = st.session_state.get("live_sel")
        order = [int(i) for i in table["candidate_idx"].tolist()]
        pos = order.index(sel) if sel in order else None
        if pos is not None:
            st.session_state["live_last_row"] = sel  # its row is selected below, not clicked
        # the inspected candidate's row is selected (highlighted); the key follows the selection
        # and the row order, so a new one applies and a stored row number never points at
        # another candidate after a sort, a filter or new candidates
        state = st.dataframe(
            table,
            hide_index=True,
            key=f"archive_{run_id}_{sel}_{zlib.crc32(repr(order).encode()):08x}",
            on_select="rerun",
            # several rows (shift- or ctrl-click, or the row checkboxes) give "Compare
            # selected", as several points on the chart do
            selection_mode="multi-row",
            selection_default={"selection": {"rows": [pos]}} if pos is not None else None,
            height=320,
            column_config={
                # as the filter matches them (SHOWN_FORMATS)
                **{c: st.column_config.NumberColumn(format=f) for c, f in SHOWN_FORMATS.items()},
                "scored_on": st.column_config.TextColumn(
                    "scored on",
                    help="the split and number of problems the scores rest on; minibatch "
                    "estimates rank after full validation scores",
                ),
            },
        )
        rows = [int(r) for r in state.selection.rows] if state else []
        pick = table_pick(run_id, rows, order, st.session_state.get("live_last_row"))
        if pick.compare is not None:
            with st.container(horizontal=True, key="live_compare_rows"):
                st.page_link(
                    page("compare"), label=pick.compare.label,
                    query_params={"items": pick.compare.items},
                )  # fmt: skip
                st.caption(pick.compare.caption)
        held_out = held_out_front_view(store.test_front(run_id))
        st.markdown(f"**{held_out.title}**")
        st.caption(held_out.caption)
        if not held_out.table.empty:
            st.dataframe(
                held_out.table,
                hide_index=True,
                key=f"test_front_{run_id}",
                column_config={
                    "accuracy": st.column_config.NumberColumn("val accuracy", format="%.3f"),
                    "cost_usd": st.column_config.NumberColumn("val cost_usd", format="%.5f"),
                    "test_accuracy": st.column_config.NumberColumn(format="%.3f"),
                    "test_cost_usd": st.column_config.NumberColumn(format="%.5f"),
                    "test_latency_ms": st.column_config.NumberColumn(format="%.0f"),
                    "test_aggregate_score": st.column_config.NumberColumn(format="%.4f"),
                    "on_test_front": st.column_config.CheckboxColumn("on test front"),
                },
            )
        if pick.inspect is not None:
            st.session_state["live_last_row"] = pick.inspect
            _select(pick.inspect)
            st.rerun()


st.html(KEEP_VIEW_JS, unsafe_allow_javascript=True)


live_view()
# phase 2 (prompts) of this search, or a phase-2 run itself: score against metric calls and
# each candidate's prompts, refreshed while phase 2 runs
prompt_section(manager, run_id, run_every=REFRESH_S if live else None)

# a link's candidate the run does not have: said above the tabs, not replaced silently;
# a running search may still evaluate it
with guard():
    cached = st.session_state.get("live_archive")
    known = (
        {int(i) for i in cached[1]["candidate_idx"].tolist()}
        if cached is not None and cached[0] == run_id
        else None
    )
    wanted = st.session_state.get("live_sel")
    if known is not None and wanted is not None and wanted not in known:
        st.warning(
            f"Run {run_id} has no candidate {wanted} (yet): no candidate is inspected; "
            "click a point of the chart or a row of the table, or pick one in the Inspector tab."
        )
    raw_candidate = st.query_params.get("candidate")
    if wanted is None and raw_candidate is not None and link.candidate is None:
        st.warning(
            f"{raw_candidate!r} is not a candidate number: no candidate is inspected; "
            "click a point of the chart or a row of the table, or pick one in the Inspector tab."
        )


def archive_tab() -> None:
    """The Archive tab: the filters and the archive table (`archive_view`)."""
    # a wrapping row, as the axes above (fixed columns cut the switches to "D..." and "Fr...")
    row = st.container(horizontal=True, vertical_alignment="bottom", key="live_filters")
    text = row.text_input(
        "Filter the archive",
        key="live_filter",
        placeholder="agent, operator, thought, reason, number, value",
        width=2 * CONTROL_WIDTH,
    )
    sort_by = row.selectbox("Sort by", ARCHIVE_SORTS, key="live_sort", width=CONTROL_WIDTH)
    descending = row.toggle("Descending", value=True, key="live_desc", width="content")
    only_front = row.toggle("Front only", value=False, key="live_front", width="content")
    archive_view(text, only_front, sort_by, descending)


def inspector_tab() -> None:
    """The Inspector tab: the candidate picker, the inspected candidate and its actions."""
    with guard():
        cached = st.session_state.get("live_archive")
        archive = (
            cached[1]
            if cached is not None and cached[0] == run_id
            else manager.store.archive(run_id, include_unevaluated=True)
        )
        options = candidate_options(archive)
        sel = st.session_state.get("live_sel")
        if sel is not None and sel not in options:
            sel = None
        if not options:
            st.caption("No candidates yet.")
        else:
            picked_box = st.selectbox(
                "Inspect candidate",
                options,
                index=options.index(sel) if sel is not None else None,
                key=f"live_box_{run_id}_{sel}",
                format_func=lambda i: f"candidate {i}",
                placeholder="click a point of the chart or a row of the table, or pick one here",
            )
            if picked_box is not None and picked_box != sel:
                _select(int(picked_box))
                sel = int(picked_box)
        # nothing selected yet: no inspector (the page draws faster without it)
        if options and sel is not None:
            row = archive.loc[archive["candidate_idx"] == sel].iloc[0]
            spec_hash = row.get("spec_hash")
            spec_json = manager.store.get_spec(str(spec_hash)) if spec_hash else None
            view = candidate_view(row, spec_json, manager.store.candidate_examples(run_id, sel))
            inspector(view)
            if not view.examples.empty:
                with st.expander("Drill into one example", expanded=True):
                    ex_ids = [
                        (str(e), int(t))
                        for e, t in zip(
                            view.examples["example_id"].tolist(),
                            view.examples["trial"].tolist(),
                            strict=True,
                        )
                    ]
                    picked_ex = st.selectbox(
                        "Example",
                        ex_ids,
                        index=None,
                        format_func=lambda k: k[0] if k[1] == 0 else f"{k[0]} (trial {k[1]})",
                        key=f"live_trace_{run_id}_{sel}",
                        placeholder="pick an example: question, gold, answer, route and steps",
                    )
                    if picked_ex is not None:
                        with guard():
                            run_rec = manager.store.get_run(run_id)
                            prob = (
                                manager.problem(run_rec.problem)
                                if run_rec is not None and run_rec.problem
                                else None
                            )
                            cases = gold_cases(prob.splits) if prob is not None else {}
                            ex_row = view.examples.loc[
                                (view.examples["example_id"] == picked_ex[0])
                                & (view.examples["trial"] == picked_ex[1])
                            ].iloc[0]
                            spans = manager.store.example_trace(
                                run_id, sel, picked_ex[0], trial=picked_ex[1]
                            )
                            drilldown(
                                cases.get(picked_ex[0]),
                                [answer_row(f"#{sel}", ex_row.to_dict())],
                                [
                                    (
                                        f"#{sel}",
                                        trace_detail(
                                            view.spec,
                                            spans,
                                            prob.prices if prob is not None else {},
                                        ),
                                    )
                                ],
                                key="live_drill",
                            )
            record = manager.store.get_run(run_id)
            target = (record.problem if record is not None else None) or "topology"
            # the actions in a wrapping row (equal columns cut them to "Open in t..." at 1000 px)
            bar = st.container(horizontal=True, key="live_actions")
            to_editor = view.spec is not None and bar.button(
                "Open in the editor", key="live_to_editor"
            )
            propose = view.spec is not None and bar.button("Propose for apply", key="live_propose")
            # the inspected candidate (picked on the chart or in the table) against the run's best
            best_rows = (
                archive.loc[archive["is_best"].astype(bool)] if "is_best" in archive else archive
            )
            best_idx = [int(i) for i in best_rows["candidate_idx"].tolist() if int(i) != sel][:1]
            if best_idx:
                bar.page_link(
                    page("compare"),
                    label="Compare with the best",
                    query_params={"items": f"{run_id}:{sel},{run_id}:{best_idx[0]}"},
                )
            if to_editor and view.spec is not None:
                st.session_state["editor_incoming"] = {
                    "spec_json": view.spec.model_dump_json(),
                    "name": target,
                    "source": f"run {run_id} candidate {sel}",
                    # the editor compares its evaluations with this candidate
                    "parent": [run_id, int(sel)],
                }
                st.switch_page(page("editor"))
            if propose and view.spec is not None:
                pid = manager.propose(target, view.spec, run_id=run_id, candidate_idx=sel)
                st.success(f"Proposal {pid}: write candidate {sel} as topology {target!r}.")
                st.page_link(
                    page("diff"),
                    label="Review it on Diff & apply",
                    query_params={"proposal": str(pid)},
                )


next_tab = st.session_state.pop("live_tab_next", None)
if next_tab is not None:
    st.session_state["live_tab"] = next_tab
tab_archive, tab_inspect = st.tabs([TAB_ARCHIVE, TAB_INSPECT], key="live_tab", on_change="rerun")
# only the open tab is drawn: st.tabs(on_change="rerun") runs the page again on a switch and
# `.open` says which tab is open (None: not tracked, both drawn); the hidden Inspector's picker
# of every candidate cost the browser ~0.3 s on each load of a large run's page
with tab_archive:
    if tab_archive.open is not False:
        archive_tab()
with tab_inspect:
    if tab_inspect.open is not False:
        inspector_tab()
