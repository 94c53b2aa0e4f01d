"""Execution traces: one span per step execution, collected only when a trace is active.

A trace is opt-in and costs nothing when off: the runtime checks one context variable and skips
all span bookkeeping when no `Trace` is active. Turn it on with `capture_trace()`:

```python
with capture_trace() as trace:
    out = await pipeline.run(x)
trace.spans                  # list[Span], in start order
trace.usage_by_model()       # {"openai:gpt-4o": ModelUsage(...), ...}
```

Spans nest per asyncio task. Each task that runs steps has a `TraceFrame` (in a context
variable) holding the id of its innermost open span; a step opens a span by appending it to the
trace and making it current, and closes it by restoring the previous one. A task is one call
stack, so within a task spans nest strictly and a plain attribute is enough. Every task created
while a trace is active gets a frame of its own whose current span is the one open where the
task was created (through the loop's task factory, see `capture_trace`; `Parallel` branches and
a loop's deadline task also fork explicitly), so concurrent branches, `asyncio.gather` inside a
step and fire-and-forget tasks all get the right parent.

Cost (the target: tracing on costs at most 0.2x the reference library's *untraced* step,
0.76 us per pipeline step, measured by `bench/bench_runtime.py`; the earlier "at most 2x off" is
withdrawn, since an untraced step costs about what a span's two clock reads do): what a
span costs is what a run pays per step, so the hot path is kept small. A function step's span
is recorded as a bare list while the run goes (`LEAF_RECORD_FIELDS`, written inline by
`FunctionStep.execute`) and turned into a `Span` only when `Trace.spans` is read; composite and
agent steps, which are rarer and slower anyway, open `Span` objects. Usage lists and attribute
dicts are only created when something is written to them, and the input/output summaries of
plain immutable values (str, int, float, bool, None) are computed when first read (e.g. by
`Trace.to_list()`), not while the run goes: the span keeps a reference to the value until then,
which is safe because such a value cannot change, so the summary read later is exactly the one
taken at the time. Any other value (a list, a dict, a Pydantic model, ...) may be mutated by a
later step, so it is summarised at once. The price of laziness is memory: a trace keeps the
plain values it has not yet summarised (every intermediate string of a run) alive until they
are read or the trace is dropped.

Model usage is attached to the innermost open span with `record_usage(...)`. Agent steps call it
after every run, including failed ones (pydantic-ai updates a `RunUsage` object in place, so
retries of structured output are counted). Any registered callable that calls a model itself
should call `record_usage` too, so the evaluator prices it.
"""

from __future__ import annotations

import asyncio
import contextvars
import time
from collections.abc import Callable, Generator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, NamedTuple, cast

