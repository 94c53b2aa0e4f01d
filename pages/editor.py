"""Topology editor: a node tree with a form per node, structural edits, a validated JSON tab,
the graph, static metrics; save as a new version (a proposal) and evaluate on a split."""

from __future__ import annotations

import hashlib
import math
from collections.abc import Callable
from typing import Any, cast

import pandas as pd
import streamlit as st

from core.errors import SpecError, StoreError
from core.ir import TopologySpec, assign_ids, node_at, spec_hash, to_dot
from studio._st_common import get_manager, guard, page, show_error, store_banner
from studio._st_render import drilldown, graph
from studio.drafts import Draft, DraftStore, new_draft_id
from studio.views.candidate import parse_stored_spec
from studio.views.compare import paired_test
from studio.views.drilldown import answer_row, gold_cases, trace_detail
from studio.views.editor import (
    EDITABLE_FIELDS,
    WRAP_KINDS,
    accuracy_interval,
    calls_per_request,
    compact_value,
    delete_node,
    edit_node,
    estimate_cost,
    follow_selection,
    insert_step,
    measured_cost,
    move_node,
    new_atomic,
    node_fields,
    node_label,
    parent_path,
    replace_node,
    spec_to_text,
    static_metrics,
    tree_rows,
    unknown_name_errors,
    validate_text,
    wrap_node,
)
from studio.views.editor_eval import (
    CalibrationSample,
    agent_names_of,
    calibrate_cost,
    parent_comparison,
)
from studio.views.history import EditHistory
from studio.views.tables import evaluation_table

st.title("Topology editor")
manager = get_manager()
store_banner(manager)
ss = st.session_state


drafts = DraftStore.beside(manager.db_path)


def _show_text(text: str) -> None:
    """Make `text` the working copy (and the JSON tab's text), without touching the history."""
    ss["ed_spec"] = text
    ss["ed_json"] = text
    ss["ed_json_errors"] = []


def _set_spec(spec: Any, source: str | None = None, parent: tuple[str, int] | None = None) -> None:
    """Make `spec` the working copy, as one undoable step.

    A load (`source` given) also sets the evaluations' parent: the candidate it came from
    (`parent`, from the inspector), else whichever run measured the loaded topology (its hash
    is kept in `ed_origin_hash` and looked up at Evaluate).
    """
    text = spec_to_text(cast(TopologySpec, assign_ids(spec)))
    hist = ss.get("ed_hist")
    ss["ed_hist"] = EditHistory(text) if hist is None else hist.push(text)
    _show_text(text)
    if source is not None:
        ss["ed_source"] = source
        ss["ed_parent"] = parent
        ss["ed_origin_hash"] = spec_hash(cast(TopologySpec, spec))


def _msg(kind: str, text: str) -> None:
    ss["ed_msg"] = (kind, text)


def _edit(fn: Callable[[Any], Any], done: str, *, path: str = "$", action: str = "edit") -> None:
    """Run one edit on the working copy; keep it unchanged (with the reason) if it fails.

    The selection then follows the node the edit touched (`follow_selection`), applied before
    the node radio is drawn on the next run.
    """
    spec, _ = parse_stored_spec(ss.get("ed_spec"))
    if spec is None:
        _msg("error", "Fix the JSON first: the working copy is not a valid topology.")
        return
    try:
        after = cast(TopologySpec, assign_ids(fn(spec)))
        _set_spec(after)
        ss["ed_sel_next"] = follow_selection(spec, after, path, action)
        _msg("success", done)
    except SpecError as exc:
        where = "; ".join(f"{p}: {m}" for p, m in exc.errors) if exc.errors else ""
        _msg("error", f"{exc}" + (f" ({where})" if where and where not in str(exc) else ""))


# ---- the draft: its id in the URL, so a reload (a new session) finds the working copy again ------

