"""Steps: the unit every runtime primitive composes (semantics section 1).

A `Step` is anything with a read-only `step_name` and `async execute(input_data)`. Primitives
take *step-likes* and turn them into steps once, at construction, with `coerce_step`:

- a `Step` is used as-is (the same object); a class is never a Step (its `step_name` is a
  property object, not a str), so a Step class is a callable like any other;
- an agent (`core.agents.is_agent`: a pydantic-ai agent, or an object with a `model` attribute
  and an async `run`) is wrapped in `AgentStep`;
- any other callable is wrapped in `FunctionStep`;
- anything else is a `TypeError` naming the type.
"""

from __future__ import annotations

import asyncio
import weakref
from collections.abc import Callable
from typing import Any, Protocol, cast, runtime_checkable

from core.agents import is_agent, render_prompt, run_agent
from core.agents.call_cache import (
    CallContext,
    CallRecord,
    active_call_cache,
    decode_output,
    encode_output,
    in_fastest_race,
    is_quoting_model,
    is_simulated_clock,
    off_clock_in_race,
)
from core.agents.providers import call_with_retries
from core.agents.rate_budget import active_rate_budget, provider_of
from core.agents.usage import UsageRecorder, agent_model_name
from core.runtime._tasks import is_async_callable, may_await
from core.runtime._trace import run_in_span
from core.runtime.tracing import (
    MODEL_LATENCY_KEY,
    PLAIN_TYPES,
    Span,
    current_frame,
    record_model_latency,
    record_usage,
    summarize,
)
from core.runtime.tracing import now_ns as _now

__all__ = ["AgentStep", "FunctionStep", "Step", "coerce_step", "is_step"]


@runtime_checkable
class Step(Protocol):
    """Anything the runtime can run: a read-only name and one async method.

    `execute(input_data)` returns the step's output; an exception means the step failed. Every
    runtime primitive (`Pipeline`, `Parallel`, `Router`, `RefinementLoop`) is itself a Step, so
    they nest.
    """

    @property
    def step_name(self) -> str:
        """The step's name, used in events, errors and trace spans."""
        ...

    async def execute(self, input_data: Any) -> Any:
        """Run the step on `input_data` and return its output."""
        ...


class FunctionStep:
    """A step around a plain or async callable `fn(input_data) -> output`.

    Async callables (coroutine functions, or objects whose `__call__` is one) are awaited.
    Plain functions are called directly on the event loop: they must not block (no network,
    no sleeping, no heavy CPU); wrap blocking work with `asyncio.to_thread` in an async
    function instead. A plain function that returns an awaitable has it awaited too.

    Args:
        fn: the callable.
        name: the step name; default `fn.__name__` (or the type's name for callable objects).
        node_id: the spec node id, for traces.

    Raises:
        TypeError: `fn` is not callable.
    """

    __slots__ = ("_fn", "_is_async", "_name", "node_id")

    def __init__(
        self, fn: Callable[[Any], Any], name: str | None = None, *, node_id: str | None = None
    ) -> None:
        if not callable(fn):
            raise TypeError(f"FunctionStep needs a callable, got {type(fn).__name__}")
        self._fn = fn
        self._name: str = name or getattr(fn, "__name__", None) or type(fn).__name__
        self._is_async = is_async_callable(fn)
        self.node_id = node_id

    @property
    def step_name(self) -> str:
        return self._name

    @property
    def fn(self) -> Callable[[Any], Any]:
        """The wrapped callable."""
        return self._fn

    @property
    def direct_call(self) -> DirectCall:
        """`(fn, is_async)`: what `execute` does when tracing is off, for composites that call
        a function step without its coroutine (see `direct_call`)."""
        return (self._fn, self._is_async)

    async def execute(self, input_data: Any) -> Any:
        frame = current_frame()
        if frame is None:
            if self._is_async:
                off_clock_in_race()
                return await self._fn(input_data)
            out = self._fn(input_data)
            if may_await(out):
                off_clock_in_race()
                return await out
            return out
        # traced: the span is a leaf record written inline (fields: tracing.LEAF_RECORD_FIELDS),
        # the cheapest way to record it; immutable values are summarised when read
        parent = frame.current
        items = frame.items
        record: list[Any] = [
            self,
            parent,
            input_data
            if type(input_data) in PLAIN_TYPES
            else summarize(input_data)
            if frame.trace.summaries
            else "",
            _now(),
            None,
            None,
            None,
            None,
            None,
        ]
        frame.current = len(items)
        items.append(record)
        try:
            if self._is_async:
                off_clock_in_race()
                out = await self._fn(input_data)
            else:
                out = self._fn(input_data)
                if may_await(out):
                    off_clock_in_race()
                    out = await out
        except BaseException as exc:
            record[4] = _now()
            record[6] = f"{type(exc).__name__}: {exc}"
            frame.current = parent
            raise
        record[4] = _now()
        record[5] = (
            out if type(out) in PLAIN_TYPES else summarize(out) if frame.trace.summaries else ""
        )
        frame.current = parent
        return out

    def __repr__(self) -> str:
        return f"FunctionStep({self._name!r})"


