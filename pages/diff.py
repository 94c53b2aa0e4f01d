"""Diff & apply: review a proposal against the registry (change table, coloured graphs, JSON
diff), approve or reject it with a comment, and roll a topology back to an earlier version.

A proposal from a phase-2 (prompt) run (`studio.views.prompt_apply`) shows its topology part
(the search's winner) and its prompt part (each prompt's word diff, side by side), and applies
both, or one of them with the other rejected, in one all-or-nothing write."""

from __future__ import annotations

import hashlib

import streamlit as st

from core.errors import ApplyError, StaleTargetError
from studio._st_common import get_manager, guard, show_error, store_banner
from studio.views.candidate import parse_stored_spec
from studio.views.diffs import (
    DiffView,
    diff_view,
    history_table,
    proposal_label,
    proposal_order,
    registry_moved_note,
)
from studio.views.prompt_apply import (
    PARTS,
    PromptApplyPlan,
    part_label,
    plan_apply,
    side_by_side,
    stored_prompts,
)
from studio.views.tables import format_time


def _graph(dot: str, *, empty: str = "No topology to draw.") -> None:
    """A diff graph at its column's width (the DOT names are already unique per graph)."""
    if dot:
        st.graphviz_chart(dot, width="stretch")
    else:
        st.caption(empty)


def _topology_diff(view: DiffView, against: str) -> None:
    """The change table, the two coloured graphs and the JSON diff of one topology change."""
    c = view.counts
    st.markdown(
        f"**{c['added']} added, {c['removed']} removed, {c['changed']} changed, "
        f"{c['moved']} moved** node(s) against {against}"
    )
    st.dataframe(view.changes, hide_index=True, key="df_changes")
    g1, g2 = st.columns(2)
    with g1:
        st.markdown("**Current** (removed red, changed orange, moved blue)")
        _graph(view.before_dot, empty="No current version: this creates the topology.")
    with g2:
        st.markdown("**Proposed** (added green, changed orange, moved blue)")
        _graph(view.after_dot)
    if view.id_lines:
        st.markdown("**Unified JSON diff** (node ids left out)")
        st.code(view.unified_no_ids or "(identical apart from node ids)", language="diff")
        with st.expander(f"With node ids ({view.id_lines} more changed line(s))"):
            st.caption(
                "These lines differ only in node ids (ids the editor gives nodes "
                "itself): cosmetic, the topology's canonical form ignores them."
            )
            st.code(view.unified, language="diff")
    else:
        st.markdown("**Unified JSON diff**")
        st.code(view.unified or "(identical)", language="diff")


_PART_CHOICES = {
    "both": "Topology and prompts",
    "topology": "Topology only (reject the prompts)",
    "prompts": "Prompts only (reject the topology)",
}

_BOX = "border:1px solid #ddd;border-radius:4px;padding:6px 8px;white-space:normal"


def _prompt_part(plan: PromptApplyPlan) -> None:
    """Each prompt's word-level diff, side by side: the prompt now, the evolved one."""
    if plan.part == "topology":
        st.markdown("**Prompt part: rejected** (the winner keeps the prompts it ran with)")
        return
    st.subheader("Prompt part: the evolved prompts")
    st.caption("Word-level diff: removed words red and struck through, added words green.")
    if not plan.prompts:
        st.caption("Phase 2 changed no prompt (candidate 0's starting prompts).")
    for d in plan.prompts:
        st.markdown(f"**`{d.gene_name}`**" + ("" if d.changed else " (unchanged)"))
        left, right = side_by_side(d.before, d.after)
        p1, p2 = st.columns(2)
        with p1:
            st.caption("Now")
            st.markdown(f'<div style="{_BOX}">{left}</div>', unsafe_allow_html=True)
        with p2:
            st.caption("Evolved")
            st.markdown(f'<div style="{_BOX}">{right}</div>', unsafe_allow_html=True)


def _opt_int(value: object) -> int | None:
    """A store cell as an int, or None when missing (None or NaN)."""
    if value is None or (isinstance(value, float) and value != value):
        return None
    return int(value)  # type: ignore[arg-type]


st.title("Diff & apply")
manager = get_manager()
store_banner(manager)
ss = st.session_state
st.caption(f"Topology registry: `{manager.registry.root}`")

