"""Pipeline: steps run one after another, each output the next input (semantics section 2)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Sequence
from contextlib import nullcontext
from dataclasses import dataclass
from enum import StrEnum
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from core.errors import PipelineStepError
from core.runtime._tasks import cancel_requested
from core.runtime._trace import run_in_span
from core.runtime.step import Step, coerce_step
from core.runtime.tracing import Span, current_frame, finish_span, new_span, use_span

__all__ = ["ErrorStrategy", "Pipeline", "PipelineEvent", "PipelineEventType", "StepConfig"]


class ErrorStrategy(StrEnum):
    """What a pipeline does when a step raises."""

    STOP = "stop"
    """Raise `PipelineStepError` (step name and index, chained to the cause)."""
    SKIP = "skip"
    """Emit `step_skip` and pass the failed step's *input* on unchanged."""
    RETRY = "retry"
    """Try again, up to `max_retries + 1` attempts in all, then raise `PipelineStepError`."""


class StepConfig(BaseModel):
    """How a pipeline runs one of its steps.

    Raises:
        pydantic.ValidationError (a `ValueError`): `max_retries < 0` or `retry_backoff_s < 0`.
    """

    model_config = ConfigDict(frozen=True, extra="forbid", use_attribute_docstrings=True)

    name: str = ""
    """Name of the step in events and errors; "" uses the step's own `step_name`."""
    on_error: ErrorStrategy = ErrorStrategy.STOP
    """What to do when the step raises."""
    max_retries: int = Field(default=1, ge=0)
    """Extra attempts under RETRY (attempts = max_retries + 1); ignored by STOP and SKIP."""
    retry_backoff_s: float = Field(default=0.0, ge=0.0, allow_inf_nan=False)
    """Fixed delay between two attempts under RETRY, in seconds."""


_DEFAULT_CONFIG = StepConfig()
_NO_SPAN = nullcontext()

PipelineEventType = Literal[
    "pipeline_start",
    "step_start",
    "step_complete",
    "step_error",
    "step_skip",
    "pipeline_complete",
    "pipeline_error",
]


@dataclass(frozen=True, slots=True)
class PipelineEvent:
    """One event of `Pipeline.run_stream`.

    Attributes:
        type: what happened (see `Pipeline.run_stream` for the order).
        pipeline: the pipeline's name.
        step_index: 0-based step position; None for pipeline-level events.
        step_name: the step's name (its `StepConfig.name`, else `step_name`); None for
            pipeline-level events.
        attempt: 1-based attempt number on `step_start`, `step_error`, `step_complete` and
            `step_skip`; None otherwise.
        output: the step's output on `step_complete`, the pipeline's on `pipeline_complete`;
            the passed-on input on `step_skip`; None otherwise.
        error: the exception on `step_error` and `step_skip` (the step's) and
            `pipeline_error` (the `PipelineStepError`); None otherwise.
    """

    type: PipelineEventType
    pipeline: str
    step_index: int | None = None
    step_name: str | None = None
    attempt: int | None = None
    output: Any = None
    error: BaseException | None = None

    @property
    def event_type(self) -> PipelineEventType:
        """The same as `type` (the name the reference library's events use)."""
        return self.type


@dataclass(frozen=True, slots=True)
class _Entry:
    step: Step
    name: str
    on_error: ErrorStrategy
    attempts: int
    backoff_s: float


