"""RefinementLoop: run, evaluate, refine the input, until good enough (semantics section 5)."""

from __future__ import annotations

import asyncio
import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from time import perf_counter
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict

from core.agents.call_cache import off_clock_in_race
from core.runtime._tasks import (
    cancel_and_reap,
    current_task,
    is_async_callable,
    may_await,
    wait_tasks,
)
from core.runtime._trace import run_in_span
from core.runtime.step import Step, coerce_step, direct_call
from core.runtime.tracing import Span, TraceFrame, current_frame, fork_trace

__all__ = [
    "EvalResult",
    "ExitReason",
    "IterationRecord",
    "LoopResult",
    "RefinementLoop",
    "as_eval_result",
]

ExitReason = Literal["passed", "confident", "converged", "max_iterations", "timeout"]


class EvalResult(BaseModel):
    """An evaluator's verdict on one iteration's output (also usable as an agent's output type)."""

    model_config = ConfigDict(frozen=True, extra="forbid", use_attribute_docstrings=True)

    passed: bool
    """Whether the output is good enough; a pass ends the loop with this output."""
    feedback: str = ""
    """What to improve, for the state updater."""
    score: float | None = None
    """Quality score (higher is better; any scale), or None. NaN counts as no score."""


@dataclass(frozen=True, slots=True)
class IterationRecord:
    """One completed iteration.

    Attributes:
        iteration: 1-based iteration number.
        eval_result: the evaluator's verdict on this iteration's output.
        duration_ms: wall time of the step plus the evaluation, in ms.
    """

    iteration: int
    eval_result: EvalResult
    duration_ms: float


@dataclass(frozen=True, slots=True)
class LoopResult:
    """What a `RefinementLoop` run produced.

    Attributes:
        output: the returned iteration's output (None when no iteration completed).
        iterations: number of completed iterations.
        exit_reason: `"passed"`, `"confident"`, `"converged"`, `"max_iterations"` or
            `"timeout"`.
        history: one record per completed iteration, in order.
        best_iteration: the iteration with the highest numeric score (the latest on ties),
            or None when no iteration has one.
        best_score: that score, or None.
        returned_iteration: whose output `output` is (None when no iteration completed).
    """

    output: Any
    iterations: int
    exit_reason: ExitReason
    history: tuple[IterationRecord, ...]
    best_iteration: int | None
    best_score: float | None
    returned_iteration: int | None

    def to_attributes(self) -> dict[str, Any]:
        """The result without its output, as trace-span attributes (JSON-serialisable)."""
        return {
            "iterations": self.iterations,
            "exit_reason": self.exit_reason,
            "returned_iteration": self.returned_iteration,
            "best_iteration": self.best_iteration,
            "best_score": self.best_score,
            "history": [
                {
                    "iteration": r.iteration,
                    "passed": r.eval_result.passed,
                    "score": _numeric(r.eval_result.score),
                    "feedback": r.eval_result.feedback,
                    "duration_ms": r.duration_ms,
                }
                for r in self.history
            ],
        }


def _never() -> int:
    """`Task.cancelling` of no task (a loop driven outside a task is never cancelled)."""
    return 0


def _numeric(score: float | None) -> float | None:
    """`score` if it is a real number, else None (None and NaN are "no score")."""
    return None if score is None or math.isnan(score) else score