proposals = None
with guard():
    proposals = manager.store.list_proposals()
if proposals is None or proposals.empty:
    st.info(
        "No proposals yet: save a topology in the editor, or propose a candidate from the live view."
    )
else:
    prefix = f"{manager.registry.root}/"
    rows = proposals.to_dict("records")
    recs = {int(r["proposal_id"]): r for r in rows}
    ids = list(recs)
    pending_first = proposal_order(rows)
    wanted = st.query_params.get("proposal")
    if (
        wanted is not None
        and wanted.isdigit()
        and int(wanted) in ids
        and ss.get("df_pid_link") != wanted
    ):
        ss["df_pid_link"] = wanted
        ss["df_pid"] = int(wanted)
    option_labels = {p: proposal_label(recs[p], prefix) for p in pending_first}
    # the picker's key names its labels: after a decision (a label now says "approved") it is
    # a new widget with fresh labels, on the same proposal, not one still showing "pending"
    picker_key = hashlib.sha256("\n".join(option_labels.values()).encode()).hexdigest()[:8]
    current = ss.get("df_pid")
    pid = st.selectbox(
        "Proposal",
        pending_first,
        index=pending_first.index(current) if current in pending_first else 0,
        format_func=option_labels.__getitem__,
        key=f"df_pid_{picker_key}",
    )
    ss["df_pid"] = int(pid)
    st.query_params["proposal"] = str(pid)
    rec = recs[int(pid)]
    target = str(rec["target"])
    if not target.startswith(prefix):
        st.warning(
            f"This proposal targets {target}, not this studio's registry; it cannot be applied here."
        )
    else:
        name = target.removeprefix(prefix)
        with guard():
            spec, problem = parse_stored_spec(manager.store.get_proposal(None, int(pid)).spec_json)
            if spec is None:
                st.error(f"The proposed spec cannot be read: {problem}")
            else:
                phase2 = None
                try:
                    phase2 = stored_prompts(
                        manager.store, rec.get("run_id"), _opt_int(rec.get("candidate_idx"))
                    )
                except ValueError as exc:
                    st.warning(
                        f"The prompts of this phase-2 proposal cannot be read ({exc}): only its "
                        "topology is shown."
                    )
                decided = isinstance(rec["decision"], str)
                plan = None
                blocked = False
                if phase2 is not None and not decided:
                    run2, prompts = phase2
                    st.info(
                        f"From phase 2 (prompts) of run {run2.parent_run_id or '?'}: the search's "
                        "winning topology (the topology part) with its evolved prompts (the prompt "
                        "part). Apply both, or one part alone (the other is rejected), in one write."
                    )
                    part = st.radio(
                        "Apply",
                        PARTS,
                        format_func=_PART_CHOICES.__getitem__,
                        key=f"df_part_{pid}",
                        horizontal=True,
                    )
                    current_spec = (
                        manager.registry.current(name)[1]
                        if manager.registry.current_version(name) is not None
                        else None
                    )
                    try:
                        plan = plan_apply(name, spec, current_spec, prompts, part)
                    except ApplyError as exc:
                        st.warning(f"This part cannot be applied: {exc}")
                        blocked = True
                write_spec = plan.spec if plan is not None else spec
                shown = manager.dry_run(name, write_spec)
                base = _opt_int(rec["base_version"])
                if decided:
                    # a decided proposal shows the diff it was decided on
                    st.info(
                        f"{str(rec['decision']).capitalize()} by {rec['who']} at "
                        f"{format_time(rec['decided_at'])}"
                        + (f": {rec['comment']}" if rec["comment"] else "")
                        + (
                            f" (wrote version {_opt_int(rec['applied_version'])})"
                            if _opt_int(rec["applied_version"]) is not None
                            else ""
                        )
                    )
                    before = manager.registry.get(name, base) if base is not None else None
                    label = f"{name} v{base}" if base is not None else f"{name} (new)"
                    applied = _opt_int(rec["applied_version"])
                    if phase2 is not None and applied is not None:
                        # the parts approved were written, not the proposal's winner as it is
                        write_spec = manager.registry.get(name, applied)
                else:
                    moved = registry_moved_note(name, base, shown.base_version)
                    if moved:
                        st.warning(moved)
                    before = shown.before
                    label = (
                        f"{name} v{shown.base_version}" if shown.base_version else f"{name} (new)"
                    )
                against = label.replace(f"{name} v", "version ").replace(
                    f"{name} (new)", "a new topology"
                )
                if plan is not None and plan.part == "prompts":
                    st.markdown(
                        "**Topology part: rejected** (the registry's topology keeps its structure; "
                        "only the prompts below change)"
                    )
                else:
                    if plan is not None:
                        st.subheader("Topology part: the search's winner")
                    _topology_diff(
                        diff_view(
                            before,
                            plan.topology if plan is not None else write_spec,
                            before_label=label,
                            after_label=f"proposal {pid}",
                        ),
                        against,
                    )
                if plan is not None:
                    _prompt_part(plan)
                # the approval applies what the person saw: the diff of the previous render
                seen_key = f"df_shown_{pid}" + (f"_{plan.part}" if plan is not None else "")
                seen = ss.get(seen_key) or shown
                ss[seen_key] = shown
                if not decided:
                    comment = st.text_input("Comment", key=f"df_comment_{pid}")
                    a1, a2, _ = st.columns([1, 1, 4])
                    if a1.button(
                        "Approve and apply",
                        key="df_approve",
                        type="primary",
                        disabled=blocked or not shown.changed,
                    ):
                        parts = "" if plan is None else part_label(plan.part)
                        recorded = ": ".join(x for x in (parts, comment) if x)
                        try:
                            done = manager.approve(
                                int(pid), name, write_spec, seen, comment=recorded
                            )
                            ss.pop(seen_key, None)
                            ss["df_msg"] = (
                                f"Applied{' ' + parts if parts else ''}: {name} is now version "
                                f"{done.new_version}."
                            )
                            st.rerun()
                        except StaleTargetError as exc:
                            ss.pop(seen_key, None)
                            show_error(exc)
                    if a2.button("Reject", key="df_reject"):
                        manager.reject(int(pid), comment=comment)
                        ss["df_msg"] = f"Rejected proposal {pid}."
                        st.rerun()
                    if not shown.changed:
                        st.caption("The registry already holds this topology: nothing to apply.")