__all__ = [
    "LEAF_RECORD_FIELDS",
    "PLAIN_TYPES",
    "ModelUsage",
    "Span",
    "SpanToken",
    "Trace",
    "TraceFrame",
    "capture_trace",
    "close_span",
    "critical_path_ms",
    "current_frame",
    "current_trace",
    "end_span",
    "finish_span",
    "fork_trace",
    "hook_loop",
    "new_span",
    "now_ns",
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


PLAIN_TYPES: frozenset[type] = frozenset({str, int, float, bool, type(None)})
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
    """A collector of spans for one run (e.g. one example of an evaluation).

    `spans` is built on read: while a run goes, a function step's span is kept as a bare
    record (see `TraceFrame`), which is turned into a `Span` the first time `spans` is read
    after it has closed. Read `spans` after the run for the full, stable list.
    """

    __slots__ = ("_hook", "_items", "summaries")

    def __init__(self, *, summaries: bool = True) -> None:
        self._items: list[Any] = []  # a Span, or a leaf record (list, see `TraceFrame`)
        self._hook: _Hook | None = None  # the task factory this trace uses, while active
        self.summaries = summaries
        """False: spans get "" as input and output summary (`capture_trace(summaries=False)`)."""

    @property
    def spans(self) -> list[Span]:
        """Every span, in start order (index = `span_id`): a new list on each read.

        A function step still running is a snapshot of its open span (`end_ns` None); read
        again after it has closed for the final one.
        """
        items = self._items
        snapshot: list[Span] | None = None
        for i, item in enumerate(items):
            if type(item) is list:
                span = _leaf_span(i, cast(list[Any], item))
                if span.end_ns is None:  # still running: its record is still being written
                    if snapshot is None:
                        snapshot = cast(list[Span], items[:i])
                    snapshot.append(span)
                    continue
                items[i] = span
            if snapshot is not None:
                snapshot.append(items[i])
        return snapshot if snapshot is not None else cast(list[Span], items[:])

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


# A function step's span while it runs, kept as a list rather than a `Span` because building
# a list is several times cheaper than a Python object (see the module docstring); index:
_L_USAGE, _L_ATTRS = 7, 8
LEAF_RECORD_FIELDS = (
    "step",  # the FunctionStep (its `step_name` and `node_id` are read when the Span is built)
    "parent_id",
    "input",  # an immutable value (summarised when read) or its summary, taken at once
    "start_ns",
    "end_ns",  # None while running
    "output",  # likewise; None on error
    "error",  # "ExceptionType: message" or None
    "usage",  # list[ModelUsage] or None
    "attributes",  # dict or None
)
"""The fields of a leaf record, in order (`FunctionStep.execute` writes them inline)."""


def _leaf_span(span_id: int, rec: list[Any]) -> Span:
    step, parent_id, inp, start, end, out, error, usage, attributes = rec
    span = Span(span_id, parent_id, step.node_id, "function_step", step.step_name, start, end)
    span._input_summary, span._input = _PENDING, inp  # pyright: ignore[reportPrivateUsage]
    if end is not None and error is None:
        span._output_summary, span._output = _PENDING, out  # pyright: ignore[reportPrivateUsage]
    span.error = error
    span._usage = usage  # pyright: ignore[reportPrivateUsage]  # shared: later usage shows
    span._attributes = attributes  # pyright: ignore[reportPrivateUsage]
    return span


class TraceFrame:
    """One asyncio task's place in the active trace: the runtime's hot-path handle.

    Every task that runs steps has its own frame (`capture_trace` makes the first one; each
    task created while tracing gets a copy, see `capture_trace`), and all frames of a trace
    share its span list. Steps open a span by appending it to `items` and making its index
    `current`, and close it by restoring the previous `current`: within one task spans nest
    strictly (a task is one call stack), so a plain attribute does what a context variable
    set per span would, at a fraction of its cost.

    Attributes:
        trace: the active trace.
        items: the trace's spans by id: a `Span`, or a function step's leaf record (a list
            with the fields `LEAF_RECORD_FIELDS`), turned into a `Span` when read.
        current: the id of the innermost open span in this task, or None at the top.
    """

    __slots__ = ("current", "items", "trace")

    def __init__(self, trace: Trace, current: int | None = None) -> None:
        self.trace = trace
        self.items: list[Any] = trace._items  # pyright: ignore[reportPrivateUsage]
        self.current = current


_FRAME: contextvars.ContextVar[TraceFrame | None] = contextvars.ContextVar(
    "ts_trace_frame", default=None
)

current_frame: Callable[[], TraceFrame | None] = _FRAME.get
"""The current task's trace frame, or None when tracing is off (the runtime's hot path)."""


def current_trace() -> Trace | None:
    """The active trace, or None when tracing is off."""
    frame = _FRAME.get()
    return None if frame is None else frame.trace


@contextmanager
def capture_trace(*, summaries: bool = True) -> Generator[Trace]:
    """Activate a new trace for the enclosed code (and the tasks it creates) and yield it.

    `summaries=False` leaves every span's `input_summary` and `output_summary` empty: for a
    caller that reads only usage, model time and structure (the evaluator when it keeps no
    traces), it saves summarising every non-plain value (a JSON dump of each state: 5% of a
    warm search).

    Tasks created while it is active (by `Parallel`, `asyncio.gather`, `create_task`, a
    `TaskGroup`, pydantic-ai's concurrent tool calls, ...) each get a frame of their own whose
    current span is the one open where the task was created, so their spans have the right
    parent even when they run after that span has closed. This uses the event loop's task
    factory, set while any trace is active on that loop and put back after (an existing
    factory is kept and called, either signature). Enter it inside the running loop, as the
    evaluator does. Entered outside (`with capture_trace(): asyncio.run(...)`), the factory is
    set when the first composite or agent step opens its span in the loop; tasks created before
    that (e.g. a `gather` of two runs at the top) share one frame and may get wrong parents.

    Not covered either way: loop callbacks (`call_later`, a future's done callback) and
    threads that a step starts and does not await see the frame of the task they came from as
    it is when they run, so `record_usage` there attaches to the span open at that moment.
    """
    trace = Trace(summaries=summaries)
    loop = _running_loop()
    if loop is not None:
        trace._hook = _hook_task_factory(loop)  # pyright: ignore[reportPrivateUsage]
    tok = _FRAME.set(TraceFrame(trace))
    try:
        yield trace
    finally:
        try:
            _FRAME.reset(tok)
        finally:  # even when the reset fails (exited in another context): the hook goes
            hook = trace._hook  # pyright: ignore[reportPrivateUsage]
            if hook is not None:
                trace._hook = None  # pyright: ignore[reportPrivateUsage]
                hook.release()


def hook_loop(trace: Trace) -> None:
    """Set `trace`'s task factory on the running loop if `capture_trace` could not (it was
    entered outside the loop); the runtime calls this when a composite or agent span opens."""
    if trace._hook is None:  # pyright: ignore[reportPrivateUsage]
        loop = _running_loop()
        if loop is not None:
            trace._hook = _hook_task_factory(loop)  # pyright: ignore[reportPrivateUsage]


def _running_loop() -> asyncio.AbstractEventLoop | None:
    try:
        return asyncio.get_running_loop()
    except RuntimeError:
        return None


class _Hook:
    """Our task factory on one loop: how many active traces use it, and the factory it wraps.

    A new task gets a frame of its own in the context it will run in: a copy of the creating
    code's context (the task is then created inside that copy, so a factory of the old
    `(loop, coro)` signature works too), or the context passed to `create_task(context=...)`,
    which is used as it is (only our variable is set in it; skipped if it is entered now).
    """

    __slots__ = ("loop", "previous", "users")

    def __init__(self, loop: asyncio.AbstractEventLoop, previous: Any) -> None:
        self.loop = loop
        self.previous = previous
        self.users = 0

    def __call__(self, loop: asyncio.AbstractEventLoop, coro: Any, **kwargs: Any) -> Any:
        context: contextvars.Context | None = kwargs.get("context")
        if context is None:
            frame = _FRAME.get()
            if frame is not None:  # created inside a trace: the task copies `forked`
                forked = contextvars.copy_context()
                forked.run(_FRAME.set, TraceFrame(frame.trace, frame.current))
                return forked.run(self._create, loop, coro, kwargs)
        else:
            frame = context.get(_FRAME)
            if frame is not None:
                try:
                    context.run(_FRAME.set, TraceFrame(frame.trace, frame.current))
                except RuntimeError:  # the context is entered (running) now: leave it
                    pass
        return self._create(loop, coro, kwargs)

    def _create(self, loop: asyncio.AbstractEventLoop, coro: Any, kwargs: dict[str, Any]) -> Any:
        if self.previous is not None:
            return self.previous(loop, coro, **kwargs)
        return asyncio.Task(coro, loop=loop, **kwargs)

    def release(self) -> None:
        """One trace less; put the wrapped factory back after the last one, if ours is still
        the loop's factory (a factory set over ours since is left alone)."""
        self.users -= 1
        loop = self.loop
        if self.users <= 0 and not loop.is_closed() and loop.get_task_factory() is self:
            loop.set_task_factory(self.previous)


def _hook_task_factory(loop: asyncio.AbstractEventLoop) -> _Hook:
    hook = loop.get_task_factory()
    if type(hook) is not _Hook:
        hook = _Hook(loop, hook)
        loop.set_task_factory(hook)  # pyright: ignore[reportArgumentType]
    hook.users += 1
    return hook


def fork_trace(parent: Span | None, creator: TraceFrame | None = None) -> None:
    """Give the current task a frame of its own whose current span is `parent`.

    Call it first thing in a task that runs steps concurrently with the code that created it
    (`Parallel` does for each branch), for when the task factory of `capture_trace` is not in
    place. A no-op when tracing is off, or when `creator` (the creating task's frame) is given
    and the task already has a frame other than it (the task factory gave it one). The frame
    lasts until the task ends.
    """
    frame = _FRAME.get()
    if frame is not None and (creator is None or frame is creator):
        _FRAME.set(TraceFrame(frame.trace, None if parent is None else parent.span_id))


def summarize(value: Any, limit: int = SUMMARY_CHARS) -> str:
    """A short one-line text of `value`: Pydantic models as JSON, others with `str`."""
    if type(value) in PLAIN_TYPES:  # fast path: no attribute lookup, cannot fail
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


now_ns: Callable[[], int] = time.perf_counter_ns
"""The clock of span start and end times, in ns (`time.perf_counter_ns`)."""

_now = now_ns


def new_span(
    frame: TraceFrame, kind: str, name: str, node_id: str | None, input_value: Any
) -> Span:
    """Open a span under the frame's current span without making it current (and set the
    trace's task factory on the loop if `capture_trace` could not, see `hook_loop`)."""
    if frame.trace._hook is None:  # pyright: ignore[reportPrivateUsage]
        hook_loop(frame.trace)
    items = frame.items
    span = Span(len(items), frame.current, node_id, kind, name, _now())
    if type(input_value) in PLAIN_TYPES:
        span._input_summary, span._input = _PENDING, input_value  # pyright: ignore[reportPrivateUsage]
    elif frame.trace.summaries:
        span._input_summary = summarize(input_value)  # pyright: ignore[reportPrivateUsage]
    items.append(span)
    return span


def open_span(
    frame: TraceFrame, kind: str, name: str, node_id: str | None, input_value: Any
) -> tuple[Span, int | None]:
    """Open a span under the frame's current span and make it current: the runtime's hot path.

    Returns:
        The span and the previous current span id, to pass to `close_span`.
    """
    parent = frame.current
    span = new_span(frame, kind, name, node_id, input_value)
    frame.current = span.span_id
    return span, parent


def close_span(
    frame: TraceFrame,
    span: Span,
    parent: int | None,
    output: Any = None,
    error: BaseException | None = None,
) -> None:
    """Close `span` (recording output or error) and make `parent` current again."""
    frame.current = parent
    finish_span(span, output=output, error=error, summary=frame.trace.summaries)


class SpanToken(NamedTuple):
    """What `start_span` returns for `end_span`: the frame and the span current before."""

    frame: TraceFrame
    parent: int | None


def start_span(
    trace: Trace, *, kind: str, name: str, node_id: str | None, input_value: Any
) -> tuple[Span, SpanToken]:
    """Open a span under the current one and make it current (for custom steps).

    Spans of a trace that is not the active one (or when none is) are roots of `trace`.

    Returns:
        The span and the token to pass to `end_span`.
    """
    frame = _FRAME.get()
    if frame is None or frame.trace is not trace:
        frame = TraceFrame(trace)
    span, parent = open_span(frame, kind, name, node_id, input_value)
    return span, SpanToken(frame, parent)


def end_span(
    span: Span,
    token: SpanToken,
    *,
    output: Any = None,
    error: BaseException | None = None,
) -> None:
    """Close `span` (recording output or error) and restore the previous current span."""
    close_span(token.frame, span, token.parent, output, error)


def finish_span(
    span: Span, *, output: Any = None, error: BaseException | None = None, summary: bool = True
) -> None:
    """Close `span` (recording output or error) without touching the current span.

    For spans whose code does not run in one stretch of one task, e.g. an async generator
    that yields between steps (`Pipeline.run_stream`); see `new_span` and `use_span`.
    `summary=False` leaves a non-plain output unsummarised ("", see `capture_trace`).
    """
    span.end_ns = _now()
    if error is not None:
        span.error = f"{type(error).__name__}: {error}"
    elif type(output) in PLAIN_TYPES:
        span._output_summary, span._output = _PENDING, output  # pyright: ignore[reportPrivateUsage]
    elif summary:
        span._output_summary = summarize(output)  # pyright: ignore[reportPrivateUsage]


@contextmanager
def use_span(span: Span | None) -> Generator[None]:
    """Make `span` the current span (the parent of spans opened inside) for the enclosed code.

    The enclosed code gets a frame of its own, so it may run in a task of its own too.
    """
    frame = _FRAME.get()
    if frame is None:
        yield
        return
    token = _FRAME.set(TraceFrame(frame.trace, None if span is None else span.span_id))
    try:
        yield
    finally:
        _FRAME.reset(token)


def _current_item() -> Any:
    """The innermost open span (a Span or a leaf record) of the current task, or None."""
    frame = _FRAME.get()
    if frame is None or frame.current is None:
        return None
    return frame.items[frame.current]


def record_usage(
    model_name: str, *, requests: int = 1, input_tokens: int = 0, output_tokens: int = 0
) -> None:
    """Attach model usage to the innermost open span; a no-op when tracing is off."""
    item = _current_item()
    if item is None:
        return
    if type(item) is list:
        usage = cast(list[Any], item)[_L_USAGE]
        if usage is None:
            usage = item[_L_USAGE] = []
    else:
        usage = cast(Span, item).usage
    for u in cast(list[ModelUsage], usage):
        if u.model_name == model_name:
            u.add(ModelUsage(model_name, requests, input_tokens, output_tokens))
            return
    usage.append(ModelUsage(model_name, requests, input_tokens, output_tokens))


MODEL_LATENCY_KEY = "model_latency_ms"
"""Span attribute holding simulated or reported model time in ms (see `record_model_latency`)."""


def record_model_latency(ms: float) -> None:
    """Add `ms` of model time to the innermost open span; a no-op when tracing is off.

    Replay and simulated models call this so that latency is reported in model time and is
    deterministic (wall time under a time scale jitters); `critical_path_ms` combines it.
    """
    item = _current_item()
    if item is None:
        return
    if type(item) is list:
        attributes = cast(list[Any], item)[_L_ATTRS]
        if attributes is None:
            attributes = item[_L_ATTRS] = {}
    else:
        attributes = cast(Span, item).attributes
    attributes[MODEL_LATENCY_KEY] = float(attributes.get(MODEL_LATENCY_KEY, 0.0)) + ms


def critical_path_ms(trace: Trace) -> float | None:
    """Model time of a run along its critical path, in ms, or None if no span recorded any.

    Rule: a span's time is its own recorded model latency plus its children's combined time;
    children of a `parallel` span run concurrently and combine by max, except under merge
    `fastest` (span attribute `winner`), where the run waits for the winner only and takes
    the time of the child span that ended first without an error (the winner's: its span ends
    as its branch returns; the losers' end cancelled); children of every other kind run one
    after another and combine by sum. Several root spans combine by sum.
    """
    spans = trace.spans
    if not any(MODEL_LATENCY_KEY in (s._attributes or ()) for s in spans):  # pyright: ignore[reportPrivateUsage]
        return None
    children: dict[int | None, list[Span]] = {}
    for s in spans:
        children.setdefault(s.parent_id, []).append(s)
    total: dict[int, float] = {}
    # spans are appended in start order, so a child always has a larger id than its parent
    for s in reversed(spans):
        kids = [total[c.span_id] for c in children.get(s.span_id, [])]
        attributes = s._attributes or {}  # pyright: ignore[reportPrivateUsage]
        if s.kind != "parallel":
            combined = sum(kids)
        elif type(attributes.get("winner")) is int:
            done = [c for c in children.get(s.span_id, []) if c.error is None and c.end_ns]
            first = min(done, key=lambda c: (c.end_ns, c.span_id), default=None)
            combined = total[first.span_id] if first is not None else max(kids, default=0.0)
        else:
            combined = max(kids, default=0.0)
        total[s.span_id] = float(attributes.get(MODEL_LATENCY_KEY, 0.0)) + combined
    return sum(total[s.span_id] for s in children.get(None, []))
