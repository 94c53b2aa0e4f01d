"""Tracing: span shape and API, lazy summaries (only of immutable values), usage and model time,
parents across concurrent tasks."""

from __future__ import annotations

import asyncio
from typing import Any

from pydantic import BaseModel

from core.runtime import FunctionStep, Parallel, Pipeline, Span, Trace, capture_trace
from core.runtime.tracing import (
    critical_path_ms,
    end_span,
    record_model_latency,
    record_usage,
    start_span,
    summarize,
)


def _traced(step: Any, x: Any) -> tuple[Any, Trace]:
    async def go() -> tuple[Any, Trace]:
        with capture_trace() as trace:
            out = await step.execute(x)
        return out, trace

    return asyncio.run(go())


class Box(BaseModel):
    items: list[int]


def test_span_fields_defaults_equality_and_dict() -> None:
    span = Span(span_id=0, parent_id=None, node_id="n", kind="function_step", name="f", start_ns=5)
    assert (span.end_ns, span.input_summary, span.output_summary, span.error) == (
        None,
        "",
        "",
        None,
    )
    assert (span.usage, span.attributes, span.duration_ms) == ([], {}, None)
    same = Span(0, None, "n", "function_step", "f", 5)
    assert span == same
    span.attributes["x"] = 1
    assert span != same
    span.end_ns = 2_000_005
    assert span.to_dict() == {
        "span_id": 0,
        "parent_id": None,
        "node_id": "n",
        "kind": "function_step",
        "name": "f",
        "start_ns": 5,
        "end_ns": 2_000_005,
        "duration_ms": 2.0,
        "input_summary": "",
        "output_summary": "",
        "usage": [],
        "attributes": {"x": 1},
        "error": None,
    }
    assert repr(same) == (
        "Span(span_id=0, parent_id=None, node_id='n', kind='function_step', name='f', "
        "start_ns=5, end_ns=None, input_summary='', output_summary='', usage=[], attributes={}, "
        "error=None)"
    )


def test_summaries_are_those_of_the_values_at_the_time() -> None:
    """Plain values (str, int, float, bool, None) are summarised when read, which gives the same
    text; anything mutable is summarised at once, so a later step mutating it in place does not
    change what the trace recorded."""

    def make_list(x: int) -> list[int]:
        return [x]

    def grow(values: list[int]) -> list[int]:
        values.append(99)  # mutates the previous step's output in place
        return values

    def make_box(values: list[int]) -> Box:
        return Box(items=values)

    def spoil(box: Box) -> str:
        box.items.append(100)
        return "long " * 60 + "\nend"

    pipe = Pipeline([make_list, grow, make_box, spoil, lambda s: None, lambda n: 2.5])
    out, trace = _traced(pipe, 7)
    assert out == 2.5
    assert [(s.name, s.input_summary, s.output_summary) for s in trace.spans] == [
        ("pipeline", "7", "2.5"),
        ("make_list", "7", "[7]"),
        ("grow", "[7]", "[7, 99]"),
        ("make_box", "[7, 99]", '{"items":[7,99]}'),
        ("spoil", '{"items":[7,99]}', summarize("long " * 60 + "\nend")),
        ("<lambda>", summarize("long " * 60 + "\nend"), "None"),
        ("<lambda>", "None", "2.5"),
    ]
    assert len(trace.spans[4].output_summary) == 201  # 200 characters and an ellipsis
    assert "\n" not in trace.spans[4].output_summary
    assert trace.to_list()[3]["output_summary"] == '{"items":[7,99]}'


def test_summaries_of_an_error_and_of_hand_made_spans() -> None:
    def boom(x: str) -> str:
        raise ValueError(f"bad {x}")

    async def go() -> Trace:
        with capture_trace() as trace:
            try:
                await FunctionStep(boom).execute("in")
            except ValueError:
                pass
            span, token = start_span(
                trace, kind="pipeline", name="manual", node_id=None, input_value=True
            )
            end_span(span, token, output="done")
        return trace

    trace = asyncio.run(go())
    failed, manual = trace.spans
    assert (failed.input_summary, failed.output_summary, failed.error) == (
        "in",
        "",
        "ValueError: bad in",
    )
    assert (manual.input_summary, manual.output_summary, manual.error) == ("True", "done", None)
    manual.output_summary = "overwritten"
    assert manual.output_summary == "overwritten"


