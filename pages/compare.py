"""Compare: two to four topologies side by side (metrics, graphs) and the examples that flip."""

from __future__ import annotations

import pandas as pd
import streamlit as st

from studio._st_common import get_manager, guard, load_runs, store_banner
from studio._st_render import graph
from studio.views.candidate import candidate_view
from studio.views.compare import (
    compare_metrics,
    flip_counts,
    flipped_examples,
    parse_item,
)
from studio.views.tables import candidate_options, run_label

st.title("Compare")
manager = get_manager()
store_banner(manager)

runs = None
with guard():
    runs = load_runs(manager)
if runs is None or runs.empty:
    st.info("No runs yet.")
    st.stop()

run_ids = [str(r) for r in runs["run_id"]]
labels = {str(r["run_id"]): run_label(r) for r in runs.to_dict("records")}
linked: list[tuple[str, int]] = []
for part in str(st.query_params.get("items", "")).split(","):
    try:
        item = parse_item(part)
    except ValueError:
        continue
    if item[0] in run_ids:
        linked.append(item)
default_run = str(st.query_params.get("run") or "")
if default_run not in run_ids:
    default_run = run_ids[0]

n = st.number_input(
    "How many topologies",
    min_value=2,
    max_value=4,
    value=max(2, min(4, len(linked) or 2)),
    key="cmp_n",
)
archives: dict[str, pd.DataFrame] = {}


def _archive(run_id: str) -> pd.DataFrame:
    if run_id not in archives:
        archives[run_id] = manager.store.archive(run_id, include_unevaluated=False)
    return archives[run_id]


items: list[tuple[str, int]] = []
slot_cols = st.columns(int(n))
with guard():
    for i, col in enumerate(slot_cols):
        with col:
            want = linked[i] if i < len(linked) else (default_run, None)
            run_i = st.selectbox(
                f"Run {i + 1}",
                run_ids,
                index=run_ids.index(str(want[0])),
                format_func=lambda r: str(labels.get(r, r)),
                key=f"cmp_run_{i}",
            )
            options = candidate_options(_archive(str(run_i)))
            if not options:
                st.caption("This run has no evaluated candidates.")
                continue
            default_idx = want[1] if want[1] in options else options[min(i, len(options) - 1)]
            idx = st.selectbox(
                f"Candidate {i + 1}",
                options,
                index=options.index(default_idx),
                format_func=lambda c: f"candidate {c}",
                key=f"cmp_cand_{i}",
            )
            items.append((str(run_i), int(idx)))
    if items:
        st.query_params["items"] = ",".join(f"{r}:{c}" for r, c in items)

if len(items) < 2:
    st.info("Pick at least two evaluated candidates.")
    st.stop()

slot_labels = [f"{i + 1}: #{c} ({r[-6:]})" for i, (r, c) in enumerate(items)]
with guard():
    rows = []
    views = []
    for run_i, idx in items:
        arch = _archive(run_i)
        row = arch.loc[arch["candidate_idx"] == idx].iloc[0]
        rows.append(row.to_dict())
        spec_hash = row.get("spec_hash")
        views.append(
            candidate_view(row, manager.store.get_spec(str(spec_hash)) if spec_hash else None)
        )
    st.subheader("Metrics")
    metrics_table = compare_metrics(rows, slot_labels)
    st.dataframe(metrics_table, key="cmp_metrics", height=35 * (len(metrics_table) + 1) + 3)
    st.subheader("Graphs")
    for col, view, label in zip(st.columns(len(views)), views, slot_labels, strict=True):
        with col:
            st.markdown(f"**{label}**  \n{view.title}")
            graph(view.dot)

st.subheader("Examples that flip")
f1, f2 = st.columns(2)
a = f1.selectbox("A", range(len(items)), format_func=slot_labels.__getitem__, key="cmp_a")
b = f2.selectbox("B", range(len(items)), index=1, format_func=slot_labels.__getitem__, key="cmp_b")
with guard():
    (run_a, idx_a), (run_b, idx_b) = items[int(a)], items[int(b)]
    flips = manager.store.compare_candidates(run_a, idx_a, idx_b, run_id_b=run_b)
    counts = flip_counts(flips)
    m = st.columns(4)
    m[0].metric("right in A, wrong in B", counts["right_to_wrong"])
    m[1].metric("wrong in A, right in B", counts["wrong_to_right"])
    m[2].metric("both right", counts["both_right"])
    m[3].metric("both wrong", counts["both_wrong"])
    show_all = st.toggle("Show every example", key="cmp_all")
    table = flipped_examples(flips, include_same=show_all)
    if table.empty:
        st.caption("No example flips between these two.")
    else:
        st.dataframe(table, hide_index=True, key="cmp_flips")
