"""Runs: every recorded run, refreshing on its own, with links to its Live page and overlay;
resume an interrupted run; start a new search with the command line's options; pause, continue
or stop one this studio runs."""

from __future__ import annotations

import streamlit as st

from core.search.strategies import STRATEGY_NAMES
from studio._cli_common import CliUsageError, parse_overrides
from studio._st_common import get_manager, guard, load_runs, page, show_error, store_banner
from studio.manager import SearchRequest
from studio.views.phases import PHASE_COLUMN, fold_phases
from studio.views.tables import runs_overview, split_editor_runs

REFRESH_S = 3.0
"""Seconds between refreshes of the runs table and the searches panel."""

_COUNT_OPTIONS: tuple[tuple[str, str, str], ...] = (
    (
        "f_patience",
        "Patience (0 = problem default)",
        "--patience: evaluations in a row without a new best before stopping",
    ),
    ("f_generations", "Generations (0 = until the budget)", "--generations: generations to run"),
    (
        "f_minibatch",
        "Minibatch size (0 = problem default)",
        "--minibatch-size: validation examples per candidate evaluation during the search",
    ),
    (
        "f_concurrency",
        "Concurrency (0 = problem default)",
        "--concurrency: examples evaluated at once",
    ),
)
"""The start form's whole-number options (widget key, label, the CLI flag it stands for); 0
keeps the problem's or the strategy's own value."""

st.title("Runs")
manager = get_manager()
store_banner(manager)
refusal = manager.start_refusal()

live = st.toggle(
    f"Refresh every {REFRESH_S:g} s",
    value=True,
    key="runs_live",
    help="The runs table and the searches below refresh on their own; switch off to keep "
    "them still.",
)

show_editor = st.toggle(
    "List editor evaluations",
    value=True,
    key="runs_editor",
    help="runs recorded by the Topology editor's Evaluate (strategy editor: one topology, no "
    "search); switch off to list the searches alone",
)


def _say_resumed(run_id: str) -> None:
    """Resume an interrupted run; the outcome stays shown across refreshes."""
    try:
        with st.spinner(f"Checking run {run_id}'s journal and problem, then resuming it..."):
            manager.resume_search(run_id)
    except Exception as exc:  # noqa: BLE001 (shown in the page)
        st.session_state["runs_msg"] = ("error", run_id, exc)
    else:
        st.session_state["runs_msg"] = ("resumed", run_id, None)


@st.fragment(run_every=REFRESH_S if live else None)
def runs_view() -> None:
    """The runs table, the interrupted runs' Resume buttons, the searches started here."""
    with guard():
        runs = load_runs(manager)
        only_searches, n_editor = split_editor_runs(runs)
        if n_editor and not show_editor:
            runs = only_searches
            st.caption(f"{n_editor} editor evaluation(s) not listed.")
        # one run, two phases: a search's phase 2 right under it (`studio.views.phases`)
        runs = fold_phases(runs)
        searches = manager.searches()
        states = {s.run_id: s.state for s in searches if s.alive}
        basis = {str(p): manager.cost_basis(str(p)) for p in set(runs["problem"].tolist())}
        table = runs_overview(runs, search_states=states, cost_basis=basis)
        if not table.empty:  # "1 topology" / "2 prompts" for a run with two phases, after
            # the links, which stay beside the run id (`runs_overview`)
            at = list(table.columns).index("overlay") + 1
            table.insert(at, PHASE_COLUMN, runs[PHASE_COLUMN].tolist())
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
                    "costs": st.column_config.TextColumn(
                        "costs",
                        help="replayed (modelled): the problem replays recorded model output, "
                        "so its cost is modelled from the recorded text's tokens at the "
                        "problem's list prices and no money is spent; measured: priced from "
                        "the usage of real model calls",
                    ),
                    "best_score": st.column_config.NumberColumn("best score", format="%.4f"),
                    "live": st.column_config.LinkColumn(
                        "live", display_text="Live", help="this run's Live search page"
                    ),
                    "overlay": st.column_config.LinkColumn(
                        "overlay",
                        display_text="Overlay",
                        help="this run with the other runs of its problem on one chart",
                    ),
                },
            )
            st.caption(
                f"Refreshes every {REFRESH_S:g} s while the switch above is on. **costs**: "
                "*replayed (modelled)* runs spend no money: their cost is modelled from the "
                "recorded text at the problem's list prices."
                if live
                else "Not refreshing (switch on above)."
            )
        msg = st.session_state.get("runs_msg")
        if msg is not None:
            kind, rid, exc = msg
            if kind == "resumed":
                st.success(f"Resumed run {rid}.")
                st.page_link(page("live"), label="Watch it live", query_params={"run": rid})
            else:
                show_error(exc)
        interrupted = (
            table.loc[runs.reset_index(drop=True)["status"] == "interrupted"]
            if not table.empty
            else table
        )
        if not interrupted.empty:
            st.subheader("Interrupted runs")
            st.caption(
                "No process writes these any more and they did not finish. Resume continues "
                "one where it stopped, as `topology-studio search PROBLEM --resume RUN` does: "
                "its recorded options, the recorded work not done again."
            )
            parents = dict(
                zip(
                    runs["run_id"].astype(str).tolist(),
                    runs["parent_run_id"].tolist(),
                    strict=True,
                )
            )
            for r in interrupted.to_dict("records"):
                rid = str(r["run_id"])
                cols = st.columns([4, 1])
                parent = parents.get(rid)
                # phase 2 is resumed as phase 2 of its search (the search's run id)
                cols[0].markdown(
                    (f"`{parent}` phase 2 (prompts)" if isinstance(parent, str) else f"`{rid}`")
                    + f" {r['problem']} / {r['strategy']}: {r['n_candidates']} candidates "
                    "recorded"
                )
                if cols[1].button(
                    "Resume",
                    key=f"resume_run_{rid}",
                    disabled=bool(refusal),
                    help=refusal or "continue this run in the studio",
                ):
                    _say_resumed(rid)
                    st.rerun()

        if searches:
            st.subheader("Searches started here")
            labels = dict(
                zip(
                    table["run_id"].astype(str).tolist(),
                    table["status_label"].tolist(),
                    strict=True,
                )
            )
            for s in searches:
                cols = st.columns([3, 3, 3])
                # the buttons as wide as their words, wrapping when narrow (equal columns cut
                # them to "P..." at 1000 px)
                buttons = cols[2].container(horizontal=True, key=f"search_buttons_{s.run_id}")
                kind = "resumed" if s.resumed else s.request.strategy
                cols[0].markdown(f"`{s.run_id}` {s.request.problem} / {kind}")
                # the table's words for it (one source); before its first event, its own state
                said = labels.get(s.run_id, s.state)
                cols[1].markdown(f"**{said}**" + (f": {s.error}" if s.error else ""))
                alive = s.alive
                if buttons.button(
                    "Pause", key=f"pause_{s.run_id}", disabled=not alive or s.state == "paused"
                ):
                    manager.pause(s.run_id)
                    st.rerun()
                if buttons.button(
                    "Continue",
                    key=f"resume_{s.run_id}",
                    disabled=not alive or s.state != "paused",
                    help="let a paused search go on",
                ):
                    manager.resume(s.run_id)
                    st.rerun()
                if buttons.button("Stop", key=f"stop_{s.run_id}", disabled=not alive):
                    manager.stop(s.run_id)
                    st.rerun()


