"""Parallel: every step gets the same input and runs concurrently (semantics section 3)."""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from core.agents.call_cache import enter_fastest_race
from core.runtime._tasks import cancel_and_reap, wait_for_wakeup
from core.runtime._trace import run_in_span
from core.runtime.step import Step, coerce_step
from core.runtime.tracing import Span, TraceFrame, current_frame, fork_trace

__all__ = ["MergeFn", "MergeStrategy", "Parallel", "ParallelResult"]

MergeFn = Callable[[list[Any]], Any]
"""A custom merge: the successful outputs in step order -> the merged value (may be async)."""


class MergeStrategy(StrEnum):
    """The built-in merges (a string with one of these values is accepted too).

    Other merges are plain callables `list -> Any` (`MergeFn`); hydration resolves other
    names through its callable registry.
    """

    collect_all = "collect_all"
    """The list of successful outputs, in step order (`[]` when every step failed)."""
    first_wins = "first_wins"
    """The first successful output in step order (None when every step failed)."""
    fastest = "fastest"
    """The output of the first step to finish successfully; the others are cancelled as soon
    as it finishes (None when every step failed).

    Cost rule (docs/concepts.md, "Cost"): every branch that started is charged in full for every model call it made or had started, replayed or answered from the call cache, finished or cancelled. The runtime obeys it where the charge is known
    up front: an `AgentStep` on a `QuotingModel` (the replay model) or answered from the call
    cache charges the call in full at its start, so a loser's cost never depends on when its
    cancellation lands. A hosted model's loser is charged what pydantic-ai counted by then."""


@dataclass(frozen=True, slots=True)
class ParallelResult:
    """What a `Parallel` run produced, one slot per step in step order.

    Attributes:
        outputs: `outputs[i]` is step i's output if it succeeded (it may legitimately be None),
            else None.
        errors: `errors[i]` is None if step i succeeded, else its exception: what it raised,
            `TimeoutError` if it was still running at the group's deadline, or
            `asyncio.CancelledError` if it was cancelled (by `fastest` once another step won,
            or by itself). Success is decided by this slot, never by `outputs[i] is None`.
        merged: the merge strategy's value.
    """

    outputs: list[Any]
    errors: list[BaseException | None]
    merged: Any

    @property
    def succeeded(self) -> list[int]:
        """Indices of the steps that succeeded, in step order."""
        return [i for i, e in enumerate(self.errors) if e is None]


