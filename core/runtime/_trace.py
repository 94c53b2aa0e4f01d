"""Running a composite step's body inside a trace span (only called when tracing is on)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from core.runtime.tracing import Span, TraceFrame, close_span, open_span

__all__ = ["run_in_span"]


async def run_in_span(
    frame: TraceFrame,
    kind: str,
    name: str,
    node_id: str | None,
    input_value: Any,
    body: Callable[[Any, Span], Awaitable[Any]],
    output_of: Callable[[Any], Any] | None = None,
) -> Any:
    """Run `body(input_value, span)` inside a new span and close the span with its outcome.

    Args:
        frame: the current task's trace frame (`current_frame()`).
        kind: the IR kind name of the step, e.g. `"pipeline"`.
        name: the step's name.
        node_id: the spec node id, or None.
        input_value: summarised as the span's input.
        body: the work; it may write `span.attributes`.
        output_of: maps the body's result to what the span summarises as output (e.g. a
            `ParallelResult` to its `merged`); identity when None.

    Returns:
        What `body` returned. Its exception (any `BaseException`) is recorded and re-raised.
    """
    span, parent = open_span(frame, kind, name, node_id, input_value)
    try:
        result = await body(input_value, span)
    except BaseException as exc:
        close_span(frame, span, parent, None, exc)
        raise
    close_span(frame, span, parent, result if output_of is None else output_of(result))
    return result
