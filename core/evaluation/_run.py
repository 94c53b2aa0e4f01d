"""Running a hydrated topology on one example (one trial) into an `ExampleResult`; never raises.

Every failure becomes a status: the topology raising or timing out is `error` (counted apart
from wrong answers), a blank output is `degenerate` (not scored), a NaN / infinite /
out-of-range score, a score function that raises, or a non-finite or unpriced cost is `invalid`
with a reason. Only cancellation propagates.
"""

from __future__ import annotations

import asyncio
import hashlib
import inspect
import json
import math
import time
from collections.abc import Callable, Sized
from dataclasses import dataclass
from typing import Any, Literal, Protocol, cast

from pydantic import BaseModel

from core.agents.call_cache import CallCache, use_call_cache
from core.agents.providers import provider_failure
from core.evaluation import example_memo
from core.evaluation._records import ExampleResult
from core.evaluation.metrics import BundleStatus, GoldExample, MetricBundle, ScoreFn
from core.evaluation.pricing import Pricer
from core.runtime.tracing import capture_trace, critical_path_ms, summarize

__all__ = [
    "BlankFn",
    "LatencySource",
    "RunContext",
    "RunnableTopology",
    "default_is_blank",
    "example_key",
    "run_example",
]

BlankFn = Callable[[Any], bool]
"""`is_blank(output) -> bool`: a problem's hook for structured outputs."""


LatencySource = Literal["auto", "model", "wall"]
"""Where a run's latency comes from: `"auto"` the critical-path model time when the run recorded
any, else wall time; `"model"` always model time (0 ms for a run that recorded none); `"wall"`
always wall time."""


def run_latency_ms(source: LatencySource, model_ms: float | None, wall_ms: float) -> float:
    """A run's latency in ms from its recorded model time (None: none) and its wall time."""
    if source == "wall":
        return wall_ms
    if source == "model":
        return 0.0 if model_ms is None else model_ms
    return wall_ms if model_ms is None else model_ms


class RunnableTopology(Protocol):
    """What the evaluator runs: a hydrated topology (any runtime `Step`)."""

    async def execute(self, input_data: Any) -> Any: ...


def default_is_blank(output: Any) -> bool:
    """True for None, empty or whitespace-only text (str or bytes), and empty collections.

    Anything else (numbers, `False`, Pydantic models, ...) is not blank; a problem whose outputs
    are structured supplies its own `is_blank` hook.
    """
    if output is None:
        return True
    if isinstance(output, str | bytes):
        return not output.strip()
    if isinstance(output, list | tuple | dict | set | frozenset):
        return len(output) == 0  # pyright: ignore[reportUnknownArgumentType]
    return isinstance(output, Sized) and not isinstance(output, type) and _empty_sized(output)


def _empty_sized(output: Sized) -> bool:
    try:
        return len(output) == 0
    except Exception:  # a broken __len__ does not make an output blank
        return False


def example_key(example: GoldExample) -> str:
    """The example's cache id: its `id`, else `"sha256:<16 hex>"` of its input and expected.

    The content hash is over the canonical JSON (sorted keys) of `input`, `expected` and
    `rubric`; values JSON cannot represent are written with `str`.
    """
    if example.id is not None:
        return example.id
    payload = {"input": example.input, "expected": example.expected, "rubric": example.rubric}
    try:
        data: Any = example.model_dump(mode="json", include={"input", "expected", "rubric"})
    except Exception:
        data = payload
    text = json.dumps(data, sort_keys=True, default=str, ensure_ascii=False)
    return "sha256:" + hashlib.sha256(text.encode()).hexdigest()[:16]


@dataclass(frozen=True, slots=True)
class RunContext:
    """What every run of one `evaluate` call shares."""

    spec_hash: str
    split: str
    n_agents: int
    depth: int
    pricer: Pricer
    score_fn: ScoreFn
    is_blank: BlankFn
    timeout_s: float | None
    latency_source: LatencySource = "auto"
    capture_traces: bool = True
    """Keep the run's spans in `ExampleResult.trace`; False: `[]` (`EvaluatorConfig`)."""
    call_cache: CallCache | None = None
    """The call-level model cache active in each run, with the run's trial (None: off)."""
    clock: Callable[[], float] | None = None
    """The wall clock, in seconds (None: `time.perf_counter_ns`); tests pass a fake one."""


def _describe(value: float) -> str:
    return "nan" if math.isnan(value) else ("inf" if value > 0 else "-inf")


async def _score(output: Any, example: GoldExample, score_fn: ScoreFn) -> tuple[float, str | None]:
    """The score, and an invalidity reason when it is not a finite number in [0, 1]."""
    try:
        value: Any = score_fn(output, example)
        if inspect.isawaitable(value):
            value = await value
    except Exception as exc:
        return math.nan, f"score_error: {type(exc).__name__}: {exc}"
    if isinstance(value, bool) or not isinstance(value, int | float):
        return math.nan, f"score_not_a_number: {type(value).__name__}"  # pyright: ignore[reportUnknownArgumentType]
    score = float(value)
    if not math.isfinite(score):
        return score, f"non_finite_score: {_describe(score)}"
    if not 0.0 <= score <= 1.0:
        return score, f"score_out_of_range: {score!r} outside [0, 1]"
    return score, None


