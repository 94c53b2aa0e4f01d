"""The four runtime primitives (Pipeline, Parallel, Router, RefinementLoop), steps and tracing."""

from core.runtime.pipeline import (
    ErrorStrategy,
    Pipeline,
    PipelineEvent,
    PipelineEventType,
    StepConfig,
)
from core.runtime.step import AgentStep, FunctionStep, Step, coerce_step
from core.runtime.tracing import ModelUsage, Span, Trace, capture_trace, current_trace, record_usage

__all__ = [
    "AgentStep",
    "ErrorStrategy",
    "FunctionStep",
    "ModelUsage",
    "Pipeline",
    "PipelineEvent",
    "PipelineEventType",
    "Span",
    "Step",
    "StepConfig",
    "Trace",
    "capture_trace",
    "coerce_step",
    "current_trace",
    "record_usage",
]
