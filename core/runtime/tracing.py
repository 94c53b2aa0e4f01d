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

Cost: a span is one small object. Its `usage` list and `attributes` dict are only created when
something is written to them, and the input/output summaries of plain immutable values (str,
int, float, bool, None) are computed when first read (e.g. by `Trace.to_list()`), not while the
run goes: the span keeps a reference to the value until then, which is safe because such a value
cannot change, so the summary read later is exactly the one taken at the time. Any other value
(a list, a dict, a Pydantic model, ...) may be mutated by a later step, so it is summarised at
once, as before. The price of laziness is memory: a trace keeps the plain values it has not yet
summarised (every intermediate string of a run) alive until they are read or the trace is
dropped.

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
from dataclasses import dataclass
from typing import Any, cast

__all__ = [
    "ModelUsage",
    "Span",
    "Trace",
    "capture_trace",
    "close_span",
    "critical_path_ms",
    "current_trace",
    "end_span",
    "finish_span",
    "open_span",
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


_PLAIN_TYPES: frozenset[type] = frozenset({str, int, float, bool, type(None)})
"""Immutable values whose summary can be taken lazily (see the module docstring)."""

_PENDING: Any = object()
"""Marks a summary not taken yet (the value is kept in the span until it is read)."""


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
        output_summary: `summarize(output)`, "" on error (and while running).
        usage: model usage recorded inside this span (not its children), one entry per model.
        attributes: kind-specific facts, e.g. a router's `{"route": "math", "raw": "Math ",
            "fallback": False, "reason": None}`, a loop's `{"iteration": 2, "exit_reason": ...}`,
            a parallel's `{"errors": [...]}`; JSON-serialisable values only.
        error: `"ExceptionType: message"` if the step raised, else None.

    A plain class with `__slots__` (not a dataclass) so that the summaries can be lazy and the
    `usage` list and `attributes` dict are created on first use (see the module docstring); it
    compares and prints like the dataclass it was, field by field.
    """

    __slots__ = (
        "_attributes",
        "_input",
        "_input_summary",
        "_output",
        "_output_summary",
        "_usage",
        "end_ns",
        "error",
        "kind",
        "name",
        "node_id",
        "parent_id",
        "span_id",
        "start_ns",
    )

    def __init__(
        self,
        span_id: int,
        parent_id: int | None,
        node_id: str | None,
        kind: str,
        name: str,
        start_ns: int,
        end_ns: int | None = None,
        input_summary: str = "",
        output_summary: str = "",
        usage: list[ModelUsage] | None = None,
        attributes: dict[str, Any] | None = None,
        error: str | None = None,
    ) -> None:
        self.span_id = span_id
        self.parent_id = parent_id
        self.node_id = node_id
        self.kind = kind
        self.name = name
        self.start_ns = start_ns
        self.end_ns = end_ns
        self._input: Any = None
        self._input_summary: Any = input_summary  # a str, or _PENDING (then `_input` holds it)
        self._output: Any = None
        self._output_summary: Any = output_summary  # likewise, with `_output`
        self._usage = usage
        self._attributes = attributes
        self.error = error

    @property
    def input_summary(self) -> str:
        """`summarize(input)` (taken on first read for plain values)."""
        text = self._input_summary
        if text is _PENDING:
            text = self._input_summary = summarize(self._input)
            self._input = None
        return cast(str, text)

    @input_summary.setter
    def input_summary(self, value: str) -> None:
        self._input_summary, self._input = value, None

    @property
    def output_summary(self) -> str:
        """`summarize(output)` (taken on first read for plain values); "" on error."""
        text = self._output_summary
        if text is _PENDING:
            text = self._output_summary = summarize(self._output)
            self._output = None
        return cast(str, text)

    @output_summary.setter
    def output_summary(self, value: str) -> None:
        self._output_summary, self._output = value, None

    @property
    def usage(self) -> list[ModelUsage]:
        """Model usage recorded inside this span, one entry per model (created on first use)."""
        usage = self._usage
        if usage is None:
            usage = self._usage = []
        return usage

    @usage.setter
    def usage(self, value: list[ModelUsage]) -> None:
        self._usage = value

    @property
    def attributes(self) -> dict[str, Any]:
        """Kind-specific facts, JSON-serialisable (created on first use)."""
        attributes = self._attributes
        if attributes is None:
            attributes = self._attributes = {}
        return attributes

    @attributes.setter
    def attributes(self, value: dict[str, Any]) -> None:
        self._attributes = value

    @property
    def duration_ms(self) -> float | None:
        """Wall time in ms, or None while the span is open."""
        return None if self.end_ns is None else (self.end_ns - self.start_ns) / 1e6

    def _fields(self) -> tuple[Any, ...]:
        return (
            self.span_id,
            self.parent_id,
            self.node_id,
            self.kind,
            self.name,
            self.start_ns,
            self.end_ns,
            self.input_summary,
            self.output_summary,
            self._usage or [],
            self._attributes or {},
            self.error,
        )

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Span):
            return NotImplemented
        return self._fields() == other._fields()

    __hash__ = None  # type: ignore[assignment]  # mutable, like the dataclass it was

    def __repr__(self) -> str:
        names = (
            "span_id",
            "parent_id",
            "node_id",
            "kind",
            "name",
            "start_ns",
            "end_ns",
            "input_summary",
            "output_summary",
            "usage",
            "attributes",
            "error",
        )
        body = ", ".join(f"{n}={v!r}" for n, v in zip(names, self._fields(), strict=True))
        return f"Span({body})"

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
            "usage": [u.to_dict() for u in self._usage or ()],
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
            for u in span._usage or ():  # pyright: ignore[reportPrivateUsage]
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


_now = time.perf_counter_ns


def open_span(
    trace: Trace, kind: str, name: str, node_id: str | None, input_value: Any
) -> tuple[Span, contextvars.Token[Span | None]]:
    """`start_span` with positional arguments: the runtime's hot path (same behaviour)."""
    parent = _SPAN.get()
    spans = trace.spans
    span = Span(len(spans), None if parent is None else parent.span_id, node_id, kind, name, _now())
    if type(input_value) in _PLAIN_TYPES:
        span._input_summary, span._input = _PENDING, input_value  # pyright: ignore[reportPrivateUsage]
    else:
        span._input_summary = summarize(input_value)  # pyright: ignore[reportPrivateUsage]
    spans.append(span)
    return span, _SPAN.set(span)


def close_span(
    span: Span,
    token: contextvars.Token[Span | None],
    output: Any = None,
    error: BaseException | None = None,
) -> None:
    """`end_span` with positional arguments: the runtime's hot path (same behaviour)."""
    span.end_ns = _now()
    if error is not None:
        span.error = f"{type(error).__name__}: {error}"
    elif type(output) in _PLAIN_TYPES:
        span._output_summary, span._output = _PENDING, output  # pyright: ignore[reportPrivateUsage]
    else:
        span._output_summary = summarize(output)  # pyright: ignore[reportPrivateUsage]
    try:
        _SPAN.reset(token)
    except ValueError:  # token from another context (e.g. a cancelled task): just unset
        _SPAN.set(None)


def start_span(
    trace: Trace, *, kind: str, name: str, node_id: str | None, input_value: Any
) -> tuple[Span, contextvars.Token[Span | None]]:
    """Open a span under the current one and make it current. Call only when a trace is active.

    Returns:
        The span and the token to pass to `end_span`.
    """
    return open_span(trace, kind, name, node_id, input_value)


def end_span(
    span: Span,
    token: contextvars.Token[Span | None],
    *,
    output: Any = None,
    error: BaseException | None = None,
) -> None:
    """Close `span` (recording output or error) and restore the previous current span."""
    close_span(span, token, output, error)


def finish_span(span: Span, *, output: Any = None, error: BaseException | None = None) -> None:
    """Close `span` (recording output or error) without touching the current span.

    For spans whose code does not run in one stretch of one context, e.g. an async generator
    that yields between steps (`Pipeline.run_stream`); see `use_span`.
    """
    span.end_ns = _now()
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
    if not any(MODEL_LATENCY_KEY in (s._attributes or ()) for s in trace.spans):  # pyright: ignore[reportPrivateUsage]
        return None
    children: dict[int | None, list[Span]] = {}
    for s in trace.spans:
        children.setdefault(s.parent_id, []).append(s)
    total: dict[int, float] = {}
    # spans are appended in start order, so a child always has a larger id than its parent
    for s in reversed(trace.spans):
        kids = [total[c.span_id] for c in children.get(s.span_id, [])]
        combined = (max(kids) if kids else 0.0) if s.kind == "parallel" else sum(kids)
        attributes = s._attributes or {}  # pyright: ignore[reportPrivateUsage]
        total[s.span_id] = float(attributes.get(MODEL_LATENCY_KEY, 0.0)) + combined
    return sum(total[s.span_id] for s in children.get(None, []))