class Pipeline:
    """Run steps in sequence: each step's output is the next step's input.

    Error handling per step follows its `StepConfig` (default STOP):

    - STOP: raise `PipelineStepError` (step name, index) chained to the step's exception.
    - SKIP: pass the step's input on unchanged to the next step.
    - RETRY: up to `max_retries + 1` attempts with `retry_backoff_s` seconds between two
      attempts (a fixed delay), then `PipelineStepError` chained to the last exception.

    Only `Exception`s are handled; cancellation and other `BaseException`s propagate as-is.
    A cancelled pipeline starts no further step (or attempt) even when the running step
    swallows the cancellation: it raises `CancelledError` instead (see
    `core.runtime._tasks.cancel_requested`).

    Args:
        steps: step-likes (see `coerce_step`) or `(step_like, StepConfig | None)` pairs.
        name: the pipeline's name.
        node_id: the spec node id, for traces.

    Raises:
        ValueError: `steps` is empty (or a `StepConfig` is invalid).
        TypeError: an entry is not step-like.
    """

    __slots__ = ("_entries", "_name", "node_id")

    def __init__(
        self,
        steps: Sequence[Any],
        name: str = "pipeline",
        *,
        node_id: str | None = None,
    ) -> None:
        entries: list[_Entry] = []
        for entry in steps:
            config = _DEFAULT_CONFIG
            if isinstance(entry, tuple):
                pair: tuple[Any, ...] = entry  # pyright: ignore[reportUnknownVariableType]
                if len(pair) != 2:
                    raise TypeError("a pipeline entry tuple must be (step_like, StepConfig)")
                entry, cfg = pair
                if cfg is not None:
                    if not isinstance(cfg, StepConfig):
                        raise TypeError(f"expected a StepConfig, got {type(cfg).__name__}")
                    config = cfg
            step = coerce_step(entry)
            entries.append(
                _Entry(
                    step=step,
                    name=config.name or step.step_name,
                    on_error=config.on_error,
                    attempts=config.max_retries + 1
                    if config.on_error is ErrorStrategy.RETRY
                    else 1,
                    backoff_s=config.retry_backoff_s,
                )
            )
        if not entries:
            raise ValueError(f"pipeline {name!r} needs at least one step")
        self._entries: tuple[_Entry, ...] = tuple(entries)
        self._name = name
        self.node_id = node_id

    @property
    def step_name(self) -> str:
        return self._name

    @property
    def steps(self) -> tuple[Step, ...]:
        """The coerced steps, in order."""
        return tuple(e.step for e in self._entries)

    async def execute(self, input_data: Any) -> Any:
        """Same as `run`."""
        return await self.run(input_data)

    async def run(self, input_data: Any) -> Any:
        """Run every step in order and return the last output.

        Raises:
            PipelineStepError: a STOP step failed or a RETRY step ran out of attempts.
        """
        frame = current_frame()
        if frame is not None:
            return await run_in_span(
                frame, "pipeline", self._name, self.node_id, input_data, self._run
            )
        return await self._run(input_data, None)

    async def _run(self, input_data: Any, span: Span | None) -> Any:
        value = input_data
        task = asyncio.current_task()
        for index, entry in enumerate(self._entries):
            if task is not None and task.cancelling():  # a step swallowed a cancellation
                raise asyncio.CancelledError
            try:
                value = await entry.step.execute(value)
            except Exception as exc:
                value = await self._recover(index, entry, value, exc, span)
        return value

    async def _recover(
        self, index: int, entry: _Entry, value: Any, exc: Exception, span: Span | None
    ) -> Any:
        """After attempt 1 of step `index` raised `exc`: skip, retry or raise (see class doc)."""
        if entry.on_error is ErrorStrategy.SKIP:
            if span is not None:
                span.attributes.setdefault("skipped", []).append(index)
            return value
        attempt = 1
        task = asyncio.current_task()
        while attempt < entry.attempts:
            if entry.backoff_s > 0:
                await asyncio.sleep(entry.backoff_s)
            if cancel_requested(task):
                raise asyncio.CancelledError
            attempt += 1
            try:
                out = await entry.step.execute(value)
            except Exception as again:
                exc = again
                continue
            _note_retries(span, index, attempt - 1)
            return out
        _note_retries(span, index, attempt - 1)
        raise self._error(index, entry, attempt, exc) from exc

    def _error(self, index: int, entry: _Entry, attempts: int, exc: Exception) -> PipelineStepError:
        return PipelineStepError(
            f"pipeline {self._name!r}: step {index} ({entry.name!r}) failed after "
            f"{attempts} attempt(s): {type(exc).__name__}: {exc}",
            step_name=entry.name,
            step_index=index,
        )

    async def run_stream(self, input_data: Any) -> AsyncIterator[PipelineEvent]:
        """Run like `run`, yielding an event for everything that happens.

        Order: `pipeline_start`; per step and attempt `step_start`, then `step_complete`
        (with the output) or `step_error` (with the exception; one per failed attempt), and
        after a failed SKIP step `step_skip`; finally `pipeline_complete` (with the output),
        or `pipeline_error` (with the `PipelineStepError`), after which that error is raised.

        Raises:
            PipelineStepError: as `run`, after the `pipeline_error` event.
        """
        name = self._name
        frame = current_frame()
        span: Span | None = None
        if frame is not None:  # made current only around each step (below): a generator
            span = new_span(frame, "pipeline", name, self.node_id, input_data)  # yields between
        outcome: BaseException | None = None
        value = input_data
        try:
            yield PipelineEvent("pipeline_start", name)
            for index, entry in enumerate(self._entries):
                attempt = 0
                while True:
                    if cancel_requested(asyncio.current_task()):  # a step swallowed one
                        raise asyncio.CancelledError
                    attempt += 1
                    yield PipelineEvent("step_start", name, index, entry.name, attempt)
                    try:
                        with use_span(span) if span is not None else _NO_SPAN:
                            out = await entry.step.execute(value)
                    except Exception as exc:
                        yield PipelineEvent(
                            "step_error", name, index, entry.name, attempt, error=exc
                        )
                        if entry.on_error is ErrorStrategy.SKIP:
                            if span is not None:
                                span.attributes.setdefault("skipped", []).append(index)
                            yield PipelineEvent(
                                "step_skip", name, index, entry.name, attempt, value, exc
                            )
                            break
                        if attempt < entry.attempts:
                            if entry.backoff_s > 0:
                                await asyncio.sleep(entry.backoff_s)
                            continue
                        _note_retries(span, index, attempt - 1)
                        error = self._error(index, entry, attempt, exc)
                        error.__cause__ = exc
                        yield PipelineEvent("pipeline_error", name, error=error)
                        raise error from exc
                    value = out
                    _note_retries(span, index, attempt - 1)
                    yield PipelineEvent("step_complete", name, index, entry.name, attempt, out)
                    break
            yield PipelineEvent("pipeline_complete", name, output=value)
        except BaseException as exc:
            outcome = exc
            raise
        finally:
            if span is not None:
                finish_span(span, output=value, error=outcome)

    def __repr__(self) -> str:
        return f"Pipeline({self._name!r}, {len(self._entries)} steps)"


def _note_retries(span: Span | None, index: int, retries: int) -> None:
    """Record on the pipeline span how many retries step `index` used (span attribute
    `retries`: `{"<index>": n}`, only for steps that retried)."""
    if span is not None and retries > 0:
        span.attributes.setdefault("retries", {})[str(index)] = retries
