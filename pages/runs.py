"""Runs: every recorded run, refreshing on its own, with links to its Live page and overlay and
where it executes; the workers of a running run on Ray (their health as its driver last
recorded it); resume an interrupted run; start a new search with the command line's options
(local or on Ray); pause, continue or stop one this studio runs."""

from __future__ import annotations

import time

import pandas as pd
import streamlit as st

from core.search.strategies import STRATEGY_NAMES
from studio._st_common import get_manager, guard, load_runs, page, show_error, store_banner
from studio.cli._common import CliUsageError, parse_overrides
from studio.manager import SearchRequest
from studio.views.phases import PHASE_COLUMN, fold_phases
from studio.views.tables import runs_overview, split_editor_runs
from studio.views.workers import health_caption, remote_running, worker_table

REFRESH_S = 3.0
"""Seconds between refreshes of the runs table and the searches panel."""

STATUS_PX = 160
"""Width of the runs table's status column in pixels: its first words ("running, data as of
...", "stopped: ...") without pushing the best score out of view at 1000 px, where the table is
about 540 px wide beside the sidebar (run id, Live and Overlay take about 275)."""

FIGURE_PX = 85
"""Width of the best score and cost columns in pixels (a 4-decimal figure and its header)."""

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


def workers_panel(runs: pd.DataFrame) -> None:
    """The workers of a running run on a remote executor, from the latest health snapshot its
    driver recorded (`StudioManager.worker_health`), with the snapshot's age."""
    remote = remote_running(runs)
    if not remote:
        return
    st.subheader("Workers")
    picked = st.selectbox(
        "Running run on a remote executor",
        remote,
        key="runs_workers_run",
        help="the run's driver records its workers' health every few seconds while it runs",
    )
    run_id = str(picked or remote[0])
    snapshot = manager.worker_health(run_id)
    if snapshot is None:
        where = runs.loc[runs["run_id"].astype(str) == run_id, "executor"].tolist()
        st.info(
            f"Run {run_id} runs on {where[0] if where else 'a remote executor'}; no worker "
            "health recorded yet (its driver records it once the workers are up)."
        )
        return
    now = time.time()
    st.caption(health_caption(snapshot, now))
    st.dataframe(
        worker_table(snapshot, now),
        hide_index=True,
        key="runs_workers",
        column_config={
            "runs_done": st.column_config.NumberColumn(
                "runs done", help="examples x trials this worker finished for the run"
            ),
            "in_flight": st.column_config.NumberColumn(
                "in flight", help="runs sent to this worker and not back yet"
            ),
            "last_seen": st.column_config.TextColumn(
                "last seen", help="its latest answer (a ping or a batch), before the snapshot"
            ),
        },
    )


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
        if not table.empty:  # "1 topology" / "2 prompts" for a run with two phases, with
            # what the run is (after the seed): the key figures stay first (`RUN_COLUMNS`)
            at = list(table.columns).index("seed") + 1
            table.insert(at, PHASE_COLUMN, runs[PHASE_COLUMN].tolist())
        if table.empty:
            st.info("No runs yet: start a search below, or run `topology-studio search PROBLEM`.")
        else:
            st.dataframe(
                table,
                hide_index=True,
                key="runs_table",
                column_config={
                    # widths that keep status, best score and the start of cost in view
                    # at 1000 px
                    "status_label": st.column_config.TextColumn("status", width=STATUS_PX),
                    "cost_usd": st.column_config.NumberColumn(
                        "cost (USD)", format="%.4f", width=FIGURE_PX
                    ),
                    "costs": st.column_config.TextColumn(
                        "costs",
                        help="replayed (modelled): the problem replays recorded model output, "
                        "so its cost is modelled from the recorded text's tokens at the "
                        "problem's list prices and no money is spent; measured: priced from "
                        "the usage of real model calls",
                    ),
                    "best_score": st.column_config.NumberColumn(
                        "best score", format="%.4f", width=FIGURE_PX
                    ),
                    "design_cost_usd": st.column_config.NumberColumn(
                        "designer (USD)",
                        format="%.6f",
                        help="the designer's (meta agent) or, for phase 2, the reflection "
                        "model's own calls: part of the run's cost, not of any candidate's",
                    ),
                    "design_input_tokens": st.column_config.NumberColumn(
                        "designer input tokens",
                        help="input tokens of the designer's (or reflection model's) own "
                        "calls, apart from the candidates'",
                    ),
                    "design_output_tokens": st.column_config.NumberColumn(
                        "designer output tokens",
                        help="output tokens of the designer's (or reflection model's) own "
                        "calls, apart from the candidates'",
                    ),
                    "executor": st.column_config.TextColumn(
                        "executor",
                        help="where the run's evaluations ran, as the run recorded it: local "
                        "(the search's own process) or ray (worker actors, how many, where)",
                    ),
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
        workers_panel(runs)
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
        c13, c14 = st.columns([1, 2])
        executor = c13.selectbox(
            "Executor",
            ["local", "ray"],
            key="f_executor",
            help="--executor: where evaluations run: local (this studio's process) or ray "
            "(Ray worker actors; needs pip install 'topology-studio[ray]')",
        )
        ray_address = c14.text_input(
            "Ray address (ray only; empty = a private local Ray instance)",
            key="f_ray_address",
            placeholder="auto, HOST:6379 or ray://HOST:10001",
            help="--ray-address: the Ray cluster to connect to; checked (something must answer "
            "there) before the search starts",
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
            executor="ray" if executor == "ray" else "local",
            ray_address=ray_address.strip() or None,
        )
        with st.spinner(
            "Loading the problem and starting the search"
            + (" (connecting to Ray)..." if request.executor == "ray" else "...")
        ):
            run_id = manager.start_search(request)
        st.success(f"Started run {run_id}.")
        st.page_link(page("live"), label="Watch it live", query_params={"run": run_id})
