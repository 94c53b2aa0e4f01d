"""Render helpers: draw view data from `studio.views` with Streamlit (no queries, no logic)."""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import streamlit as st

from studio.views.candidate import CandidateView
from studio.views.compare import distinct_dot
from studio.views.drilldown import AnswerRow, ExampleCase, TraceDetail
from studio.views.tables import example_table

__all__ = ["drilldown", "format_value", "graph", "inspector", "metric_row"]


def format_value(name: str, value: Any) -> str:
    """A metric for display: costs with 4 decimals and `$`, shares as %, ms as integers."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "-"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if not isinstance(value, int | float):
        return str(value)
    if "usd" in name:
        return f"${value:.4f}" if value < 1 else f"${value:,.2f}"
    if name in ("accuracy", "test_accuracy", "error_rate", "blank_rate"):
        return f"{value:.1%}"
    if name.endswith("_ms"):
        return f"{value:,.0f} ms"
    if isinstance(value, float) and not value.is_integer():
        return f"{value:.4f}"
    return f"{int(value)}"


def metric_row(metrics: Mapping[str, Any], *, per_row: int = 6) -> None:
    """Metrics as `st.metric` tiles as wide as their values, wrapping when the page is narrow
    (equal columns cut values to "$1..." at 1000 px). `per_row` is kept
    for callers; the row wraps by width instead."""
    del per_row
    with st.container(horizontal=True):
        for name, value in metrics.items():
            st.metric(name.replace("_", " "), format_value(name, value), width="content")


def graph(dot: str, *, empty: str = "No topology to draw.") -> None:
    """A topology graph (DOT rendered in the browser by `st.graphviz_chart`; node names made
    unique per graph, see `distinct_dot`, so switching candidates keeps every node's shape)."""
    if dot:
        st.graphviz_chart(distinct_dot(dot))
    else:
        st.caption(empty)


def inspector(view: CandidateView) -> None:
    """The candidate inspector: title, status, the designer's thought, metrics, graph, results."""
    st.subheader(view.title)
    st.caption(view.status)
    if view.thought:
        st.markdown("**Designer's thought**")
        st.info(view.thought)
    metric_row(view.metrics)
    tab_graph, tab_examples, tab_json = st.tabs(["Graph", "Per-example results", "Spec JSON"])
    with tab_graph:
        if view.spec_problem:
            st.warning(view.spec_problem)
        graph(view.dot)
    with tab_examples:
        if view.examples.empty:
            st.caption("No per-example results stored for this candidate.")
        else:
            st.dataframe(example_table(view.examples), hide_index=True, key="inspector_examples")
    with tab_json:
        # st.json, not st.code: the code view loads a 1.5 MB highlighter into the browser
        if view.spec is not None:
            st.json(view.spec.model_dump(mode="json", exclude_none=True), expanded=True)
        else:
            st.text(view.spec_json or "(none)")


def drilldown(
    case: ExampleCase | None,
    answers: list[AnswerRow],
    traces: list[tuple[str, TraceDetail]],
    *,
    key: str,
) -> None:
    """One example in full: question, gold, each candidate's answer, and per candidate its
    route, step table (tokens, cost, latency) and graph with the path taken in yellow."""
    if case is not None:
        st.markdown(f"**Question** ({case.example_id})")
        st.text(case.question)
        st.markdown(f"**Gold answer:** `{case.gold or '(none)'}`")
    for a in answers:
        st.markdown(
            f"**{a.who}** answered `{a.answer}`: {'right' if a.right else 'wrong'}"
            + (f" ({a.status})" if a.status not in ("", "ok") else "")
            + f", {format_value('cost_usd', a.cost_usd)}, {format_value('latency_ms', a.latency_ms)}"
        )
    for label, detail in traces:
        st.markdown(f"**Trace of {label}**")
        if detail.message is not None:
            st.caption(detail.message)
            continue
        for line in detail.routes:
            st.markdown(f"Route taken: {line}")
        t = detail.totals
        st.caption(
            f"{int(t.get('input_tokens', 0)):,} tokens in, {int(t.get('output_tokens', 0)):,} "
            f"out; {format_value('cost_usd', t.get('cost_usd'))}; model latencies add up to "
            f"{format_value('latency_ms', t.get('latency_ms'))} (parallel steps overlap)."
        )
        st.dataframe(detail.steps, hide_index=True, key=f"{key}_steps_{label}")
        graph(detail.dot)