problems = manager.problem_names()
if "ed_draft_id" not in ss:
    wanted_draft = str(st.query_params.get("draft") or "")
    found = drafts.get(wanted_draft) if wanted_draft else None
    if found is not None:
        ss["ed_draft_id"] = found.draft_id
        ss["ed_hist"] = found.history
        _show_text(found.history.current)
        ss["ed_source"] = found.source or "a draft"
        ss["ed_name"] = found.name or "topology"
        if found.problem in problems:
            ss["ed_problem"] = found.problem
        ss["ed_saved_draft"] = found
        ss["ed_parent"] = found.parent
        ss["ed_origin_hash"] = found.origin_hash or None
        ss["ed_msg"] = ("info", "Restored your draft (kept across reloads; undo works too).")
    else:
        ss["ed_draft_id"] = new_draft_id()
st.query_params["draft"] = str(ss["ed_draft_id"])

# ---- incoming spec (from the live inspector) and loading ----------------------------------------

incoming = ss.pop("editor_incoming", None)
if incoming:
    spec_in, problem_text = parse_stored_spec(incoming.get("spec_json"))
    if spec_in is not None:
        raw_parent = incoming.get("parent")
        parent_in = (
            (str(raw_parent[0]), int(raw_parent[1]))
            if isinstance(raw_parent, list | tuple) and len(raw_parent) == 2  # type: ignore[arg-type]
            else None
        )
        _set_spec(spec_in, incoming.get("source", "inspector"), parent_in)
        ss["ed_name"] = incoming.get("name") or ss.get("ed_name", "topology")
    elif problem_text:
        st.error(problem_text)

with st.expander("Load a topology", expanded="ed_spec" not in ss):
    lc1, lc2 = st.columns(2)
    with lc1:
        problem_pick = st.selectbox(
            "Problem (names, prices, evaluation)", problems or ["gsm8k_replay"], key="ed_problem"
        )
        if st.button("Load the problem's seed", key="ed_load_seed"):
            with guard():
                prob = manager.problem(str(problem_pick))
                _set_spec(prob.seed_spec, f"seed of {prob.name}")
                ss["ed_name"] = prob.name
                st.rerun()
    with lc2:
        with guard():
            names = manager.registry.names()
            if names:
                reg_name = st.selectbox("Registry topology", names, key="ed_reg_name")
                hist = manager.registry.history(str(reg_name))
                versions = [h.version for h in hist]
                reg_v = st.selectbox("Version", versions[::-1], key="ed_reg_version")
                if st.button("Load this version", key="ed_load_reg"):
                    _set_spec(
                        manager.registry.get(str(reg_name), int(reg_v)), f"{reg_name} v{reg_v}"
                    )
                    ss["ed_name"] = str(reg_name)
                    st.rerun()
            else:
                st.caption(f"The registry ({manager.registry.root}) has no topologies yet.")

if "ed_spec" not in ss:
    with guard():
        prob = manager.problem(
            str(ss.get("ed_problem") or (problems[0] if problems else "gsm8k_replay"))
        )
        _set_spec(prob.seed_spec, f"seed of {prob.name}")
        ss.setdefault("ed_name", prob.name)

problem = None
with guard():
    problem = manager.problem(
        str(ss.get("ed_problem") or (problems[0] if problems else "gsm8k_replay"))
    )
agents = sorted(problem.agent_registry.names()) if problem is not None else []
callables = sorted(problem.callable_registry.names()) if problem is not None else []
roles = problem.roles if problem is not None else {}

if "ed_spec" not in ss:
    st.stop()

spec, spec_problem = parse_stored_spec(ss["ed_spec"])
unknown: list[tuple[str, str]] = []
if spec is not None and problem is not None:
    # the learned conditions it routes on, from the run it came from (else any run's journal
    # or the registry's), so they count as known and evaluate
    try:
        _origin = ss.get("ed_parent")
        manager.register_learned_of(
            spec, problem.callable_registry, str(_origin[0]) if _origin is not None else None
        )
    except (StoreError, ValueError, OSError) as exc:  # a damaged journal or artefact file
        show_error(exc)
    unknown = unknown_name_errors(
        spec,
        callable_registry=problem.callable_registry,
        agent_registry=problem.agent_registry,
    )


