"""SubAgentTool / SubAgentResult as documented: the ValueError rule, the first result always
committed, refinement to a better result, a raising refinement keeping the best prior result with
the exception in the history, extra keyword arguments forwarded, and as_tool()."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from pydantic_ai import Agent
from pydantic_ai.messages import ModelMessage, ModelResponse, TextPart, ToolCallPart
from pydantic_ai.models.function import AgentInfo, FunctionModel

from core.agents import BaseAgent, GlobalState
from core.compound import SubAgentEvalResult, SubAgentTool


class ScriptedAgent(BaseAgent[str]):
    """Answers from a script; records the prompts and keyword arguments it got."""

    def __init__(self, answers: list[str | Exception]) -> None:
        super().__init__("drafter")
        self.answers = list(answers)
        self.calls: list[tuple[str, dict[str, Any]]] = []

    async def run(self, state: Any, /, *, usage: Any = None, **kwargs: Any) -> str:
        prompt = kwargs.pop("prompt")
        self.calls.append((prompt, kwargs))
        answer = self.answers.pop(0)
        if isinstance(answer, Exception):
            raise answer
        return answer


async def execute(output: str, state: GlobalState) -> dict[str, Any]:
    return {"text": output, "length": len(output)}


def update(result: dict[str, Any], state: GlobalState) -> None:
    state.results["draft"] = result
    state.history.append(f"committed {result['text']}")


def by_length(result: dict[str, Any]) -> SubAgentEvalResult:
    n = result["length"]
    return SubAgentEvalResult(passed=n >= 10, feedback="longer", score=float(n))


def refine(result: dict[str, Any], prompt: str) -> str:
    return f"{prompt} (was {result['length']} chars, make it longer)"


def test_refinement_needs_an_evaluator_and_a_prompt_builder() -> None:
    agent = ScriptedAgent([])
    with pytest.raises(ValueError, match="needs both an evaluator and a build_refinement_prompt"):
        SubAgentTool(agent, execute, update, max_refinements=1, evaluator=by_length)
    with pytest.raises(ValueError, match="needs both"):
        SubAgentTool(agent, execute, update, max_refinements=1, build_refinement_prompt=refine)
    assert SubAgentTool(agent, execute, update).name == "drafter"


def test_no_evaluator_is_one_pass_committed() -> None:
    agent = ScriptedAgent(["hello"])
    state = GlobalState()
    out = asyncio.run(SubAgentTool(agent, execute, update).run(state, "write"))
    assert out.result == {"text": "hello", "length": 5}
    assert out.passed is None and out.refinements == 0
    assert state.results["draft"] == {"text": "hello", "length": 5}


def test_refinement_reaches_a_passing_result() -> None:
    agent = ScriptedAgent(["hi", "hello", "hello world"])
    state = GlobalState()
    tool = SubAgentTool(
        agent,
        execute,
        update,
        evaluator=by_length,
        max_refinements=3,
        build_refinement_prompt=refine,
        name="writer",
    )
    out = asyncio.run(tool.run(state, "write"))
    assert out.name == "writer"
    assert out.result == {"text": "hello world", "length": 11}
    assert out.passed is True
    assert out.refinements == 2
    assert [a.prompt for a in out.history] == [
        "write",
        "write (was 2 chars, make it longer)",
        "write (was 5 chars, make it longer)",
    ]
    assert state.history == ["committed hi", "committed hello", "committed hello world"]


def test_a_raising_refinement_keeps_the_first_result_and_records_the_exception() -> None:
    agent = ScriptedAgent(["short", RuntimeError("model fell over")])
    state = GlobalState()
    tool = SubAgentTool(
        agent,
        execute,
        update,
        evaluator=by_length,
        max_refinements=2,
        build_refinement_prompt=refine,
    )
    out = asyncio.run(tool.run(state, "write"))
    assert out.result == {"text": "short", "length": 5}
    assert out.evaluation == SubAgentEvalResult(passed=False, feedback="longer", score=5.0)
    assert out.refinements == 1
    assert [(a.attempt, a.error) for a in out.history] == [
        (0, None),
        (1, "RuntimeError: model fell over"),
    ]
    # the first result was committed before refinement and is still there
    assert state.results["draft"] == {"text": "short", "length": 5}
    assert state.history == ["committed short"]


def test_a_worse_refinement_is_not_committed() -> None:
    agent = ScriptedAgent(["abcdef", "abc"])
    state = GlobalState()
    tool = SubAgentTool(
        agent,
        execute,
        update,
        evaluator=by_length,
        max_refinements=1,
        build_refinement_prompt=refine,
    )
    out = asyncio.run(tool.run(state, "write"))
    assert out.result["text"] == "abcdef"
    assert state.results["draft"]["text"] == "abcdef"
    assert out.refinements == 1


def test_extra_keyword_arguments_are_forwarded_verbatim() -> None:
    agent = ScriptedAgent(["x"])
    asyncio.run(SubAgentTool(agent, execute, update).run(GlobalState(), "p", tone="dry", n=3))
    assert agent.calls == [("p", {"tone": "dry", "n": 3})]


def test_as_tool_lets_a_pydantic_ai_agent_call_it() -> None:
    sub = ScriptedAgent(["a result long enough"])
    tool = SubAgentTool(sub, execute, update, name="drafter").as_tool()

    def lead(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        if len(messages) == 1:
            return ModelResponse(parts=[ToolCallPart("drafter", {"prompt": "draft it"})])
        return ModelResponse(parts=[TextPart("done")])

    state = GlobalState(goal="g")
    agent = Agent(FunctionModel(lead), tools=[tool], deps_type=GlobalState)
    assert asyncio.run(agent.run("go", deps=state)).output == "done"
    assert sub.calls == [("draft it", {})]
    assert state.results["draft"] == {"text": "a result long enough", "length": 20}
