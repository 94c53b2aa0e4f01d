"""Replaying the recorded GPT-3 runs: the data, the usage / cost / latency model, the agents.

Each of the four recorded runs is a real pydantic-ai `Agent` whose model is a `ReplayModel`, a
pydantic-ai `FunctionModel`, so the same code path as a hosted model runs (structured output,
usage accounting). The agent's prompt is the state as JSON (the runtime renders a `MathState`
that way), or a bare question; its structured output is the state with the run's recorded
solution appended as a `Candidate`. A question with no recording raises `NoRecordingError`:
never a guess.

The usage, cost and latency model (all settings in `problem.toml` under `[params]`):

- **tokens**: one rule, `ceil(characters / chars_per_token)` (default 4 characters a token,
  characters counted as Unicode code points); input = the question, output = the solution.
- **calls_per_request**: a `*_verification` call is the paper's test-time method, 100 sampled
  solutions plus 100 verifier passes of the same model size, so it stands for 200 calls of the
  question/solution size. The reported usage multiplies both token counts by
  `calls_per_request` (1 for `*_finetuning`, 200 for `*_verification`); pydantic-ai counts it as
  one request (`usage.requests == 1`) and `usage.details["replayed_calls"]` holds the multiplier.
  Plain per-token pricing (`[models.prices]`) then gives the right cost.
- **prices**: GPT-3 list prices of the time, per 1K tokens: $0.006 for 6B (Curie tier), $0.06
  for 175B (Davinci tier); input and output alike (the model name priced is
  `"replay:<run>"`).
- **latency**: `latency_passes * output tokens / throughput` (throughput 50 tokens/s for 6B,
  20 tokens/s for 175B; 1 pass for a single sample, 2 for verification: the 100 samples and the
  100 verifier passes each run in parallel, so one generation plus one verifier pass). It is
  reported in model time with `core.runtime.tracing.record_model_latency` (inside the agent
  step's span, so reported latency is deterministic) and slept for real (`asyncio.sleep`)
  multiplied by `[models] time_scale` (0 sleeps nothing).
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
  Since issue 17 (item 5) the request waits on a future instead, and a plain callback stands
  in its place in the loop's queue once a turn, so it resumes in the same turn at the same
  place (`pass_turns`; `[params] race_clock = "ticks"` keeps the old way, which the test
  `tests/gsm8k/test_gsm8k_race_clock.py` checks both against, on races recorded with it). Not
  a clock that jumps to the next finish time: it cannot keep the rule, which counts
  pydantic-ai's turns (e.g. `175b_verification` against `6b_finetuning` then
  `175b_finetuning`, on the problem "James decides to run 3 sprints": 2,300 ms of model time
  against 560 + 1,200 ms; the turns are 46 + 37 against 12 + 24 + 2 x 37, so the single call
  wins, where a jump to the smaller model time would crown the pipeline: so would 13 of the 30
  recorded races of that shape, none of those between single calls), nor the place in the turn
  that decides a tie. With time scale above 0, a branch that makes more than one call
  interleaves its real sleeps with other branches' turns, so its race is decided partly by the
  wall clock, with either way of passing turns.
- **who is charged** (the rule, also in `README.md`): every branch that started is charged in
  full for every model call it made or had started, replayed or answered from the call cache,
  finished or cancelled. A replayed request charges its whole usage and model time the moment
  it starts (`core.agents.charge_started_request`, `record_model_latency`), before it passes
  any model time, so the loser of a `fastest` race costs the same whether its cancellation
  lands during its model time, after it returned, or after the evaluator has read the trace.
  (Charging on cancellation instead left a gap: a loser that had just passed its model time
  but not yet returned through pydantic-ai, or whose cancellation outlived the 20 ms grace,
  was charged nothing, and the same `fastest` spec cost $0.008802, $0.008177, $0.008294 a
  problem in three evaluations.) A call-cache hit is charged the same way, at its start.
"""

from __future__ import annotations

import asyncio
import json
import math
from collections.abc import Awaitable, Mapping
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator
from pydantic_ai import Agent
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
from core.errors import ProblemError
from core.runtime.tracing import record_model_latency

from .answers import extract_gold_answer, extract_solution_answer
from .state import Candidate, MathState, coerce_state

MODEL_TICK_MS = 50.0
"""Model time a replayed request passes per event-loop turn inside a `fastest` race (see the
module docstring)."""