def test_usage_and_model_time_attach_to_the_innermost_span() -> None:
    def calls_a_model(x: str) -> str:
        record_usage("m:a", input_tokens=3, output_tokens=1)
        record_usage("m:a", requests=2, input_tokens=4, output_tokens=2)
        record_usage("m:b", input_tokens=1)
        record_model_latency(10.0)
        return x

    def plain(x: str) -> str:
        return x

    par = Parallel([calls_a_model, Pipeline([plain, calls_a_model])])
    out, trace = _traced(par, "q")
    assert out == ["q", "q"]
    usage = [[u.to_dict() for u in s.usage] for s in trace.spans]
    assert [s.name for s in trace.spans] == [
        "parallel",
        "calls_a_model",
        "pipeline",
        "plain",
        "calls_a_model",
    ]
    one = [
        {"model_name": "m:a", "requests": 3, "input_tokens": 7, "output_tokens": 3},
        {"model_name": "m:b", "requests": 1, "input_tokens": 1, "output_tokens": 0},
    ]
    assert usage == [[], one, [], [], one]
    assert {k: (v.requests, v.input_tokens) for k, v in trace.usage_by_model().items()} == {
        "m:a": (6, 14),
        "m:b": (2, 2),
    }
    assert [s.attributes for s in trace.spans[3:]] == [{}, {"model_latency_ms": 10.0}]
    assert critical_path_ms(trace) == 10.0  # the two branches run side by side: max, not sum
    # outside a trace both are no-ops
    record_usage("m:a")
    record_model_latency(1.0)


def test_parents_are_right_across_tasks_the_step_creates() -> None:
    """A step that fans out with `asyncio.gather` (tasks copying the context) and one that
    starts a task and returns before it runs: every span's parent is the step that created it."""
    leaf_a = FunctionStep(lambda x: x + "a", name="a")
    leaf_b = FunctionStep(lambda x: x + "b", name="b")
    later: list[asyncio.Task[Any]] = []

    async def fan_out(x: str) -> str:
        outs = await asyncio.gather(leaf_a.execute(x), Pipeline([leaf_b, leaf_a]).execute(x))
        return "|".join(outs)

    async def fire_and_forget(x: str) -> str:
        later.append(asyncio.ensure_future(leaf_b.execute("late")))
        return x

    pipe = Pipeline(
        [FunctionStep(fan_out, name="fan"), FunctionStep(fire_and_forget, name="fire"), leaf_a]
    )

    async def go() -> tuple[Any, Trace]:
        with capture_trace() as trace:
            out = await pipe.run("x")
            await asyncio.gather(*later)
        return out, trace

    out, trace = asyncio.run(go())
    assert out == "xa|xbaa"
    by_id = {s.span_id: s for s in trace.spans}
    rows = sorted(
        (s.name, "" if s.parent_id is None else by_id[s.parent_id].name, s.input_summary)
        for s in trace.spans
    )
    assert rows == sorted(
        [
            ("pipeline", "", "x"),
            ("fan", "pipeline", "x"),
            ("a", "fan", "x"),
            ("pipeline", "fan", "x"),
            ("b", "pipeline", "x"),
            ("a", "pipeline", "xb"),
            ("fire", "pipeline", "xa|xba"),
            ("b", "fire", "late"),
            ("a", "pipeline", "xa|xba"),
        ]
    )
    assert all(s.end_ns is not None for s in trace.spans)


def test_a_trace_without_summaries_leaves_non_plain_values_unsummarised() -> None:
    """`capture_trace(summaries=False)`: plain values still read as text (they cost nothing to
    keep), every other input and output is "", in function, agent-less composite and nested
    spans alike; structure and timing are unchanged."""

    def make_box(x: int) -> Box:
        return Box(items=[x])

    def unbox(box: Box) -> int:
        return box.items[0] + 1

    inner = Pipeline([make_box], name="inner")
    pipe = Pipeline([inner, unbox, lambda n: [n]], name="outer")

    async def go() -> tuple[Any, Trace]:
        with capture_trace(summaries=False) as trace:
            return await pipe.run(7), trace

    out, trace = asyncio.run(go())
    assert out == [8]
    assert [(s.name, s.input_summary, s.output_summary) for s in trace.spans] == [
        ("outer", "7", ""),
        ("inner", "7", ""),
        ("make_box", "7", ""),
        ("unbox", "", "8"),
        ("<lambda>", "8", ""),
    ]
    assert [s.parent_id for s in trace.spans] == [None, 0, 1, 0, 0]
    assert all(s.end_ns is not None for s in trace.spans)
