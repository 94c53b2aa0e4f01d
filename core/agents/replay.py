"""Replayed models: a pydantic-ai `FunctionModel` that answers with recorded outputs, charges
their recorded usage and passes their modelled latency on a simulated clock.

A replay problem (`data/problems/gsm8k_replay`, or any problem made from a recorded-outputs file,
`core.problems.replay_file`) runs real pydantic-ai `Agent`s whose model is a `ReplayModel`, so
the same code path as a hosted model runs (structured output, usage accounting). A subclass says
what one request on a prompt replays (`ReplayModel.replayed_call`: the usage, the model time and
the response text); this module does the rest, the same way for every replay problem:

- **usage** is reported under the model name `"replay:<name>"` (`system` is `"replay"`), so a
  problem prices it with `[models.prices."replay:<name>"]`;
- **latency** is reported in model time with `core.runtime.tracing.record_model_latency`
  (inside the agent step's span, so reported latency is deterministic) and slept for real
  (`asyncio.sleep`) multiplied by `[models] time_scale` (0 sleeps nothing);
- **who finishes first**: inside a `fastest` race a request passes its model time as turns of
  the event loop, one per `MODEL_TICK_MS` of it (rounded up), before any real sleep (`ticks *
  MODEL_TICK_MS * time_scale`); outside a race nothing depends on the order, and no turn is
  passed. Time in a race is counted in turns, and everything a branch does takes turns, not
  only its requests: pydantic-ai's own work around each request (with pydantic-ai 2.68, 28
  turns before it reaches the model and 9 after it, so about 1.85 s of model time a call), the
  runtime's hand-offs between tasks. The rule: a branch finishes in the turn in which its last
  step returns; branches that finish in the same turn finish in the order in which the event
  loop runs them that turn, which for branches of the same shape is the order they are listed
  in. So at time scale 0 the same topology gives the same answer in every run, whatever the
  machine's load (but for a race inside a race's branch: how many turns a race takes to end
  includes its losers unwinding their cancellation, which `Parallel` waits for at most
  `core.runtime._tasks.CANCEL_GRACE_S` of real time). The rule dates from commit 580b510 (a
  plain `asyncio.sleep(latency * time_scale)` had let wall-clock jitter, or with time scale 0
  the branch order, decide the race: one candidate scored 0.2200, then 0.2233), which passed
  each turn with an `asyncio.sleep(0)`, resuming the request's whole coroutine stack (the
  model, pydantic-ai's graph, `AgentStep`, the pipeline and the branch above it) once a turn.
  The request now waits on a future instead, and a plain callback stands in its place in the
  loop's queue once a turn, so it resumes in the same turn at the same place (`pass_turns`;
  `race_clock = "ticks"` keeps the old way, which `tests/gsm8k/test_gsm8k_race_clock.py`
  checks both against, on races recorded with it). Not a clock that jumps to the next finish
  time: it cannot keep the rule, which counts pydantic-ai's turns (e.g. on gsm8k_replay,
  `175b_verification` against `6b_finetuning` then `175b_finetuning`, on the problem "James
  decides to run 3 sprints": 2,300 ms of model time against 560 + 1,200 ms; the turns are 46 +
  37 against 12 + 24 + 2 x 37, so the single call wins, where a jump to the smaller model time
  would crown the pipeline: so would 13 of the 30 recorded races of that shape, none of those
  between single calls), nor the place in the turn that decides a tie. With time scale above 0,
  a branch that makes more than one call interleaves its real sleeps with other branches'
  turns, so its race is decided partly by the wall clock, with either way of passing turns.
- **who is charged**: every branch that started is charged in full for every model call it made
  or had started, replayed or answered from the call cache, finished or cancelled. A replayed
  request charges its whole usage and model time the moment it starts
  (`core.agents.usage.charge_started_request`, `record_model_latency`; or `AgentStep` charges
  the model's `quote_request` at the step's start, `QuotingModel`), before it passes any model
  time, so the loser of a `fastest` race costs the same whether its cancellation lands during
  its model time, after it returned, or after the evaluator has read the trace. (Charging on
  cancellation instead left a gap: a loser that had just passed its model time but not yet
  returned through pydantic-ai, or whose cancellation outlived the 20 ms grace, was charged
  nothing, and the same `fastest` spec cost $0.008802, $0.008177, $0.008294 a problem in three
  evaluations.) A call-cache hit is charged the same way, at its start, and passes the same
  model time (`SimulatedClock`).

A prompt with no recording raises `NoRecordingError`: never a guess.
"""

