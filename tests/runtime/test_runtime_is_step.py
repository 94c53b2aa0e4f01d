"""`is_step`, the duck-typed `isinstance(x, Step)` of `coerce_step`: no `runtime_checkable`
Protocol `isinstance` on the hydration hot path (6.5 us each on Python 3.11).

Every case is checked against the expected value and against the `runtime_checkable`
Protocol check it replaces, so the two cannot drift apart on this Python.
"""

from __future__ import annotations

from typing import Any

import pytest
from pydantic_ai import Agent
from pydantic_ai.models.test import TestModel

from core.runtime import (
    AgentStep,
    FunctionStep,
    Parallel,
    Pipeline,
    RefinementLoop,
    Route,
    Router,
    Step,
    coerce_step,
)
from core.runtime.step import is_step


async def _echo(x: Any) -> Any:
    return x


class PropertyStep:
    @property
    def step_name(self) -> str:
        return "p"

    async def execute(self, input_data: Any) -> Any:
        return input_data


class AttributeStep:
    def __init__(self) -> None:
        self.step_name = "a"

    async def execute(self, input_data: Any) -> Any:
        return input_data


class SyncExecute:
    step_name = "s"

    def execute(self, input_data: Any) -> Any:  # not async: the protocol does not check it
        return input_data


class NonStrName:
    step_name = 42  # any value: only the attribute's presence is checked

    async def execute(self, input_data: Any) -> Any:
        return input_data


class OnlyName:
    step_name = "n"


class OnlyExecute:
    async def execute(self, input_data: Any) -> Any:
        return input_data


class ExecuteNone:
    step_name = "x"
    execute = None


class NameRaisesAttributeError:
    @property
    def step_name(self) -> str:
        raise AttributeError("no name yet")

    async def execute(self, input_data: Any) -> Any:
        return input_data


class NominalStep(Step):  # subclasses the Protocol: inherits both members
    pass


class NominalExecuteNone(Step):  # opts out of the method, but is a nominal subclass
    execute = None  # type: ignore[assignment]


class Registered:  # has neither attribute; registered as a virtual subclass below
    pass


Step.register(Registered)


class EverythingGetattr:
    def __getattr__(self, name: str) -> Any:
        return lambda *a: None


class NoneGetattr:
    def __getattr__(self, name: str) -> Any:
        return None


class ClassProxy:
    """An object whose `__class__` claims to be a FunctionStep (like a proxy)."""

    @property  # type: ignore[misc]
    def __class__(self) -> type:  # type: ignore[override]
        return FunctionStep


def _case_objects() -> list[tuple[str, Any, bool]]:
    fn = FunctionStep(_echo)
    return [
        ("FunctionStep", fn, True),
        ("AgentStep", AgentStep(Agent(TestModel())), True),
        ("Pipeline", Pipeline([fn]), True),
        ("Parallel", Parallel([fn]), True),
        ("Router", Router([Route("a", fn)], classifier=lambda x: "a"), True),
        ("RefinementLoop", RefinementLoop(fn, lambda o: True, lambda i, o, e: o), True),
        ("property step_name", PropertyStep(), True),
        ("instance attribute step_name", AttributeStep(), True),
        ("sync execute", SyncExecute(), True),
        ("non-str step_name", NonStrName(), True),
        ("only step_name", OnlyName(), False),
        ("only execute", OnlyExecute(), False),
        ("execute is None", ExecuteNone(), False),
        ("step_name raises AttributeError", NameRaisesAttributeError(), False),
        ("nominal subclass", NominalStep(), True),
        ("nominal subclass, execute None", NominalExecuteNone(), True),
        ("registered virtual subclass", Registered(), True),
        ("__getattr__ answers everything", EverythingGetattr(), True),
        ("__getattr__ answers None", NoneGetattr(), False),
        ("__class__ proxy", ClassProxy(), False),
        ("a Step class", FunctionStep, True),  # coerce_step refuses classes separately
        ("async function", _echo, False),
        ("lambda", lambda x: x, False),
        ("pydantic-ai agent", Agent(TestModel()), False),
        ("None", None, False),
        ("int", 1, False),
        ("str", "step", False),
        ("object()", object(), False),
    ]


CASES = _case_objects()


@pytest.mark.parametrize(("label", "obj", "expected"), CASES, ids=[c[0] for c in CASES])
def test_is_step_agrees_with_the_protocol_check(label: str, obj: Any, expected: bool) -> None:
    protocol = isinstance(obj, Step)
    assert protocol is expected, f"{label}: the Protocol check says {protocol}"
    assert is_step(obj) is expected
    assert is_step(obj) is expected  # again: the per-class answer is cached


def test_an_exception_from_step_name_propagates_from_both() -> None:
    class NameRaises:
        @property
        def step_name(self) -> str:
            raise ValueError("broken name")

        async def execute(self, input_data: Any) -> Any:
            return input_data

    with pytest.raises(ValueError, match="broken name"):
        isinstance(NameRaises(), Step)
    with pytest.raises(ValueError, match="broken name"):
        is_step(NameRaises())


def test_coerce_step_uses_the_same_rule() -> None:
    step = PropertyStep()
    assert coerce_step(step) is step
    registered = Registered()
    assert coerce_step(registered) is registered  # type: ignore[comparison-overlap]
    wrapped = coerce_step(OnlyExecute().execute)  # a bound async method: a callable
    assert type(wrapped) is FunctionStep
    assert type(coerce_step(FunctionStep)) is FunctionStep  # a Step class is a callable
    with pytest.raises(TypeError, match="cannot use a ExecuteNone as a step"):
        coerce_step(ExecuteNone())
