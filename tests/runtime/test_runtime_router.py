"""Router (semantics section 4), including field case F6."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from dataclasses import dataclass
from enum import Enum
from typing import Any

import pydantic_ai.models
import pytest
from pydantic import BaseModel
from pydantic_ai import Agent
from pydantic_ai.messages import ModelMessage, ModelResponse, TextPart, ToolCallPart
from pydantic_ai.models.function import AgentInfo, FunctionModel
from pydantic_ai.usage import RequestUsage

from core.errors import RouterError
from core.runtime import Route, RouteDecision, Router, capture_trace, normalize_route_name

pydantic_ai.models.ALLOW_MODEL_REQUESTS = False


def _run(coro: Any) -> Any:
    return asyncio.run(coro)


def solve_math(x: Any) -> str:
    return f"math:{x}"


def solve_code(x: Any) -> str:
    return f"code:{x}"


def general(x: Any) -> str:
    return f"general:{x}"


class Scripted:
    """A classifier answering from a script; an exception in the script is raised."""

    def __init__(self, answers: list[Any]) -> None:
        self._answers: Iterator[Any] = iter(answers)
        self.__name__ = "scripted"

    def __call__(self, x: Any) -> Any:
        answer = next(self._answers)
        if isinstance(answer, BaseException):
            raise answer
        return answer


F6_ANSWERS: list[Any] = ["math", "Math ", "billing", "", RuntimeError("classifier down")]


def _f6_router(fallback: Any) -> Router:
    return Router(
        [Route("math", solve_math), Route("code", solve_code)],
        classifier=Scripted(list(F6_ANSWERS)),
        fallback=fallback,
        name="triage",
    )


def test_construction_rules() -> None:
    with pytest.raises(ValueError, match="at least one route"):
        Router([], classifier=lambda x: "a")
    with pytest.raises(ValueError, match="classifier or at least one route condition"):
        Router([Route("a", general), Route("b", general)])
    with pytest.raises(ValueError, match="duplicate route name"):
        Router([Route("math", general), Route("math", general)], classifier=lambda x: "math")
    with pytest.raises(ValueError, match="duplicate route name"):
        Router([Route("Math", general), Route(" math", general)], classifier=lambda x: "math")
    with pytest.raises(ValueError, match="non-empty name"):
        Route("  ", general)
    with pytest.raises(TypeError, match="int"):
        Route("a", 5)
    with pytest.raises(TypeError, match="callable"):
        Route("a", general, condition="yes")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="Route"):
        Router([("a", general)], classifier=lambda x: "a")  # type: ignore[list-item]


def test_normalisation_rule() -> None:
    assert normalize_route_name("  Math\n") == "math"
    assert normalize_route_name("STRASSE") == normalize_route_name("straße")


# ---- F6 ------------------------------------------------------------------------------------


def test_f6_with_fallback_every_decision_is_recorded() -> None:
    router = _f6_router(fallback=general)

    async def go() -> list[tuple[Any, RouteDecision, dict[str, Any]]]:
        rows = []
        for _ in F6_ANSWERS:
            with capture_trace() as trace:
                out, decision = await router.run_with_decision("q")
            assert router.last_decision == decision
            rows.append((out, decision, trace.spans[0].attributes))
        return rows

    rows = _run(go())
    assert [(out, d) for out, d, _ in rows] == [
        ("math:q", RouteDecision("math", "math", False, None)),
        ("math:q", RouteDecision("math", "Math ", False, None)),
        ("general:q", RouteDecision(None, "billing", True, "unknown_route")),
        ("general:q", RouteDecision(None, "", True, "empty_output")),
        (
            "general:q",
            RouteDecision(None, None, True, "classifier_error", "RuntimeError: classifier down"),
        ),
    ]
    assert [attrs for _, _, attrs in rows] == [
        {"route": "math", "raw": "math", "fallback": False, "reason": None, "error": None},
        {"route": "math", "raw": "Math ", "fallback": False, "reason": None, "error": None},
        {
            "route": None,
            "raw": "billing",
            "fallback": True,
            "reason": "unknown_route",
            "error": None,
        },
        {"route": None, "raw": "", "fallback": True, "reason": "empty_output", "error": None},
        {
            "route": None,
            "raw": None,
            "fallback": True,
            "reason": "classifier_error",
            "error": "RuntimeError: classifier down",
        },
    ]


def test_f6_without_fallback_a_clear_no_match_error() -> None:
    router = _f6_router(fallback=None)

    async def go() -> list[Any]:
        results: list[Any] = []
        for _ in F6_ANSWERS:
            try:
                results.append(await router.run("q"))
            except RouterError as exc:
                results.append((exc, router.last_decision))
        return results

    ok1, ok2, unknown, empty, raised = _run(go())
    assert (ok1, ok2) == ("math:q", "math:q")
    exc, decision = unknown
    assert str(exc) == (
        "router 'triage': no route matched: the classifier answered 'billing', which names no "
        "route (routes: 'math', 'code'; no fallback)"
    )
    assert exc.__cause__ is None
    assert decision == RouteDecision(None, "billing", False, "unknown_route")
    exc, decision = empty
    assert str(exc) == (
        "router 'triage': no route matched: the classifier answered nothing ('') "
        "(routes: 'math', 'code'; no fallback)"
    )
    assert decision == RouteDecision(None, "", False, "empty_output")
    exc, decision = raised
    assert str(exc) == (
        "router 'triage': no route matched: the classifier raised RuntimeError: classifier down "
        "(routes: 'math', 'code'; no fallback)"
    )
    assert isinstance(exc.__cause__, RuntimeError)  # chained to the classifier's error
    assert decision == RouteDecision(
        None, None, False, "classifier_error", "RuntimeError: classifier down"
    )


def test_f6_no_match_error_is_recorded_in_the_trace() -> None:
    router = Router([Route("math", solve_math)], classifier=lambda x: "billing", name="r")

    async def go() -> Any:
        with capture_trace() as trace:
            with pytest.raises(RouterError):
                await router.run("q")
        return trace

    trace = _run(go())
    root = trace.spans[0]
    assert root.kind == "router"
    assert root.error is not None and root.error.startswith("RouterError: router 'r'")
    assert root.attributes == {
        "route": None,
        "raw": "billing",
        "fallback": False,
        "reason": "unknown_route",
        "error": None,
    }


# ---- classifier kinds ------------------------------------------------------------------------


class Choice(BaseModel):
    route: str


@dataclass
class Named:
    name: str


def test_classifier_output_duck_typing() -> None:
    routes = [Route("math", solve_math), Route("code", solve_code)]
    cases: list[tuple[Any, str]] = [
        (Choice(route=" CODE"), "code:1"),
        (Named(name="math"), "math:1"),
        (42, "general:1"),  # str(42) names no route
        (None, "general:1"),  # nothing: empty output
        (Named(name=None), "general:1"),  # type: ignore[arg-type]
    ]
    reasons = []
    for raw, expected in cases:
        router = Router(routes, classifier=lambda x, raw=raw: raw, fallback=general)
        out, decision = _run(router.run_with_decision(1))
        assert out == expected
        assert decision.raw_output is raw
        reasons.append(decision.reason)
    assert reasons == [None, None, "unknown_route", "empty_output", "empty_output"]


@dataclass
class RouteAndName:
    route: str | None
    name: str


def test_route_attribute_wins_over_name() -> None:
    routes = [Route("math", solve_math), Route("code", solve_code)]
    router = Router(routes, classifier=lambda x: RouteAndName("code", "math"), fallback=general)
    assert _run(router.run_with_decision(1)) == (
        "code:1",
        RouteDecision("code", RouteAndName("code", "math"), False, None),
    )
    # `.route` present but None: nothing named (the `.name` is not consulted)
    router = Router(routes, classifier=lambda x: RouteAndName(None, "math"), fallback=general)
    out, decision = _run(router.run_with_decision(1))
    assert (out, decision.reason) == ("general:1", "empty_output")


class Topic(str, Enum):  # noqa: UP042 (what users write; str() is not the value)
    MATH = "math"
    CODING = "code"


class PlainTopic(Enum):
    MATH = "math"
    CODING = "code"


class TopicChoice(BaseModel):
    route: Topic


@dataclass
class PlainChoice:
    route: PlainTopic


def test_enum_route_names_match_by_value() -> None:
    """A classifier constrained by an enum (a natural structured output) names the route by the
    member's value: `str()` of a str-mixin member is `"Topic.CODING"`, which names no route."""
    routes = [Route("math", solve_math), Route("code", solve_code)]
    outputs: list[Any] = [
        TopicChoice(route=Topic.CODING),
        PlainChoice(route=PlainTopic.CODING),
        Topic.CODING,
        PlainTopic.CODING,
        TopicChoice(route=Topic.MATH),
    ]
    got = []
    for raw in outputs:
        router = Router(routes, classifier=lambda x, raw=raw: raw, fallback=general)
        out, decision = _run(router.run_with_decision(1))
        got.append((out, decision.route, decision.reason))
    assert got == [
        ("code:1", "code", None),
        ("code:1", "code", None),
        ("code:1", "code", None),
        ("code:1", "code", None),
        ("math:1", "math", None),
    ]


