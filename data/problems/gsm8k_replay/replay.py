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
  100 verifier passes each run in parallel, so one generation plus one verifier pass), reported
  as model time.
- **who finishes first** in a `fastest` race, **who is charged**, and how model time is passed
  and slept: the rules of every replayed model, in `core.agents.replay` (this problem's
  `ReplayModel` is one; `[params] race_clock` chooses its `RaceClock`).
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, model_validator
from pydantic_ai import Agent
from pydantic_ai.usage import RequestUsage

from core.agents.replay import (
    MODEL_TICK_MS,
    NoRecordingError,
    RaceClock,
    ReplayedCall,
    pass_model_time,
    pass_turns,
    pass_turns_by_ticks,
)
from core.agents.replay import ReplayModel as _CoreReplayModel
from core.errors import ProblemError

from .answers import extract_gold_answer, extract_solution_answer
from .state import Candidate, MathState, coerce_state

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


class ReplayModel(_CoreReplayModel):
    """A pydantic-ai model that answers with one run's recorded solutions (a
    `core.agents.replay.ReplayModel`: its charging and clock rules are there).

    Its usage is reported under the model name `"replay:<run>"` (`system` is `"replay"`). Its
    prompt is a `MathState` as JSON or a bare question; its response is that state with the
    run's recorded solution appended as a `Candidate`.

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
        super().__init__(run, time_scale=time_scale, race_clock=race_clock)
        # (not `settings`: pydantic-ai models use that name for their ModelSettings)
        self.replay_run = run
        self.replay_data = data
        self.run_settings = settings
        self.chars_per_token = chars_per_token

    def replayed_call(self, prompt: str, /) -> ReplayedCall:
        """The run's recorded solution for the question of `prompt` (a state's JSON or a bare
        question): its usage, model time and the state with it appended.

        Raises:
            NoRecordingError: no recording of this run for the question.
        """
        state = coerce_state(prompt)
        rec = self.replay_data.recording(self.replay_run, state.question)

        def response() -> str:
            candidate = Candidate(
                run=self.replay_run,
                solution=rec.solution,
                answer=extract_solution_answer(rec.solution),
            )
            return state.with_candidate(candidate).model_dump_json()

        return ReplayedCall(
            usage=self.usage_for(state.question, rec.solution),
            latency_ms=self.latency_ms(rec.solution),
            response=response,
        )

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
