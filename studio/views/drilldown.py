"""Per-example drill-down: the question, the gold answer, each candidate's
answer and, when the trace was recorded, the route taken and why, each step's span with its
tokens, cost and latency, and the path taken drawn on the topology's graph.

Pure functions over stored rows (`RunStore.candidate_examples`, `RunStore.example_trace`,
`ExampleResult` of an editor evaluation) and the problem's gold examples; nothing here queries
or calls Streamlit.

Spans carry a `node_id` only when the spec had ids; searched specs often have none. So spans
are matched to the spec's nodes by structure (`trace_paths`): the root span is the root node,
and each span's children are matched, in start order, to the node's child slots of the same
kind (and, for an agent or function step, the same name), a router's to its chosen route.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, cast

import pandas as pd

from core.evaluation.pricing import ModelPrice
from core.ir import (
    AgentStepSpec,
    AnyNode,
    FunctionStepSpec,
    RouterSpec,
    TopologySpec,
    assign_ids,
    node_at,
    to_dot,
)
from core.ir.models import child_slots
from studio.views.candidate import TRACE_NOT_RECORDED

__all__ = [
    "PATH_COLOUR",
    "STEP_COLUMNS",
    "AnswerRow",
    "ExampleCase",
    "TraceDetail",
    "answer_row",
    "answer_text",
    "answers_frame",
    "gold_cases",
    "trace_detail",
    "trace_paths",
]

PATH_COLOUR = "#fde047"
"""The nodes an example ran through, on its graph (the editor's selection yellow)."""

STEP_COLUMNS: tuple[str, ...] = (
    "step",
    "kind",
    "node",
    "route / note",
    "latency_ms",
    "input_tokens",
    "output_tokens",
    "requests",
    "cost_usd",
    "error",
)
"""Columns of a trace's step table."""


@dataclass(frozen=True, slots=True)
class ExampleCase:
    """One gold example as the drill-down shows it.

    Attributes:
        example_id: its id.
        question: the input's `question` field, else the input as text.
        gold: the expected answer as text ("" when the example has none).
    """

    example_id: str
    question: str
    gold: str


def _text(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, str):
        return value
    dump = getattr(value, "model_dump", None)
    if callable(dump):
        data = dump(mode="json")
        if isinstance(data, dict):
            for key in ("question", "input", "text", "prompt"):
                if isinstance(data.get(key), str):
                    return str(data[key])
        return json.dumps(data)
    return str(value)


def gold_cases(splits: Mapping[str, Sequence[Any]]) -> dict[str, ExampleCase]:
    """Example id -> its case, over every split of a problem (`Problem.splits`, lists of
    `GoldExample`); examples without an id are left out."""
    out: dict[str, ExampleCase] = {}
    for examples in splits.values():
        for ex in examples:
            ex_id = getattr(ex, "id", None)
            if ex_id is None:
                continue
            question = getattr(ex, "input", None)
            q = getattr(question, "question", None)
            out[str(ex_id)] = ExampleCase(
                str(ex_id),
                q if isinstance(q, str) else _text(question),
                _text(getattr(ex, "expected", None)),
            )
    return out


_ANSWER = re.compile(r'"(?:final_answer|answer|output)"\s*:\s*("(?:[^"\\]|\\.)*"|-?[\d.]+)')


def answer_text(output_summary: str | None) -> str:
    """A candidate's answer read from its stored output summary.

    The summary is the final state as JSON cut at 200 characters (`core.runtime.summarize`),
    so a `final_answer` (or `answer`, `output`) field is looked for in the text; a summary that
    is not such a state is shown as it is.

    Returns:
        The answer, or `"(not in the stored summary)"` when the state's answer was cut off.
    """
    text = (output_summary or "").strip()
    if not text:
        return "(none)"
    found = _ANSWER.findall(text)
    if found:
        raw = found[0]
        try:
            value = json.loads(raw)
        except ValueError:
            value = raw
        return "(none)" if value in (None, "") else str(value)
    if text.startswith("{"):
        return "(not in the stored summary)"
    return text


@dataclass(frozen=True, slots=True)
class AnswerRow:
    """One candidate's answer to one example.

    Attributes:
        who: the candidate's label (e.g. `#6`).
        answer: `answer_text` of its output.
        right: whether it scored (accuracy >= 0.5).
        accuracy: its score on the example.
        cost_usd: its model cost.
        latency_ms: its latency.
        status: `ok`, `error`, `blank`, ...
    """

    who: str
    answer: str
    right: bool
    accuracy: float
    cost_usd: float
    latency_ms: float
    status: str


def answer_row(who: str, row: Mapping[str, Any]) -> AnswerRow:
    """An `AnswerRow` from a `candidate_examples` row (or an evaluation row's mapping)."""

    def num(key: str) -> float:
        v = row.get(key)
        return float(v) if isinstance(v, int | float) and not isinstance(v, bool) else math.nan

    acc = num("accuracy")
    return AnswerRow(
        who,
        answer_text(cast(str | None, row.get("output_summary"))),
        math.isfinite(acc) and acc >= 0.5 and row.get("status") != "error",
        acc,
        num("cost_usd"),
        num("latency_ms"),
        str(row.get("status") or ""),
    )


def answers_frame(rows: Iterable[AnswerRow]) -> pd.DataFrame:
    """Answers side by side, one row per candidate."""
    return pd.DataFrame(
        [
            {
                "candidate": r.who,
                "answer": r.answer,
                "right": r.right,
                "accuracy": r.accuracy,
                "cost_usd": r.cost_usd,
                "latency_ms": r.latency_ms,
                "status": r.status,
            }
            for r in rows
        ],
        columns=["candidate", "answer", "right", "accuracy", "cost_usd", "latency_ms", "status"],
    )


def _step_name(node: AnyNode) -> str | None:
    if isinstance(node, AgentStepSpec):
        return node.agent_name
    if isinstance(node, FunctionStepSpec):
        return node.callable_name
    return None


def trace_paths(spec: AnyNode, spans: Sequence[Mapping[str, Any]]) -> dict[int, str]:
    """Span id -> the JSON path of the spec node it ran (spans that match no node are left out).

    A span with a `node_id` that names a node of `spec` (ids assigned) is that node; otherwise
    the structural match of the module docstring.
    """
    children: dict[int | None, list[Mapping[str, Any]]] = {}
    for s in spans:
        children.setdefault(cast(int | None, s.get("parent_id")), []).append(s)
    for kids in children.values():
        kids.sort(key=lambda s: (s.get("start_ns") or 0, s.get("span_id") or 0))
    roots = children.get(None, [])
    out: dict[int, str] = {}
    if not roots:
        return out
    stack: list[tuple[Mapping[str, Any], str]] = [(roots[0], "$")]
    while stack:
        span, path = stack.pop()
        out[int(span["span_id"])] = path
        node = node_at(spec, path)
        slots = list(child_slots(node))
        if isinstance(node, RouterSpec):
            route = (span.get("attributes") or {}).get("route")
            chosen = [(i, r) for i, r in enumerate(node.routes) if r.name == route]
            if chosen:
                slots = [(f".routes[{chosen[0][0]}].step", chosen[0][1].step)]
            elif (span.get("attributes") or {}).get("fallback"):
                slots = [(".fallback_step", node.fallback_step)]
        used: set[int] = set()
        for kid in children.get(int(span["span_id"]), []):
            for k, (suffix, child) in enumerate(slots):
                if child is None:
                    continue
                if k in used and len(slots) > 1:
                    continue
                if child.node_kind != kid.get("kind"):
                    continue
                name = _step_name(child)
                if name is not None and kid.get("name") not in (name, child.id):
                    continue
                if len(slots) > 1:
                    used.add(k)
                stack.append((kid, path + suffix))
                break
    return out


@dataclass(frozen=True, slots=True)
class TraceDetail:
    """One example's trace, ready to draw.

    Attributes:
        message: `TRACE_NOT_RECORDED` without spans, else None.
        routes: one sentence per router decision, e.g. `"router [r]: route 'long' (condition
            question_is_long)"` or `"router: fallback (no_condition_matched)"`.
        steps: the step table (`STEP_COLUMNS`), one row per span in start order, indented by
            depth.
        dot: the topology's graph with the nodes the example ran through filled yellow ("" when
            there is no spec).
        totals: `{"input_tokens", "output_tokens", "cost_usd", "latency_ms"}` over the steps.
    """

    message: str | None
    routes: tuple[str, ...]
    steps: pd.DataFrame
    dot: str
    totals: dict[str, float]


def _span_cost(usage: Sequence[Mapping[str, Any]], prices: Mapping[str, ModelPrice]) -> float:
    total = 0.0
    for u in usage:
        price = prices.get(str(u.get("model_name")))
        if price is None:
            return math.nan
        total += (
            float(u.get("input_tokens") or 0) * price.input_usd_per_1k
            + float(u.get("output_tokens") or 0) * price.output_usd_per_1k
        ) / 1000
    return total


def trace_detail(
    spec: TopologySpec | None,
    spans: Sequence[Mapping[str, Any]] | None,
    prices: Mapping[str, ModelPrice] | None = None,
) -> TraceDetail:
    """The drill-down of one example's trace (`RunStore.example_trace` or an evaluation's
    `ExampleResult.trace`).

    A step's latency is the replayed model latency when the span records one
    (`model_latency_ms`, replay models), else its wall time; its cost is its usage times the
    problem's prices (NaN for an unpriced model).
    """
    ided = cast(TopologySpec, assign_ids(spec)) if spec is not None else None
    if not spans:
        return TraceDetail(
            TRACE_NOT_RECORDED,
            (),
            pd.DataFrame(columns=list(STEP_COLUMNS)),
            to_dot(ided) if ided is not None else "",
            {},
        )
    paths = trace_paths(ided, spans) if ided is not None else {}
    depth: dict[int, int] = {}
    rows: list[dict[str, Any]] = []
    routes: list[str] = []
    path_ids: dict[str, str] = {}
    for s in sorted(spans, key=lambda s: (s.get("start_ns") or 0, s.get("span_id") or 0)):
        sid = int(s["span_id"])
        parent = s.get("parent_id")
        depth[sid] = 0 if parent is None else depth.get(int(parent), 0) + 1
        attrs = cast(Mapping[str, Any], s.get("attributes") or {})
        usage = cast(Sequence[Mapping[str, Any]], s.get("usage") or [])
        path = paths.get(sid)
        node = node_at(ided, path) if ided is not None and path is not None else None
        if node is not None and node.id is not None:
            path_ids[node.id] = PATH_COLOUR
        label = f"{s.get('kind')}" + (f" [{node.id}]" if node is not None and node.id else "")
        note = ""
        if s.get("kind") == "router":
            if attrs.get("route") is not None:
                cond = (
                    [r.condition_name for r in node.routes if r.name == attrs["route"]]
                    if isinstance(node, RouterSpec)
                    else []
                )
                why = attrs.get("reason") or (
                    f"classifier said {attrs['raw']!r}"
                    if attrs.get("raw")
                    else (f"condition {cond[0]} held" if cond and cond[0] else "condition held")
                )
                note = f"route {attrs['route']!r} ({why})"
            elif attrs.get("fallback"):
                note = f"fallback ({attrs.get('reason') or 'no route chosen'})"
            routes.append(f"{label}: {note}")
        elif s.get("kind") == "refinement_loop" and attrs.get("exit_reason"):
            note = f"exit: {attrs['exit_reason']}"
        latency = attrs.get("model_latency_ms")
        rows.append(
            {
                "step": "\u2003" * depth[sid] + str(s.get("name") or ""),
                "kind": label,
                "node": path or "",
                "route / note": note,
                "latency_ms": float(latency)
                if isinstance(latency, int | float)
                else float(s.get("duration_ms") or 0.0),
                "input_tokens": int(sum(int(u.get("input_tokens") or 0) for u in usage)),
                "output_tokens": int(sum(int(u.get("output_tokens") or 0) for u in usage)),
                "requests": int(sum(int(u.get("requests") or 0) for u in usage)),
                "cost_usd": _span_cost(usage, prices or {}) if usage else 0.0,
                "error": s.get("error") or "",
            }
        )
    steps = pd.DataFrame(rows, columns=list(STEP_COLUMNS))
    leaf = [r["input_tokens"] + r["output_tokens"] > 0 for r in rows]
    totals = {
        "input_tokens": float(sum(r["input_tokens"] for r in rows)),
        "output_tokens": float(sum(r["output_tokens"] for r in rows)),
        "cost_usd": float(sum(r["cost_usd"] for r in rows)),
        "latency_ms": float(sum(r["latency_ms"] for r, x in zip(rows, leaf, strict=True) if x)),
    }
    return TraceDetail(
        None,
        tuple(routes),
        steps,
        to_dot(ided, highlight=path_ids) if ided is not None else "",
        totals,
    )
