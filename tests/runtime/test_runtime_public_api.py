"""The public surfaces of `core.runtime` and `core.agents` are curated: pin them."""

import core.agents
import core.runtime
import core.runtime.tracing

RUNTIME = [
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

AGENTS = [
    "UNKNOWN_MODEL",
    "AgentLike",
    "BaseAgent",
    "DynamicAgent",
    "GlobalState",
    "agent_model_name",
    "is_agent",
    "model_name",
    "render_prompt",
    "run_agent",
]


def test_runtime_exports() -> None:
    assert sorted(core.runtime.__all__) == sorted(RUNTIME)
    for name in RUNTIME:
        assert getattr(core.runtime, name) is not None


def test_agents_exports() -> None:
    assert sorted(core.agents.__all__) == sorted(AGENTS)
    for name in AGENTS:
        assert getattr(core.agents, name) is not None


def test_tracing_public_api_is_kept() -> None:
    for name in ["capture_trace", "current_trace", "record_usage", "start_span", "end_span"]:
        assert name in core.runtime.tracing.__all__
