"""Dispatch of the router and the loop without per-dispatch overhead the reference library does
not pay: callables are classified sync
or async once, at construction, and untraced runs call function steps without their step.

Every kind of callable a router or a loop accepts today is run through `run` (the untraced fast
path), `run_with_decision` / `run` under a trace (the path through the steps), with exact
expected results. A plain function returning an awaitable is awaited, as before. The router's
decision record is built only when tracing is on or when it is asked for.
"""

from __future__ import annotations

import asyncio
import functools
from typing import Any

import pytest

from core.errors import RouterError
from core.runtime import (
    EvalResult,
    FunctionStep,
    RefinementLoop,
    Route,
    RouteDecision,
    Router,
    capture_trace,
)


def _run(coro: Any) -> Any:
    return asyncio.run(coro)


async def _async_is_code(x: str) -> bool:
    return "def" in x


class AsyncCall:
    async def __call__(self, x: str) -> bool:
        return "def" in x


class SyncCallReturningAwaitable:
    def __call__(self, x: str) -> Any:
        return _async_is_code(x)


def _sync_is_code(x: str) -> bool:
    return "def" in x


CONDITIONS: list[tuple[str, Any]] = [
    ("sync def", _sync_is_code),
    ("sync lambda, truthy non-bool", lambda x: x.count("def")),
    ("async def", _async_is_code),
    ("sync def returning a coroutine", lambda x: _async_is_code(x)),
    ("partial of an async def", functools.partial(_async_is_code)),
    ("object with an async __call__", AsyncCall()),
    ("object whose __call__ returns an awaitable", SyncCallReturningAwaitable()),
]


def _route(tag: str) -> Any:
    async def step(x: str) -> str:
        return f"{tag}:{x}"

    step.__name__ = tag
    return step


def _condition_router(condition: Any) -> Router:
    return Router(
        [
            Route("never", _route("never"), condition=lambda x: False),
            Route("code", _route("code"), condition=condition),
            Route("text", lambda x: f"text:{x}", condition=lambda x: True),
        ],
        name="r",
    )


@pytest.mark.parametrize(("label", "condition"), CONDITIONS, ids=[c[0] for c in CONDITIONS])
def test_every_kind_of_condition_dispatches(label: str, condition: Any) -> None:
    router = _condition_router(condition)

    async def go() -> list[Any]:
        untraced = [await router.run("def f"), await router.run("hello")]
        decided = [await router.run_with_decision("def f"), await router.run_with_decision("hi")]
        with capture_trace() as trace:
            traced = [await router.run("def f"), await router.run("hello")]
        routes = [s.attributes.get("route") for s in trace.spans if s.kind == "router"]
        return [untraced, decided, traced, routes]

    untraced, decided, traced, routes = _run(go())
    assert untraced == ["code:def f", "text:hello"]
    assert decided == [
        ("code:def f", RouteDecision("code", None, False, None)),
        ("text:hi", RouteDecision("text", None, False, None)),
    ]
    assert traced == ["code:def f", "text:hello"]
    assert routes == ["code", "text"]


class Label:
    def __init__(self, route: str) -> None:
        self.route = route


async def _async_classify(x: str) -> str:
    return "code" if "def" in x else "text"


def _sync_classify(x: str) -> str:
    return "code" if "def" in x else "text"


class ClassifierStep:
    """A Step used as a classifier (run through `execute`, never inlined)."""

    step_name = "custom"

    async def execute(self, input_data: Any) -> Any:
        return _sync_classify(input_data)


CLASSIFIERS: list[tuple[str, Any]] = [
    ("sync def", _sync_classify),
    ("async def", _async_classify),
    ("sync def returning a coroutine", lambda x: _async_classify(x)),
    ("a FunctionStep passed in", FunctionStep(_async_classify, "given")),
    ("a custom Step", ClassifierStep()),
    ("an object with .route", lambda x: Label(_sync_classify(x))),
    ("names after strip and casefold", lambda x: " CODE " if "def" in x else "Text"),
]


@pytest.mark.parametrize(("label", "classifier"), CLASSIFIERS, ids=[c[0] for c in CLASSIFIERS])
def test_every_kind_of_classifier_dispatches(label: str, classifier: Any) -> None:
    router = Router(
        [Route("code", _route("code")), Route("text", lambda x: f"text:{x}")],
        classifier=classifier,
        name="r",
    )

    async def go() -> list[Any]:
        untraced = [await router.run("def f"), await router.run("hello")]
        last = router.last_decision
        with capture_trace() as trace:
            traced = await router.run("def f")
        names = [s.name for s in trace.spans]
        return [untraced, last, traced, names]

    untraced, last, traced, names = _run(go())
    assert untraced == ["code:def f", "text:hello"]
    assert last is not None and (last.route, last.fallback_used, last.reason) == (
        "text",
        False,
        None,
    )
    assert traced == "code:def f"
    spans = ["r", "code"]  # a custom Step opens no span of its own
    if label != "a custom Step":
        spans.insert(1, "given" if "passed" in label else "r.classifier")
    assert names == spans  # traced, the classifier runs as its step