RaceClock = Literal["turns", "ticks"]
"""How a racing request passes its turns (`[params] race_clock`): `"turns"` (the default) lets
the event loop turn without resuming the request (`pass_turns`); `"ticks"` is the reference it
replaced, one `asyncio.sleep(0)` per turn (`pass_turns_by_ticks`). Both give the same finishing
order, cost and latency (tests/gsm8k/test_gsm8k_race_clock.py checks them on recorded races)."""


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
    whole coroutine stack. This was `pass_model_time`'s rule up to issue 17 (item 5): 50 ms
    ticks chosen in issue 10 because 10 ms ticks doubled the CPU time of a 175b_verification
    evaluation (~780 turns a request). Kept for `race_clock = "ticks"` and the test that
    compares the two on recorded races."""
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
    are skipped: they were 480,000 of a cold 9-candidate evaluation's 550,000 event-loop
    callbacks, about half its CPU time.
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


__all__ = [
    "MODEL_TICK_MS",
    "RUNS",
    "NoRecordingError",
    "RaceClock",
    "Recording",
    "ReplayData",
    "ReplayItem",
    "ReplayModel",
    "ReplayParams",
    "RunSettings",
    "count_tokens",
    "load_replay_data",
    "make_replay_agent",
    "pass_model_time",
    "pass_turns",
    "pass_turns_by_ticks",
]

RUNS: tuple[str, ...] = ("6b_finetuning", "6b_verification", "175b_finetuning", "175b_verification")
"""The four recorded runs, named as in the dataset."""

_CONFIG = ConfigDict(
    frozen=True, extra="forbid", use_attribute_docstrings=True, allow_inf_nan=False
)


class NoRecordingError(LookupError):
    """The replayed run has no recorded solution for the question it was asked."""


class RunSettings(BaseModel):
    """`[params.runs.<run>]`: how one recorded run is replayed."""

    model_config = _CONFIG

    description: str
    """One line for the designer: what the run is and what it costs."""
    throughput_tokens_per_s: float = Field(gt=0)
    """Generation speed, output tokens per second (50 for 6B, 20 for 175B)."""
    calls_per_request: int = Field(default=1, ge=1)
    """Model calls one replayed request stands for (200 for verification); multiplies usage."""
    latency_passes: float = Field(default=1.0, ge=0)
    """Sequential generation passes on the critical path (2 for verification)."""


class ReplayParams(BaseModel):
    """`[params]` of the GSM8K replay problem."""

    model_config = _CONFIG

    chars_per_token: float = Field(default=4.0, gt=0)
    """The token rule: `ceil(characters / chars_per_token)`."""
    long_question_chars: int = Field(default=300, ge=1)
    """`question_is_long` holds when the question has more characters than this."""
    many_numbers: int = Field(default=5, ge=1)
    """`question_has_many_numbers` holds when the question has at least this many numbers."""
    escalation_order: tuple[str, ...] = RUNS
    """Run order of the `next_unused_run` classifier (cheapest first)."""
    runs: dict[str, RunSettings]
    """One entry per recorded run, keyed by its dataset name."""
    race_clock: RaceClock = "turns"
    """How a request in a `fastest` race passes its turns: `"turns"` without resuming it,
    `"ticks"` the reference it replaced (same results, more CPU; see `RaceClock`)."""

    @model_validator(mode="after")
    def _check_runs(self) -> ReplayParams:
        missing = [r for r in RUNS if r not in self.runs]
        unknown = [r for r in self.runs if r not in RUNS]
        if missing or unknown:
            raise ValueError(
                f"runs must be exactly {', '.join(RUNS)} (missing {missing}, unknown {unknown})"
            )
        bad = [r for r in self.escalation_order if r not in RUNS]
        if bad:
            raise ValueError(f"escalation_order names unknown runs: {bad}")
        return self


def count_tokens(text: str, chars_per_token: float = 4.0) -> int:
    """The documented token rule: `ceil(len(text) / chars_per_token)` (0 for empty text)."""
    return math.ceil(len(text) / chars_per_token)


@dataclass(frozen=True, slots=True)
class Recording:
    """One recorded solution of one run.

    Attributes:
        solution: the solution text.
        is_correct: the dataset's own label.
    """

    solution: str
    is_correct: bool


@dataclass(frozen=True, slots=True)
class ReplayItem:
    """One GSM8K test problem with its gold answer and every run's recording.

    Attributes:
        index: 0-based line number in the dataset files.
        id: stable example id, `gsm8k-test-<index:04d>` (the files are pinned by sha256).
        question: the problem text.
        gold_answer: the text after `####` in the gold answer, e.g. `"18"`.
        recordings: run name -> its recorded solution.
    """

    index: int
    id: str
    question: str
    gold_answer: str
    recordings: Mapping[str, Recording]


@dataclass(frozen=True, slots=True)
class ReplayData:
    """The whole replay dataset, indexed by question text.

    Attributes:
        items: every problem, in file order.
        by_question: question text -> item.
    """

    items: tuple[ReplayItem, ...]
    by_question: Mapping[str, ReplayItem]

    def recording(self, run: str, question: str) -> Recording:
        """The recorded solution of `run` for `question`.

        Raises:
            NoRecordingError: no such question, or no recording of that run for it.
        """
        item = self.by_question.get(question)
        rec = None if item is None else item.recordings.get(run)
        if rec is None:
            short = question if len(question) <= 80 else question[:80] + "…"
            raise NoRecordingError(f"no recorded {run} solution for the question {short!r}")
        return rec


def _read_jsonl(path: Path) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    with path.open(encoding="utf-8") as f:
        for n, line in enumerate(f, start=1):
            if not line.strip():
                continue
            try:
                obj = json.loads(line)
            except json.JSONDecodeError as exc:
                raise ProblemError(f"not JSON: {exc}", file=str(path), field=f"line {n}") from exc
            if not isinstance(obj, dict):
                raise ProblemError(
                    "each line must be a JSON object", file=str(path), field=f"line {n}"
                )
            out.append(obj)  # pyright: ignore[reportUnknownArgumentType]
    return out


def _field(obj: dict[str, Any], key: str, kind: type, path: Path, n: int) -> Any:
    value = obj.get(key)
    if not isinstance(value, kind):
        raise ProblemError(f"expected a {kind.__name__}", file=str(path), field=f"line {n}.{key}")
    return value


@lru_cache(maxsize=4)
def _load_cached(test_path: Path, solutions_path: Path, _stamp: tuple[int, ...]) -> ReplayData:
    tests = _read_jsonl(test_path)
    sols = _read_jsonl(solutions_path)
    if len(tests) != len(sols):
        raise ProblemError(
            f"{len(sols)} solution records for {len(tests)} test problems", file=str(solutions_path)
        )
    items: list[ReplayItem] = []
    for i, (t, s) in enumerate(zip(tests, sols, strict=True)):
        n = i + 1
        question = _field(t, "question", str, test_path, n)
        if _field(s, "question", str, solutions_path, n) != question:
            raise ProblemError(
                "question differs from test.jsonl's same line",
                file=str(solutions_path),
                field=f"line {n}.question",
            )
        try:
            gold = extract_gold_answer(_field(t, "answer", str, test_path, n))
        except ValueError as exc:
            raise ProblemError(str(exc), file=str(test_path), field=f"line {n}.answer") from exc
        recs: dict[str, Recording] = {}
        for run in RUNS:
            rec = _field(s, run, dict, solutions_path, n)
            recs[run] = Recording(
                solution=_field(rec, "solution", str, solutions_path, n),
                is_correct=_field(rec, "is_correct", bool, solutions_path, n),
            )
        items.append(ReplayItem(i, f"gsm8k-test-{i:04d}", question, gold, recs))
    by_question = {it.question: it for it in items}
    if len(by_question) != len(items):
        raise ProblemError("questions must be unique", file=str(test_path))
    return ReplayData(tuple(items), by_question)


def load_replay_data(test_path: Path, solutions_path: Path) -> ReplayData:
    """Read and cross-check `test.jsonl` and `example_model_solutions.jsonl` (cached per process
    by path, size and modification time).

    Raises:
        ProblemError: a malformed record (names the file and `line <n>.<key>`).
    """
    stamp = tuple(
        x for p in (test_path, solutions_path) for x in (p.stat().st_size, p.stat().st_mtime_ns)
    )
    return _load_cached(test_path.resolve(), solutions_path.resolve(), stamp)


def _prompt_text(messages: list[ModelMessage]) -> str:
    for message in reversed(messages):
        if isinstance(message, ModelRequest):
            for part in reversed(message.parts):
                if isinstance(part, UserPromptPart):
                    content = part.content
                    if isinstance(content, str):
                        return content
                    return "".join(c for c in content if isinstance(c, str))
    raise NoRecordingError("the replay model was called without a user prompt")


class ReplayModel(FunctionModel):
    """A pydantic-ai model that answers with one run's recorded solutions.

    Its usage is reported under the model name `"replay:<run>"` (`system` is `"replay"`).

    Args:
        run: the recorded run to replay, e.g. `"175b_finetuning"`.
        data: the replay dataset.
        settings: the run's replay settings.
        chars_per_token: the token rule.
        time_scale: multiplier on the modelled latency before it is slept (0: no sleep).
        race_clock: how a request in a `fastest` race passes its turns (`RaceClock`).
    """

    def __init__(
        self,
        run: str,
        data: ReplayData,
        settings: RunSettings,
        *,
        chars_per_token: float,
        time_scale: float,
        race_clock: RaceClock = "turns",
    ) -> None:
        super().__init__(self._respond, model_name=run)
        # (not `settings`: pydantic-ai models use that name for their ModelSettings)
        self.replay_run = run
        self.replay_data = data
        self.run_settings = settings
        self.chars_per_token = chars_per_token
        self.time_scale = time_scale
        self.race_clock: RaceClock = race_clock

    @property
    def system(self) -> str:
        return "replay"

    def quote_request(self, prompt: Any, /) -> tuple[str, int, int, int, float] | None:
        """The full charge of a request on `prompt` before it is made (`QuotingModel`):
        `(model name, 1 request, input tokens, output tokens, model time ms)`, or None when
        the prompt is not a state or question with a recording (the request then fails)."""
        try:
            state = coerce_state(prompt if isinstance(prompt, str) else str(prompt))
            rec = self.replay_data.recording(self.replay_run, state.question)
        except Exception:
            return None
        usage = self.usage_for(state.question, rec.solution)
        return (
            f"{self.system}:{self.replay_run}",
            1,
            usage.input_tokens,
            usage.output_tokens,
            self.latency_ms(rec.solution),
        )

    async def pass_model_time(self, ms: float, /) -> None:
        """Pass `ms` of model time as a request does (`pass_model_time` with this model's
        time scale and race clock); a call-cache hit calls it (`core.agents.SimulatedClock`)."""
        await pass_model_time(ms, self.time_scale, self.race_clock)

    def latency_ms(self, solution: str) -> float:
        """Modelled latency of one request, ms: `latency_passes * tokens(solution) / throughput`."""
        out = count_tokens(solution, self.chars_per_token)
        return (
            1000.0
            * self.run_settings.latency_passes
            * out
            / self.run_settings.throughput_tokens_per_s
        )

    def usage_for(self, question: str, solution: str) -> RequestUsage:
        """Reported usage of one request (token counts times `calls_per_request`)."""
        calls = self.run_settings.calls_per_request
        return RequestUsage(
            input_tokens=calls * count_tokens(question, self.chars_per_token),
            output_tokens=calls * count_tokens(solution, self.chars_per_token),
            details={"replayed_calls": calls},
        )

    async def _respond(self, messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        state = coerce_state(_prompt_text(messages))
        rec = self.replay_data.recording(self.replay_run, state.question)
        new = state.with_candidate(
            Candidate(
                run=self.replay_run,
                solution=rec.solution,
                answer=extract_solution_answer(rec.solution),
            )
        )
        latency = self.latency_ms(rec.solution)
        usage = self.usage_for(state.question, rec.solution)
        # charged in full the moment the request starts (usage and model time), so a run's cost
        # and latency never depend on whether or when a cancellation lands (module docstring)
        if not request_was_quoted():  # (else AgentStep charged `quote_request` at its start)
            record_model_latency(latency)
        charge_started_request(
            f"{self.system}:{self.replay_run}",
            requests=1,
            input_tokens=usage.input_tokens,
            output_tokens=usage.output_tokens,
        )
        await self.pass_model_time(latency)
        payload = new.model_dump_json()
        part = (
            ToolCallPart(tool_name=info.output_tools[0].name, args=payload)
            if info.output_tools
            else TextPart(content=payload)
        )
        return ModelResponse(parts=[part], usage=usage)


def make_replay_agent(
    run: str,
    data: ReplayData,
    settings: RunSettings,
    *,
    chars_per_token: float,
    time_scale: float,
    race_clock: RaceClock = "turns",
) -> Agent[None, MathState]:
    """A fresh pydantic-ai agent replaying `run`, with `MathState` as structured output."""
    model = ReplayModel(
        run,
        data,
        settings,
        chars_per_token=chars_per_token,
        time_scale=time_scale,
        race_clock=race_clock,
    )
    return Agent(model, output_type=MathState, name=run)
