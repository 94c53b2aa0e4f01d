"""Agents on pydantic-ai: what counts as an agent, prompts, stateless runs with usage recorded."""

from core.agents.agent_like import AgentLike, is_agent
from core.agents.call_cache import (
    CallCache,
    CallCacheStats,
    CallRecord,
    InMemoryCallCache,
    SimulatedClock,
    call_key,
    use_call_cache,
)
from core.agents.prompt import render_prompt
from core.agents.usage import (
    UNKNOWN_MODEL,
    agent_model_name,
    charge_started_request,
    model_name,
    run_agent,
)

__all__ = [
    "UNKNOWN_MODEL",
    "AgentLike",
    "CallCache",
    "CallCacheStats",
    "CallRecord",
    "InMemoryCallCache",
    "SimulatedClock",
    "agent_model_name",
    "call_key",
    "charge_started_request",
    "is_agent",
    "model_name",
    "render_prompt",
    "run_agent",
    "use_call_cache",
]