msg = ss.pop("df_msg", None)
if msg:
    st.success(msg)

st.divider()
st.subheader("History and rollback")
with guard():
    names = manager.registry.names()
    if not names:
        st.caption("The registry has no topologies yet.")
    else:
        name_h = st.selectbox("Topology", names, key="df_hist_name")
        hist = manager.registry.history(str(name_h))
        st.dataframe(
            history_table(hist),
            hide_index=True,
            key="df_history",
        )
        earlier = [h.version for h in hist][:-1]
        if earlier:
            r1, r2 = st.columns([1, 3])
            back_to = r1.selectbox("Roll back to", earlier[::-1], key="df_rb_version")
            rb_comment = r2.text_input("Why", key="df_rb_comment")
            cur_v = hist[-1].version
            # a preview of what the rollback changes, then an explicit confirmation
            rb_view = diff_view(
                manager.registry.get(str(name_h), cur_v),
                manager.registry.get(str(name_h), int(back_to)),
                before_label=f"{name_h} v{cur_v} (current)",
                after_label=f"{name_h} v{back_to}",
            )
            rc = rb_view.counts
            st.markdown(
                f"**Rollback preview: v{cur_v} → v{back_to}**: {rc['added']} added, "
                f"{rc['removed']} removed, {rc['changed']} changed, {rc['moved']} moved node(s)"
            )
            with st.expander("What the rollback changes", expanded=True):
                st.dataframe(rb_view.changes, hide_index=True, key="df_rb_changes")
                if rb_view.unified_no_ids:
                    st.code(rb_view.unified_no_ids, language="diff")
            sure = st.checkbox(
                f"Make v{back_to} current again (as version {cur_v + 1})",
                key=f"df_rb_sure_{name_h}_{back_to}_{cur_v}",
            )
            if st.button("Roll back", key="df_rollback", disabled=not sure):
                v = manager.rollback(str(name_h), int(back_to), comment=rb_comment)
                ss["df_msg"] = f"Rolled {name_h} back to v{back_to}: now version {v}."
                st.rerun()