def _unknown_text(items: list[tuple[str, str]]) -> str:
    head = (
        f"This topology names {len(items)} thing(s) the problem "
        f"{problem.name if problem is not None else ''} does not register; it cannot be "
        "evaluated until they are fixed:\n\n"
    )
    return head + "\n".join(f"- `{p}`: {m}" for p, m in items[:5])


st.caption(f"Editing: {ss.get('ed_source', 'a topology')}")
msg = ss.pop("ed_msg", None)
if msg:
    {"success": st.success, "info": st.info}.get(msg[0], st.error)(msg[1])

undo_log: EditHistory | None = ss.get("ed_hist")
if undo_log is None or undo_log.current != ss["ed_spec"]:
    # a working copy set elsewhere (a test, an older session) starts its own history
    undo_log = ss["ed_hist"] = (
        EditHistory(ss["ed_spec"]) if undo_log is None else undo_log.push(ss["ed_spec"])
    )
with st.container(horizontal=True, key="ed_history"):
    do_undo = st.button(f"Undo ({len(undo_log.undo)})", key="ed_undo", disabled=not undo_log.undo)
    do_redo = st.button(f"Redo ({len(undo_log.redo)})", key="ed_redo", disabled=not undo_log.redo)
if do_undo or do_redo:
    undo_log = ss["ed_hist"] = undo_log.back() if do_undo else undo_log.forward()
    _show_text(undo_log.current)
    _msg("info", "Undid the last change." if do_undo else "Redid the change.")
    st.rerun()

left, right = st.columns([3, 2])


_archives_now: dict[str, Any] | None = None


def _recent_archives() -> dict[str, Any]:
    """The archives of the problem's 20 newest runs, newest first (read once per page run; {}
    when the store cannot be read: the banner says why)."""
    global _archives_now
    if _archives_now is not None:
        return _archives_now
    _archives_now = {}
    if problem is None:
        return _archives_now
    try:
        runs = manager.store.list_runs()
        if len(runs) == 0:
            return _archives_now
        mine = [
            (str(started), str(run_id))
            for run_id, prob, started in zip(
                runs["run_id"], runs["problem"], runs["started_at"], strict=True
            )
            if prob == problem.name
        ]
        newest = [run_id for _, run_id in sorted(mine, reverse=True)[:20]]
        _archives_now = {run_id: manager.store.archive(run_id) for run_id in newest}
    except Exception:  # noqa: BLE001 (a store problem must not hide the editor; the banner says)
        _archives_now = {}
    return _archives_now


def _samples(calls: dict[str, float]) -> list[CalibrationSample]:
    """Measured topologies of the recent runs (validation figures, at most 300), for the cost
    calibration.

    Specs are content-addressed, so their texts are kept in the session once read.
    """
    assert problem is not None
    cache: dict[str, str | None] = ss.setdefault("ed_spec_texts", {})
    registered = set(agents)
    out: list[CalibrationSample] = []
    for run_id, frame in _recent_archives().items():
        if frame is None or len(frame) == 0:
            continue
        rows = frame.loc[frame["objective_split"] == "validation"]
        for h, usd, idx in zip(
            rows["spec_hash"], rows["cost_usd"], rows["candidate_idx"], strict=True
        ):
            # each run's measurement counts (the same topology measured twice is two samples)
            if not isinstance(h, str) or len(out) >= 300:
                continue
            if usd is None or not math.isfinite(float(usd)):
                continue
            if h not in cache:
                try:
                    cache[h] = manager.store.get_spec(h)
                except Exception:  # noqa: BLE001 (a missing spec is one sample fewer)
                    cache[h] = None
            spec_i, _ = parse_stored_spec(cache[h])
            if spec_i is None:
                continue
            est_i = estimate_cost(spec_i, problem.prices, agent_names=agents or None, calls=calls)
            out.append(
                CalibrationSample(
                    est_i.usd_per_example,
                    float(usd),
                    agent_names_of(spec_i) & registered,
                    f"{run_id} #{idx}",
                )
            )
    return out