def as_eval_result(value: Any) -> EvalResult:
    """Read an evaluator's return value as an `EvalResult`.

    Accepted: an `EvalResult`; a mapping with key `"passed"` (and optionally `"feedback"`,
    `"score"`); any object with attribute `passed` (and optionally `feedback`, `score`), such as
    an agent's structured output. A `passed` given as text is read as a word (`"false"`, `"no"`,
    `"0"` are False; `"true"`, `"yes"`, `"1"` True, case and spaces ignored), never
    truth-tested; a `score` given as text is converted with `float`.

    Raises:
        TypeError: none of these; the message names the type.
        ValueError: a `passed` text that is no yes/no word, or a `score` that is no number.
    """
    if isinstance(value, EvalResult):
        return value
    if isinstance(value, Mapping):
        fields: Mapping[Any, Any] = value  # pyright: ignore[reportUnknownVariableType]
        if "passed" not in fields:
            raise TypeError("an evaluator's mapping result needs a 'passed' key")
        passed, feedback, score = fields["passed"], fields.get("feedback"), fields.get("score")
    elif hasattr(value, "passed"):
        passed = value.passed
        feedback = getattr(value, "feedback", None)
        score = getattr(value, "score", None)
    else:
        raise TypeError(
            f"an evaluator must return an EvalResult or an object with passed/feedback/score, "
            f"got {type(value).__name__}"
        )
    return EvalResult(
        passed=_passed(passed),
        feedback="" if feedback is None else str(feedback),
        score=None if score is None else float(score),
    )


_TRUE_TEXT = frozenset({"true", "t", "yes", "y", "on", "1", "pass", "passed"})
_FALSE_TEXT = frozenset({"false", "f", "no", "n", "off", "0", "fail", "failed"})


def _passed(value: Any) -> bool:
    """An evaluator's `passed` as a bool: text is read (`"false"` is False, whatever
    `bool("false")` says), anything else is truth-tested.

    Raises:
        ValueError: text that is neither a yes nor a no word.
    """
    if isinstance(value, str):
        word = value.strip().casefold()
        if word in _TRUE_TEXT:
            return True
        if word in _FALSE_TEXT:
            return False
        raise ValueError(f"an evaluator's 'passed' must be a bool or yes/no text, got {value!r}")
    return bool(value)


class _State:
    """What the iterations have produced so far (shared with the iterating task)."""

    __slots__ = ("history", "outputs", "stopped")

    def __init__(self) -> None:
        self.history: list[IterationRecord] = []
        self.outputs: list[Any] = []
        self.stopped = False


