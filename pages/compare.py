"""Compare: two to four topologies side by side (metrics, graphs) and the examples that flip."""

from __future__ import annotations

import hashlib

import pandas as pd
import streamlit as st

from studio._st_common import guard, open_runs_page
from studio._st_render import drilldown
from studio.views.candidate import candidate_view
from studio.views.compare import (
    compare_metrics,
    default_candidates,
    delta_table,
    distinct_dot,
    flip_counts,
    flip_splits,
    flipped_examples,
    format_metric,
    paired_test,
    parse_item,
    sample_note,
    spec_differences,
    split_note,
)
from studio.views.drilldown import answer_row, gold_cases, trace_detail
from studio.views.tables import candidate_options, run_label

manager, runs = open_runs_page("Compare", "No runs yet.")

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
            run_i = str(
                st.selectbox(
                    f"Run {i + 1}",
                    run_ids,
                    index=run_ids.index(str(want[0])),
                    format_func=lambda r: str(labels.get(r, r)),
                    key=f"cmp_run_{i}",
                )
            )
            arch_i = _archive(run_i)
            options = candidate_options(arch_i)
            if not options:
                st.caption("This run has no evaluated candidates.")
                continue
            # unlinked slots: the best, then the seed, then others with different figures
            defaults = default_candidates(arch_i, int(n))
            fallback = defaults[min(i, len(defaults) - 1)]
            default_idx = want[1] if want[0] == run_i and want[1] in options else fallback
            figures = {
                int(r["candidate_idx"]): ", ".join(
                    format_metric(m, r.get(m)) for m in ("accuracy", "cost_usd")
                )
                for r in arch_i.to_dict("records")
            }
            idx = st.selectbox(
                f"Candidate {i + 1}",
                options,
                index=options.index(default_idx),
                format_func=lambda c, f=figures: f"#{c}: {f.get(int(c), '')}",
                # one widget per run: a pick in one run is not carried to another
                key=f"cmp_cand_{i}_{run_i}",
            )
            items.append((run_i, int(idx)))
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
    base_label = st.selectbox(
        "Baseline for the deltas",
        slot_labels,
        index=0,
        key=f"cmp_base_{hashlib.sha256('|'.join(slot_labels).encode()).hexdigest()[:8]}",
    )
    deltas = delta_table(rows, slot_labels, baseline=slot_labels.index(str(base_label)))
    st.caption("Each figure and its change from the baseline; ★ marks the best of each row.")
    note = sample_note(rows, slot_labels)
    if note:
        st.warning(note, icon=":material/compare_arrows:")
    st.dataframe(deltas, key="cmp_deltas", height=35 * (len(deltas) + 1) + 3)
    st.subheader("Graphs")
    side = st.toggle(
        "Graphs side by side",
        value=False,
        key="cmp_side",
        help="One below the other gives every graph the page's width, legible on any screen.",
    )
    graph_cols = st.columns(len(views)) if side else [st.container() for _ in views]
    for col, view, label in zip(graph_cols, views, slot_labels, strict=True):
        with col:
            st.markdown(f"**{label}**  \n{view.title}")
            if view.dot:
                # names salted per graph: a swapped topology never inherits another's shapes;
                # stacked, a graph keeps its own size (stretched, a 2-node graph is enormous)
                st.graphviz_chart(distinct_dot(view.dot), width="stretch" if side else "content")
            else:
                st.caption("No topology to draw.")
    if st.toggle("Differences only (spec JSON)", value=False, key="cmp_diff_only"):
        first = rows[0].get("spec_hash")
        text0 = manager.store.get_spec(str(first)) if first else None
        for row, label in zip(rows[1:], slot_labels[1:], strict=True):
            h = row.get("spec_hash")
            diff = spec_differences(
                text0, manager.store.get_spec(str(h)) if h else None, slot_labels[0], label
            )
            st.markdown(f"**{slot_labels[0]} → {label}**")
            if diff:
                st.code(diff, language="diff")
            else:
                st.caption("The same topology (node ids aside).")

st.subheader("Examples that flip")
# the pickers' options are the slot labels themselves, under a key naming the compared items:
# a changed candidate makes new pickers, never a box still showing the previous label
pair_key = hashlib.sha256("|".join(slot_labels).encode()).hexdigest()[:8]
f1, f2 = st.columns(2)
a = f1.selectbox("A", slot_labels, index=0, key=f"cmp_a_{pair_key}")
b = f2.selectbox("B", slot_labels, index=1, key=f"cmp_b_{pair_key}")
with guard():
    (run_a, idx_a), (run_b, idx_b) = items[slot_labels.index(a)], items[slot_labels.index(b)]
    name_a, name_b = f"#{idx_a}", f"#{idx_b}"
    if name_a == name_b:
        name_a, name_b = f"A ({name_a})", f"B ({name_b})"
    st.caption(f"A = {a}, B = {b}")
    all_flips = manager.store.compare_candidates(run_a, idx_a, idx_b, run_id_b=run_b)
    splits = flip_splits(all_flips)
    if not splits:
        st.caption("These two have no examples scored on the same split.")
        st.stop()
    split = st.radio(
        "Split",
        splits,
        horizontal=True,
        key=f"cmp_split_{pair_key}",
        help="Flips are counted on one split: the examples both were scored on there.",
    )
    flips = all_flips.loc[all_flips["split"] == split].reset_index(drop=True)
    note = split_note(str(split), [str(e) for e in flips["example_id"].tolist()])
    if note:
        st.caption(note)
    counts = flip_counts(flips)
    # content-width tiles that wrap: four equal columns cut the labels at 1000 px
    with st.container(horizontal=True, key="cmp_flip_tiles"):
        for label_, n_ in (
            (f"right in {name_a}, wrong in {name_b}", counts["right_to_wrong"]),
            (f"wrong in {name_a}, right in {name_b}", counts["wrong_to_right"]),
            ("both right", counts["both_right"]),
            ("both wrong", counts["both_wrong"]),
        ):
            st.metric(label_, n_, width="content")
    test = paired_test(counts, name_a, name_b)
    st.markdown(test.text)
    show_all = st.toggle("Show every example", key="cmp_all")
    table = flipped_examples(flips, include_same=show_all)
    if table.empty:
        st.caption("No example flips between these two.")
    else:
        st.dataframe(table, hide_index=True, key="cmp_flips")
        picked = st.selectbox(
            "Drill into one example",
            [str(e) for e in table["example_id"].tolist()],
            index=None,
            key=f"cmp_drill_{pair_key}_{split}",
            placeholder="pick an example: question, gold, both answers, routes and steps",
        )
        if picked is not None:
            answers, traces = [], []
            prob = None
            record = manager.store.get_run(run_a)
            if record is not None and record.problem:
                prob = manager.problem(record.problem)
            for run_x, idx_x, name_x in ((run_a, idx_a, name_a), (run_b, idx_b, name_b)):
                ex = manager.store.candidate_examples(run_x, idx_x, split=str(split))
                mine = ex.loc[ex["example_id"] == picked]
                if not mine.empty:
                    answers.append(answer_row(name_x, mine.iloc[0].to_dict()))
                view_x = views[items.index((run_x, idx_x))]
                spans = manager.store.example_trace(run_x, idx_x, picked)
                traces.append(
                    (name_x, trace_detail(view_x.spec, spans, prob.prices if prob else {}))
                )
            drilldown(
                gold_cases(prob.splits).get(picked) if prob is not None else None,
                answers,
                traces,
                key="cmp_drill",
            )
