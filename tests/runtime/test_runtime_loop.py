"""RefinementLoop (semantics section 5): exit order, keep_best, timeout, evaluators, tracing."""

from __future__ import annotations

import asyncio
import gc
import math
import time
from dataclasses import dataclass
from typing import Any

import pydantic_ai.models
import pytest
from pydantic_ai import Agent
from pydantic_ai.messages import ModelMessage, ModelResponse, ToolCallPart
from pydantic_ai.models.function import AgentInfo, FunctionModel
from pydantic_ai.usage import RequestUsage

from core.runtime import (
    EvalResult,
    IterationRecord,
    LoopResult,
    RefinementLoop,
    as_eval_result,
    capture_trace,
)

pydantic_ai.models.ALLOW_MODEL_REQUESTS = False


def _run(coro: Any) -> Any:
    return asyncio.run(coro)


def produce(x: int) -> str:
    """The step: output `out<x>`, where x is the iteration's input (0, 1, 2, ...)."""
    return f"out{x}"


def next_input(current: int, output: str, verdict: EvalResult) -> int:
    return current + 1


def scripted(verdicts: list[EvalResult]) -> Any:
    """An evaluator giving verdicts[i] for output `out<i>`."""

    def evaluate(output: str) -> EvalResult:
        return verdicts[int(output[3:])]

    return evaluate


def fail(score: float | None = None) -> EvalResult:
    return EvalResult(passed=False, score=score)


def ok(score: float | None = None) -> EvalResult:
    return EvalResult(passed=True, score=score)


def loop_of(verdicts: list[EvalResult], **kwargs: Any) -> RefinementLoop:
    return RefinementLoop(produce, scripted(verdicts), next_input, **kwargs)


def summary(r: LoopResult) -> tuple[Any, ...]:
    return (
        r.output,
        r.iterations,
        r.exit_reason,
        r.best_iteration,
        r.best_score,
        r.returned_iteration,
    )


def test_construction_rules() -> None:
    ev = scripted([])
    for kwargs in [
        {"max_iterations": 0},
        {"convergence_window": 0},
        {"convergence_threshold": -0.1},
        {"convergence_threshold": math.nan},
        {"confidence_threshold": -1.0},
        {"confidence_threshold": math.nan},
        {"timeout": 0},
        {"timeout": -1.0},
    ]:
        with pytest.raises(ValueError):
            RefinementLoop(produce, ev, next_input, **kwargs)
    with pytest.raises(TypeError, match="state_updater"):
        RefinementLoop(produce, ev, "update")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="int"):
        RefinementLoop(3, ev, next_input)
    RefinementLoop(produce, ev, next_input, convergence_window=1, convergence_threshold=0.0)


def test_passed_returns_that_output_even_if_an_earlier_score_was_higher() -> None:
    r = _run(loop_of([fail(0.9), fail(0.5), ok(0.2)]).run(0))
    assert summary(r) == ("out2", 3, "passed", 1, 0.9, 3)
    assert [(h.iteration, h.eval_result) for h in r.history] == [
        (1, fail(0.9)),
        (2, fail(0.5)),
        (3, ok(0.2)),
    ]
    assert all(isinstance(h, IterationRecord) and h.duration_ms >= 0 for h in r.history)


def test_passed_is_checked_before_confident() -> None:
    r = _run(loop_of([ok(0.99)], confidence_threshold=0.5).run(0))
    assert r.exit_reason == "passed"


def test_confident_at_or_above_the_threshold() -> None:
    r = _run(loop_of([fail(0.5), fail(0.8), fail(0.95)], confidence_threshold=0.8).run(0))
    assert summary(r) == ("out1", 2, "confident", 2, 0.8, 2)


def test_confident_is_checked_before_converged() -> None:
    verdicts = [fail(0.8), fail(0.8)]
    r = _run(loop_of(verdicts, confidence_threshold=0.8, convergence_window=1).run(0))
    assert r.exit_reason == "confident"
    assert r.iterations == 1


def test_converged_when_the_window_spans_less_than_the_threshold() -> None:
    verdicts = [fail(0.1), fail(0.5), fail(0.52), fail(0.53), fail(0.9)]
    r = _run(loop_of(verdicts, convergence_window=2, convergence_threshold=0.05).run(0))
    assert summary(r) == ("out2", 3, "converged", 3, 0.52, 3)
    r = _run(loop_of(verdicts, convergence_window=3, convergence_threshold=0.05).run(0))
    assert summary(r) == ("out3", 4, "converged", 4, 0.53, 4)


