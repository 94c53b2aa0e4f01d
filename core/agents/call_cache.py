"""The call-level model cache: the same agent call, made again, returns its recorded result.

Where it sits: `core.runtime.AgentStep` (so every agent call made through the runtime: agent
steps, and agent classifiers and evaluators, which are agent steps too). It is active only
inside `use_call_cache(cache, trial)` (the evaluator sets it around each example run, with the
trial index of that run) and only while a trace is active (the evaluator always traces).

**The key** (`call_key`) is the sha256 of the canonical JSON of everything that changes the
result of one call:

- the agent's name and the name of the model it runs with now (`agent_model_name`);
- the agent's static configuration (`agent_identity`): system prompts, instructions, model
  settings, output type and its JSON schema;
- the rendered user prompt (the step's input, `AgentStep.build_prompt`);
- the trial index, so trial 1 of an example is never a hit for trial 0 (repeats of a sampled
  model differ; temperature 0 is never assumed), and the occurrence number of an identical
  call within one run (`CallContext.occurrence`: a vote of three calls of the same agent on the
  same question is three calls).

An agent whose result may depend on anything else (dynamic system prompts or instructions,
tools or toolsets, output validators, or an object that only quacks like an agent) has no
identity: its calls are never cached and are counted `uncacheable`. What is read from a
pydantic-ai `Agent` is its configuration as stored on the agent; if an attribute this relies on
is missing (another pydantic-ai version), the agent is uncacheable, never a false hit.

**The value** (`CallRecord`) is the call's output as JSON, the usage it recorded on its span
(per model: requests, input and output tokens) and its model time in ms. A hit records exactly
that usage and model time on the step's span, at once, before anything else, so cost and
latency are identical hit or miss, and a hit inside a cancelled losing branch of a `fastest`
race is charged in full like a started call (`core.runtime.parallel`). If the agent's model
simulates time (`SimulatedClock`: the replay model does), a hit then passes the same model time
on it, so a race is decided exactly as on a miss. Only calls that returned are stored (a call
that raised runs again next time).

Counters (`CallCacheStats`): `hits` (calls answered from the cache: model calls saved),
`misses` (keyable calls made to the model: new model calls; stored only if they returned, so
the cancelled loser of a `fastest` race is a miss every time), `uncacheable` (calls made that
could not be keyed).
"""

from __future__ import annotations

import hashlib
import json
import threading
from collections.abc import Callable, Mapping
from contextvars import ContextVar, Token
from dataclasses import dataclass
from functools import lru_cache
from typing import Any, Protocol, TypeGuard, runtime_checkable

from pydantic import BaseModel, TypeAdapter
from pydantic_ai import Agent

from core.agents.usage import agent_model_name

__all__ = [
    "CallCache",
    "CallCacheStats",
    "CallContext",
    "CallRecord",
    "InMemoryCallCache",
    "QuotingModel",
    "SimulatedClock",
    "active_call_cache",
    "agent_identity",
    "call_key",
    "decode_output",
    "enter_fastest_race",
    "mark_unrepeatable",
    "off_clock_in_race",
    "in_fastest_race",
    "is_quoting_model",
    "is_simulated_clock",
    "encode_output",
    "use_call_cache",
]


@dataclass(frozen=True, slots=True)
class CallRecord:
    """What one agent call produced and recorded.

    Attributes:
        output_json: the call's output as JSON text (`encode_output`).
        usage: `(model_name, requests, input_tokens, output_tokens)` per model, as recorded on
            the call's span.
        model_latency_ms: the model time the call recorded, ms (None: it recorded none).
    """

    output_json: str
    usage: tuple[tuple[str, int, int, int], ...]
    model_latency_ms: float | None

    def to_json(self) -> str:
        """The record as JSON text (keys `output`, `usage`, `model_latency_ms`)."""
        return json.dumps(
            {
                "output": self.output_json,
                "usage": [list(u) for u in self.usage],
                "model_latency_ms": self.model_latency_ms,
            },
            separators=(",", ":"),
        )

    @classmethod
    def from_json(cls, text: str) -> CallRecord:
        """The record `to_json` wrote.

        Raises:
            ValueError: `text` is not such a record (names what is wrong).
        """
        try:
            data = json.loads(text)
            usage = tuple((str(m), int(r), int(i), int(o)) for m, r, i, o in data["usage"])
            latency = data["model_latency_ms"]
            return cls(str(data["output"]), usage, None if latency is None else float(latency))
        except (ValueError, KeyError, TypeError) as exc:
            raise ValueError(f"not a call record ({type(exc).__name__}: {exc})") from exc


