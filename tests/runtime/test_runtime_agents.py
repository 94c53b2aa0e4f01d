"""Agent glue: prompts, stateless runs, usage recorded on every attempt, model names."""

from __future__ import annotations

import asyncio
from typing import Any

import pydantic_ai.models
import pytest
from pydantic import BaseModel
from pydantic_ai import Agent
from pydantic_ai.messages import ModelMessage, ModelRequest, ModelResponse, TextPart, ToolCallPart
from pydantic_ai.models.function import AgentInfo, FunctionModel
from pydantic_ai.models.test import TestModel
from pydantic_ai.usage import RequestUsage

from core.agents import agent_model_name, is_agent, model_name, render_prompt, run_agent
from core.runtime import AgentStep, Pipeline, capture_trace

pydantic_ai.models.ALLOW_MODEL_REQUESTS = False


class Question(BaseModel):
    text: str
    n: int


class Verdict(BaseModel):
    route: str


def _user_prompts(messages: list[ModelMessage]) -> list[str]:
    return [
        str(part.content)
        for m in messages
        if isinstance(m, ModelRequest)
        for part in m.parts
        if part.part_kind == "user-prompt"
    ]


def test_render_prompt_rule() -> None:
    assert render_prompt("as is") == "as is"
    assert render_prompt(12) == "12"
    assert render_prompt(Question(text="hi", n=2)) == '{"text":"hi","n":2}'
    assert render_prompt([1, "a"]) == "[1, 'a']"


def test_agent_step_is_stateless_and_renders_the_prompt() -> None:
    seen: list[list[str]] = []

    def answer(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        seen.append(_user_prompts(messages))
        return ModelResponse(parts=[TextPart(f"echo {len(seen)}")])

    step = AgentStep(Agent(FunctionModel(answer)))

    async def go() -> list[Any]:
        return [await step.execute(Question(text="q", n=1)), await step.execute(7)]

    assert asyncio.run(go()) == ["echo 1", "echo 2"]
    # each run saw only its own prompt: no history carried between calls
    assert seen == [['{"text":"q","n":1}'], ["7"]]


def test_agent_step_prompt_builder() -> None:
    seen: list[list[str]] = []

    def answer(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        seen.append(_user_prompts(messages))
        return ModelResponse(parts=[TextPart("ok")])

    step = AgentStep(Agent(FunctionModel(answer)), prompt_builder=lambda x: f"Solve: {x}")
    assert asyncio.run(step.execute(3)) == "ok"
    assert seen == [["Solve: 3"]]
    assert step.build_prompt(4) == "Solve: 4"


def _flaky_structured(valid_after: int | None) -> FunctionModel:
    """A model whose structured output is invalid `valid_after` times, then valid (None: never).

    Every response reports 10 input and 3 output tokens.
    """
    calls = {"n": 0}

    def answer(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        calls["n"] += 1
        tool = info.output_tools[0].name
        ok = valid_after is not None and calls["n"] > valid_after
        args = {"route": "math"} if ok else {"wrong": 1}
        return ModelResponse(
            parts=[ToolCallPart(tool, args)],
            usage=RequestUsage(input_tokens=10, output_tokens=3),
            model_name="flaky",
        )

    return FunctionModel(answer, model_name="flaky")


def test_usage_counts_structured_output_retries() -> None:
    agent = Agent(_flaky_structured(valid_after=2), output_type=Verdict, retries=3, name="cls")
    step = AgentStep(agent)

    async def go() -> Any:
        with capture_trace() as trace:
            out = await step.execute("x")
        return out, trace

    out, trace = asyncio.run(go())
    assert out == Verdict(route="math")
    [span] = trace.spans
    assert span.kind == "agent_step"
    assert span.name == "cls"
    assert [u.to_dict() for u in span.usage] == [
        {"model_name": "function:flaky", "requests": 3, "input_tokens": 30, "output_tokens": 9}
    ]
    assert trace.usage_by_model()["function:flaky"].requests == 3


def test_usage_is_recorded_when_the_run_fails() -> None:
    agent = Agent(_flaky_structured(valid_after=None), output_type=Verdict, retries=2)
    step = AgentStep(agent)

    async def go() -> Any:
        with capture_trace() as trace:
            with pytest.raises(Exception, match="retries"):
                await step.execute("x")
        return trace

    trace = asyncio.run(go())
    [span] = trace.spans
    assert span.error is not None and span.error.startswith("UnexpectedModelBehavior")
    assert [u.to_dict() for u in span.usage] == [
        {"model_name": "function:flaky", "requests": 3, "input_tokens": 30, "output_tokens": 9}
    ]


def test_usage_accumulates_over_calls_and_retries_in_a_pipeline() -> None:
    agent = Agent(_flaky_structured(valid_after=1), output_type=Verdict, retries=3)
    pipe = Pipeline([AgentStep(agent, name="a"), lambda v: v.route])

    async def go() -> Any:
        with capture_trace() as trace:
            out = await pipe.run("x")
        return out, trace

    out, trace = asyncio.run(go())
    assert out == "math"
    assert {k: v.to_dict() for k, v in trace.usage_by_model().items()} == {
        "function:flaky": {
            "model_name": "function:flaky",
            "requests": 2,
            "input_tokens": 20,
            "output_tokens": 6,
        }
    }


def test_run_agent_reports_to_a_recorder_without_tracing() -> None:
    got: list[tuple[str, int, int, int]] = []

    def record(name: str, /, *, requests: int, input_tokens: int, output_tokens: int) -> None:
        got.append((name, requests, input_tokens, output_tokens))

    agent = Agent(_flaky_structured(valid_after=1), output_type=Verdict, retries=3)
    assert asyncio.run(run_agent(agent, "x", record=record)) == Verdict(route="math")
    assert got == [("function:flaky", 2, 20, 6)]
    # tracing off and no recorder: nothing recorded, nothing fails
    assert asyncio.run(AgentStep(agent).execute("y")) == Verdict(route="math")


def test_model_name_rule() -> None:
    def fn(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        return ModelResponse(parts=[TextPart("x")])

    assert model_name("openai:gpt-4o-mini") == "openai:gpt-4o-mini"
    assert model_name(None) == "unknown"
    assert model_name(TestModel()) == "test:test"
    assert model_name(FunctionModel(fn)) == "function:fn:"
    assert model_name(FunctionModel(fn, model_name="replay-6b")) == "function:replay-6b"
    agent = Agent(TestModel())
    assert agent_model_name(agent) == "test:test"
    with agent.override(model=FunctionModel(fn, model_name="other")):
        assert agent_model_name(agent) == "function:other"
    assert agent_model_name(agent) == "test:test"
    assert agent_model_name(Agent(defer_model_check=True)) == "unknown"


def test_is_agent_rule() -> None:
    class Duck:
        model = None

        async def run(self, prompt: Any, **kwargs: Any) -> Any:
            return None

    class NoModel:
        async def run(self, prompt: Any) -> Any:
            return None

    assert is_agent(Agent(TestModel()))
    assert is_agent(Duck())
    assert not is_agent(Duck)  # the class itself
    assert not is_agent(NoModel())
    assert not is_agent(Pipeline([len]))  # a step with `run` but no `model`
    assert not is_agent(len)


def test_running_does_not_rename_the_agent() -> None:
    agent = Agent(TestModel())
    assert asyncio.run(AgentStep(agent).execute("x")) == "success (no tool calls)"
    assert agent.name is None  # pydantic-ai's name inference from call frames is off