def test_convergence_uses_the_last_numeric_scores_only() -> None:
    verdicts = [fail(0.5), fail(None), fail(math.nan), fail(0.505), fail(0.1)]
    r = _run(loop_of(verdicts, convergence_window=2, convergence_threshold=0.01).run(0))
    assert r.exit_reason == "converged"
    assert r.iterations == 4
    assert r.returned_iteration == 4


def test_convergence_span_must_be_strictly_less_than_the_threshold() -> None:
    verdicts = [fail(0.5), fail(0.5), fail(0.5)]
    r = _run(
        loop_of(verdicts, max_iterations=3, convergence_window=2, convergence_threshold=0.0).run(0)
    )
    assert r.exit_reason == "max_iterations"
    verdicts = [fail(0.5), fail(0.75)]  # exact binary fractions: the span is exactly 0.25
    r = _run(
        loop_of(verdicts, max_iterations=2, convergence_window=2, convergence_threshold=0.25).run(0)
    )
    assert r.exit_reason == "max_iterations"


def test_max_iterations_and_the_updater_protocol() -> None:
    calls: list[tuple[Any, Any, EvalResult]] = []

    async def update(current: int, output: str, verdict: EvalResult) -> int:
        calls.append((current, output, verdict))
        return current + 1

    verdicts = [EvalResult(passed=False, feedback=f"fix {i}", score=None) for i in range(3)]
    r = _run(RefinementLoop(produce, scripted(verdicts), update, max_iterations=3).run(0))
    assert summary(r) == ("out2", 3, "max_iterations", None, None, 3)
    # called between iterations, never after the last one
    assert calls == [(0, "out0", verdicts[0]), (1, "out1", verdicts[1])]


def test_keep_best_returns_the_best_when_the_latest_is_lower() -> None:
    r = _run(loop_of([fail(0.5), fail(0.9), fail(0.3)], max_iterations=3).run(0))
    assert summary(r) == ("out1", 3, "max_iterations", 2, 0.9, 2)


def test_keep_best_ties_keep_the_latest() -> None:
    r = _run(loop_of([fail(0.9), fail(0.4), fail(0.9)], max_iterations=3).run(0))
    assert summary(r) == ("out2", 3, "max_iterations", 3, 0.9, 3)


def test_keep_best_when_the_latest_score_is_missing() -> None:
    r = _run(loop_of([fail(0.2), fail(0.7), fail(None)], max_iterations=3).run(0))
    assert summary(r) == ("out1", 3, "max_iterations", 2, 0.7, 2)
    r = _run(loop_of([fail(0.2), fail(0.7), fail(math.nan)], max_iterations=3).run(0))
    assert summary(r) == ("out1", 3, "max_iterations", 2, 0.7, 2)


def test_no_numeric_scores_returns_the_latest() -> None:
    r = _run(loop_of([fail(), fail(), fail()], max_iterations=3).run(0))
    assert summary(r) == ("out2", 3, "max_iterations", None, None, 3)


def test_keep_best_off_returns_the_latest() -> None:
    r = _run(loop_of([fail(0.5), fail(0.9), fail(0.3)], max_iterations=3, keep_best=False).run(0))
    assert summary(r) == ("out2", 3, "max_iterations", 2, 0.9, 3)


def test_keep_best_applies_to_converged_exits() -> None:
    verdicts = [fail(0.9), fail(0.4), fail(0.41)]
    r = _run(loop_of(verdicts, convergence_window=2, convergence_threshold=0.05).run(0))
    assert summary(r) == ("out0", 3, "converged", 1, 0.9, 1)


def test_defaults_five_iterations_and_a_convergence_threshold_of_0_01() -> None:
    verdicts = [fail(0.1), fail(0.2), fail(0.3), fail(0.4), fail(0.5), fail(0.6), fail(0.7)]
    r = _run(loop_of(verdicts).run(0))
    assert summary(r) == ("out4", 5, "max_iterations", 5, 0.5, 5)
    # convergence_threshold defaults to 0.01: a span of 0.009 has converged, 0.02 has not
    r = _run(loop_of([fail(0.5), fail(0.509), fail(0.9)], convergence_window=2).run(0))
    assert (r.exit_reason, r.iterations) == ("converged", 2)
    verdicts = [fail(0.5), fail(0.52), fail(0.9)]
    r = _run(loop_of(verdicts, convergence_window=2, max_iterations=3).run(0))
    assert (r.exit_reason, r.iterations, r.returned_iteration, r.output) == (
        "max_iterations",
        3,
        3,
        "out2",
    )


def test_execute_returns_the_output() -> None:
    assert _run(loop_of([fail(0.1), ok()]).execute(0)) == "out1"


# ---- timeout -------------------------------------------------------------------------------