@dataclass(frozen=True, slots=True)
class CallCacheStats:
    """Counters of one call cache since it was made (or `reset_stats`).

    Attributes:
        hits: calls answered from the cache (model calls saved).
        misses: keyable calls made to the model (new model calls; stored if they returned).
        uncacheable: calls made to the model that could not be keyed.
    """

    hits: int = 0
    misses: int = 0
    uncacheable: int = 0

    @property
    def calls(self) -> int:
        """Every agent call seen: hits + misses + uncacheable."""
        return self.hits + self.misses + self.uncacheable

    @property
    def new_model_calls(self) -> int:
        """Calls that reached the model: misses + uncacheable."""
        return self.misses + self.uncacheable

    @property
    def hit_rate(self) -> float:
        """hits / calls, 0.0 when there were none."""
        return self.hits / self.calls if self.calls else 0.0

    def summary_line(self) -> str:
        """`call cache: N hits of M calls (x%), K new model calls` (the run summary's line)."""
        return (
            f"call cache: {self.hits} hits of {self.calls} calls ({100 * self.hit_rate:.1f}%), "
            f"{self.new_model_calls} new model calls"
        )


class CallCache(Protocol):
    """Where recorded agent calls are kept, keyed by `call_key` (a hex digest).

    Contract: `get` returns the stored record or None (never raises for a missing key);
    `put` stores a record (replacing any earlier one); `count(...)` adds to the counters that
    `stats()` returns; `flush()` makes what was put durable (a no-op for memory). Called from
    the event loop's tasks; the in-memory implementation is also safe across threads.
    """

    def get(self, key: str) -> CallRecord | None: ...

    def put(self, key: str, record: CallRecord) -> None: ...

    def count(self, *, hits: int = 0, misses: int = 0, uncacheable: int = 0) -> None: ...

    def stats(self) -> CallCacheStats: ...

    def flush(self) -> None: ...


class InMemoryCallCache:
    """A dict-backed `CallCache`; lives as long as the process (or is prefilled by a subclass).

    Args:
        records: entries to start with (key -> record).
    """

    def __init__(self, records: Mapping[str, CallRecord] | None = None) -> None:
        self._data: dict[str, CallRecord] = dict(records or {})
        self._lock = threading.Lock()
        self._hits = self._misses = self._uncacheable = 0

    def get(self, key: str) -> CallRecord | None:
        return self._data.get(key)

    def put(self, key: str, record: CallRecord) -> None:
        with self._lock:
            self._data[key] = record

    def count(self, *, hits: int = 0, misses: int = 0, uncacheable: int = 0) -> None:
        with self._lock:
            self._hits += hits
            self._misses += misses
            self._uncacheable += uncacheable

    def stats(self) -> CallCacheStats:
        with self._lock:
            return CallCacheStats(self._hits, self._misses, self._uncacheable)

    def reset_stats(self) -> None:
        """Set every counter back to 0 (the stored records stay)."""
        with self._lock:
            self._hits = self._misses = self._uncacheable = 0

    def flush(self) -> None:
        """Nothing to do in memory."""

    def records(self) -> list[tuple[str, CallRecord]]:
        """A snapshot of every stored (key, record) (a distributed executor seeds its shared
        cache with it)."""
        with self._lock:
            return list(self._data.items())

    def __len__(self) -> int:
        return len(self._data)


@runtime_checkable
class SimulatedClock(Protocol):
    """A model that simulates its own time (the replay model): a call-cache hit awaits
    `pass_model_time(ms)` with the recorded model time, so concurrent calls finish in the same
    order as on a miss. Models without it (hosted models) answer a hit at once."""

    async def pass_model_time(self, ms: float, /) -> None: ...


