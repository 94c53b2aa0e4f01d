"""compound-tools-api.txt: `SubAgentTool` and `SubAgentResult`, with `from core import ...`.

Built in `core/compound/`: every example runs as documented.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from pydantic import BaseModel
from pydantic_ai.models.test import TestModel

REASON = "compound tools (SubAgentTool), built in core/compound/"


class Query(BaseModel):
    sql: str


class Session:
    def __init__(self) -> None:
        self.results: list[dict[str, Any]] = []


async def executor(agent_output: Query, state: Session) -> dict[str, Any]:
    return {"rows": len(agent_output.sql)}


def state_updater(result: dict[str, Any], state: Session) -> None:
    state.results.append(result)


def test_sub_agent_tool_requires_evaluator_and_prompt_builder_to_refine() -> None:
    from core import BaseAgent, SubAgentTool

    agent = BaseAgent(model=TestModel(custom_output_args={"sql": "select 1"}), output_type=Query)
    with pytest.raises(ValueError):
        SubAgentTool(agent, executor, state_updater, max_refinements=1)
    tool = SubAgentTool(agent, executor, state_updater, name="sql_tool")
    assert tool.name == "sql_tool"


def test_sub_agent_tool_run_commits_the_first_result() -> None:
    from core import BaseAgent, SubAgentResult, SubAgentTool

    agent = BaseAgent(model=TestModel(custom_output_args={"sql": "select 1"}), output_type=Query)
    tool = SubAgentTool(agent, executor, state_updater)
    state = Session()
    outcome = asyncio.run(tool.run(state, "count the rows"))
    assert isinstance(outcome, SubAgentResult)
    assert state.results == [{"rows": 8}]


def test_sub_agent_tool_refinement_keeps_the_best_prior_result() -> None:
    from core import BaseAgent, SubAgentEvalResult, SubAgentTool

    agent = BaseAgent(model=TestModel(custom_output_args={"sql": "select 1"}), output_type=Query)

    def evaluator(result: dict[str, Any]) -> SubAgentEvalResult:
        return SubAgentEvalResult(passed=False, feedback="more rows")

    def build_refinement_prompt(result: dict[str, Any], prompt: str) -> str:
        raise RuntimeError("refinement failed")

    tool = SubAgentTool(
        agent,
        executor,
        state_updater,
        evaluator=evaluator,
        max_refinements=2,
        build_refinement_prompt=build_refinement_prompt,
    )
    state = Session()
    outcome = asyncio.run(tool.run(state, "count the rows"))
    assert state.results == [{"rows": 8}]  # the first result stays committed
    assert outcome.result == {"rows": 8}