def _measured(spec_: TopologySpec) -> str | None:
    """The measured cost of this topology (same spec hash) in the store's recent runs."""
    if problem is None:
        return None
    found = measured_cost(_recent_archives(), spec_hash(spec_))
    if found is None:
        return None
    return (
        f"**Measured cost per example: {compact_value('usd', found.usd_per_example)}** "
        f"(mean over {found.n_examples} {found.split} examples, run {found.run_id} "
        f"candidate {found.candidate_idx})."
    )


def _n_runs(n: int) -> str:
    return "the newest run" if n == 1 else f"the {n} newest runs"


def _cost_text(spec_: TopologySpec) -> str:
    """The measured cost when a run evaluated this topology, then the static estimate
    calibrated against measured costs of the same agents (or no estimate: `calibrate_cost`)."""
    if problem is None:
        return "No cost estimate: the problem (its prices) could not be loaded."
    calls = calls_per_request(problem.config.params)
    est = estimate_cost(spec_, problem.prices, agent_names=agents or None, calls=calls)
    cal = calibrate_cost(
        est.usd_per_example,
        agent_names_of(spec_) & set(agents),
        _samples(calls),
        where=f"{_n_runs(len(_recent_archives()))} of {problem.name}",
    )
    rule = (
        f"Static rule: {est.assumptions}; prices from the problem's table"
        + (f"; unpriced: {', '.join(est.unpriced)}" if est.unpriced else "")
        + "."
    )
    measured = _measured(spec_)
    if measured is None:
        return f"**{cal.text}** No run has measured this exact topology yet.\n\n{rule}"
    return f"{measured}\n\n{cal.text}\n\n{rule}"


# ---- left: tree + node form + actions, or the JSON tab ------------------------------------------

