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
import sys
import threading
from collections.abc import Callable, Sequence
from typing import Any

from core.agents.call_cache import active_call_cache, mark_unrepeatable

__all__ = [
    "CANCEL_GRACE_S",
    "call_maybe_async",
    "is_async_callable",
    "may_await",
    "cancel_and_reap",
    "cancel_requested",
    "current_task",
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


def _current_task_311() -> asyncio.Task[Any] | None:
    """`asyncio.current_task()` without its `get_running_loop()` on every call.

    On Python 3.11, `get_running_loop()` calls `getpid()` each time (to notice a fork), a system
    call that costs about 0.3 us on these machines: half a router dispatch. This keeps the loop
    last found in this thread (a closed one stays referenced until the thread finds another)
    and reuses it while it is running *in
    this thread* (`loop._thread_id`, set by `run_forever`); at most one loop runs per thread, so
    that loop is the running one and its entry in asyncio's table of current tasks is what
    `asyncio.current_task()` would return. Anything else (no loop cached, a loop without
    `_thread_id`, one that stopped or runs elsewhere) takes the public path.
    """
    loop = _LOOP.loop
    try:
        if loop._thread_id == _get_ident():
            return _CURRENT_TASKS.get(loop)
    except AttributeError:  # none cached yet (None), or a loop without `_thread_id`
        pass
    try:
        loop = asyncio.get_running_loop()
    except RuntimeError:
        return None
    _LOOP.loop = loop
    return _CURRENT_TASKS.get(loop)


class _ThreadLoop(threading.local):
    loop: Any = None
    """The event loop `_current_task_311` last found running in this thread, or None."""


_LOOP = _ThreadLoop()
_get_ident = threading.get_ident
_CURRENT_TASKS: dict[Any, asyncio.Task[Any]] = getattr(asyncio.tasks, "_current_tasks", {})

current_task: Callable[[], asyncio.Task[Any] | None] = (
    asyncio.current_task  # C from 3.12 on
    if sys.version_info >= (3, 12) or not hasattr(asyncio.tasks, "_current_tasks")
    else _current_task_311
)
"""The running task, or None (`asyncio.current_task()`; on 3.11 see `_current_task_311`)."""


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
    run = active_call_cache()  # (the example run whose result a deadline makes wall-clock)

    def on_timeout() -> None:
        if not waiter.done():
            waiter.set_result(None)
            timed_out.append(True)
            mark_unrepeatable(run)

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
    if may_await(result):
        return await result
    return result


def is_async_callable(fn: object) -> bool:
    """Whether calling `fn` always gives an awaitable: a coroutine function (a `partial` of one
    too), or an object whose `__call__` is one. Decided once, when a primitive is built, so the
    per-call path does not ask `inspect`."""
    return inspect.iscoroutinefunction(fn) or inspect.iscoroutinefunction(
        getattr(fn, "__call__", None)  # noqa: B004 (detects an async __call__ method)
    )


_NEVER_AWAITABLE: frozenset[type] = frozenset({str, int, float, bool, type(None)})


def may_await(value: object) -> bool:
    """Whether a sync callable's result is awaitable (then the caller awaits it, the rule of
    `call_maybe_async`): `inspect.isawaitable`, skipped for the plain values a condition, a
    classifier or an updater usually returns (a `type` lookup instead of three `isinstance`)."""
    return type(value) not in _NEVER_AWAITABLE and inspect.isawaitable(value)
