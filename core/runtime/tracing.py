"""Execution traces: one span per step execution, collected only when a trace is active.

A trace is opt-in and costs nothing when off: the runtime checks one context variable and skips
all span bookkeeping when no `Trace` is active. Turn it on with `capture_trace()`:

```python
with capture_trace() as trace:
    out = await pipeline.run(x)
trace.spans                  # list[Span], in start order
trace.usage_by_model()       # {"openai:gpt-4o": ModelUsage(...), ...}
```

Spans nest through a context variable holding the current span id, so concurrent branches of a
`Parallel` (separate asyncio tasks, each with a copy of the context) get the right parent.

Model usage is attached to the innermost open span with `record_usage(...)`. Agent steps call it
after every run, including failed ones (pydantic-ai updates a `RunUsage` object in place, so
retries of structured output are counted). Any registered callable that calls a model itself
should call `record_usage` too, so the evaluator prices it.
"""

from __future__ import annotations

import contextvars
import time
from collections.abc import Generator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

__all__ = [
    "ModelUsage",
    "Span",
    "Trace",
    "capture_trace",
    "critical_path_ms",
    "current_trace",
    "end_span",
    "finish_span",
    "record_model_latency",
    "record_usage",
    "start_span",
    "summarize",
    "use_span",
]

SUMMARY_CHARS = 200
"""Input and output summaries are cut to this many characters (plus an ellipsis)."""


@dataclass(slots=True)
class ModelUsage:
    """Token usage of model calls, for one model.

    Attributes:
        model_name: the model as priced, e.g. `"openai:gpt-4o-mini"` or a replay run name.
        requests: number of model requests (structured-output retries each count).
        input_tokens: prompt tokens, summed over requests.
        output_tokens: completion tokens, summed over requests.
    """

    model_name: str
    requests: int = 0
    input_tokens: int = 0
    output_tokens: int = 0

    def add(self, other: ModelUsage) -> None:
        """Add `other`'s counts into this one (model names are not checked)."""
        self.requests += other.requests
        self.input_tokens += other.input_tokens
        self.output_tokens += other.output_tokens

    def to_dict(self) -> dict[str, Any]:
        return {
            "model_name": self.model_name,
            "requests": self.requests,
            "input_tokens": self.input_tokens,
            "output_tokens": self.output_tokens,
        }


def _new_usage_list() -> list[ModelUsage]:
    # a plain function: calling `list[ModelUsage]` (a generic alias) costs ~10x a list literal
    return []


def _new_attributes() -> dict[str, Any]:
    return {}


@dataclass(slots=True)
class Span:
    """One execution of one step.

    Attributes:
        span_id: 0-based id, unique within its trace, in start order.
        parent_id: the enclosing span's id, or None for a root span.
        node_id: the spec node's `id` when the step was built from a spec, else None.
        kind: `"agent_step"`, `"function_step"`, `"pipeline"`, `"parallel"`, `"router"`,
            `"refinement_loop"` (the IR's kind names).
        name: the step's `step_name`.
        start_ns: `time.perf_counter_ns()` at start.
        end_ns: at end, or None while running.
        input_summary: `summarize(input)`.
        output_summary: `summarize(output)`, "" on error.
        usage: model usage recorded inside this span (not its children), one entry per model.
        attributes: kind-specific facts, e.g. a router's `{"route": "math", "raw": "Math ",
            "fallback": False, "reason": None}`, a loop's `{"iteration": 2, "exit_reason": ...}`,
            a parallel's `{"errors": [...]}`; JSON-serialisable values only.
        error: `"ExceptionType: message"` if the step raised, else None.
    """

    span_id: int
    parent_id: int | None
    node_id: str | None
    kind: str
    name: str
    start_ns: int
    end_ns: int | None = None
    input_summary: str = ""
    output_summary: str = ""
    usage: list[ModelUsage] = field(default_factory=lambda: _new_usage_list())
    attributes: dict[str, Any] = field(default_factory=lambda: _new_attributes())
    error: str | None = None

    @property
    def duration_ms(self) -> float | None:
        """Wall time in ms, or None while the span is open."""
        return None if self.end_ns is None else (self.end_ns - self.start_ns) / 1e6

    def to_dict(self) -> dict[str, Any]:
        return {
            "span_id": self.span_id,
            "parent_id": self.parent_id,
            "node_id": self.node_id,
            "kind": self.kind,
            "name": self.name,
            "start_ns": self.start_ns,
            "end_ns": self.end_ns,
            "duration_ms": self.duration_ms,
            "input_summary": self.input_summary,
            "output_summary": self.output_summary,
            "usage": [u.to_dict() for u in self.usage],
            "attributes": self.attributes,
            "error": self.error,
        }


class Trace:
    """A collector of spans for one run (e.g. one example of an evaluation)."""

    __slots__ = ("spans",)

    def __init__(self) -> None:
        self.spans: list[Span] = []

    def usage_by_model(self) -> dict[str, ModelUsage]:
        """Total usage per model over every span, e.g. for pricing. Shape: model -> usage."""
        out: dict[str, ModelUsage] = {}
        for span in self.spans:
            for u in span.usage:
                agg = out.get(u.model_name)
                if agg is None:
                    agg = out[u.model_name] = ModelUsage(u.model_name)
                agg.add(u)
        return out

    def to_list(self) -> list[dict[str, Any]]:
        """The spans as JSON-serialisable dicts, in start order."""
        return [s.to_dict() for s in self.spans]


