"""A candidate's inspector view: its spec and graph, the designer's thought, metrics, and results.

`candidate_view` assembles what the inspector shows from the store's rows; it never queries.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import pandas as pd

from core.errors import SpecError
from core.ir import SpecLimits, TopologySpec, assign_ids, parse_topology, to_dot

__all__ = [
    "METRIC_FIELDS",
    "TRACE_NOT_RECORDED",
    "CandidateView",
    "TraceView",
    "candidate_view",
    "parse_stored_spec",
    "trace_view",
]

TRACE_NOT_RECORDED = "trace not recorded (run the search with --traces)"
"""What the drill-down says for an example whose trace the journal did not record: searches
record traces only with `--traces` or `[search] traces = true`."""

METRIC_FIELDS: tuple[str, ...] = (
    "accuracy",
    "cost_usd",
    "latency_ms",
    "n_agents",
    "depth",
    "aggregate_score",
    "error_rate",
    "blank_rate",
    "n_examples",
    "test_accuracy",
)
"""The archive columns shown as the candidate's metrics."""

_READ_LIMITS = SpecLimits(max_depth=64, max_nodes=100_000)
"""Stored specs are read back with the IR's ceiling (whatever a search produced)."""


def parse_stored_spec(spec_json: str | None) -> tuple[TopologySpec | None, str | None]:
    """A stored spec, parsed: `(spec, None)`, or `(None, why)` when missing or not a spec
    (a rejected proposal keeps the raw text the designer produced)."""
    if not spec_json:
        return None, "no spec stored for this candidate"
    try:
        return parse_topology(spec_json, _READ_LIMITS), None
    except SpecError as exc:
        return None, f"not a valid spec: {exc}"


@dataclass(frozen=True, slots=True)
class CandidateView:
    """What the inspector shows for one candidate.

    Attributes:
        candidate_idx: the candidate.
        title: e.g. `"candidate 7 (generation 2, mutate insert_step of 3)"`.
        status: e.g. `"on the Pareto front, best aggregate score; scored on 300 problems of
            the validation split"`, `"minibatch estimate: scored on 20 problems of the
            minibatch split only, ..."` or `"not valid: nan_accuracy"`.
        thought: the designer's reasoning ("" when none).
        metrics: metric name -> value (`METRIC_FIELDS` present in the row; NaN kept).
        spec: the parsed spec, or None.
        spec_json: the stored JSON text ("" when none).
        spec_problem: why `spec` is None, else None.
        dot: the graph as DOT ("" without a spec).
        examples: per-example results (the store's `candidate_examples`).
    """

    candidate_idx: int
    title: str
    status: str
    thought: str
    metrics: dict[str, Any]
    spec: TopologySpec | None
    spec_json: str
    spec_problem: str | None
    dot: str
    examples: pd.DataFrame


def _value(row: dict[str, Any], key: str) -> Any:
    v = row.get(key)
    # pd.NA too: an archive's nullable integer columns (parent_idx) hold it, not None
    if v is None or v is pd.NA or (isinstance(v, float) and math.isnan(v)):
        return None
    return v


def candidate_view(
    row: dict[str, Any] | pd.Series,
    spec_json: str | None,
    examples: pd.DataFrame | None = None,
) -> CandidateView:
    """Build the inspector view of one archive row.

    Args:
        row: the candidate's `RunStore.archive` row (a dict or Series).
        spec_json: its stored spec (`RunStore.get_spec(row["spec_hash"])`).
        examples: its per-example results, if loaded.
    """
    data: dict[str, Any] = dict(row)
    idx = int(data["candidate_idx"])
    gen = _value(data, "generation")
    op = _value(data, "operator") or ""
    parent = _value(data, "parent_idx")
    bits = []
    if gen is not None:
        bits.append("seed" if int(gen) < 0 else f"generation {int(gen)}")
    if op and op != "seed":
        bits.append(op + (f" of {int(parent)}" if parent is not None else ""))
    title = f"candidate {idx}" + (f" ({', '.join(bits)})" if bits else "")
    if bool(data.get("valid")):
        tags = []
        if bool(data.get("on_front")):
            tags.append("on the Pareto front")
        else:
            tags.append("dominated")
        if bool(data.get("is_best")):
            tags.append("best aggregate score")
        status = ", ".join(tags)
        split = _value(data, "objective_split")
        n = _value(data, "n_examples")
        on = f"{int(n)} problems of the {split} split" if n is not None else f"the {split} split"
        comparable = _value(data, "comparable")  # numpy or Python bool, None when absent
        if split and comparable is not None and not bool(comparable):
            status = f"minibatch estimate: scored on {on} only, not ranked with full-split scores"
        elif split:
            status += f"; scored on {on}"
    else:
        status = f"not valid: {_value(data, 'invalid_reason') or 'unknown reason'}"
    spec, problem = parse_stored_spec(spec_json)
    dot = to_dot(assign_ids(spec), title=f"candidate {idx}") if spec is not None else ""
    metrics = {k: data[k] for k in METRIC_FIELDS if k in data}
    return CandidateView(
        candidate_idx=idx,
        title=title,
        status=status,
        thought=str(_value(data, "thought") or ""),
        metrics=metrics,
        spec=spec,
        spec_json=spec_json or "",
        spec_problem=problem,
        dot=dot,
        examples=examples if examples is not None else pd.DataFrame(),
    )


@dataclass(frozen=True, slots=True)
class TraceView:
    """One example's trace for the drill-down.

    Attributes:
        message: `TRACE_NOT_RECORDED` when there are no spans (None: `spans` has rows).
        spans: one row per span: `span_id, parent_id, node_id, kind, name, duration_ms` (ms),
            `input_summary, output_summary, error`; empty without a trace.
    """

    message: str | None
    spans: pd.DataFrame


_SPAN_COLUMNS = (
    "span_id",
    "parent_id",
    "node_id",
    "kind",
    "name",
    "duration_ms",
    "input_summary",
    "output_summary",
    "error",
)


def trace_view(spans: list[dict[str, Any]] | None) -> TraceView:
    """The drill-down of one example's spans (`RunStore.example_trace`): a table, or the
    message that the trace was not recorded (None or [] from the store)."""
    if not spans:
        return TraceView(TRACE_NOT_RECORDED, pd.DataFrame())
    rows = [{c: s.get(c) for c in _SPAN_COLUMNS} for s in spans]
    return TraceView(None, pd.DataFrame(rows, columns=list(_SPAN_COLUMNS)))