def test_the_decision_record_is_built_only_when_tracing_or_asked() -> None:
    router = Router(
        [Route("code", _route("code"))], classifier=_async_classify, fallback=lambda x: "fb"
    )

    async def untraced() -> Any:
        return await router.run("hello")

    assert _run(untraced()) == "fb"
    assert type(router._last) is tuple  # pyright: ignore[reportPrivateUsage]  # no record yet
    assert router.last_decision == RouteDecision(None, "text", True, "unknown_route")
    assert type(router._last) is RouteDecision  # pyright: ignore[reportPrivateUsage]  # built on read

    async def traced() -> Any:
        with capture_trace() as trace:
            out = await router.run("def f")
        return out, type(router._last), trace.spans[0].attributes  # pyright: ignore[reportPrivateUsage]

    out, kept, attributes = _run(traced())
    assert (out, kept) == ("code:def f", RouteDecision)
    assert attributes == {
        "route": "code",
        "raw": "code",
        "fallback": False,
        "reason": None,
        "error": None,
    }


def test_untraced_failures_are_the_same_as_traced_ones() -> None:
    def broken(x: Any) -> bool:
        raise ValueError("no")

    router = Router([Route("a", _route("a"), condition=broken)], name="r")
    with pytest.raises(RouterError, match="the condition of route 'a' raised ValueError: no") as e:
        _run(router.run("x"))
    assert isinstance(e.value.__cause__, ValueError)
    assert router.last_decision is None  # a raising condition decides nothing

    async def down(x: Any) -> str:
        raise RuntimeError("down")

    fallback = Router([Route("a", _route("a"))], classifier=down, fallback=lambda x: "fb")
    assert _run(fallback.run("x")) == "fb"
    assert fallback.last_decision == RouteDecision(
        None, None, True, "classifier_error", "RuntimeError: down"
    )
    strict = Router([Route("a", _route("a"))], classifier=down, name="s")
    with pytest.raises(RouterError, match="the classifier raised RuntimeError: down") as e:
        _run(strict.run("x"))
    assert isinstance(e.value.__cause__, RuntimeError)


# --- the refinement loop ----------------------------------------------------------------------


def _verdict(output: str) -> EvalResult:
    return EvalResult(passed=output == "out2", score=float(output[3:]))


async def _async_verdict(output: str) -> EvalResult:
    return _verdict(output)


class VerdictStep:
    step_name = "judge"

    async def execute(self, input_data: Any) -> Any:
        return _verdict(input_data)


EVALUATORS: list[tuple[str, Any]] = [
    ("sync def returning EvalResult", _verdict),
    ("sync def returning a mapping", lambda o: {"passed": o == "out2", "score": float(o[3:])}),
    ("async def", _async_verdict),
    ("sync def returning a coroutine", lambda o: _async_verdict(o)),
    ("a custom Step", VerdictStep()),
]


def _produce(x: int) -> str:
    return f"out{x}"


async def _async_produce(x: int) -> str:
    return f"out{x}"


STEPS: list[tuple[str, Any]] = [
    ("sync step", _produce),
    ("async step", _async_produce),
    ("sync step returning a coroutine", lambda x: _async_produce(x)),
]


async def _async_next(current: int, output: str, verdict: EvalResult) -> int:
    return current + 1


UPDATERS: list[tuple[str, Any]] = [
    ("sync updater", lambda current, output, verdict: current + 1),
    ("async updater", _async_next),
    ("sync updater returning a coroutine", lambda c, o, v: _async_next(c, o, v)),
]


@pytest.mark.parametrize(("e_label", "evaluator"), EVALUATORS, ids=[c[0] for c in EVALUATORS])
@pytest.mark.parametrize(("s_label", "step"), STEPS, ids=[c[0] for c in STEPS])
@pytest.mark.parametrize(("u_label", "updater"), UPDATERS, ids=[c[0] for c in UPDATERS])
def test_every_kind_of_step_evaluator_and_updater_iterates(
    e_label: str, evaluator: Any, s_label: str, step: Any, u_label: str, updater: Any
) -> None:
    loop = RefinementLoop(step, evaluator, updater, max_iterations=5, name="loop")

    async def go() -> Any:
        untraced = await loop.run(0)
        with capture_trace() as trace:
            traced = await loop.run(0)
        return untraced, traced, [s.name for s in trace.spans]

    untraced, traced, names = _run(go())
    for result in (untraced, traced):
        assert (result.output, result.iterations, result.exit_reason) == ("out2", 3, "passed")
        assert [r.eval_result for r in result.history] == [
            EvalResult(passed=False, score=0.0),
            EvalResult(passed=False, score=1.0),
            EvalResult(passed=True, score=2.0),
        ]
    step_name = "<lambda>" if "coroutine" in s_label else step.__name__
    per_iteration = [step_name] if e_label == "a custom Step" else [step_name, "loop.evaluator"]
    assert names == ["loop"] + per_iteration * 3  # traced, each runs as its step (a custom
    # Step opens no span of its own)


def test_nan_scores_are_no_scores_and_keep_best_holds_untraced() -> None:
    scores = iter([0.5, float("nan"), 0.2])
    loop = RefinementLoop(
        _produce,
        lambda o: EvalResult(passed=False, score=next(scores)),
        lambda c, o, v: c + 1,
        max_iterations=3,
    )
    result = _run(loop.run(0))
    assert (result.output, result.returned_iteration, result.best_score) == ("out0", 1, 0.5)
    assert result.exit_reason == "max_iterations"