class CallContext:
    """The call cache of one example run: the cache, the trial, and how many calls with each
    key were made so far in this run (`occurrence`)."""

    __slots__ = (
        "_seen",
        "answered",
        "answered_requests",
        "cache",
        "raced",
        "raced_requests",
        "trial",
        "unanswered",
        "unrepeatable",
    )

    def __init__(self, cache: CallCache, trial: int) -> None:
        self.cache = cache
        self.trial = trial
        self._seen: dict[str, int] = {}
        self.answered = 0
        """Calls of this run that the cache holds now (hits, and misses stored after they
        returned): the calls a rerun answers from the cache."""
        self.answered_requests = 0
        """The model requests those calls recorded (their records' usage)."""
        self.unanswered = 0
        """Calls a rerun would make to a model again: uncacheable ones, and misses not stored
        (still running, raised, or an output that is not JSON)."""
        self.raced = 0
        """Calls on a `SimulatedClock` model made inside a `fastest` race (never answered from
        the cache, see `in_fastest_race`): a rerun replays them again, on the same simulated
        clock, so they give it the same outcome when `unrepeatable` stays False."""
        self.raced_requests = 0
        """The model requests those calls were charged at their start (their quotes)."""
        self.unrepeatable = False
        """Set when this run's result may differ run again, because the wall clock had a say
        (`mark_unrepeatable`): a deadline fired; or,
        inside a race, a raced call whose model sleeps real time (`time_scale` > 0) or quotes
        no charge at its start or waited for a provider's lease, a model that is not replayed,
        an awaited async callable (`off_clock_in_race`), or a race inside a race's branch (how
        many turns the inner race takes includes its losers' unwinding, which `Parallel` waits
        for in real time, `core.runtime._tasks.CANCEL_GRACE_S`)."""

    def answer(self, record: CallRecord) -> None:
        """Count a call the cache answered or has just stored (`answered`)."""
        self.answered += 1
        self.answered_requests += sum(u[1] for u in record.usage)

    def occurrence(self, agent: Any, prompt: Any, name: str) -> str | None:
        """The key of this call (`call_key` with its occurrence number in this run), or None
        when it cannot be keyed. The n-th identical call of a run (e.g. three votes of the same
        agent on the same question) gets occurrence n, so repeats within a run are distinct
        calls, as repeats across trials are."""
        base = call_key(agent, prompt, self.trial, name=name)
        if base is None:
            return None
        n = self._seen.get(base, 0)
        self._seen[base] = n + 1
        return base if n == 0 else hashlib.sha256(f"{base}#{n}".encode()).hexdigest()


@runtime_checkable
class QuotingModel(Protocol):
    """A simulated model that knows a request's full charge before making it (the replay
    model): `quote_request(prompt)` gives `(model_name, requests, input_tokens, output_tokens,
    model_latency_ms)` or None. `AgentStep` charges the quote the moment the step starts, so a
    branch that started is charged in full even if it is cancelled before its agent reaches the
    model (pydantic-ai's preamble takes a varying number of event-loop turns)."""

    def quote_request(self, prompt: Any, /) -> tuple[str, int, int, int, float] | None: ...


_KINDS: dict[tuple[type, type], bool] = {}


def _has_kind(model: object, protocol: type) -> bool:
    tp: type = type(model)
    known = _KINDS.get((tp, protocol))
    if known is None:
        known = _KINDS[(tp, protocol)] = isinstance(model, protocol)
    return known


def is_simulated_clock(model: Any) -> TypeGuard[SimulatedClock]:
    """`isinstance(model, SimulatedClock)`, decided once per model class (a runtime-checkable
    Protocol check costs ~6 us on Python 3.11; it ran on every call-cache hit, 5% of a warm
    search). A model class either defines the protocol's methods or it does not."""
    return _has_kind(model, SimulatedClock)


def is_quoting_model(model: Any) -> TypeGuard[QuotingModel]:
    """`isinstance(model, QuotingModel)`, decided once per model class (see
    `is_simulated_clock`)."""
    return _has_kind(model, QuotingModel)


_ACTIVE: ContextVar[CallContext | None] = ContextVar("call_cache", default=None)

_RACING: ContextVar[bool] = ContextVar("in_fastest_race", default=False)


def enter_fastest_race() -> None:
    """Mark the current task as a branch of a `Parallel` with merge `fastest` (its own context:
    `Parallel` calls it at the start of each branch task; nested steps inherit it). A race
    entered inside a race's branch marks the active example run `unrepeatable` (`CallContext`).
    """
    if _RACING.get():
        active = _ACTIVE.get()
        if active is not None:
            active.unrepeatable = True
    _RACING.set(True)


def mark_unrepeatable(context: CallContext | None = None) -> None:
    """Mark an example run (`context`, default the active one) `unrepeatable`: something in it
    depended on the wall clock, so the example memo does not keep its result. The runtime calls
    it when a deadline fires (`Parallel` and `RefinementLoop` timeouts) and inside a `fastest`
    race when anything but a replayed model call waits (`off_clock_in_race`). (A race's losers
    outliving their cancellation grace do not count: the winner is decided by then; only a race
    in a race's branch depends on it, and that run is marked anyway.)"""
    active = context if context is not None else _ACTIVE.get()
    if active is not None:
        active.unrepeatable = True