class AgentStep:
    """A step that runs a pydantic-ai agent statelessly on its input.

    Every call is a fresh run (no message history, nothing kept between calls). The prompt is
    `prompt_builder(input_data)` if given, else `core.agents.render_prompt(input_data)`
    (Pydantic models as JSON, others with `str`). The step returns the run's `output` (typed by
    the agent's `output_type`). Model usage of every call, including failed runs and
    structured-output retries, is recorded on this step's span when tracing (see
    `core.agents.run_agent`; the model is named by `core.agents.agent_model_name`).

    Inside `core.agents.use_call_cache` (the evaluator sets it per example run) and while
    tracing, a call is first looked up in the call cache (`core.agents.call_cache`: the key is
    the agent, its model, its static configuration, the prompt and the trial): a hit records the
    stored usage and model time on this step's span at once, passes the model time on a
    `SimulatedClock` model, and returns the stored output without calling the agent; a miss
    calls it and stores what the call returned and recorded on the span. Inside a `fastest`
    race a call on a `SimulatedClock` model always runs (`core.agents.in_fastest_race`) and is
    counted in the run's `CallContext.raced`, with the requests of its quote.

    Args:
        agent: a pydantic-ai agent, or an object that quacks like one (`core.agents.AgentLike`).
        prompt_builder: optional `input -> prompt` function (sync).
        name: the step name; default the agent's `name`, else `"agent"`.
        node_id: the spec node id, for traces.

    Raises:
        TypeError: `agent` is not an agent.
    """

    __slots__ = ("_agent", "_name", "_prompt_builder", "node_id")

    def __init__(
        self,
        agent: Any,
        prompt_builder: Callable[[Any], Any] | None = None,
        *,
        name: str | None = None,
        node_id: str | None = None,
    ) -> None:
        if not is_agent(agent):
            raise TypeError(f"AgentStep needs a pydantic-ai agent, got {type(agent).__name__}")
        self._agent = agent
        self._prompt_builder = prompt_builder
        agent_name = getattr(agent, "name", None)
        self._name: str = name or (agent_name if isinstance(agent_name, str) else "") or "agent"
        self.node_id = node_id

    @property
    def step_name(self) -> str:
        return self._name

    @property
    def agent(self) -> Any:
        """The wrapped agent."""
        return self._agent

    def build_prompt(self, input_data: Any) -> Any:
        """The prompt this step sends for `input_data`."""
        if self._prompt_builder is not None:
            return self._prompt_builder(input_data)
        return render_prompt(input_data)

    async def execute(self, input_data: Any) -> Any:
        frame = current_frame()
        if frame is not None:
            return await run_in_span(
                frame, "agent_step", self._name, self.node_id, input_data, self._traced
            )
        return await run_agent(self._agent, self.build_prompt(input_data))

    async def _traced(self, input_data: Any, span: Span, /) -> Any:
        prompt = self.build_prompt(input_data)
        active = active_call_cache()
        if active is None:
            return await self._run(prompt)
        cache = active.cache
        key = active.occurrence(self._agent, prompt, self._name)
        if key is None:
            cache.count(uncacheable=1)
            active.unanswered += 1
            return await self._run(prompt)
        model = getattr(self._agent, "model", None)
        in_race = in_fastest_race()
        racing = in_race and is_simulated_clock(model)
        if racing:  # (never answered from the cache: `in_fastest_race`)
            cache.count(misses=1)
            active.raced += 1
            if (
                getattr(model, "time_scale", 0)
                or not is_quoting_model(model)
                or active_rate_budget() is not None  # (a lease's wait decides the race)
            ):
                active.unrepeatable = True
            output = await self._run(prompt, active)
        else:
            if in_race:  # a model off the simulated clock: a cache hit would skip its turns
                active.unrepeatable = True
            hit = cache.get(key)
            if hit is not None:
                cache.count(hits=1)
                active.answer(hit)
                return await self._replay(hit, span)
            cache.count(misses=1)  # a new model call, stored below only if it returns
            active.unanswered += 1  # (until it is stored)
            output = await self._run(prompt)
        text = encode_output(output)
        if text is None:
            return output
        latency = span.attributes.get(MODEL_LATENCY_KEY)
        usage = tuple(
            (u.model_name, u.requests, u.input_tokens, u.output_tokens) for u in span.usage
        )
        record = CallRecord(text, usage, None if latency is None else float(latency))
        cache.put(key, record)
        if not racing:  # (a race's call is counted in `raced`, at its start)
            active.unanswered -= 1
            active.answer(record)
        return output

    async def _run(self, prompt: Any, race: CallContext | None = None) -> Any:
        """Call the agent; a `QuotingModel`'s quote is charged first, at once (see its doc).

        With a rate budget active (`core.agents.rate_budget`), the call takes its provider's
        lease first and returns it after, charging the tokens it recorded: the budget is drawn
        here, at the model call only, never while a parent step waits (no hold-and-wait)."""
        budget = active_rate_budget()
        if budget is None:
            return await self._call(prompt, race=race)
        provider = provider_of(self._agent)
        await budget.acquire(provider)
        tokens = [0]

        def record(name: str, /, *, requests: int, input_tokens: int, output_tokens: int) -> None:
            tokens[0] += input_tokens + output_tokens
            record_usage(
                name, requests=requests, input_tokens=input_tokens, output_tokens=output_tokens
            )

        try:
            return await self._call(prompt, record, race=race)
        finally:
            await asyncio.shield(budget.release(provider, tokens[0]))

    async def _call(
        self, prompt: Any, record: UsageRecorder = record_usage, *, race: CallContext | None = None
    ) -> Any:
        """The model call itself (see `_run`); `record` receives its usage, and `race` (a raced
        call's example run) the requests of its quote (`CallContext.raced_requests`)."""
        model = getattr(self._agent, "model", None)
        quote = model.quote_request(prompt) if is_quoting_model(model) else None
        if quote is None:  # a real model: transient faults waited out (core.agents.providers)
            return await call_with_retries(
                lambda: run_agent(self._agent, prompt, record=record, remote=True),
                model=agent_model_name(self._agent),
            )
        name, requests, input_tokens, output_tokens, latency_ms = quote
        record(name, requests=requests, input_tokens=input_tokens, output_tokens=output_tokens)
        record_model_latency(latency_ms)
        if race is not None:
            race.raced_requests += requests
        return await run_agent(
            self._agent,
            prompt,
            record=record,
            quoted=(name, requests, input_tokens, output_tokens),
        )

    async def _replay(self, hit: CallRecord, span: Span) -> Any:
        """A call-cache hit: charge the recorded call in full first (so a cancelled hit is
        charged like a started call), then pass its model time, then return its output."""
        for model, requests, input_tokens, output_tokens in hit.usage:
            record_usage(
                model, requests=requests, input_tokens=input_tokens, output_tokens=output_tokens
            )
        if hit.model_latency_ms is not None:
            record_model_latency(hit.model_latency_ms)
            model = getattr(self._agent, "model", None)
            if is_simulated_clock(model):
                await model.pass_model_time(hit.model_latency_ms)
        return decode_output(self._agent, hit.output_json)

    def __repr__(self) -> str:
        return f"AgentStep({self._name!r})"