from __future__ import annotations

import asyncio
import json
import math
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any, Literal, cast

from pydantic_ai.messages import (
    ModelMessage,
    ModelRequest,
    ModelResponse,
    TextPart,
    ToolCallPart,
    UserPromptPart,
)
from pydantic_ai.models.function import AgentInfo, FunctionModel
from pydantic_ai.usage import RequestUsage

from core.agents.call_cache import in_fastest_race
from core.agents.usage import charge_started_request, request_was_quoted
from core.runtime.tracing import record_model_latency

__all__ = [
    "MODEL_TICK_MS",
    "REPLAY_SYSTEM",
    "NoRecordingError",
    "RaceClock",
    "RecordedCall",
    "ReplayModel",
    "ReplayedCall",
    "TableReplayModel",
    "pass_model_time",
    "pass_turns",
    "pass_turns_by_ticks",
    "prompt_text",
]

REPLAY_SYSTEM = "replay"
"""The `system` of every replayed model: usage is recorded as `"replay:<name>"`."""

MODEL_TICK_MS = 50.0
"""Model time a replayed request passes per event-loop turn inside a `fastest` race (see the
module docstring)."""

RaceClock = Literal["turns", "ticks"]
"""How a racing request passes its turns: `"turns"` (the default) lets the event loop turn
without resuming the request (`pass_turns`); `"ticks"` is the reference it replaced, one
`asyncio.sleep(0)` per turn (`pass_turns_by_ticks`). Both give the same finishing order, cost
and latency (tests/gsm8k/test_gsm8k_race_clock.py checks them on recorded races)."""


class NoRecordingError(LookupError):
    """The replayed model has no recorded output for the prompt it was given."""


def pass_turns(n: int) -> Awaitable[None] | None:
    """Let `n` event-loop turns pass before the caller resumes, without resuming it meanwhile.

    Returns None when `n` is 0 (nothing to wait for: go on at once), else an awaitable that
    resumes the awaiting task in the `n`-th turn from now at the place in the turn where it would
    have been after `n` bare `asyncio.sleep(0)`s (`pass_turns_by_ticks`): the task awaits a
    future, and a plain callback (no coroutine) stands in its place in the loop's ready queue,
    re-queueing itself once a turn (`loop.call_soon`, as a task's bare yield does) and setting
    the future's result in turn `n - 1`, so the task's wake-up is queued where its own step would
    have been. A turn thus costs one small callback instead of one pass through the request's
    whole coroutine stack (pydantic-ai's graph, the model, `AgentStep`, the pipeline and the
    branch above it).

    A cancelled awaiter leaves at once: its future is cancelled, and the callback sees that on
    its next turn and stops. (The cancelled task is woken where the cancelling task queued it,
    not in its own place, so it may unwind its cancellation a turn later than after a bare
    yield. A racer waiting here makes no call, so what it is charged and who wins cannot
    change; what can is how many turns its race takes to end, which only a race inside a race's
    branch could see, and there the wall clock already decides it: see the module docstring.)
    """
    if n <= 0:
        return None
    if n == 1:
        return asyncio.sleep(0)
    loop = asyncio.get_running_loop()
    done: asyncio.Future[None] = loop.create_future()
    left = n - 1

    def turn() -> None:
        nonlocal left
        if done.done():  # cancelled: leave the queue
            return
        left -= 1
        if left:
            loop.call_soon(turn)
        else:
            done.set_result(None)

    loop.call_soon(turn)
    return done


async def pass_turns_by_ticks(n: int) -> None:
    """The reference for `pass_turns`: `n` bare `asyncio.sleep(0)`s, each resuming the caller's
    whole coroutine stack (50 ms ticks: 10 ms ticks had doubled the CPU time of a gsm8k_replay
    `175b_verification` evaluation, ~780 turns a request). Kept for `race_clock = "ticks"` and
    the test that compares the two on recorded races."""
    for _ in range(n):
        await asyncio.sleep(0)


