"""Task helpers behind the hard deadlines of `Parallel` and `RefinementLoop`.

A deadline is hard: when it passes, unfinished tasks are cancelled and given `CANCEL_GRACE_S`
to finish; a task that swallows the cancellation and keeps running is *detached*: the caller
stops waiting for it, a strong reference keeps it alive until it ends (so asyncio never
reports "Task was destroyed but it is pending!"), and its result or exception is retrieved and
dropped when it does end (so asyncio never reports "exception was never retrieved").
"""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import Callable, Sequence
from typing import Any

__all__ = [
    "CANCEL_GRACE_S",
    "call_maybe_async",
    "cancel_and_reap",
    "cancel_requested",
    "detached_count",
    "wait_for_wakeup",
    "wait_tasks",
]

CANCEL_GRACE_S = 0.02
"""Seconds a cancelled task gets to finish before it is detached (s)."""

_DETACHED: set[asyncio.Task[Any]] = set()


def _retrieve(task: asyncio.Task[Any]) -> None:
    """Mark a finished task's outcome as retrieved (no asyncio log), drop our reference."""
    _DETACHED.discard(task)
    if not task.cancelled():
        task.exception()


def cancel_requested(task: asyncio.Task[Any] | None) -> bool:
    """Whether `task` has a cancellation request that the awaited code swallowed.

    A step that catches `CancelledError` and returns leaves the request pending
    (`Task.cancelling() > 0`, Python 3.11+). A composite checks this before it starts more work
    (a pipeline's next step, a router's chosen route, a loop's next stage) and raises
    `CancelledError` instead, so a cancelled composite (cancelled from outside, or detached at
    a deadline) never goes on running steps, and model calls, that nobody waits for.
    """
    return task is not None and task.cancelling() > 0


def detached_count() -> int:
    """How many detached tasks are still running (for tests and diagnostics)."""
    return len(_DETACHED)


async def wait_tasks(
    tasks: Sequence[asyncio.Task[Any]],
    timeout: float | None,
    stop: Callable[[asyncio.Task[Any]], bool] | None = None,
) -> bool:
    """Wait until every task is done, a finished task satisfies `stop`, or `timeout` passes.

    Args:
        tasks: the tasks to wait for (left running when this returns early).
        timeout: seconds from now, or None for no limit.
        stop: called on each task as it finishes; True ends the wait early.

    Returns:
        True if the wait ended because `timeout` passed.

    Raises:
        asyncio.CancelledError: if the waiting task is cancelled (see `wait_for_wakeup`).
    """
    waiter: asyncio.Future[None] = asyncio.get_running_loop().create_future()
    remaining = len(tasks)

    def on_done(task: asyncio.Task[Any]) -> None:
        nonlocal remaining
        remaining -= 1
        if not waiter.done() and (remaining == 0 or (stop is not None and stop(task))):
            waiter.set_result(None)

    for task in tasks:
        task.add_done_callback(on_done)
    try:
        return await wait_for_wakeup(waiter, timeout, tasks)
    finally:
        for task in tasks:
            task.remove_done_callback(on_done)


async def wait_for_wakeup(
    waiter: asyncio.Future[None], timeout: float | None, tasks: Sequence[asyncio.Task[Any]]
) -> bool:
    """Wait until `waiter` gets a result (set by the caller's tasks) or `timeout` passes.

    Args:
        waiter: a future the caller's tasks resolve (with `set_result(None)`) to end the wait.
        timeout: seconds from now, or None for no limit.
        tasks: the tasks behind the wait, cancelled and reaped if the wait is cancelled.

    Returns:
        True if the wait ended because `timeout` passed.

    Raises:
        asyncio.CancelledError: if the waiting task is cancelled; every task is then cancelled
            and reaped (`cancel_and_reap`) before the cancellation propagates.
    """
    timed_out: list[bool] = []

    def on_timeout() -> None:
        if not waiter.done():
            waiter.set_result(None)
            timed_out.append(True)

    handle = None if timeout is None else asyncio.get_running_loop().call_later(timeout, on_timeout)
    try:
        await waiter
    except BaseException:
        await cancel_and_reap(tasks)
        raise
    finally:
        if handle is not None:
            handle.cancel()
    return bool(timed_out)


async def cancel_and_reap(
    tasks: Sequence[asyncio.Task[Any]], grace: float = CANCEL_GRACE_S
) -> list[asyncio.Task[Any]]:
    """Cancel the unfinished tasks, wait up to `grace` seconds, detach those still running.

    Every task handed in ends up with its outcome retrieved (now, or when a detached one ends).

    Returns:
        The tasks that were still running after the grace and were detached.
    """
    pending = [t for t in tasks if not t.done()]
    for task in pending:
        task.cancel()
    try:
        if pending and grace > 0:
            await asyncio.wait(pending, timeout=grace)
    finally:
        stubborn = [t for t in pending if not t.done()]
        for task in tasks:
            if task.done():
                _retrieve(task)
            else:
                _DETACHED.add(task)
                task.add_done_callback(_retrieve)
    return stubborn


async def call_maybe_async(fn: Callable[..., Any], *args: Any) -> Any:
    """Call `fn(*args)` and await the result if it is awaitable (sync or async callables)."""
    result = fn(*args)
    if inspect.isawaitable(result):
        return await result
    return result