_TRACE: contextvars.ContextVar[Trace | None] = contextvars.ContextVar("ts_trace", default=None)
_SPAN: contextvars.ContextVar[Span | None] = contextvars.ContextVar("ts_span", default=None)


def current_trace() -> Trace | None:
    """The active trace, or None when tracing is off."""
    return _TRACE.get()


@contextmanager
def capture_trace() -> Generator[Trace]:
    """Activate a new trace for the enclosed code (and tasks it creates) and yield it."""
    trace = Trace()
    tok = _TRACE.set(trace)
    span_tok = _SPAN.set(None)
    try:
        yield trace
    finally:
        _SPAN.reset(span_tok)
        _TRACE.reset(tok)


_PLAIN_TYPES: frozenset[type] = frozenset({str, int, float, bool, type(None)})


def summarize(value: Any, limit: int = SUMMARY_CHARS) -> str:
    """A short one-line text of `value`: Pydantic models as JSON, others with `str`."""
    if type(value) in _PLAIN_TYPES:  # fast path: no attribute lookup, cannot fail
        text = str(value)
    else:
        dump = getattr(value, "model_dump_json", None)
        try:
            text = dump() if callable(dump) else str(value)
        except Exception as exc:  # a summary must never break a run
            text = f"<unprintable {type(value).__name__}: {exc}>"
        text = str(text)
    if "\n" in text:
        text = text.replace("\n", " ")
    return text if len(text) <= limit else text[:limit] + "…"


def start_span(
    trace: Trace, *, kind: str, name: str, node_id: str | None, input_value: Any
) -> tuple[Span, contextvars.Token[Span | None]]:
    """Open a span under the current one and make it current. Call only when a trace is active.

    Returns:
        The span and the token to pass to `end_span`.
    """
    parent = _SPAN.get()
    span = Span(
        span_id=len(trace.spans),
        parent_id=None if parent is None else parent.span_id,
        node_id=node_id,
        kind=kind,
        name=name,
        start_ns=time.perf_counter_ns(),
        input_summary=summarize(input_value),
        usage=[],
        attributes={},
    )
    trace.spans.append(span)
    return span, _SPAN.set(span)


def end_span(
    span: Span,
    token: contextvars.Token[Span | None],
    *,
    output: Any = None,
    error: BaseException | None = None,
) -> None:
    """Close `span` (recording output or error) and restore the previous current span."""
    finish_span(span, output=output, error=error)
    try:
        _SPAN.reset(token)
    except ValueError:  # token from another context (e.g. a cancelled task): just unset
        _SPAN.set(None)


def finish_span(span: Span, *, output: Any = None, error: BaseException | None = None) -> None:
    """Close `span` (recording output or error) without touching the current span.

    For spans whose code does not run in one stretch of one context, e.g. an async generator
    that yields between steps (`Pipeline.run_stream`); see `use_span`.
    """
    span.end_ns = time.perf_counter_ns()
    if error is not None:
        span.error = f"{type(error).__name__}: {error}"
    else:
        span.output_summary = summarize(output)


@contextmanager
def use_span(span: Span | None) -> Generator[None]:
    """Make `span` the current span (the parent of spans opened inside) for the enclosed code."""
    token = _SPAN.set(span)
    try:
        yield
    finally:
        _SPAN.reset(token)


def record_usage(
    model_name: str, *, requests: int = 1, input_tokens: int = 0, output_tokens: int = 0
) -> None:
    """Attach model usage to the innermost open span; a no-op when tracing is off."""
    span = _SPAN.get()
    if span is None or _TRACE.get() is None:
        return
    for u in span.usage:
        if u.model_name == model_name:
            u.add(ModelUsage(model_name, requests, input_tokens, output_tokens))
            return
    span.usage.append(ModelUsage(model_name, requests, input_tokens, output_tokens))


MODEL_LATENCY_KEY = "model_latency_ms"
"""Span attribute holding simulated or reported model time in ms (see `record_model_latency`)."""


def record_model_latency(ms: float) -> None:
    """Add `ms` of model time to the innermost open span; a no-op when tracing is off.

    Replay and simulated models call this so that latency is reported in model time and is
    deterministic (wall time under a time scale jitters); `critical_path_ms` combines it.
    """
    span = _SPAN.get()
    if span is None or _TRACE.get() is None:
        return
    span.attributes[MODEL_LATENCY_KEY] = float(span.attributes.get(MODEL_LATENCY_KEY, 0.0)) + ms


def critical_path_ms(trace: Trace) -> float | None:
    """Model time of a run along its critical path, in ms, or None if no span recorded any.

    Rule: a span's time is its own recorded model latency plus its children's combined time;
    children of a `parallel` span run concurrently and combine by max, children of every other
    kind run one after another and combine by sum. Several root spans combine by sum.
    """
    if not any(MODEL_LATENCY_KEY in s.attributes for s in trace.spans):
        return None
    children: dict[int | None, list[Span]] = {}
    for s in trace.spans:
        children.setdefault(s.parent_id, []).append(s)
    total: dict[int, float] = {}
    # spans are appended in start order, so a child always has a larger id than its parent
    for s in reversed(trace.spans):
        kids = [total[c.span_id] for c in children.get(s.span_id, [])]
        combined = (max(kids) if kids else 0.0) if s.kind == "parallel" else sum(kids)
        total[s.span_id] = float(s.attributes.get(MODEL_LATENCY_KEY, 0.0)) + combined
    return sum(total[s.span_id] for s in children.get(None, []))
