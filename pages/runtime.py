"""Runtime: pick or design a topology per request from a run's seed library, run it, and watch
the cache learn.

The run's validated front is the seed library; a `LibraryDesigner` picks from it (the cache
first), the problem's evaluator runs the pick on the request, and the outcome is stored in the
run's cache (an `InMemoryLRU` kept in this session), so the same request again is a cache hit.
Marking an output bad decays its cache entry. The steps are in `studio.views.runtime`.
"""

from __future__ import annotations

import math

import streamlit as st

from studio._st_common import guard, open_runs_page, pick_run
from studio._st_render import format_value, graph, metric_row
from studio.views.runtime import (
    RuntimeRun,
    RuntimeSession,
    cache_table,
    design_dot,
    design_request,
    gold_questions,
    library_table,
    mark_output,
    open_session,
    run_design,
)


def show_design(session: RuntimeSession) -> None:
    """The designed (or cached) topology: where it came from, why, and its graph (with the
    path taken once it ran)."""
    design = session.last_design
    assert design is not None
    st.subheader("Design")
    where = "Cache hit" if design.source == "cache" else "Library rule"
    st.markdown(f"**{where}** for the request")
    st.info(design.thought or "(no reason given)")
    if design.rejected_hit is not None:
        hit = design.rejected_hit
        st.caption(
            f"A cache hit was refused (similarity {hit.similarity:.3f}, reliability "
            f"{hit.reliability:.3f}): it does not fit this request's limits, or names "
            "something the registries no longer have."
        )
    run = session.last_run
    if run is not None and run.design is design and run.trace.message is None:
        for line in run.trace.routes:
            st.markdown(f"Route taken: {line}")
        graph(run.trace.dot)
        st.caption("The path taken is drawn in yellow.")
    else:
        graph(design_dot(design.spec))


def show_run(run: RuntimeRun) -> None:
    """The run's answer, whether it is right, its cost and latency, its steps."""
    st.subheader("Run")
    if run.status != "ok":
        st.error(f"The run ended {run.status}: {run.error}")
    if run.accuracy is None:
        verdict = "unscored (no gold example has this question)"
    else:
        verdict = f"{'correct' if run.accuracy >= 1.0 else 'wrong'} (gold answer `{run.gold}`)"
    st.markdown(f"**Answer:** `{run.answer or '(none)'}`: {verdict}")
    metric_row(
        {
            "accuracy": run.accuracy,
            "cost_usd": run.cost_usd,
            "latency_ms": run.latency_ms,
            "status": run.status,
        }
    )
    if not run.trace.steps.empty:
        st.dataframe(run.trace.steps, hide_index=True, key="rt_steps")


def show_cache(session: RuntimeSession) -> None:
    """The cache's counters and entries with their reliabilities."""
    st.subheader("Cache")
    stats = session.cache.stats
    metric_row(
        {
            "hits": stats.hits,
            "misses": stats.misses,
            "stores": stats.stores,
            "decays": stats.decays,
            "hit rate": format_value("accuracy", stats.hit_rate),
        }
    )
    table = cache_table(session)
    if table.empty:
        st.caption("The cache is empty: a request that runs ok is stored in it.")
    else:
        st.dataframe(table, hide_index=True, key="rt_cache")
    st.caption(
        "Exact match on the normalised request (case-folded, spaces collapsed). A run that "
        "ends ok stores its topology; a failure or a bad mark multiplies the entry's "
        "reliability by 0.7, and an entry below 0.3 is no longer used."
    )


ss = st.session_state
manager, runs = open_runs_page("Runtime", "No runs yet: a search's validated front is the library.")
run_id = pick_run(runs, key="rt_run")
if run_id is None:
    st.stop()
problem_name = str(runs.loc[runs["run_id"] == run_id, "problem"].iloc[0])
st.caption(
    f"Problem **{problem_name}** (the run's), replayed with no sleeping (time scale 0): latency "
    "is the replayed model latency."
)

sessions: dict[str, RuntimeSession] = ss.setdefault("rt_sessions", {})
session = sessions.get(run_id)
if session is None:
    with guard():
        problem = manager.problem(problem_name, {"models.time_scale": 0})
        session = open_session(manager.store, run_id, problem)
        sessions[run_id] = session
    if session is None:
        st.stop()

with st.expander(f"Seed library: {len(session.library)} entries of the validation front"):
    st.dataframe(library_table(session), hide_index=True, key="rt_library")

# ---- the request ----------------------------------------------------------------------------

golds = gold_questions(session)


def _pick_gold() -> None:
    picked = ss.get("rt_gold")
    if picked:
        ss["rt_request"] = picked


st.selectbox(
    "Pick a gold question",
    golds,
    index=None,
    key="rt_gold",
    placeholder="(or type a request below)",
    format_func=lambda q: q if len(q) <= 100 else q[:99] + "…",
    on_change=_pick_gold,
)
question = st.text_area("Request", key="rt_request", height=90)
c1, c2 = st.columns(2)
budget = c1.number_input(
    "Budget (USD per request)", min_value=0.0, value=None, step=0.01, format="%.4f",
    key="rt_budget", placeholder="no limit",
)  # fmt: skip
latency = c2.number_input(
    "Latency limit (ms)", min_value=0.0, value=None, step=100.0, format="%.0f",
    key="rt_latency", placeholder="no limit",
)  # fmt: skip
limits = (
    None if budget is None or math.isnan(budget) else float(budget),
    None if latency is None or math.isnan(latency) else float(latency),
)

with st.container(horizontal=True):
    design_clicked = st.button("Design", key="rt_design")
    run_clicked = st.button("Run", key="rt_run_btn", type="primary")

if design_clicked or run_clicked:
    with guard():
        text = (question or "").strip()
        if not text:
            raise ValueError("type a request or pick a gold question first")
        fresh = session.last_design
        # a design not yet run, for exactly this request and limits, is what "Run" runs;
        # anything else is designed anew (so running the same request again asks the cache)
        if (
            not run_clicked
            or fresh is None
            or session.last_run is not None
            or fresh.goal != text
            or session.last_limits != limits
        ):
            fresh = design_request(session, text, budget_usd=limits[0], latency_ms=limits[1])
        if run_clicked:
            with st.spinner("Running…"):
                run_design(session, fresh)

# ---- the design, the run, the verdict -----------------------------------------------------------

if session.last_design is not None:
    show_design(session)
if session.last_run is not None:
    show_run(session.last_run)
    with st.container(horizontal=True):
        good = st.button("Mark good", key="rt_good")
        bad = st.button("Mark bad", key="rt_bad")
    if good or bad:
        with guard():
            mark_output(session, good)
            st.rerun()
    if session.last_run.verdict is not None:
        reliability = session.cache.reliability(session.last_run.design.goal)
        st.caption(
            f"Marked {session.last_run.verdict}: the cache entry's reliability is now "
            + ("- (not held)" if reliability is None else f"{reliability:.3f}")
            + "."
        )

show_cache(session)
