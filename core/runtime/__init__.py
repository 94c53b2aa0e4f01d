"""The four runtime primitives (Pipeline, Parallel, Router, RefinementLoop), steps and tracing."""

from core.runtime.tracing import ModelUsage, Span, Trace, capture_trace, current_trace, record_usage

__all__ = ["ModelUsage", "Span", "Trace", "capture_trace", "current_trace", "record_usage"]
