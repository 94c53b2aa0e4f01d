"""Diff & apply: review a proposal against the registry (change table, coloured graphs, JSON
diff), approve or reject it with a comment, and roll a topology back to an earlier version."""

from __future__ import annotations

import hashlib

import streamlit as st

from core.errors import StaleTargetError
from studio._st_common import get_manager, guard, show_error, store_banner
from studio.views.candidate import parse_stored_spec
from studio.views.diffs import (
    diff_view,
    history_table,
    proposal_label,
    proposal_order,
    registry_moved_note,
)
from studio.views.tables import format_time


def _graph(dot: str, *, empty: str = "No topology to draw.") -> None:
    """A diff graph at its column's width (the DOT names are already unique per graph)."""
    if dot:
        st.graphviz_chart(dot, width="stretch")
    else:
        st.caption(empty)


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
                shown = manager.dry_run(name, spec)
                decided = isinstance(rec["decision"], str)
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
                else:
                    moved = registry_moved_note(name, base, shown.base_version)
                    if moved:
                        st.warning(moved)
                    before = shown.before
                    label = (
                        f"{name} v{shown.base_version}" if shown.base_version else f"{name} (new)"
                    )
                view = diff_view(before, spec, before_label=label, after_label=f"proposal {pid}")
                against = label.replace(f"{name} v", "version ").replace(
                    f"{name} (new)", "a new topology"
                )
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
                    st.code(
                        view.unified_no_ids or "(identical apart from node ids)", language="diff"
                    )
                    with st.expander(f"With node ids ({view.id_lines} more changed line(s))"):
                        st.caption(
                            "These lines differ only in node ids (ids the editor gives nodes "
                            "itself): cosmetic, the topology's canonical form ignores them."
                        )
                        st.code(view.unified, language="diff")
                else:
                    st.markdown("**Unified JSON diff**")
                    st.code(view.unified or "(identical)", language="diff")
                # the approval applies what the person saw: the diff of the previous render
                seen = ss.get(f"df_shown_{pid}") or shown
                ss[f"df_shown_{pid}"] = shown
                if not decided:
                    comment = st.text_input("Comment", key=f"df_comment_{pid}")
                    a1, a2, _ = st.columns([1, 1, 4])
                    if a1.button(
                        "Approve and apply",
                        key="df_approve",
                        type="primary",
                        disabled=not shown.changed,
                    ):
                        try:
                            done = manager.approve(int(pid), name, spec, seen, comment=comment)
                            ss.pop(f"df_shown_{pid}", None)
                            ss["df_msg"] = f"Applied: {name} is now version {done.new_version}."
                            st.rerun()
                        except StaleTargetError as exc:
                            ss.pop(f"df_shown_{pid}", None)
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