async def pass_model_time(latency_ms: float, time_scale: float, clock: RaceClock = "turns") -> None:
    """Let `latency_ms` of model time pass: inside a `fastest` race, one event-loop turn per
    `MODEL_TICK_MS` (rounded up) without resuming the request (`pass_turns`; `clock="ticks"`:
    `pass_turns_by_ticks`, the same turns spent resuming it); then a real sleep of that many
    ticks times `time_scale` (none when it is 0).

    Racing requests thus finish in the order of their turn counts, the earlier in the turn first
    on a tie, independent of wall-clock jitter (see the module docstring). Outside a race
    (`core.agents.call_cache.in_fastest_race`) no result depends on which request finishes
    first (every other merge waits for all its branches and keeps branch order), so the turns
    are skipped: they were 480,000 of a cold 9-candidate gsm8k_replay evaluation's 550,000
    event-loop callbacks, about half its CPU time.
    """
    ticks = math.ceil(latency_ms / MODEL_TICK_MS)
    if in_fastest_race():
        if clock == "ticks":
            await pass_turns_by_ticks(ticks)
        else:
            wait = pass_turns(ticks)
            if wait is not None:
                await wait
    if time_scale > 0:
        await asyncio.sleep(ticks * MODEL_TICK_MS / 1000.0 * time_scale)


def prompt_text(messages: list[ModelMessage]) -> str:
    """The text of the latest user prompt in `messages` (a multi-part prompt: its text parts
    joined).

    Raises:
        NoRecordingError: there is no user prompt.
    """
    for message in reversed(messages):
        if isinstance(message, ModelRequest):
            for part in reversed(message.parts):
                if isinstance(part, UserPromptPart):
                    content = part.content
                    if isinstance(content, str):
                        return content
                    return "".join(c for c in content if isinstance(c, str))
    raise NoRecordingError("the replay model was called without a user prompt")


@dataclass(frozen=True, slots=True)
class ReplayedCall:
    """What one replayed request charges and answers.

    Attributes:
        usage: the reported usage (tokens; `details` as the problem records them).
        latency_ms: the request's model time, ms.
        response: the response, made only when the request is answered, so a quote does not
            build it: text (plain text, or a structured output's JSON as the output tool's
            arguments), or a JSON object (`_response_part` fits it to the agent's output).
    """

    usage: RequestUsage
    latency_ms: float
    response: Callable[[], str | dict[str, Any]]