class Parallel:
    """Run steps concurrently on the same input, then merge their outputs.

    Each step runs in its own asyncio task (with a copy of the context, so trace spans nest
    under this one). Step failures never raise out of `run`: they fill the error slot of the
    `ParallelResult`. A merge that raises propagates. Cancelling the run from outside cancels
    every branch and propagates. A `BaseException` that is not an `Exception` nor a
    cancellation (e.g. `KeyboardInterrupt`, `SystemExit`) is not a step failure: as in
    `Pipeline`, it propagates out of `run`, after the other branches are cancelled.

    `timeout` is one wall-clock budget for the whole group and a hard deadline: at the
    deadline the unfinished branches are cancelled, given a short grace
    (`core.runtime._tasks.CANCEL_GRACE_S`, 20 ms) and, if they swallow the cancellation, left
    behind (kept alive and reaped in the background, never awaited), so `run` returns within
    `timeout` plus the grace. Such branches are recorded as `TimeoutError`; whatever they
    return later is discarded.

    Args:
        steps: step-likes (see `coerce_step`).
        merge: a `MergeStrategy` (or its string value), or a callable taking the list of
            successful outputs in step order (sync or async).
        timeout: the group's budget in seconds, or None for no limit.
        name: the step's name.
        node_id: the spec node id, for traces.

    Raises:
        ValueError: `steps` is empty, `timeout <= 0`, or `merge` is an unknown string.
        TypeError: a step is not step-like, or `merge` is neither a strategy nor callable.
    """

    __slots__ = ("_merge", "_merge_fn", "_name", "_steps", "_timeout", "node_id")

    def __init__(
        self,
        steps: Sequence[Any],
        merge: MergeStrategy | str | MergeFn = MergeStrategy.collect_all,
        timeout: float | None = None,
        name: str = "parallel",
        *,
        node_id: str | None = None,
    ) -> None:
        coerced = tuple(coerce_step(s) for s in steps)
        if not coerced:
            raise ValueError(f"parallel {name!r} needs at least one step")
        if timeout is not None and not timeout > 0:
            raise ValueError(f"parallel {name!r}: timeout must be > 0 seconds, got {timeout}")
        self._merge: MergeStrategy | None
        self._merge_fn: MergeFn | None
        if isinstance(merge, str):
            try:
                self._merge, self._merge_fn = MergeStrategy(merge), None
            except ValueError:
                known = ", ".join(m.value for m in MergeStrategy)
                raise ValueError(
                    f"parallel {name!r}: unknown merge {merge!r} (built-ins: {known}; "
                    "pass a callable for anything else)"
                ) from None
        elif callable(merge):
            self._merge, self._merge_fn = None, merge
        else:
            raise TypeError(
                f"merge must be a MergeStrategy or callable, got {type(merge).__name__}"
            )
        self._steps: tuple[Step, ...] = coerced
        self._timeout = timeout
        self._name = name
        self.node_id = node_id

    @property
    def step_name(self) -> str:
        return self._name

    @property
    def steps(self) -> tuple[Step, ...]:
        """The coerced steps, in order."""
        return self._steps

    @property
    def timeout(self) -> float | None:
        """The group's budget in seconds, or None."""
        return self._timeout

    async def execute(self, input_data: Any) -> Any:
        """Run and return only the merged value."""
        return (await self.run(input_data)).merged

    async def run(self, input_data: Any) -> ParallelResult:
        """Run every step concurrently on `input_data`; see the class docstring.

        Returns:
            One output and one error slot per step, and the merged value.
        """
        frame = current_frame()
        if frame is None:
            return await self._run(input_data, None)
        return await run_in_span(
            frame, "parallel", self._name, self.node_id, input_data, self._run, _merged_of
        )

    async def _run(self, input_data: Any, span: Span | None) -> ParallelResult:
        loop = asyncio.get_running_loop()
        group = _Group(len(self._steps), loop.create_future(), self._merge is MergeStrategy.fastest)
        creator = None if span is None else current_frame()
        tasks = [
            loop.create_task(_branch(i, step, input_data, group, span, creator))
            for i, step in enumerate(self._steps)
        ]
        timed_out = await wait_for_wakeup(group.waiter, self._timeout, tasks)
        group.closed = True  # from here on, a branch's late value or error is discarded
        outputs, errors, finished = group.outputs, group.errors, group.finished
        if not all(finished):  # late branches, branches cancelled from within, fatal errors
            late = [i for i, task in enumerate(tasks) if not task.done()]
            if late:
                await cancel_and_reap([tasks[i] for i in late])
                for i in late:
                    errors[i] = self._late_error(i, timed_out)
                if span is not None and timed_out:
                    span.attributes["timed_out"] = late
            fatal: BaseException | None = None
            for i, task in enumerate(tasks):
                if finished[i] or errors[i] is not None:
                    continue
                exc = None if task.cancelled() else task.exception()  # retrieved either way
                if exc is None:  # cancelled from within the step
                    errors[i] = asyncio.CancelledError(f"{self._label(i)} was cancelled")
                elif fatal is None:
                    fatal = exc
            if fatal is not None:
                raise fatal
        if span is not None:
            span.attributes["errors"] = [
                None if e is None else f"{type(e).__name__}: {e}" for e in errors
            ]
            if group.fastest:  # the run waited for this branch only (see `critical_path_ms`)
                span.attributes["winner"] = group.winner
        return ParallelResult(outputs, errors, await self._merged(outputs, errors, group.winner))

    def _label(self, i: int) -> str:
        return f"step {i} ({self._steps[i].step_name!r}) of parallel {self._name!r}"

    def _late_error(self, i: int, timed_out: bool) -> BaseException:
        if timed_out:
            return TimeoutError(
                f"{self._label(i)} did not finish within the {self._timeout} s timeout"
            )
        return asyncio.CancelledError(
            f"{self._label(i)} cancelled: another step finished first (merge 'fastest')"
        )

    async def _merged(
        self, outputs: list[Any], errors: list[BaseException | None], winner: int | None
    ) -> Any:
        merge = self._merge
        if merge is MergeStrategy.fastest:
            return None if winner is None else outputs[winner]
        if merge is MergeStrategy.first_wins:
            for out, err in zip(outputs, errors, strict=True):
                if err is None:
                    return out
            return None
        ok = [out for out, err in zip(outputs, errors, strict=True) if err is None]
        if merge is MergeStrategy.collect_all or self._merge_fn is None:
            return ok
        merged = self._merge_fn(ok)
        if inspect.isawaitable(merged):
            merged = await merged
        return merged

    def __repr__(self) -> str:
        return f"Parallel({self._name!r}, {len(self._steps)} steps)"


def _merged_of(result: ParallelResult) -> Any:
    return result.merged


class _Group:
    """The shared state of one `Parallel` run: slots filled by the branches as they finish."""

    __slots__ = (
        "closed",
        "errors",
        "fastest",
        "finished",
        "outputs",
        "remaining",
        "waiter",
        "winner",
    )

    def __init__(self, n: int, waiter: asyncio.Future[None], fastest: bool) -> None:
        self.outputs: list[Any] = [None] * n
        self.errors: list[BaseException | None] = [None] * n
        self.finished: list[bool] = [False] * n
        self.remaining = n
        self.waiter = waiter
        self.fastest = fastest
        self.winner: int | None = None
        self.closed = False


async def _branch(
    i: int,
    step: Step,
    input_data: Any,
    group: _Group,
    span: Span | None,
    creator: TraceFrame | None,
) -> None:
    """Run one branch and fill its slot (unless the group stopped waiting for it).

    With tracing on, the branch task runs in a trace frame of its own under `span` (the
    parallel's; see `fork_trace`: `creator` is the frame of `Parallel._run`), so spans of
    concurrent branches nest right.

    Only `Exception`s are caught: a cancellation propagates, so the task ends cancelled; any
    other `BaseException` ends the wait at once and propagates, so the task holds it for
    `Parallel._run` to re-raise.
    """
    if span is not None:
        fork_trace(span, creator)
    if group.fastest:
        enter_fastest_race()  # (this task's own context: see `in_fastest_race`)
    try:
        out = await step.execute(input_data)
    except Exception as exc:
        if not group.closed:
            group.errors[i] = exc
            group.finished[i] = True
    except asyncio.CancelledError:
        raise
    except BaseException:  # not a step failure: stop waiting, `Parallel._run` re-raises it
        if not group.waiter.done():
            group.waiter.set_result(None)
        raise
    else:
        if not group.closed:
            group.outputs[i] = out
            group.finished[i] = True
            if group.fastest and group.winner is None:
                group.winner = i
                if not group.waiter.done():
                    group.waiter.set_result(None)
    finally:
        group.remaining -= 1
        if not group.remaining and not group.waiter.done():
            group.waiter.set_result(None)
