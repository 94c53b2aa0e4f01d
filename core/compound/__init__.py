"""Compound tools: sub-agents bound to executors, state updaters and evaluators."""

from core.compound.sub_agent_tool import (
    RefinementAttempt,
    SubAgentEvalResult,
    SubAgentResult,
    SubAgentTool,
)

__all__ = ["RefinementAttempt", "SubAgentEvalResult", "SubAgentResult", "SubAgentTool"]
