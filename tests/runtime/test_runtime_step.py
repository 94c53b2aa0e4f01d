"""Steps and coercion (semantics section 1)."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from pydantic_ai import Agent
from pydantic_ai.models.test import TestModel

from core.runtime import AgentStep, FunctionStep, Pipeline, Step, coerce_step


def _run(coro: Any) -> Any:
    return asyncio.run(coro)


def double(x: int) -> int:
    return x * 2


async def adouble(x: int) -> int:
    await asyncio.sleep(0)
    return x * 2


class AsyncCallable:
    async def __call__(self, x: int) -> int:
        return x + 100


class DuckAgent:
    """Quacks like a pydantic-ai agent: a `model` and an async `run` returning `.output`."""

    model = "duck:model"
    name = "duck"

    async def run(self, prompt: Any, **kwargs: Any) -> Any:
        class Result:
            output = f"quack {prompt}"

        return Result()


def test_a_step_is_used_as_is() -> None:
    step = FunctionStep(double)
    assert coerce_step(step) is step
    pipe = Pipeline([double])
    assert coerce_step(pipe) is pipe


def test_callables_become_function_steps() -> None:
    for fn, name in [(double, "double"), (adouble, "adouble"), (AsyncCallable(), "AsyncCallable")]:
        step = coerce_step(fn)
        assert isinstance(step, FunctionStep)
        assert step.step_name == name
        assert step.fn is fn


def test_agents_become_agent_steps() -> None:
    agent = Agent(TestModel(), name="solver")
    step = coerce_step(agent)
    assert isinstance(step, AgentStep)
    assert step.agent is agent
    assert step.step_name == "solver"
    duck = DuckAgent()
    duck_step = coerce_step(duck)
    assert isinstance(duck_step, AgentStep)
    assert _run(duck_step.execute(3)) == "quack 3"


def test_coerce_names_wrappers_only() -> None:
    assert coerce_step(double, name="x").step_name == "x"
    step = FunctionStep(double)
    assert coerce_step(step, name="x").step_name == "double"


def test_a_step_class_is_not_a_step() -> None:
    """A class has `step_name` and `execute` attributes, but its `step_name` is a property, not
    a str: passing `FunctionStep` instead of an instance must not make the class a step. As any
    callable it is wrapped in a `FunctionStep` (calling it builds an instance)."""

    class Shout:
        """A step class: `Shout(prefix)` is the step."""

        def __init__(self, prefix: str) -> None:
            self.prefix = prefix

        @property
        def step_name(self) -> str:
            return "shout"

        async def execute(self, input_data: Any) -> Any:
            return self.prefix + str(input_data)

    wrapped = coerce_step(Shout)
    assert isinstance(wrapped, FunctionStep)
    assert wrapped.step_name == "Shout"
    assert wrapped.fn is Shout
    assert coerce_step(Shout("!")).step_name == "shout"
    assert [type(s).__name__ for s in Pipeline([Shout, Shout("!")]).steps] == [
        "FunctionStep",
        "Shout",
    ]


@pytest.mark.parametrize("bad", [42, "text", None, [double]])
def test_anything_else_is_a_type_error_naming_the_type(bad: Any) -> None:
    with pytest.raises(TypeError, match=type(bad).__name__):
        coerce_step(bad)


def test_function_step_name_and_protocol() -> None:
    step = FunctionStep(double)
    assert step.step_name == "double"
    assert FunctionStep(double, "twice").step_name == "twice"
    assert FunctionStep(lambda x: x).step_name == "<lambda>"
    assert isinstance(step, Step)
    with pytest.raises(AttributeError):
        step.step_name = "other"  # type: ignore[misc]
    with pytest.raises(TypeError, match="int"):
        FunctionStep(3)  # type: ignore[arg-type]


def test_function_step_calls_sync_and_awaits_async() -> None:
    assert _run(FunctionStep(double).execute(4)) == 8
    assert _run(FunctionStep(adouble).execute(4)) == 8
    assert _run(FunctionStep(AsyncCallable()).execute(4)) == 104
    # a plain function returning an awaitable has it awaited
    assert _run(FunctionStep(lambda x: adouble(x)).execute(5)) == 10


def test_function_step_exceptions_propagate() -> None:
    def boom(x: int) -> int:
        raise ValueError(f"bad {x}")

    with pytest.raises(ValueError, match="bad 1"):
        _run(FunctionStep(boom).execute(1))


def test_agent_step_rejects_non_agents() -> None:
    with pytest.raises(TypeError, match="function"):
        AgentStep(double)


def test_agent_step_default_name() -> None:
    assert AgentStep(Agent(TestModel())).step_name == "agent"
    assert AgentStep(Agent(TestModel(), name="a1")).step_name == "a1"
    assert AgentStep(Agent(TestModel(), name="a1"), name="mine").step_name == "mine"
    assert AgentStep(Agent(TestModel()), node_id="n3").node_id == "n3"