runs_view()

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
        counts: dict[str, int] = {}
        for col, (key, label, flag_help) in zip(
            st.columns(len(_COUNT_OPTIONS)), _COUNT_OPTIONS, strict=True
        ):
            counts[key] = int(
                col.number_input(label, min_value=0, value=0, step=1, key=key, help=flag_help)
            )
        c11, c12 = st.columns(2)
        model = c11.text_input("Designer model (meta_agent only), provider:model", key="f_model")
        time_scale = c12.number_input(
            "Replay time scale (latency slept x this)", min_value=0.0, value=0.0, key="f_ts"
        )
        sets = st.text_area(
            "Problem settings (--set), one FIELD=VALUE a line",
            key="f_set",
            placeholder="gold.validation_size=50",
            help="overrides of the problem's problem.toml fields; VALUE is read as TOML "
            "(numbers, true/false, quoted strings), else taken as text",
        )
        use_test = st.checkbox(
            "Score the front on the held-out test split at the end (off = --no-test)",
            value=True,
            key="f_test",
        )
        submitted = st.form_submit_button("Start search", type="primary", disabled=bool(refusal))
    if refusal:
        st.caption(refusal)
    replayed = [p for p in problems if manager.cost_basis(p) == "replayed"]
    if replayed:
        st.caption(
            f"Costs of {', '.join(replayed)} are replayed: modelled from the recorded text at "
            "the problem's list prices; a search spends no money."
        )
    if submitted:
        try:
            overrides = parse_overrides([ln for ln in sets.splitlines() if ln.strip()])
        except CliUsageError as exc:
            st.error(f"Problem settings: {exc}")
            st.stop()
        request = SearchRequest(
            problem=str(problem),
            strategy=str(strategy),
            seed=int(seed),
            max_evaluations=int(max_evals),
            max_usd=float(max_usd) or None,
            max_wall_s=float(max_wall) or None,
            patience=counts["f_patience"] or None,
            n_generations=counts["f_generations"] or None,
            minibatch_size=counts["f_minibatch"] or None,
            concurrency=counts["f_concurrency"] or None,
            overrides=overrides,
            meta_model=model.strip() or None,
            time_scale=float(time_scale),
            use_test_split=bool(use_test),
        )
        with st.spinner("Loading the problem and starting the search..."):
            run_id = manager.start_search(request)
        st.success(f"Started run {run_id}.")
        st.page_link(page("live"), label="Watch it live", query_params={"run": run_id})