with left:
    # keyed and stateful: a message above the tabs (after an edit) must not reset them to Tree
    tab_tree, tab_json = st.tabs(["Tree", "JSON"], key="ed_tab", on_change="rerun")
    with tab_tree:
        if spec is None:
            st.error(f"The working copy is not valid ({spec_problem}); fix it in the JSON tab.")
        else:
            rows = tree_rows(spec)
            paths = [r.path for r in rows]
            labels = {r.path: ("\u2003" * r.depth) + f"{r.slot}: {r.label}" for r in rows}
            # the radio keeps its choice as the option's label, and an edit changes labels: on
            # a new revision the selection is set again, from the node the edit touched
            # (`ed_sel_next`) or the path last selected, so it never falls back to the root
            rev_now = hashlib.sha1(ss["ed_spec"].encode()).hexdigest()
            if ss.get("ed_sel_rev") != rev_now or ss.get("ed_sel") not in paths:
                want = ss.pop("ed_sel_next", None) or ss.get("ed_sel_path") or "$"
                while want not in paths and want != "$":
                    want = parent_path(want) or "$"
                ss["ed_sel"] = want if want in paths else paths[0]
                ss["ed_sel_rev"] = rev_now
            sel = st.radio("Nodes", paths, key="ed_sel", format_func=labels.__getitem__)
            ss["ed_sel_path"] = sel
            node = node_at(spec, sel)
            st.markdown(f"**{node.node_kind}** at `{sel}`")

            fields = node_fields(node)
            # widget keys name the node and the spec's revision, so a form never shows the
            # values another node (or an older spec) left in its widgets
            rev = f"{sel}_{hashlib.sha1(ss['ed_spec'].encode()).hexdigest()[:10]}"
            with st.form(f"ed_form_{rev}"):
                values: dict[str, Any] = {}
                for name in EDITABLE_FIELDS[node.node_kind]:
                    cur = fields.get(name)
                    key = f"ed_f_{rev}_{name}"
                    if name == "agent_name" and agents:
                        opts = agents if cur in agents else [*agents, str(cur)]
                        values[name] = st.selectbox(name, opts, index=opts.index(str(cur)), key=key)
                    elif name == "callable_name" and callables:
                        opts = callables if cur in callables else [*callables, str(cur)]
                        values[name] = st.selectbox(name, opts, index=opts.index(str(cur)), key=key)
                    elif name == "keep_best":
                        values[name] = st.checkbox(name, value=bool(cur), key=key)
                    elif name == "max_iterations":
                        values[name] = st.number_input(
                            name, min_value=1, value=int(cur or 5), key=key
                        )
                    elif name in ("timeout", "confidence_threshold"):
                        values[name] = st.number_input(
                            f"{name} (0 = none)", min_value=0.0, value=float(cur or 0.0), key=key
                        )
                    elif name == "classifier" and cur is None:
                        values[name] = st.text_input(
                            name,
                            value="",
                            key=key,
                            placeholder="none: the routes' conditions decide",
                            help="Blank: the first route whose condition holds runs (else the "
                            "fallback). Or name a classifier agent or function.",
                        )
                    else:
                        values[name] = st.text_input(
                            name, value="" if cur is None else str(cur), key=key
                        )
                if st.form_submit_button("Apply changes to this node"):
                    _edit(
                        lambda s, p=sel, v=values: edit_node(s, p, v),
                        f"Updated {sel} ({node_label(spec, sel)}).",
                        path=sel,
                        action="edit",
                    )
                    st.rerun()

            st.markdown("**Change the structure**")
            # two columns at most and buttons that wrap: the left column is narrow at 1000 px
            a1, a2 = st.columns(2)
            new_kind = a1.selectbox(
                "New step kind", ["agent_step", "function_step"], key="ed_new_kind"
            )
            choices = agents if new_kind == "agent_step" else (roles.get("step") or callables)
            new_name = a2.selectbox("Name", choices or ["(none registered)"], key="ed_new_name")
            where = st.radio(
                "Where (relative to the selected node)",
                ["after", "before", "inside"],
                key="ed_where",
                horizontal=True,
            )
            with st.container(horizontal=True, key="ed_actions"):
                do_insert = st.button("Insert step", key="ed_insert", type="primary")
                do_replace = st.button("Replace", key="ed_replace")
                do_delete = st.button("Delete", key="ed_delete")
                do_up = st.button("Move up", key="ed_up")
                do_down = st.button("Move down", key="ed_down")
            what = node_label(spec, sel)
            if do_insert:
                _edit(
                    lambda s: insert_step(s, sel, new_atomic(new_kind, str(new_name)), where=where),
                    f"Inserted a {new_kind} ({new_name}) {where} {sel} ({what}).",
                    path=sel,
                    action="insert",
                )
                st.rerun()
            if do_replace:
                _edit(
                    lambda s: replace_node(s, sel, new_atomic(new_kind, str(new_name))),
                    f"Replaced {sel} ({what}) with a {new_kind} ({new_name}).",
                    path=sel,
                    action="replace",
                )
                st.rerun()
            if do_delete:
                _edit(
                    lambda s: delete_node(s, sel),
                    f"Deleted {sel} ({what}).",
                    path=sel,
                    action="delete",
                )
                st.rerun()
            if do_up or do_down:
                _edit(
                    lambda s: move_node(s, sel, -1 if do_up else +1),
                    f"Moved {sel} ({what}) {'up' if do_up else 'down'}.",
                    path=sel,
                    action="move",
                )
                st.rerun()
            wrap_kind = st.selectbox("Wrap the selected node in", WRAP_KINDS, key="ed_wrap_kind")
            ev_name, up_name = "", ""
            if wrap_kind == "refinement_loop":
                evaluators = roles.get("evaluator") or callables
                updaters = roles.get("state_updater") or callables
                w1, w2 = st.columns(2)
                ev_name = w1.selectbox("Loop evaluator", evaluators or [""], key="ed_wrap_eval")
                up_name = w2.selectbox("Loop state updater", updaters or [""], key="ed_wrap_upd")
            if st.button("Wrap", key="ed_wrap"):
                _edit(
                    lambda s: wrap_node(
                        s, sel, wrap_kind, evaluator=str(ev_name), state_updater=str(up_name)
                    ),
                    f"Wrapped {sel} ({what}) in a {wrap_kind}.",
                    path=sel,
                    action="wrap",
                )
                st.rerun()

    with tab_json:

        def _on_json() -> None:
            parsed, errors = validate_text(
                ss["ed_json"],
                callable_registry=problem.callable_registry if problem is not None else None,
                agent_registry=problem.agent_registry if problem is not None else None,
            )
            ss["ed_json_errors"] = errors
            ss["ed_tab"] = "JSON"
            if parsed is not None:
                text = spec_to_text(parsed)
                ss["ed_spec"] = text
                ss["ed_hist"] = ss["ed_hist"].push(text) if "ed_hist" in ss else EditHistory(text)

        st.text_area(
            "Spec JSON (checked, names included, when you press Ctrl+Enter or leave the box)",
            key="ed_json",
            height=480,
            on_change=_on_json,
        )
        errors = ss.get("ed_json_errors") or []
        if errors:
            # once, as a table: the message says what it means for the working copy
            st.error(
                f"Not valid: {len(errors)} problem(s), listed below. The graph, Save and "
                "Evaluate use the last valid version until the text is fixed."
            )
            st.dataframe(
                [{"JSON path": p, "problem": m} for p, m in errors],
                hide_index=True,
                key="ed_errors",
            )
        elif unknown:
            st.error(_unknown_text(unknown))
        else:
            st.success("Valid topology: every name is registered in the problem.")

