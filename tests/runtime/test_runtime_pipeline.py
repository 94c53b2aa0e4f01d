"""Pipeline (semantics section 2): order, STOP / SKIP / RETRY, events, errors, tracing."""

from __future__ import annotations

import asyncio
import time
from typing import Any

import pydantic
import pytest

from core.errors import PipelineStepError
from core.runtime import (
    ErrorStrategy,
    FunctionStep,
    Parallel,
    Pipeline,
    PipelineEvent,
    StepConfig,
    capture_trace,
)


def inc(x: int) -> int:
    return x + 1


async def double(x: int) -> int:
    return x * 2


def boom(x: Any) -> Any:
    raise ValueError(f"boom {x}")


class Flaky:
    """Fails `failures` times, then adds 10; records the time of every attempt."""

    def __init__(self, failures: int) -> None:
        self.failures = failures
        self.calls: list[float] = []
        self.__name__ = "flaky"

    def __call__(self, x: int) -> int:
        self.calls.append(time.monotonic())
        if len(self.calls) <= self.failures:
            raise RuntimeError(f"attempt {len(self.calls)} failed")
        return x + 10


def _events(pipe: Pipeline, x: Any) -> tuple[list[tuple[Any, ...]], BaseException | None]:
    """(type, step_index, step_name, attempt, output, error type) per event, and the raised error."""

    async def go() -> tuple[list[tuple[Any, ...]], BaseException | None]:
        out: list[tuple[Any, ...]] = []
        try:
            async for ev in pipe.run_stream(x):
                assert isinstance(ev, PipelineEvent)
                assert ev.pipeline == pipe.step_name
                err = None if ev.error is None else type(ev.error).__name__
                out.append((ev.type, ev.step_index, ev.step_name, ev.attempt, ev.output, err))
        except Exception as exc:
            return out, exc
        return out, None

    return asyncio.run(go())


def test_outputs_chain_and_the_last_is_returned() -> None:
    pipe = Pipeline([inc, double, inc])
    assert asyncio.run(pipe.run(1)) == 5
    assert asyncio.run(pipe.execute(1)) == 5
    assert pipe.step_name == "pipeline"
    assert [s.step_name for s in pipe.steps] == ["inc", "double", "inc"]


def test_construction_rules() -> None:
    with pytest.raises(ValueError, match="at least one step"):
        Pipeline([])
    with pytest.raises(ValueError):
        StepConfig(max_retries=-1)
    with pytest.raises(ValueError):
        Pipeline([(inc, StepConfig(on_error=ErrorStrategy.RETRY, max_retries=-1))])
    with pytest.raises(ValueError):
        StepConfig(retry_backoff_s=-0.1)
    with pytest.raises(TypeError, match="int"):
        Pipeline([inc, 3])
    with pytest.raises(TypeError, match="StepConfig"):
        Pipeline([(inc, {"on_error": "skip"})])
    # strings are accepted for the strategy; a config is frozen
    cfg = StepConfig(on_error="retry")  # type: ignore[arg-type]
    assert cfg.on_error is ErrorStrategy.RETRY
    assert [s.value for s in ErrorStrategy] == ["stop", "skip", "retry"]
    assert StepConfig() == StepConfig(
        name="", on_error=ErrorStrategy.STOP, max_retries=1, retry_backoff_s=0.0
    )
    with pytest.raises(pydantic.ValidationError):
        cfg.name = "x"  # type: ignore[misc]
    # a (step, None) entry uses the default config
    assert asyncio.run(Pipeline([(inc, None)]).run(1)) == 2


def test_stop_raises_a_chained_pipeline_step_error() -> None:
    pipe = Pipeline([inc, (boom, StepConfig(name="explode")), inc], name="p")
    with pytest.raises(PipelineStepError) as info:
        asyncio.run(pipe.run(1))
    err = info.value
    assert err.step_name == "explode"
    assert err.step_index == 1
    assert isinstance(err.__cause__, ValueError)
    assert str(err.__cause__) == "boom 2"
    assert str(err) == (
        "pipeline 'p': step 1 ('explode') failed after 1 attempt(s): ValueError: boom 2"
    )


def test_default_config_is_stop_even_with_max_retries() -> None:
    flaky = Flaky(failures=1)
    with pytest.raises(PipelineStepError):
        asyncio.run(Pipeline([(flaky, StepConfig(max_retries=3))]).run(0))
    assert len(flaky.calls) == 1


def test_skip_passes_the_input_on_unchanged() -> None:
    pipe = Pipeline([inc, (boom, StepConfig(on_error=ErrorStrategy.SKIP)), double])
    assert asyncio.run(pipe.run(1)) == 4


def test_retry_succeeds_within_max_retries() -> None:
    flaky = Flaky(failures=2)
    pipe = Pipeline([(flaky, StepConfig(on_error=ErrorStrategy.RETRY, max_retries=2))])
    assert asyncio.run(pipe.run(1)) == 11
    assert len(flaky.calls) == 3


