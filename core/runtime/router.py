"""Router: one route chosen per input, by a classifier or by conditions (semantics section 4).

Route names match after `str.strip()` and `str.casefold()` on both sides, so a classifier
answering `"Math "` or `"MATH"` takes the route named `"math"`; names that are equal after that
normalisation are duplicates.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from enum import Enum
from typing import Any, Literal, cast

from core.agents.call_cache import off_clock_in_race
from core.errors import RouterError
from core.runtime._tasks import cancel_requested, current_task, is_async_callable, may_await
from core.runtime._trace import run_in_span
from core.runtime.step import DirectCall, Step, coerce_step, direct_call
from core.runtime.tracing import Span, current_frame, summarize

__all__ = ["FallbackReason", "Route", "RouteDecision", "Router", "normalize_route_name"]

FallbackReason = Literal[
    "unknown_route", "empty_output", "classifier_error", "no_condition_matched"
]


def normalize_route_name(name: str) -> str:
    """The form route names are compared in: whitespace stripped, case-folded."""
    return name.strip().casefold()


class Route:
    """A named branch of a `Router`.

    Args:
        name: the route's name (what a classifier answers); non-empty after stripping.
        step: what runs when the route is chosen (step-like, see `coerce_step`).
        condition: used only by routers without a classifier: a sync or async callable on the
            router's input; the route matches when it returns a truthy value. A route without a
            condition never matches by condition.

    Raises:
        ValueError: `name` is empty or blank.
        TypeError: `step` is not step-like, or `condition` is not callable.
    """

    __slots__ = ("_condition", "_name", "_step")

    def __init__(self, name: str, step: Any, condition: Callable[[Any], Any] | None = None) -> None:
        if not normalize_route_name(name):
            raise ValueError("a route needs a non-empty name")
        if condition is not None and not callable(condition):
            raise TypeError(f"a route condition must be callable, got {type(condition).__name__}")
        self._name = name
        self._step = coerce_step(step)
        self._condition = condition

    @property
    def name(self) -> str:
        return self._name

    @property
    def step(self) -> Step:
        return self._step

    @property
    def condition(self) -> Callable[[Any], Any] | None:
        return self._condition

    def __repr__(self) -> str:
        return f"Route({self._name!r}, {self._step!r})"


@dataclass(frozen=True, slots=True)
class RouteDecision:
    """How a `Router` chose, for one input.

    Attributes:
        route: the chosen route's name (as declared), or None when no route matched (the
            fallback ran, or `RouterError` was raised).
        raw_output: the classifier's raw output (None without a classifier, or when it raised).
        fallback_used: whether the fallback step ran.
        reason: why no route matched: `"unknown_route"` (the classifier named no route),
            `"empty_output"` (it answered nothing: None or blank), `"classifier_error"` (it
            raised), `"no_condition_matched"`; None when a route matched.
        error: `"ExceptionType: message"` of the classifier's exception, else None.
    """

    route: str | None
    raw_output: Any
    fallback_used: bool
    reason: FallbackReason | None
    error: str | None = None

    def to_attributes(self) -> dict[str, Any]:
        """The decision as trace-span attributes (JSON-serialisable; `raw` summarised unless
        it is a plain scalar)."""
        raw = self.raw_output
        if not (raw is None or isinstance(raw, str | int | float | bool)):
            raw = summarize(raw)
        return {
            "route": self.route,
            "raw": raw,
            "fallback": self.fallback_used,
            "reason": self.reason,
            "error": self.error,
        }


_DecisionFields = tuple[str | None, Any, bool, FallbackReason | None, str | None]
"""A `RouteDecision`'s fields in order, as the router keeps them until the record is asked for."""


def _text(value: Any) -> str:
    """A route name as text: an enum member by its value (`str()` of a `(str, Enum)` member is
    `"Topic.MATH"`, and an enum's `.name` is its identifier), anything else with `str`."""
    if isinstance(value, Enum):
        value = value.value
    return value if isinstance(value, str) else str(value)