class RefinementLoop:
    """Run a step, evaluate its output, update the input, and repeat until an exit.

    Per iteration: run `step` on the current input, evaluate its output, record an
    `IterationRecord`, then check, in this order:

    1. `passed`: the evaluation passed: return this output (always, even if an earlier
       iteration scored higher).
    2. `confident`: `confidence_threshold` is set and the score is >= it.
    3. `converged`: `convergence_window` is set and the last `convergence_window` numeric
       scores of (non-passing) iterations span less than `convergence_threshold`
       (max - min < threshold; iterations without a score are left out).
    4. otherwise, unless this was iteration `max_iterations` (exit `max_iterations`),
       `next_input = state_updater(current_input, output, eval_result)` (awaited if async).

    `timeout` is a hard deadline for the whole loop: at the deadline whatever is in flight
    (step, evaluator or state updater) is cancelled (and detached if it swallows the
    cancellation; no further iteration starts), and the exit is `timeout`. An iteration that
    completes in the same event-loop pass as the deadline keeps its own exit. Cancelling the
    loop from outside propagates `CancelledError` and, likewise, starts no further work even
    if the step swallows the cancellation.

    keep_best: on any exit but `passed`, the best-scoring completed iteration's output is
    returned instead of the latest when the latest score is lower or missing; ties keep the
    latest; with no numeric score at all, the latest. `keep_best=False` always returns the
    latest. With no completed iteration (timeout during the first) the output is None.

    The evaluator receives the step's output (one argument) and is a sync or async callable, a
    Step, or an agent whose output has `passed` / `feedback` / `score` (see
    `as_eval_result`); an agent or callable evaluator runs as a child step named
    `"<loop name>.evaluator"`. Exceptions from the step, evaluator or updater propagate.

    Args:
        step: step-like producing a candidate output from the current input.
        evaluator: judges an output (see above).
        state_updater: `(current_input, output, eval_result) -> next_input`, sync or async.
        max_iterations: at least 1.
        timeout: seconds for the whole loop (> 0), or None.
        convergence_window: number of recent numeric scores compared (>= 1), or None (off).
        convergence_threshold: the span (max - min) under which scores have converged (>= 0).
        confidence_threshold: score at or above which the loop exits `confident` (>= 0), or None.
        keep_best: see above.
        name: the step's name.
        node_id: the spec node id, for traces.

    Raises:
        ValueError: a number out of range (including NaN).
        TypeError: `step` or `evaluator` is not step-like, or `state_updater` is not callable.
    """

    __slots__ = (
        "_call_evaluator",
        "_call_step",
        "_conf",
        "_evaluator",
        "_keep_best",
        "_max",
        "_name",
        "_step",
        "_threshold",
        "_timeout",
        "_updater",
        "_updater_async",
        "_window",
        "node_id",
    )

    def __init__(
        self,
        step: Any,
        evaluator: Any,
        state_updater: Callable[[Any, Any, EvalResult], Any],
        max_iterations: int = 5,
        timeout: float | None = None,
        convergence_window: int | None = None,
        convergence_threshold: float = 0.01,
        confidence_threshold: float | None = None,
        keep_best: bool = True,
        name: str = "refinement_loop",
        *,
        node_id: str | None = None,
    ) -> None:
        where = f"refinement loop {name!r}"
        if max_iterations < 1:
            raise ValueError(f"{where}: max_iterations must be >= 1, got {max_iterations}")
        if timeout is not None and not timeout > 0:
            raise ValueError(f"{where}: timeout must be > 0 seconds, got {timeout}")
        if convergence_window is not None and convergence_window < 1:
            raise ValueError(f"{where}: convergence_window must be >= 1, got {convergence_window}")
        if not convergence_threshold >= 0:
            raise ValueError(
                f"{where}: convergence_threshold must be >= 0, got {convergence_threshold}"
            )
        if confidence_threshold is not None and not confidence_threshold >= 0:
            raise ValueError(
                f"{where}: confidence_threshold must be >= 0, got {confidence_threshold}"
            )
        if not callable(state_updater):
            raise TypeError(f"{where}: state_updater must be callable")
        self._step = coerce_step(step)
        self._evaluator = coerce_step(evaluator, name=f"{name}.evaluator")
        self._updater = state_updater
        # decided once here, not per iteration
        self._call_step = direct_call(self._step)
        self._call_evaluator = direct_call(self._evaluator)
        self._updater_async = is_async_callable(state_updater)
        self._max = max_iterations
        self._timeout = timeout
        self._window = convergence_window
        self._threshold = convergence_threshold
        self._conf = confidence_threshold
        self._keep_best = keep_best
        self._name = name
        self.node_id = node_id

    @property
    def step_name(self) -> str:
        return self._name

    @property
    def step(self) -> Step:
        return self._step

    @property
    def evaluator(self) -> Step:
        """The evaluator as a step."""
        return self._evaluator

    async def execute(self, input_data: Any) -> Any:
        """Run and return only the output."""
        return (await self.run(input_data)).output

    async def run(self, input_data: Any) -> LoopResult:
        """Iterate from `input_data` until an exit; see the class docstring."""
        frame = current_frame()
        if frame is None:
            return await self._run(input_data, None)
        return await run_in_span(
            frame, "refinement_loop", self._name, self.node_id, input_data, self._run, _output_of
        )

    async def _run(self, input_data: Any, span: Span | None) -> LoopResult:
        state = _State()
        if self._timeout is None:
            exit_reason = await self._iterate(input_data, state)
        else:
            task = asyncio.get_running_loop().create_task(
                self._iterate(input_data, state, span, current_frame())
            )
            timed_out = await wait_tasks([task], self._timeout)
            if timed_out and not task.done():
                state.stopped = True  # a step that swallowed the cancellation starts no more work
                await cancel_and_reap([task])
                exit_reason = "timeout"
            else:  # finished in time, or in the same event-loop pass as the deadline
                exit_reason = task.result()
        result = self._result(state, exit_reason)
        if span is not None:
            span.attributes.update(result.to_attributes())
        return result

    async def _iterate(
        self,
        current: Any,
        state: _State,
        span: Span | None = None,
        creator: TraceFrame | None = None,
    ) -> ExitReason:
        """Run the iterations. In a task of its own: `span`, the loop's span to trace under, and
        `creator`, the frame of the code that created the task (see `fork_trace`)."""
        if span is not None:
            fork_trace(span, creator)
        task = current_task()
        cancelling = _never if task is None else task.cancelling
        # untraced, function steps and evaluators are called without their step (see
        # `direct_call`); traced, each runs as its step, with a span of its own
        untraced = current_frame() is None
        step, run_step = self._step, self._call_step if untraced else None
        evaluator, evaluate = self._evaluator, self._call_evaluator if untraced else None
        update, update_async = self._updater, self._updater_async
        outputs, history = state.outputs, state.history
        for iteration in range(1, self._max + 1):
            start = perf_counter()
            if run_step is None:
                output = await step.execute(current)
            elif run_step[1]:
                off_clock_in_race()
                output = await run_step[0](current)
            else:
                output = run_step[0](current)
                if may_await(output):
                    off_clock_in_race()
                    output = await output
            if state.stopped or cancelling():
                raise asyncio.CancelledError
            if evaluate is None:
                verdict = await evaluator.execute(output)
            elif evaluate[1]:
                off_clock_in_race()
                verdict = await evaluate[0](output)
            else:
                verdict = evaluate[0](output)
                if type(verdict) is not EvalResult and may_await(verdict):
                    off_clock_in_race()
                    verdict = await verdict
            if type(verdict) is not EvalResult:
                verdict = as_eval_result(verdict)
            if state.stopped or cancelling():
                raise asyncio.CancelledError
            duration_ms = (perf_counter() - start) * 1e3
            outputs.append(output)
            history.append(IterationRecord(iteration, verdict, duration_ms))
            if verdict.passed:
                return "passed"
            score = verdict.score
            if score is not None and score != score:  # NaN is no score
                score = None
            if self._conf is not None and score is not None and score >= self._conf:
                return "confident"
            if self._window is not None and self._converged(history):
                return "converged"
            if iteration < self._max:
                if update_async:
                    off_clock_in_race()
                    current = await update(current, output, verdict)
                else:
                    current = update(current, output, verdict)
                    if may_await(current):
                        off_clock_in_race()
                        current = await current
                if state.stopped or cancelling():
                    raise asyncio.CancelledError
        return "max_iterations"

    def _converged(self, history: list[IterationRecord]) -> bool:
        window = self._window or 0
        recent: list[float] = []
        for record in reversed(history):
            score = _numeric(record.eval_result.score)
            if score is not None and not record.eval_result.passed:
                recent.append(score)
                if len(recent) == window:
                    return max(recent) - min(recent) < self._threshold
        return False

    def _result(self, state: _State, exit_reason: ExitReason) -> LoopResult:
        history = tuple(state.history)
        outputs = state.outputs[: len(history)]
        best_iteration: int | None = None
        best_score: float | None = None
        for record in history:
            score = _numeric(record.eval_result.score)
            if score is not None and (best_score is None or score >= best_score):
                best_iteration, best_score = record.iteration, score
        returned: int | None = len(history) or None
        if (
            returned is not None
            and exit_reason != "passed"
            and self._keep_best
            and best_iteration is not None
            and best_score is not None
        ):
            latest = _numeric(history[-1].eval_result.score)
            if latest is None or latest < best_score:
                returned = best_iteration
        return LoopResult(
            output=None if returned is None else outputs[returned - 1],
            iterations=len(history),
            exit_reason=exit_reason,
            history=history,
            best_iteration=best_iteration,
            best_score=best_score,
            returned_iteration=returned,
        )

    def __repr__(self) -> str:
        return f"RefinementLoop({self._name!r}, max_iterations={self._max})"


def _output_of(result: LoopResult) -> Any:
    return result.output