def test_str_output_used_when_no_route_or_name_attribute() -> None:
    class Label:
        def __str__(self) -> str:
            return "code"

    router = Router([Route("code", solve_code)], classifier=lambda x: Label())
    assert _run(router.run(2)) == "code:2"


def test_async_classifier() -> None:
    async def classify(x: str) -> str:
        await asyncio.sleep(0)
        return "code" if "def" in x else "math"

    router = Router([Route("math", solve_math), Route("code", solve_code)], classifier=classify)
    assert _run(router.run("def f")) == "code:def f"
    assert _run(router.run("1+1")) == "math:1+1"


def test_agent_classifier_with_structured_output_and_usage() -> None:
    def classify(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        return ModelResponse(
            parts=[ToolCallPart(info.output_tools[0].name, {"route": "Code"})],
            usage=RequestUsage(input_tokens=7, output_tokens=2),
        )

    agent = Agent(FunctionModel(classify, model_name="cls"), output_type=Choice)
    router = Router(
        [Route("math", solve_math), Route("code", solve_code)], classifier=agent, name="r"
    )

    async def go() -> Any:
        with capture_trace() as trace:
            out = await router.run("x")
        return out, trace

    out, trace = _run(go())
    assert out == "code:x"
    assert [(s.parent_id, s.kind, s.name) for s in trace.spans] == [
        (None, "router", "r"),
        (0, "agent_step", "r.classifier"),
        (0, "function_step", "solve_code"),
    ]
    assert trace.spans[0].attributes["raw"] == '{"route":"Code"}'
    assert trace.spans[0].attributes["route"] == "code"
    assert {
        k: (v.requests, v.input_tokens, v.output_tokens) for k, v in trace.usage_by_model().items()
    } == {"function:cls": (1, 7, 2)}


def test_agent_classifier_with_text_output() -> None:
    def classify(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        return ModelResponse(parts=[TextPart("  math\n")])

    router = Router(
        [Route("math", solve_math)], classifier=Agent(FunctionModel(classify)), fallback=general
    )
    out, decision = _run(router.run_with_decision(3))
    assert out == "math:3"
    assert decision == RouteDecision("math", "  math\n", False, None)


def test_classifier_alone_chooses_conditions_ignored() -> None:
    router = Router(
        [Route("math", solve_math, condition=lambda x: True), Route("code", solve_code)],
        classifier=lambda x: "code",
    )
    assert _run(router.run(1)) == "code:1"


# ---- conditions ------------------------------------------------------------------------------


def test_conditions_first_truthy_in_list_order_wins() -> None:
    async def is_code(x: str) -> bool:
        return "def" in x

    router = Router(
        [
            Route("plain", general),  # no condition: never matches by condition
            Route("code", solve_code, condition=is_code),
            Route("math", solve_math, condition=lambda x: any(c.isdigit() for c in x)),
            Route("also_code", general, condition=lambda x: "def" in x),
        ],
        fallback=lambda x: "fb",
    )
    assert _run(router.run_with_decision("def f(1)")) == (
        "code:def f(1)",
        RouteDecision("code", None, False, None),
    )
    assert _run(router.run("1+1")) == "math:1+1"
    assert _run(router.run_with_decision("hello")) == (
        "fb",
        RouteDecision(None, None, True, "no_condition_matched"),
    )


def test_no_condition_matched_without_fallback() -> None:
    router = Router([Route("a", general, condition=lambda x: x > 5)], name="r")
    with pytest.raises(RouterError) as info:
        _run(router.run(1))
    assert str(info.value) == (
        "router 'r': no route matched: no route condition was true (routes: 'a'; no fallback)"
    )
    assert router.last_decision == RouteDecision(None, None, False, "no_condition_matched")


def test_a_condition_that_raises_is_a_router_error_naming_the_route() -> None:
    def broken(x: Any) -> bool:
        raise ZeroDivisionError("cond")

    router = Router([Route("a", general, condition=broken)], fallback=general, name="r")
    with pytest.raises(RouterError, match="condition of route 'a' raised") as info:
        _run(router.run(1))
    assert isinstance(info.value.__cause__, ZeroDivisionError)


def test_route_step_errors_propagate_unchanged() -> None:
    def bad(x: Any) -> Any:
        raise KeyError("in route")

    router = Router([Route("a", bad)], classifier=lambda x: "a")
    with pytest.raises(KeyError):
        _run(router.run(1))
    assert router.last_decision == RouteDecision("a", "a", False, None)


def test_a_cancelled_router_does_not_run_the_route_when_the_classifier_swallows_it() -> None:
    ran: list[str] = []

    async def swallowing_classifier(x: Any) -> str:
        try:
            await asyncio.sleep(10)
        except asyncio.CancelledError:
            await asyncio.sleep(0.05)
        return "a"

    def route_a(x: Any) -> str:
        ran.append("route a")
        return "a"

    router = Router([Route("a", route_a)], classifier=swallowing_classifier)

    async def go() -> None:
        task = asyncio.create_task(router.run(1))
        await asyncio.sleep(0.02)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    _run(go())
    assert ran == []


def test_execute_and_node_id() -> None:
    router = Router([Route("a", general)], classifier=lambda x: "a", node_id="n7")
    assert _run(router.execute(2)) == "general:2"
    assert router.node_id == "n7"
    assert router.step_name == "router"
    assert router.last_decision == RouteDecision("a", "a", False, None)