DirectCall = tuple[Callable[[Any], Any], bool]
"""A function step's function and whether it is async (then its result is awaited; a sync
one's result is awaited too if it is awaitable, see `may_await`)."""


def direct_call(step: Step) -> DirectCall | None:
    """How a composite may run `step` untraced without its `execute` coroutine (one coroutine
    less per call): for a `FunctionStep` of exactly that class (whose untraced
    `execute` is only the call), its `direct_call`; for any other step, None (use `execute`).
    """
    if type(step) is FunctionStep:
        return step.direct_call
    return None


_NOT_BY_ATTRIBUTES: weakref.WeakKeyDictionary[type, bool] = weakref.WeakKeyDictionary()
"""Per class: whether `isinstance(x, Step)` holds for its instances that lack the attributes
(only a nominal or registered subclass of `Step`); see `is_step`."""


def is_step(obj: object) -> bool:
    """`isinstance(obj, Step)`, without the `runtime_checkable` machinery on the hot path.

    `isinstance` against a runtime-checkable Protocol costs about 7 us on Python 3.11 (it
    recomputes the protocol's attributes on every call); hydration made 34 such checks for a
    31-node spec, half its time. The same rule, duck-typed: on 3.11 an object is an
    instance of `Step` when it has a `step_name` attribute (any value: the protocol's member is
    a property, so only its presence counts) and an `execute` attribute that is not None (the
    protocol's member is a method, and a method set to None opts out), in that order, each read
    with `hasattr`/`getattr` as `typing` does; otherwise when its class subclasses `Step`
    nominally or is registered with `Step.register` (the ABC part, which depends on the class
    only and is asked once per class). The contract test in `tests/runtime` compares the two on
    a table of cases.
    """
    if hasattr(obj, "step_name") and getattr(obj, "execute", None) is not None:
        return True
    cls = type(obj)
    if obj.__class__ is not cls:  # a proxy: let `isinstance` decide, as it would
        return isinstance(obj, Step)
    known = _NOT_BY_ATTRIBUTES.get(cls)
    if known is None:
        known = _NOT_BY_ATTRIBUTES[cls] = isinstance(obj, Step)
    return known


def coerce_step(step_like: Any, *, name: str | None = None) -> Step:
    """Turn a step-like into a `Step` (the rule is in this module's docstring).

    Args:
        step_like: a `Step`, an agent, or a callable `input -> output` (sync or async).
        name: the name to give a wrapper (`AgentStep` / `FunctionStep`); ignored for a Step.

    Returns:
        The same object if it is a Step, else an `AgentStep` or `FunctionStep` around it.

    Raises:
        TypeError: `step_like` is none of these; the message names its type.
    """
    if is_step(step_like) and not isinstance(step_like, type):
        return cast(Step, step_like)  # (a Step class has the attributes too, but is not a step)
    if is_agent(step_like):
        return AgentStep(step_like, name=name)
    if callable(step_like):
        return FunctionStep(step_like, name)
    raise TypeError(
        f"cannot use a {type(step_like).__name__} as a step: expected a Step, "
        "a pydantic-ai agent or a callable"
    )