def slow_from(n: int, swallow: bool) -> Any:
    """A step answering in 10 ms for inputs < n; from input n on it hangs (and, if `swallow`,
    catches its cancellation and sleeps 0.5 s more)."""

    async def step(x: int) -> str:
        try:
            await asyncio.sleep(0.01 if x < n else 10)
        except asyncio.CancelledError:
            if not swallow:
                raise
            await asyncio.sleep(0.5)
            return "late"
        return f"out{x}"

    return step


@pytest.mark.parametrize("swallow", [False, True])
def test_timeout_is_a_hard_deadline_cancelling_the_step(swallow: bool) -> None:
    evaluated: list[str] = []

    def evaluate(output: str) -> EvalResult:
        evaluated.append(output)
        return fail({"out0": 0.7, "out1": 0.4}.get(output))

    reports: list[dict[str, Any]] = []

    async def go() -> tuple[LoopResult, float]:
        asyncio.get_running_loop().set_exception_handler(lambda loop, c: reports.append(c))
        loop = RefinementLoop(
            slow_from(2, swallow), evaluate, next_input, max_iterations=9, timeout=0.1
        )
        start = time.perf_counter()
        result = await loop.run(0)
        return result, time.perf_counter() - start

    r, elapsed = _run(go())
    gc.collect()
    assert elapsed < 0.3  # timeout + grace, never the 0.5 s a swallowing step takes
    assert summary(r) == ("out0", 2, "timeout", 1, 0.7, 1)
    assert evaluated == ["out0", "out1"]  # the late value was never evaluated
    assert reports == []


@pytest.mark.parametrize("swallow", [False, True])
def test_timeout_during_the_evaluator(swallow: bool) -> None:
    """The deadline falls while the evaluator judges iteration 2: it is cancelled (detached if
    it swallows that), iteration 2 never completes, and its late verdict is never used."""

    async def evaluate(output: str) -> EvalResult:
        if output == "out0":
            return fail(0.6)
        try:
            await asyncio.sleep(10)
        except asyncio.CancelledError:
            if not swallow:
                raise
            await asyncio.sleep(0.5)
        return ok(1.0)

    async def go() -> tuple[LoopResult, float]:
        loop = RefinementLoop(produce, evaluate, next_input, max_iterations=5, timeout=0.1)
        start = time.perf_counter()
        result = await loop.run(0)
        return result, time.perf_counter() - start

    r, elapsed = _run(go())
    assert elapsed < 0.3
    assert summary(r) == ("out0", 1, "timeout", 1, 0.6, 1)


def test_timeout_before_the_first_iteration_completes() -> None:
    loop = RefinementLoop(slow_from(0, False), scripted([]), next_input, timeout=0.03)
    r = _run(loop.run(0))
    assert summary(r) == (None, 0, "timeout", None, None, None)
    assert r.history == ()


def test_cancelling_a_loop_with_timeout_from_outside_propagates() -> None:
    loop = RefinementLoop(slow_from(0, True), scripted([]), next_input, timeout=5)

    async def go() -> float:
        task = asyncio.create_task(loop.run(0))
        await asyncio.sleep(0.02)
        start = time.perf_counter()
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        return time.perf_counter() - start

    assert _run(go()) < 0.2


@pytest.mark.parametrize("timeout", [None, 5.0])
def test_cancelling_from_outside_starts_no_more_work_when_the_step_swallows_it(
    timeout: float | None,
) -> None:
    """A step that catches the cancellation and returns must not keep the loop iterating (in
    the same task without a timeout, or detached in the background with one)."""
    calls: list[str] = []

    async def swallowing(x: int) -> str:
        calls.append(f"step {x}")
        try:
            await asyncio.sleep(10)
        except asyncio.CancelledError:
            await asyncio.sleep(0.05)
        return f"out{x}"

    def evaluate(output: str) -> EvalResult:
        calls.append(f"evaluate {output}")
        return fail(0.1)

    loop = RefinementLoop(swallowing, evaluate, next_input, max_iterations=5, timeout=timeout)

    async def go() -> None:
        task = asyncio.create_task(loop.run(0))
        await asyncio.sleep(0.02)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        await asyncio.sleep(0.2)  # a detached iteration would go on meanwhile

    _run(go())
    assert calls == ["step 0"]


def test_an_iteration_finishing_at_the_deadline_keeps_its_exit() -> None:
    """The step's wake-up and the deadline fall due in the same event-loop pass (another task
    blocked the loop past both): the iteration completes and passes, so the exit is `passed`
    with its output, not `timeout` with another (keep_best) output."""

    async def step(x: int) -> str:
        await asyncio.sleep(0.04)
        return f"out{x}"

    loop = RefinementLoop(step, scripted([ok(0.5)]), next_input, timeout=0.05)

    async def go() -> LoopResult:
        async def blocker() -> None:
            await asyncio.sleep(0.01)
            time.sleep(0.1)  # blocks the event loop past the step's wake-up and the deadline

        blocking = asyncio.create_task(blocker())
        result = await loop.run(0)
        await blocking
        return result

    r = _run(go())
    assert summary(r) == ("out0", 1, "passed", 1, 0.5, 1)