def route_name_of(output: Any) -> str | None:
    """The route a classifier's output names, by duck typing: `.route`, else `.name`, else
    `str(output)`; None when the output (or that attribute) is None. Enum members (the output
    itself or its `.route` / `.name`) name a route by their value, e.g. a structured output
    `route: Topic` with `Topic.MATH = "math"` names `"math"`."""
    if output is None:
        return None
    if isinstance(output, str | Enum):
        return _text(output)
    for attr in ("route", "name"):
        if hasattr(output, attr):
            value = getattr(output, attr)
            return None if value is None else _text(value)
    return str(output)


class Router:
    """Run exactly one of several routes, chosen per input.

    With a `classifier`, the classifier alone chooses: it is an agent (its output names the
    route by duck typing: `.route`, else `.name`, else `str(output)`; enum members by their
    value), a Step, or a sync or async callable returning the route name; names match per
    `normalize_route_name`. Without a classifier, the first route in list order whose condition
    is truthy wins.

    When nothing matches (unknown or empty classifier answer, classifier raised, no condition
    true) the `fallback` runs if there is one, else `RouterError` naming the router is raised
    (chained to the classifier's exception when it raised). An exception from a condition
    raises `RouterError` naming the route, chained to it. The chosen step's exceptions
    propagate unchanged.

    Every decision is observable: `run_with_decision` returns it, `last_decision` keeps the
    latest one (also when `RouterError` is raised; with concurrent runs of one router prefer
    `run_with_decision`), and with tracing on it is written to the router span's attributes
    (`RouteDecision.to_attributes`). An agent or callable classifier runs as a child step
    named `"<router name>.classifier"`, so its usage is recorded.

    Cost: whether each condition and a callable classifier is async is decided once,
    here (`is_async_callable`); a sync one's result is awaited only if it is awaitable (so a
    plain function returning a coroutine still works), which is checked by type first
    (`may_await`). Untraced, a callable classifier is called directly rather than through its
    step, and the decision is kept as a bare tuple, made a `RouteDecision` only when
    `last_decision` is read or `run_with_decision` returns it.

    Args:
        routes: the routes, in priority order for conditions.
        classifier: an agent, Step or callable choosing the route, or None.
        fallback: step-like run when no route matches, or None.
        name: the step's name.
        node_id: the spec node id, for traces.

    Raises:
        ValueError: no routes, duplicate route names (after normalisation), or neither a
            classifier nor any route condition.
        TypeError: a route is not a `Route`, or something is not step-like.
    """

    __slots__ = (
        "_by_key",
        "_by_name",
        "_classify_async",
        "_classify_fn",
        "_classifier",
        "_conditions",
        "_fallback",
        "_last",
        "_name",
        "_routes",
        "node_id",
    )

    def __init__(
        self,
        routes: Sequence[Route],
        classifier: Any = None,
        fallback: Any = None,
        name: str = "router",
        *,
        node_id: str | None = None,
    ) -> None:
        routes = tuple(routes)
        if not routes:
            raise ValueError(f"router {name!r} needs at least one route")
        by_key: dict[str, Route] = {}
        for route in routes:
            if not isinstance(route, Route):  # pyright: ignore[reportUnnecessaryIsInstance]
                raise TypeError(f"router {name!r}: expected Route, got {type(route).__name__}")
            key = normalize_route_name(route.name)
            if key in by_key:
                raise ValueError(
                    f"router {name!r}: duplicate route name {route.name!r} "
                    f"(same as {by_key[key].name!r} after strip + casefold)"
                )
            by_key[key] = route
        if classifier is None and all(r.condition is None for r in routes):
            raise ValueError(f"router {name!r} needs a classifier or at least one route condition")
        self._routes = routes
        self._by_key = by_key
        # a route's name as declared normalises to its own key, so an exact hit is a match
        self._by_name: dict[str, tuple[str, Step, DirectCall | None]] = {
            r.name: (r.name, r.step, direct_call(r.step)) for r in routes
        }
        self._conditions: tuple[
            tuple[str, Step, DirectCall | None, Callable[[Any], Any], bool], ...
        ] = tuple(
            (r.name, r.step, direct_call(r.step), r.condition, is_async_callable(r.condition))
            for r in routes
            if r.condition is not None
        )
        self._classifier: Step | None = None
        # a function classifier's function and whether it is async (None: run its step)
        self._classify_fn: Callable[[Any], Any] | None = None
        self._classify_async = False
        if classifier is not None:
            self._classifier = coerce_step(classifier, name=f"{name}.classifier")
            call = direct_call(self._classifier)
            if call is not None:
                self._classify_fn, self._classify_async = call
        self._fallback: Step | None = None if fallback is None else coerce_step(fallback)
        self._name = name
        self.node_id = node_id
        self._last: RouteDecision | _DecisionFields | None = None

    @property
    def step_name(self) -> str:
        return self._name

    @property
    def routes(self) -> tuple[Route, ...]:
        return self._routes

    @property
    def classifier(self) -> Step | None:
        """The classifier as a step, or None."""
        return self._classifier

    @property
    def fallback(self) -> Step | None:
        return self._fallback

    @property
    def last_decision(self) -> RouteDecision | None:
        """The most recent decision of this router (None before the first run)."""
        last = self._last
        if isinstance(last, tuple):
            last = self._last = RouteDecision(*last)
        return last

    async def run(self, input_data: Any) -> Any:
        """Choose a route for `input_data`, run it and return its output.

        Raises:
            RouterError: nothing matched and there is no fallback, or a condition raised.
        """
        if current_frame() is not None:
            return (await self.run_with_decision(input_data))[0]
        # Untraced: `_decide(input_data, None)` inlined, one coroutine less per dispatch.
        awaited = False
        call: DirectCall | None = None  # how to call the chosen step without it (see below)
        if self._classifier is None:
            for name, route_step, route_call, condition, is_async in self._conditions:
                try:
                    if is_async:
                        awaited = True
                        off_clock_in_race()
                        hit = await condition(input_data)
                    else:
                        hit = condition(input_data)
                        if type(hit) is not bool and may_await(hit):
                            awaited = True
                            off_clock_in_race()
                            hit = await hit
                except Exception as exc:
                    raise self._condition_error(name, exc) from exc
                if hit:
                    self._last = (name, None, False, None, None)
                    step, call = route_step, route_call
                    break
            else:
                step = self._no_match(None, "no_condition_matched", None, None)
        else:
            awaited = True
            classify = self._classify_fn
            try:
                if classify is None:
                    raw = await self._classifier.execute(input_data)
                elif self._classify_async:
                    off_clock_in_race()
                    raw = await classify(input_data)
                else:
                    raw = classify(input_data)
                    if may_await(raw):
                        off_clock_in_race()
                        raw = await raw
            except Exception as exc:
                step = self._no_match(None, "classifier_error", exc, None)
            else:
                exact = self._by_name.get(raw) if type(raw) is str else None
                if exact is None:
                    step = self._route_for(raw, None)
                else:
                    self._last = (exact[0], raw, False, None, None)
                    _, step, call = exact
        # a cancellation can only have been swallowed at an await of the decision
        if awaited:
            task = current_task()
            if task is not None and task.cancelling():  # the classifier swallowed one
                raise asyncio.CancelledError
        if call is None:
            return await step.execute(input_data)
        if call[1]:  # the chosen route's FunctionStep, untraced, without its coroutine
            return await call[0](input_data)
        out = call[0](input_data)
        return (await out) if may_await(out) else out

    execute = run
    """Same as `run` (the Step method)."""

    async def run_with_decision(self, input_data: Any) -> tuple[Any, RouteDecision]:
        """Like `run`, also returning the `RouteDecision` made for this input."""
        frame = current_frame()
        if frame is None:
            return await self._run(input_data, None)
        return await run_in_span(
            frame, "router", self._name, self.node_id, input_data, self._run, _output_of
        )

    async def _run(self, input_data: Any, span: Span | None) -> tuple[Any, RouteDecision]:
        step = await self._decide(input_data, span)
        decision = self.last_decision  # recorded by `_decide` with no await since
        if cancel_requested(current_task()):  # the classifier swallowed a cancellation
            raise asyncio.CancelledError
        return await step.execute(input_data), cast(RouteDecision, decision)

    async def _decide(self, input_data: Any, span: Span | None) -> Step:
        """The step to run for `input_data`; records the decision (`_record`) on the way out.

        With `span` (tracing on) the classifier runs as its step, so it gets a span of its own.
        `run` inlines this for the untraced case: keep the two in step.
        """
        if self._classifier is None:
            for name, step, _, condition, is_async in self._conditions:
                try:
                    if is_async:
                        off_clock_in_race()
                        hit = await condition(input_data)
                    else:
                        hit = condition(input_data)
                        if type(hit) is not bool and may_await(hit):
                            off_clock_in_race()
                            hit = await hit
                except Exception as exc:
                    raise self._condition_error(name, exc) from exc
                if hit:
                    self._record((name, None, False, None, None), span)
                    return step
            return self._no_match(None, "no_condition_matched", None, span)
        classify = self._classify_fn
        try:
            if classify is None or span is not None:
                raw = await self._classifier.execute(input_data)
            elif self._classify_async:
                off_clock_in_race()
                raw = await classify(input_data)
            else:
                raw = classify(input_data)
                if may_await(raw):
                    off_clock_in_race()
                    raw = await raw
        except Exception as exc:
            return self._no_match(None, "classifier_error", exc, span)
        return self._route_for(raw, span)

    def _route_for(self, raw: Any, span: Span | None) -> Step:
        """The step a classifier's output `raw` chooses (the fallback, or `RouterError`, when
        it names no route); records the decision."""
        exact = self._by_name.get(raw) if type(raw) is str else None
        if exact is not None:
            self._record((exact[0], raw, False, None, None), span)
            return exact[1]
        name = route_name_of(raw)
        key = None if name is None else normalize_route_name(name)
        if not key:
            return self._no_match(raw, "empty_output", None, span)
        route = self._by_key.get(key)
        if route is None:
            return self._no_match(raw, "unknown_route", None, span)
        self._record((route.name, raw, False, None, None), span)
        return route.step

    def _condition_error(self, name: str, exc: Exception) -> RouterError:
        return RouterError(
            f"router {self._name!r}: the condition of route {name!r} raised "
            f"{type(exc).__name__}: {exc}"
        )

    def _record(self, fields: _DecisionFields, span: Span | None) -> None:
        """Keep a decision: as a tuple when untraced, else as a `RouteDecision` that is also
        written to the span's attributes."""
        if span is None:
            self._last = fields
            return
        decision = self._last = RouteDecision(*fields)
        span.attributes.update(decision.to_attributes())

    def _no_match(
        self, raw: Any, reason: FallbackReason, cause: Exception | None, span: Span | None
    ) -> Step:
        """The fallback step, or `RouterError` (chained to `cause`) when there is none."""
        error = None if cause is None else f"{type(cause).__name__}: {cause}"
        if self._fallback is not None:
            self._record((None, raw, True, reason, error), span)
            return self._fallback
        self._record((None, raw, False, reason, error), span)
        raise RouterError(self._no_match_message(raw, reason, error)) from cause

    def _no_match_message(self, raw: Any, reason: FallbackReason, error: str | None) -> str:
        names = ", ".join(repr(r.name) for r in self._routes)
        what = {
            "unknown_route": f"the classifier answered {raw!r}, which names no route",
            "empty_output": f"the classifier answered nothing ({raw!r})",
            "classifier_error": f"the classifier raised {error}",
            "no_condition_matched": "no route condition was true",
        }[reason]
        return f"router {self._name!r}: no route matched: {what} (routes: {names}; no fallback)"

    def __repr__(self) -> str:
        return f"Router({self._name!r}, {len(self._routes)} routes)"


def _output_of(result: tuple[Any, RouteDecision]) -> Any:
    return result[0]
