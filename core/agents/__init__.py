"""Agents on pydantic-ai: what counts as an agent, prompts, stateless runs with usage recorded."""

from core.agents.agent_like import AgentLike, is_agent
from core.agents.base import BaseAgent, DynamicAgent, GlobalState
from core.agents.prompt import render_prompt
from core.agents.usage import UNKNOWN_MODEL, agent_model_name, model_name, run_agent

__all__ = [
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