# ---- evaluators ----------------------------------------------------------------------------


@dataclass
class Review:
    passed: bool
    feedback: str
    score: float | None


def test_evaluator_result_shapes() -> None:
    assert as_eval_result(ok(1.0)) == ok(1.0)
    assert as_eval_result({"passed": False, "score": 2}) == EvalResult(passed=False, score=2.0)
    assert as_eval_result(Review(True, "good", None)) == EvalResult(passed=True, feedback="good")

    class OnlyPassed:
        passed = 1

    assert as_eval_result(OnlyPassed()) == EvalResult(passed=True)
    with pytest.raises(TypeError, match="str"):
        as_eval_result("yes")
    with pytest.raises(TypeError, match="passed"):
        as_eval_result({"score": 1.0})


def test_a_passed_given_as_text_is_read_not_truth_tested() -> None:
    """`bool("false")` is True: a verdict parsed from text (e.g. a JSON reply read by a callable
    evaluator) must not turn a fail into a pass."""
    assert as_eval_result({"passed": "false", "score": "0.25"}) == fail(0.25)
    assert as_eval_result({"passed": "False"}) == fail()
    assert as_eval_result({"passed": " no "}) == fail()
    assert as_eval_result({"passed": "true"}) == ok()
    assert as_eval_result(Review("1", "fine", None)) == EvalResult(passed=True, feedback="fine")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="passed"):
        as_eval_result({"passed": "maybe"})
    r = _run(RefinementLoop(produce, lambda out: {"passed": "false"}, next_input).run(0))
    assert (r.exit_reason, r.iterations) == ("max_iterations", 5)


def test_async_and_object_evaluators() -> None:
    async def evaluate(output: str) -> Review:
        return Review(output == "out1", f"saw {output}", 0.5)

    r = _run(RefinementLoop(produce, evaluate, next_input).run(0))
    assert summary(r) == ("out1", 2, "passed", 2, 0.5, 2)
    assert r.history[0].eval_result == EvalResult(passed=False, feedback="saw out0", score=0.5)


def test_an_evaluator_returning_junk_raises() -> None:
    with pytest.raises(TypeError, match="int"):
        _run(RefinementLoop(produce, lambda out: 3, next_input).run(0))


def test_step_errors_propagate() -> None:
    def bad(x: int) -> str:
        raise RuntimeError("step broke")

    with pytest.raises(RuntimeError, match="step broke"):
        _run(RefinementLoop(bad, scripted([]), next_input).run(0))


def test_agent_evaluator_and_tracing() -> None:
    def judge(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        prompt = str(messages[-1].parts[-1].content)  # type: ignore[union-attr]
        passed = prompt == "out1"
        return ModelResponse(
            parts=[
                ToolCallPart(
                    info.output_tools[0].name,
                    {"passed": passed, "feedback": "more" if not passed else "", "score": 0.25},
                )
            ],
            usage=RequestUsage(input_tokens=4, output_tokens=6),
        )

    judge_agent = Agent(FunctionModel(judge, model_name="judge"), output_type=EvalResult)
    loop = RefinementLoop(produce, judge_agent, next_input, name="refine", node_id="L")

    async def go() -> tuple[LoopResult, Any]:
        with capture_trace() as trace:
            result = await loop.run(0)
        return result, trace

    r, trace = _run(go())
    assert summary(r) == ("out1", 2, "passed", 2, 0.25, 2)
    assert [(s.parent_id, s.kind, s.name) for s in trace.spans] == [
        (None, "refinement_loop", "refine"),
        (0, "function_step", "produce"),
        (0, "agent_step", "refine.evaluator"),
        (0, "function_step", "produce"),
        (0, "agent_step", "refine.evaluator"),
    ]
    root = trace.spans[0]
    assert root.node_id == "L"
    assert root.output_summary == "out1"
    attrs = dict(root.attributes)
    history = attrs.pop("history")
    assert attrs == {
        "iterations": 2,
        "exit_reason": "passed",
        "returned_iteration": 2,
        "best_iteration": 2,
        "best_score": 0.25,
    }
    assert [(h["iteration"], h["passed"], h["score"], h["feedback"]) for h in history] == [
        (1, False, 0.25, "more"),
        (2, True, 0.25, ""),
    ]
    usage = trace.usage_by_model()["function:judge"]
    assert (usage.requests, usage.input_tokens, usage.output_tokens) == (2, 8, 12)