# ---- right: graph and metrics -----------------------------------------------------------------

json_errors = ss.get("ed_json_errors") or []
with right:
    if spec is not None:
        if json_errors:
            st.warning(
                f"Stale: the JSON tab's text has {len(json_errors)} problem(s); this is the last "
                "valid version, not the text on screen.",
                icon=":material/history:",
            )
        sel_path = str(ss.get("ed_sel_path") or "$")
        sel_node = (
            node_at(spec, sel_path) if sel_path in {r.path for r in tree_rows(spec)} else None
        )
        hl = {sel_node.id: "#fde047"} if sel_node is not None and sel_node.id else None
        graph(to_dot(spec, highlight=hl, title=ss.get("ed_name", "")))
        prices = problem.prices if problem is not None else {}
        metrics = static_metrics(spec, prices, agent_names=agents or None)
        with st.container(horizontal=True, key="ed_static"):
            for label, key in (
                ("n agents", "n_agents"),
                ("depth", "depth"),
                ("n nodes", "n_nodes"),
            ):
                st.metric(label, compact_value(key, metrics[key]), width="content")
        st.markdown(_cost_text(spec))


def _parent() -> tuple[str, int] | None:
    """The candidate the working copy was edited from: the inspector's, else the newest
    measurement of the loaded topology (by its hash) in the problem's recent runs."""
    explicit = ss.get("ed_parent")
    if explicit is not None:
        return (str(explicit[0]), int(explicit[1]))
    origin = ss.get("ed_origin_hash")
    found = measured_cost(_recent_archives(), str(origin)) if origin else None
    return None if found is None else (found.run_id, found.candidate_idx)