def test_retry_exhausted_raises_after_max_retries_plus_one_attempts() -> None:
    flaky = Flaky(failures=5)
    pipe = Pipeline([inc, (flaky, StepConfig(on_error=ErrorStrategy.RETRY, max_retries=2))])
    with pytest.raises(PipelineStepError) as info:
        asyncio.run(pipe.run(1))
    assert len(flaky.calls) == 3
    assert info.value.step_index == 1
    assert info.value.step_name == "flaky"
    assert str(info.value.__cause__) == "attempt 3 failed"
    assert "after 3 attempt(s)" in str(info.value)


def test_retry_with_zero_retries_is_one_attempt() -> None:
    flaky = Flaky(failures=1)
    with pytest.raises(PipelineStepError):
        asyncio.run(Pipeline([(flaky, StepConfig(on_error="retry", max_retries=0))]).run(0))  # type: ignore[arg-type]
    assert len(flaky.calls) == 1


def test_retry_backoff_is_honoured_between_attempts() -> None:
    flaky = Flaky(failures=2)
    cfg = StepConfig(on_error=ErrorStrategy.RETRY, max_retries=2, retry_backoff_s=0.05)
    assert asyncio.run(Pipeline([(flaky, cfg)]).run(0)) == 10
    gaps = [b - a for a, b in zip(flaky.calls, flaky.calls[1:], strict=False)]
    assert len(gaps) == 2
    assert all(g >= 0.049 for g in gaps)  # a lower bound only: sleeping never ends early


def test_cancellation_is_not_handled_as_a_step_error() -> None:
    async def cancelled(x: int) -> int:
        raise asyncio.CancelledError

    pipe = Pipeline([(cancelled, StepConfig(on_error=ErrorStrategy.SKIP)), inc])

    async def go() -> None:
        await pipe.run(1)

    with pytest.raises(asyncio.CancelledError):
        asyncio.run(go())


async def swallowing(x: Any) -> Any:
    """Catches its cancellation and returns as if nothing happened."""
    try:
        await asyncio.sleep(10)
    except asyncio.CancelledError:
        await asyncio.sleep(0.05)
    return x


def test_a_cancelled_pipeline_starts_no_further_step_even_if_a_step_swallows_it() -> None:
    """Cancelled from outside (directly, or by a Parallel's deadline that then detaches it), a
    pipeline whose running step swallows the cancellation must not go on to its next steps:
    they would run unseen (e.g. paid model calls after the trace was read)."""
    ran: list[str] = []

    def record(x: Any) -> Any:
        ran.append("next step")
        return x

    async def go() -> None:
        task = asyncio.create_task(Pipeline([swallowing, record]).run(1))
        await asyncio.sleep(0.02)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        result = await Parallel([Pipeline([swallowing, record]), inc], timeout=0.02).run(1)
        assert isinstance(result.errors[0], TimeoutError)
        assert result.merged == [2]
        await asyncio.sleep(0.15)  # the detached branch ends meanwhile

    asyncio.run(go())
    assert ran == []


def test_a_cancelled_stream_starts_no_further_step() -> None:
    ran: list[str] = []

    def record(x: Any) -> Any:
        ran.append("next step")
        return x

    async def consume() -> list[str]:
        seen: list[str] = []
        async for event in Pipeline([swallowing, record]).run_stream(1):
            seen.append(event.type)
        return seen

    async def go() -> None:
        task = asyncio.create_task(consume())
        await asyncio.sleep(0.02)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    asyncio.run(go())
    assert ran == []


def test_stream_events_for_a_clean_run() -> None:
    events, err = _events(Pipeline([inc, double], name="p"), 1)
    assert err is None
    assert events == [
        ("pipeline_start", None, None, None, None, None),
        ("step_start", 0, "inc", 1, None, None),
        ("step_complete", 0, "inc", 1, 2, None),
        ("step_start", 1, "double", 1, None, None),
        ("step_complete", 1, "double", 1, 4, None),
        ("pipeline_complete", None, None, None, 4, None),
    ]


def test_stream_events_for_skip_and_retry() -> None:
    flaky = Flaky(failures=1)
    pipe = Pipeline(
        [
            (boom, StepConfig(name="b", on_error=ErrorStrategy.SKIP)),
            (flaky, StepConfig(on_error=ErrorStrategy.RETRY, max_retries=1)),
        ]
    )
    events, err = _events(pipe, 1)
    assert err is None
    assert events == [
        ("pipeline_start", None, None, None, None, None),
        ("step_start", 0, "b", 1, None, None),
        ("step_error", 0, "b", 1, None, "ValueError"),
        ("step_skip", 0, "b", 1, 1, "ValueError"),
        ("step_start", 1, "flaky", 1, None, None),
        ("step_error", 1, "flaky", 1, None, "RuntimeError"),
        ("step_start", 1, "flaky", 2, None, None),
        ("step_complete", 1, "flaky", 2, 11, None),
        ("pipeline_complete", None, None, None, 11, None),
    ]