class ReplayModel(FunctionModel):
    """A pydantic-ai model that answers with recorded outputs (see the module docstring).

    A subclass implements `replayed_call(prompt)`. Its usage is reported under the model name
    `"replay:<name>"`.

    Args:
        name: the replayed model's name, e.g. a recorded run `"175b_finetuning"`.
        time_scale: multiplier on the modelled latency before it is slept (0: no sleep).
        race_clock: how a request in a `fastest` race passes its turns (`RaceClock`).
    """

    def __init__(self, name: str, *, time_scale: float, race_clock: RaceClock = "turns") -> None:
        super().__init__(self._respond, model_name=name)
        self.replay_name = name
        self.time_scale = time_scale
        self.race_clock: RaceClock = race_clock

    @property
    def system(self) -> str:
        return REPLAY_SYSTEM

    def replayed_call(self, prompt: str, /) -> ReplayedCall:
        """What a request on `prompt` replays.

        Raises:
            NoRecordingError: nothing is recorded for `prompt`.
        """
        raise NotImplementedError

    def quote_request(self, prompt: Any, /) -> tuple[str, int, int, int, float] | None:
        """The full charge of a request on `prompt` before it is made (`QuotingModel`):
        `(model name, 1 request, input tokens, output tokens, model time ms)`, or None when
        nothing is recorded for the prompt (the request then fails)."""
        try:
            call = self.replayed_call(prompt if isinstance(prompt, str) else str(prompt))
        except Exception:
            return None
        return (
            f"{REPLAY_SYSTEM}:{self.replay_name}",
            1,
            call.usage.input_tokens,
            call.usage.output_tokens,
            call.latency_ms,
        )

    async def pass_model_time(self, ms: float, /) -> None:
        """Pass `ms` of model time as a request does (`pass_model_time` with this model's
        time scale and race clock); a call-cache hit calls it (`core.agents.SimulatedClock`)."""
        await pass_model_time(ms, self.time_scale, self.race_clock)

    async def _respond(self, messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        call = self.replayed_call(prompt_text(messages))
        usage = call.usage
        # charged in full the moment the request starts (usage and model time), so a run's cost
        # and latency never depend on whether or when a cancellation lands (module docstring)
        if not request_was_quoted():  # (else AgentStep charged `quote_request` at its start)
            record_model_latency(call.latency_ms)
        charge_started_request(
            f"{REPLAY_SYSTEM}:{self.replay_name}",
            requests=1,
            input_tokens=usage.input_tokens,
            output_tokens=usage.output_tokens,
        )
        await self.pass_model_time(call.latency_ms)
        return ModelResponse(parts=[_response_part(call.response(), info)], usage=usage)


def _is_response_wrapper(schema: Mapping[str, Any]) -> bool:
    """Whether an output tool's schema is pydantic-ai's `{"response": ...}` wrapper."""
    props: object = schema.get("properties")
    return (
        schema.get("required") == ["response"]
        and isinstance(props, Mapping)
        and list(cast(Mapping[str, Any], props)) == ["response"]
    )


def _response_part(payload: str | dict[str, Any], info: AgentInfo) -> TextPart | ToolCallPart:
    """The response part carrying `payload`: a call of the agent's output tool when it has one
    (an object wrapped as `{"response": payload}` when the tool's schema is pydantic-ai's
    wrapper of a non-model output type such as `dict[str, Any]`), else text (an object as its
    JSON)."""
    if not info.output_tools:
        return TextPart(content=payload if isinstance(payload, str) else json.dumps(payload))
    tool = info.output_tools[0]
    if isinstance(payload, dict) and _is_response_wrapper(tool.parameters_json_schema):
        return ToolCallPart(tool_name=tool.name, args={"response": payload})
    return ToolCallPart(tool_name=tool.name, args=payload)


@dataclass(frozen=True, slots=True)
class RecordedCall:
    """One recorded request: the response text and what it cost.

    Attributes:
        response: the recorded output: text, or a JSON object (a structured output).
        input_tokens: recorded input tokens.
        output_tokens: recorded output tokens.
        latency_ms: recorded latency, ms (replayed as model time).
    """

    response: str | dict[str, Any]
    input_tokens: int
    output_tokens: int
    latency_ms: float


class TableReplayModel(ReplayModel):
    """A replayed model whose recordings are a table: exact prompt text -> `RecordedCall`.

    Args:
        name: the replayed model's name (usage is recorded as `"replay:<name>"`).
        calls: prompt text -> the recorded request for it.
        time_scale: multiplier on the modelled latency before it is slept (0: no sleep).
        race_clock: how a request in a `fastest` race passes its turns (`RaceClock`).
    """

    def __init__(
        self,
        name: str,
        calls: Mapping[str, RecordedCall],
        *,
        time_scale: float,
        race_clock: RaceClock = "turns",
    ) -> None:
        super().__init__(name, time_scale=time_scale, race_clock=race_clock)
        self.calls = calls

    def replayed_call(self, prompt: str, /) -> ReplayedCall:
        """The recorded request for exactly `prompt`.

        Raises:
            NoRecordingError: `prompt` is not a recorded prompt of this model.
        """
        rec = self.calls.get(prompt)
        if rec is None:
            short = prompt if len(prompt) <= 80 else prompt[:80] + "…"
            raise NoRecordingError(f"no recorded output of {self.replay_name} for {short!r}")
        return ReplayedCall(
            usage=RequestUsage(input_tokens=rec.input_tokens, output_tokens=rec.output_tokens),
            latency_ms=rec.latency_ms,
            response=lambda: rec.response,
        )