def off_clock_in_race() -> None:
    """Inside a `fastest` race, a wait that is not on the replayed models' simulated clock
    (an async function, condition, classifier, evaluator or state updater; a model that is not
    replayed) decides who wins by real time: the run is marked `unrepeatable`. Outside a race
    it does nothing (no result there depends on which step finishes first)."""
    if _RACING.get():
        mark_unrepeatable()


def in_fastest_race() -> bool:
    """Whether the current task runs inside a branch of a `fastest` race.

    There, a call on a `SimulatedClock` model is never answered from the cache: a hit skips
    pydantic-ai's own event-loop turns before and after the request, so it would finish earlier
    than the same call made afresh and could change which branch wins. Such a call runs (and
    is stored) as a miss; its cost is the same either way (charged at its start). It counts as
    `CallContext.raced`, so the whole example run may still be kept by the example memo
    (`core.evaluation.example_memo`): at time scale 0 a race between replayed calls ends the
    same way in every run, so the run's result is a function of its spec, example and
    recordings.
    """
    return _RACING.get()


class use_call_cache:  # noqa: N801 (a context manager used like a function)
    """Make `cache` the call cache of agent calls in this context: one example run of trial
    `trial` (0-based). `cache=None` switches caching off inside the block. Tasks created inside
    inherit it. (A class, not a `@contextmanager` generator: it is entered once per example
    run, and the generator's frame cost more than the rest of it.)

    Use: `with use_call_cache(cache, trial): ...`.
    """

    __slots__ = ("_context", "_token")

    def __init__(self, cache: CallCache | None, trial: int) -> None:
        self._context = None if cache is None else CallContext(cache, trial)
        self._token: Token[CallContext | None] | None = None

    def __enter__(self) -> None:
        self._token = _ACTIVE.set(self._context)

    def __exit__(self, *exc: object) -> None:
        if self._token is not None:
            _ACTIVE.reset(self._token)
            self._token = None

    @property
    def context(self) -> CallContext | None:
        """The block's `CallContext` (None when caching is off): its counts of the run's calls."""
        return self._context


def active_call_cache() -> CallContext | None:
    """The active `CallContext`, or None outside `use_call_cache`."""
    return _ACTIVE.get()


def _type_name(tp: Any) -> str:
    if isinstance(tp, type):
        return tp.__qualname__  # (a problem module's name is per-process; the schema is keyed)
    return repr(tp)


@lru_cache(maxsize=256)
def _adapter(tp: Any) -> TypeAdapter[Any]:
    return TypeAdapter(tp)


def _schema(tp: Any) -> Any:
    text = _schema_text(tp)
    return None if text is None else json.loads(text)


@lru_cache(maxsize=256)
def _schema_text(tp: Any) -> str | None:
    """The JSON schema of `tp` as canonical text, computed once per type (generating it took
    1.4 of 2.4 s of a warm 300-example evaluation: it ran for every call)."""
    try:
        return json.dumps(_adapter(tp).json_schema(), sort_keys=True)
    except Exception:
        return None


_NO_DYNAMIC = (
    "_system_prompt_functions",
    "_system_prompt_dynamic_functions",
    "_output_validators",
    "_dynamic_toolsets",
    "_user_toolsets",
)


def _tool_count(agent: Any) -> int | None:
    toolset = getattr(agent, "_function_toolset", None)
    tools = getattr(toolset, "tools", None)
    if tools is None:
        return None
    return len(tools)


def _identity_parts(
    agent: Any,
) -> tuple[tuple[str, ...], tuple[str, ...], str, Any] | None:
    """The static configuration of `agent` as hashable parts `(system_prompts, instructions,
    model_settings as canonical JSON text, output_type)`, or None when it cannot be keyed."""
    if type(agent) is not Agent:
        return None  # a wrapper agent or an agent-like: its behaviour is not ours to key
    for attr in _NO_DYNAMIC:
        value = getattr(agent, attr, None)
        if value is None or len(value):
            return None
    if _tool_count(agent) != 0:
        return None
    prompts = getattr(agent, "_system_prompts", None)
    raw_instructions = getattr(agent, "_instructions", None)
    if not isinstance(prompts, tuple | list) or not isinstance(raw_instructions, list | tuple):
        return None
    instructions: list[str] = []
    for item in raw_instructions:  # pyright: ignore[reportUnknownVariableType]
        text = item if isinstance(item, str) else getattr(item, "instruction", None)  # pyright: ignore[reportUnknownArgumentType]
        if not isinstance(text, str):
            return None  # an instruction function: dynamic
        instructions.append(text)
    settings = getattr(agent, "model_settings", None)
    settings_text = json.dumps(settings, sort_keys=True, default=repr)
    return (
        tuple(str(p) for p in prompts),  # pyright: ignore[reportUnknownVariableType, reportUnknownArgumentType]
        tuple(instructions),
        settings_text,
        getattr(agent, "output_type", None),
    )