def _parent_section(ev: Any) -> None:
    """Where the evaluation is stored, and its change from the parent on the same examples."""
    run_id = ss.get("ed_eval_run")
    parent = ss.get("ed_eval_parent")
    links = st.container(horizontal=True, key="ed_eval_links")
    if run_id:
        links.page_link(
            page("live"), label=f"Stored as run {run_id}", query_params={"run": str(run_id)}
        )
    if parent is None:
        st.caption("Not compared: the working copy was not loaded from a candidate a run measured.")
        return
    p_run, p_idx = parent
    try:
        parent_ex = manager.store.candidate_examples(p_run, p_idx, split=str(ev.split))
    except Exception as exc:  # noqa: BLE001 (shown in the page)
        show_error(exc)
        return
    mine = pd.DataFrame(
        [
            {
                "split": r.split,
                "example_id": r.example_id,
                "accuracy": r.accuracy,
                "cost_usd": r.cost_usd,
                "latency_ms": r.latency_ms,
            }
            for r in ev.results
        ],
        columns=["split", "example_id", "accuracy", "cost_usd", "latency_ms"],
    )
    cmp = parent_comparison(parent_ex, mine, str(ev.split))
    st.markdown(f"**Compared with its parent, run {p_run} candidate {p_idx}**")
    if cmp.n_paired == 0:
        st.caption(f"The parent was never scored on these {ev.split} examples: nothing to pair.")
        return
    st.caption(
        f"On the {cmp.n_paired} {cmp.split} examples both were scored on"
        + (f" ({cmp.n_only_this} more only here)" if cmp.n_only_this else "")
        + ": the parent's figures are taken on the same examples."
    )
    st.dataframe(cmp.table, key="ed_parent_deltas")
    c = cmp.counts
    st.caption(
        f"{c['wrong_to_right']} wrong to right, {c['right_to_wrong']} right to wrong, "
        f"{c['both_right']} both right, {c['both_wrong']} both wrong. "
        + paired_test(c, "the parent", "this topology").text
    )
    if run_id:
        links.page_link(
            page("compare"),
            label="Compare with the parent",
            query_params={"items": f"{p_run}:{p_idx},{run_id}:0"},
        )


# ---- save and evaluate ------------------------------------------------------------------------

st.divider()
s1, s2 = st.columns(2)
with s1:
    st.markdown("**Save as a new version**")
    name = st.text_input("Topology name (in the registry)", key="ed_name")
    if json_errors:
        st.caption("Save is off while the JSON tab's text is not valid.")
    if st.button(
        "Save as new version",
        key="ed_save",
        type="primary",
        disabled=spec is None or bool(json_errors),
    ):
        with guard():
            assert spec is not None
            pid = manager.propose(str(name).strip(), spec, note=str(ss.get("ed_source", "")))
            versions = manager.store.list_topology_versions(str(name).strip())
            st.success(
                f"Saved {name} draft version {max(versions['version'].tolist())}; proposal {pid} "
                "waits for review."
            )
            st.page_link(
                page("diff"), label="Review it on Diff & apply", query_params={"proposal": str(pid)}
            )
with s2:
    st.markdown("**Evaluate on a split**")
    e1, e2 = st.columns(2)
    split = e1.selectbox("Split", ["validation", "test"], key="ed_split")
    limit = e2.number_input("Examples (0 = all)", min_value=0, value=20, step=5, key="ed_limit")
    pending = ss.get("ed_json_errors") or []
    if pending:
        st.caption(
            f"Evaluate is off while the JSON tab's text has {len(pending)} problem(s) (listed "
            "there)."
        )
    elif unknown:
        st.error(_unknown_text(unknown))
    blocked = spec is None or problem is None or bool(unknown) or bool(pending)
    if st.button("Evaluate", key="ed_eval", disabled=blocked):
        try:
            assert spec is not None and problem is not None
            with st.spinner("Evaluating..."):
                ev = manager.evaluate(
                    problem.name, spec, split=str(split), limit=int(limit) or None
                )
            ss["ed_eval_result"] = ev
            ss["ed_eval_of"] = ss.get("ed_spec")
            ss["ed_eval_run"] = None
            ss["ed_eval_parent"] = _parent()
        except Exception as exc:  # noqa: BLE001 (shown in the page)
            show_error(exc)
        else:
            # stored as a run of its own, so Live and Compare show it; a
            # store that cannot take it leaves the result on screen, with the reason
            try:
                ss["ed_eval_run"] = manager.record_evaluation(
                    problem.name,
                    spec,
                    ev,
                    parent=ss["ed_eval_parent"],
                    source=str(ss.get("ed_source") or ""),
                )
            except Exception as exc:  # noqa: BLE001 (shown in the page)
                st.warning(f"The evaluation is shown but was not stored: {exc}")
            else:
                # drawn again with the stored run read: the cost above is now the measured one
                st.rerun()

