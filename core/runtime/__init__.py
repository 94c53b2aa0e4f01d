"""The four runtime primitives (Pipeline, Parallel, Router, RefinementLoop), steps and tracing."""

from core.runtime.loop import (
    EvalResult,
    ExitReason,
    IterationRecord,
    LoopResult,
    RefinementLoop,
    as_eval_result,
)
from core.runtime.parallel import MergeFn, MergeStrategy, Parallel, ParallelResult
from core.runtime.pipeline import (
    ErrorStrategy,
    Pipeline,
    PipelineEvent,
    PipelineEventType,
    StepConfig,
)
from core.runtime.router import (
    FallbackReason,
    Route,
    RouteDecision,
    Router,
    normalize_route_name,
)
from core.runtime.step import AgentStep, FunctionStep, Step, coerce_step
from core.runtime.tracing import ModelUsage, Span, Trace, capture_trace, current_trace, record_usage

__all__ = [
    "AgentStep",
    "ErrorStrategy",
    "EvalResult",
    "ExitReason",
    "FallbackReason",
    "FunctionStep",
    "IterationRecord",
    "LoopResult",
    "MergeFn",
    "MergeStrategy",
    "ModelUsage",
    "Parallel",
    "ParallelResult",
    "Pipeline",
    "PipelineEvent",
    "PipelineEventType",
    "RefinementLoop",
    "Route",
    "RouteDecision",
    "Router",
    "Span",
    "Step",
    "StepConfig",
    "Trace",
    "as_eval_result",
    "capture_trace",
    "coerce_step",
    "current_trace",
    "normalize_route_name",
    "record_usage",
]