async def run_example(
    topology: RunnableTopology,
    example: GoldExample,
    example_id: str,
    trial: int,
    ctx: RunContext,
) -> tuple[ExampleResult, bool]:
    """Run `topology` on `example` once, inside its own trace, and measure it.

    Returns:
        The result, and whether it may be cached (False when the evaluator's own
        `example_timeout_s` cut the run short: more time could give another outcome).
    """
    output: Any = None
    error: str | None = None
    timed_out = False
    clock = ctx.clock
    start = time.perf_counter_ns() if clock is None else 0
    start_s = 0.0 if clock is None else clock()
    # (span summaries are read only from a kept trace: without one, none is taken)
    calls = use_call_cache(ctx.call_cache, trial)
    with capture_trace(summaries=ctx.capture_traces) as trace, calls:
        try:
            if ctx.timeout_s is None:
                output = await topology.execute(example.input)
            else:
                deadline = asyncio.timeout(ctx.timeout_s)
                try:
                    async with deadline:
                        output = await topology.execute(example.input)
                except TimeoutError:
                    if not deadline.expired():
                        raise
                    timed_out = True
                    error = f"example_timeout: timed out after {ctx.timeout_s:g} s"
        except Exception as exc:
            failed = provider_failure(exc)
            if failed is not None:  # a provider that kept failing is no answer to score
                raise failed from exc
            error = f"{type(exc).__name__}: {exc}"
    if clock is None:
        wall_ms = (time.perf_counter_ns() - start) / 1e6
    else:
        wall_ms = (clock() - start_s) * 1000.0

    usage = list(trace.usage_by_model().values())
    quote = ctx.pricer.total(usage)
    model_ms = critical_path_ms(trace)
    latency_ms = run_latency_ms(ctx.latency_source, model_ms, wall_ms)

    status: BundleStatus = "ok"
    reason: str | None = None
    accuracy = 0.0
    blank = False
    if error is not None:
        status, reason = "error", error
    else:
        try:
            blank = bool(ctx.is_blank(output))
        except Exception as exc:
            status, reason = "invalid", f"is_blank_error: {type(exc).__name__}: {exc}"
        if status == "ok":
            if blank:
                status, reason = "degenerate", "blank_output"
            else:
                accuracy, why = await _score(output, example, ctx.score_fn)
                if why is not None:
                    status, reason = "invalid", why
    # an untrustworthy cost or latency makes any run invalid (F7), its other facts kept
    if status != "invalid":
        if quote.reason is not None:
            status, reason = "invalid", quote.reason
        elif not math.isfinite(quote.cost_usd):
            status, reason = "invalid", f"non_finite_cost: {_describe(quote.cost_usd)}"
        elif not math.isfinite(latency_ms):
            status, reason = "invalid", f"non_finite_latency: {_describe(latency_ms)}"

    bundle = MetricBundle(
        accuracy=accuracy,
        cost_usd=quote.cost_usd,
        latency_ms=latency_ms,
        status=status,
        error=reason,
        input_tokens=sum(u.input_tokens for u in usage),
        output_tokens=sum(u.output_tokens for u in usage),
    )
    result = ExampleResult(
        spec_hash=ctx.spec_hash,
        example_id=example_id,
        trial=trial,
        split=ctx.split,
        bundle=bundle,
        requests=sum(u.requests for u in usage),
        blank=blank,
        output_summary="" if error is not None else summarize(_answer_first(output)),
        trace=trace.to_list() if ctx.capture_traces else [],
        n_agents=ctx.n_agents,
        depth=ctx.depth,
    )
    example_memo.record(ctx, result, calls.context, timed_out=timed_out, model_ms=model_ms)
    return result, not timed_out


ANSWER_FIELDS: tuple[str, ...] = ("final_answer", "answer", "output")
"""Fields of a state model that hold an answer; the output summary leads with one."""


def _last_answer(data: Any) -> Any:
    """The state's answer: a top-level `ANSWER_FIELDS` value that is set, else the last one
    set anywhere inside it (e.g. the last candidate's `answer`), else None."""
    if isinstance(data, dict):
        items = cast(dict[str, Any], data)
        for key in ANSWER_FIELDS:
            value = items.get(key)
            if value is not None and not isinstance(value, dict | list):
                return value
        values = list(items.values())
    elif isinstance(data, list):
        values = list(cast(list[Any], data))
    else:
        return None
    for value in reversed(values):
        found = _last_answer(value)
        if found is not None:
            return found
    return None


def _answer_first(output: Any) -> Any:
    """A state model's JSON led by its answer (`{"answer": ..., <the state>}`), else `output`.

    The summary is cut at 200 characters, and a state that starts with a long question lost
    its answer (the studio's drill-down shows each candidate's answer).
    """
    if not isinstance(output, BaseModel):
        return output
    try:
        data: dict[str, Any] = output.model_dump(mode="json")
    except Exception:  # noqa: BLE001 (a summary must never break a run)
        return output
    answer = _last_answer(data)
    if answer is None:
        return output
    rest = {k: v for k, v in data.items() if k != "answer"}
    return json.dumps(
        {"answer": answer, **rest}, ensure_ascii=False, separators=(",", ":"), default=str
    )