# the results take the page's full width: four numbers do not fit half of it at 1000 px
ev = ss.get("ed_eval_result")
if ev is not None:
    st.markdown("**Evaluation**")
    if ss.get("ed_eval_of") != ss.get("ed_spec"):
        st.caption("Of an earlier version of the working copy: evaluate again for this one.")
    head = f"{ev.status} on {ev.n_examples} {ev.split} examples" + (
        f": {ev.reason}" if ev.reason else ""
    )
    if ev.status == "ok":
        st.caption(head)
    else:
        st.error(f"Evaluation {head}")
    with st.container(horizontal=True, key="ed_eval_metrics"):
        for label, key, value in (
            ("accuracy", "accuracy", ev.accuracy),
            ("cost / example", "cost_usd", ev.cost_usd),
            ("latency", "latency_ms", ev.latency_ms),
            ("score", "aggregate_score", ev.aggregate_score),
        ):
            st.metric(label, compact_value(key, value), width="content")
    lo, hi = accuracy_interval(float(ev.accuracy), int(ev.n_examples))
    if ev.n_examples and lo == lo:  # not NaN
        st.caption(
            f"n = {ev.n_examples}: accuracy {compact_value('accuracy', ev.accuracy)}, 95% "
            f"interval {compact_value('accuracy', lo)} to {compact_value('accuracy', hi)} "
            "(Wilson)."
            + (
                " A small sample: set Examples to 0 to use the whole split."
                if ev.n_examples < 100
                else ""
            )
        )
    _parent_section(ev)
    if ev.results:
        st.dataframe(evaluation_table(ev.results), hide_index=True, key="ed_eval_rows")
        by_id = {r.example_id: r for r in ev.results}
        picked = st.selectbox(
            "Drill into one example",
            list(by_id),
            index=None,
            key="ed_drill",
            placeholder="pick an example: question, gold, answer, route and steps",
        )
        if picked is not None and problem is not None:
            res = by_id[picked]
            row = {
                "accuracy": res.bundle.accuracy,
                "cost_usd": res.bundle.cost_usd,
                "latency_ms": res.bundle.latency_ms,
                "status": "ok",
                "output_summary": res.output_summary,
            }
            ev_spec, _ = parse_stored_spec(ss.get("ed_eval_of"))
            drilldown(
                gold_cases(problem.splits).get(picked),
                [answer_row("this topology", row)],
                [("this topology", trace_detail(ev_spec, res.trace, problem.prices))],
                key="ed_drill",
            )

# ---- keep the draft: written when the working copy, its history or its name changed ------------

draft = Draft(
    str(ss["ed_draft_id"]),
    ss["ed_hist"],
    name=str(ss.get("ed_name") or ""),
    source=str(ss.get("ed_source") or ""),
    problem=str(ss.get("ed_problem") or ""),
    parent=ss.get("ed_parent"),
    origin_hash=str(ss.get("ed_origin_hash") or ""),
)
saved: Draft | None = ss.get("ed_saved_draft")
if saved is None or (
    saved.history,
    saved.name,
    saved.source,
    saved.problem,
    saved.parent,
    saved.origin_hash,
) != (draft.history, draft.name, draft.source, draft.problem, draft.parent, draft.origin_hash):
    if drafts.put(draft):
        ss["ed_saved_draft"] = draft