def _identity_of(parts: tuple[tuple[str, ...], tuple[str, ...], str, Any]) -> dict[str, Any]:
    prompts, instructions, settings_text, output_type = parts
    return {
        "system_prompts": list(prompts),
        "instructions": list(instructions),
        "model_settings": json.loads(settings_text),
        "output_type": _type_name(output_type),
        "output_schema": _schema(output_type),
    }


@lru_cache(maxsize=1024)
def _identity_text(parts: tuple[tuple[str, ...], tuple[str, ...], str, Any]) -> str:
    """`_identity_of(parts)` as the canonical text `call_key` embeds, once per distinct
    configuration (dumping the output schema on every call was a fifth of a warm search)."""
    return json.dumps(
        _identity_of(parts), sort_keys=True, separators=(",", ":"), ensure_ascii=False
    )


def agent_identity(agent: Any) -> dict[str, Any] | None:
    """The static configuration of `agent` that changes a call's result, as JSON-able data, or
    None when the agent cannot be keyed (see the module docstring for the rule).

    Keys: `system_prompts` (list of str), `instructions` (list of str), `model_settings`,
    `output_type` (qualified name) and `output_schema` (its JSON schema, or None).
    """
    parts = _identity_parts(agent)
    return None if parts is None else _identity_of(parts)


def _dump(value: Any) -> str:
    """Canonical JSON text of `value`: byte for byte `json.dumps(value, sort_keys=True,
    separators=(",", ":"), ensure_ascii=False)`, with the two commonest cases (a str, an int
    that is not a bool) written directly by the same encoder functions `json` uses; four
    of these per model call were 4% of a warm search."""
    kind: type = type(value)  # pyright: ignore[reportUnknownVariableType]
    if kind is str:
        return _encode_str(value)
    if kind is int:
        return int.__repr__(value)
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


_encode_str: Callable[[str], str] = json.encoder.encode_basestring  # pyright: ignore[reportAttributeAccessIssue]
"""`json`'s own string encoder for `ensure_ascii=False` (the C one when available)."""


def call_key(agent: Any, prompt: Any, trial: int, *, name: str) -> str | None:
    """The cache key of one call of `agent` on `prompt` in trial `trial` (sha256 hex), or None
    when the agent cannot be keyed (`agent_identity`) or the prompt is not text or JSON data.

    The key is the sha256 of the canonical JSON (sorted keys, no spaces, UTF-8) of
    `{"agent": name, "identity": agent_identity(agent), "model": <model name>, "prompt":
    prompt, "trial": trial}`. The text is assembled from its parts, the identity's text cached
    per configuration, so it equals `json.dumps` of that object byte for byte (a test pins it).

    Args:
        agent: the agent.
        prompt: the user prompt as sent.
        trial: the evaluator's 0-based trial index of the example being run.
        name: the agent step's name (the registered agent name).
    """
    parts = _identity_parts(agent)
    if parts is None:
        return None
    try:
        identity = _identity_text(parts)
    except TypeError:  # an unhashable part (e.g. an output type that is not hashable)
        identity = _dump(_identity_of(parts))
    try:
        text = (
            f'{{"agent":{_dump(name)},"identity":{identity},'
            f'"model":{_dump(agent_model_name(agent))},"prompt":{_dump(prompt)},'
            f'"trial":{_dump(trial)}}}'
        )
    except (TypeError, ValueError):
        return None
    return hashlib.sha256(text.encode()).hexdigest()


def encode_output(output: Any) -> str | None:
    """`output` as JSON text, or None when it cannot be written as JSON."""
    try:
        if isinstance(output, BaseModel):
            return output.model_dump_json()
        return json.dumps(output, separators=(",", ":"), ensure_ascii=False)
    except (TypeError, ValueError):
        return None


def decode_output(agent: Any, text: str) -> Any:
    """The output `encode_output` wrote, validated as `agent`'s `output_type` (a fresh object
    per hit, so a caller that mutates it never changes the cache)."""
    return _adapter(getattr(agent, "output_type", Any)).validate_json(text)