def test_stream_events_for_a_failure_then_the_error_is_raised() -> None:
    flaky = Flaky(failures=9)
    pipe = Pipeline([inc, (flaky, StepConfig(on_error=ErrorStrategy.RETRY, max_retries=1)), inc])
    events, err = _events(pipe, 1)
    assert events == [
        ("pipeline_start", None, None, None, None, None),
        ("step_start", 0, "inc", 1, None, None),
        ("step_complete", 0, "inc", 1, 2, None),
        ("step_start", 1, "flaky", 1, None, None),
        ("step_error", 1, "flaky", 1, None, "RuntimeError"),
        ("step_start", 1, "flaky", 2, None, None),
        ("step_error", 1, "flaky", 2, None, "RuntimeError"),
        ("pipeline_error", None, None, None, None, "PipelineStepError"),
    ]
    assert isinstance(err, PipelineStepError)
    assert err.step_index == 1
    assert isinstance(err.__cause__, RuntimeError)


def test_stream_error_event_carries_the_raised_error() -> None:
    pipe = Pipeline([boom])

    async def go() -> tuple[PipelineEvent, BaseException]:
        last: PipelineEvent | None = None
        try:
            async for ev in pipe.run_stream(0):
                last = ev
        except PipelineStepError as exc:
            assert last is not None
            return last, exc
        raise AssertionError("no error")

    last, exc = asyncio.run(go())
    assert last.type == "pipeline_error"
    assert last.error is exc


def test_tracing_spans_for_steps_retries_and_skips() -> None:
    flaky = Flaky(failures=1)
    pipe = Pipeline(
        [
            inc,
            (flaky, StepConfig(on_error=ErrorStrategy.RETRY, max_retries=2)),
            (boom, StepConfig(on_error=ErrorStrategy.SKIP)),
        ],
        name="p",
        node_id="n0",
    )

    async def go() -> Any:
        with capture_trace() as trace:
            out = await pipe.run(1)
        return out, trace

    out, trace = asyncio.run(go())
    assert out == 12
    rows = [(s.span_id, s.parent_id, s.kind, s.name, s.error) for s in trace.spans]
    assert rows == [
        (0, None, "pipeline", "p", None),
        (1, 0, "function_step", "inc", None),
        (2, 0, "function_step", "flaky", "RuntimeError: attempt 1 failed"),
        (3, 0, "function_step", "flaky", None),
        (4, 0, "function_step", "boom", "ValueError: boom 12"),
    ]
    root = trace.spans[0]
    assert root.node_id == "n0"
    assert root.input_summary == "1"
    assert root.output_summary == "12"
    assert root.attributes == {"retries": {"1": 1}, "skipped": [2]}
    assert all(s.end_ns is not None for s in trace.spans)


def test_tracing_the_stream_gives_the_same_spans() -> None:
    flaky = Flaky(failures=1)
    pipe = Pipeline(
        [inc, (flaky, StepConfig(on_error=ErrorStrategy.RETRY)), FunctionStep(inc, node_id="s2")],
        name="p",
    )

    async def go() -> Any:
        with capture_trace() as trace:
            async for _ in pipe.run_stream(1):
                pass
        return trace

    trace = asyncio.run(go())
    rows = [(s.parent_id, s.kind, s.name, s.node_id, s.error) for s in trace.spans]
    assert rows == [
        (None, "pipeline", "p", None, None),
        (0, "function_step", "inc", None, None),
        (0, "function_step", "flaky", None, "RuntimeError: attempt 1 failed"),
        (0, "function_step", "flaky", None, None),
        (0, "function_step", "inc", "s2", None),
    ]
    assert trace.spans[0].output_summary == "13"
    assert trace.spans[0].attributes == {"retries": {"1": 1}}


def test_tracing_a_failed_pipeline_records_the_error() -> None:
    async def go() -> Any:
        with capture_trace() as trace:
            with pytest.raises(PipelineStepError):
                await Pipeline([boom], name="p").run(1)
        return trace

    trace = asyncio.run(go())
    assert trace.spans[0].error == (
        "PipelineStepError: pipeline 'p': step 0 ('boom') failed after 1 attempt(s): "
        "ValueError: boom 1"
    )
    assert trace.spans[1].error == "ValueError: boom 1"


def test_no_spans_without_a_trace() -> None:
    async def go() -> Any:
        out = await Pipeline([inc]).run(1)
        with capture_trace() as trace:
            pass
        return out, trace

    out, trace = asyncio.run(go())
    assert out == 2
    assert trace.spans == []
