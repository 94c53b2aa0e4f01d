"""`core.runtime._tasks.current_task`: what `asyncio.current_task()` returns, in every setting.

On Python 3.11 it reuses the loop it last found in the thread (`get_running_loop()` makes a system
call there, about 0.3 us: half a router dispatch); these cases are the ones where a cached loop
could be stale.
"""

from __future__ import annotations

import asyncio
import threading
from typing import Any

from core.runtime._tasks import current_task


async def _both() -> tuple[Any, Any]:
    return current_task(), asyncio.current_task()


def test_in_a_task_in_nested_tasks_and_in_a_callback() -> None:
    async def go() -> list[tuple[Any, Any]]:
        pairs = [await _both()]
        pairs.append(await asyncio.create_task(_both()))
        pairs.extend(await asyncio.gather(_both(), _both()))
        seen: list[tuple[Any, Any]] = []
        loop = asyncio.get_running_loop()
        done = loop.create_future()

        def callback() -> None:  # a plain loop callback runs in no task
            seen.append((current_task(), asyncio.current_task()))
            done.set_result(None)

        loop.call_soon(callback)
        await done
        return pairs + seen

    pairs = asyncio.run(go())
    assert all(ours is theirs for ours, theirs in pairs)
    assert len({id(ours) for ours, _ in pairs[:4]}) == 4  # the main task, then three others
    assert pairs[-1] == (None, None)


def test_outside_a_loop_and_across_loops() -> None:
    assert current_task() is None
    first = asyncio.run(_both())
    assert current_task() is None  # the cached loop has stopped
    second = asyncio.run(_both())
    assert first[0] is first[1] and second[0] is second[1] and first[0] is not second[0]


def test_in_other_threads_and_with_a_loop_that_moved_thread() -> None:
    results: list[tuple[Any, Any]] = []

    def in_thread() -> None:
        results.append(asyncio.run(_both()))

    threads = [threading.Thread(target=in_thread) for _ in range(3)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(results) == 3 and all(ours is theirs for ours, theirs in results)

    loop = asyncio.new_event_loop()
    try:
        here = loop.run_until_complete(_both())  # cached for this thread
        moved: list[tuple[Any, Any]] = []
        thread = threading.Thread(target=lambda: moved.append(loop.run_until_complete(_both())))
        thread.start()
        thread.join()
        assert here[0] is here[1] and moved[0][0] is moved[0][1]
        again = asyncio.run(_both())  # this thread's cached loop now runs elsewhere: not used
        assert again[0] is again[1]
    finally:
        loop.close()


def test_a_swallowed_cancellation_is_seen() -> None:
    async def swallow() -> bool:
        try:
            await asyncio.sleep(10)
        except asyncio.CancelledError:
            pass
        task = current_task()
        return task is not None and task.cancelling() > 0

    async def go() -> bool:
        task = asyncio.create_task(swallow())
        await asyncio.sleep(0)
        task.cancel()
        return await task

    assert asyncio.run(go()) is True


def test_a_cached_loop_running_a_task_in_another_thread_is_not_used() -> None:
    loop = asyncio.new_event_loop()
    entered, release = threading.Event(), threading.Event()

    async def block() -> Any:
        entered.set()
        release.wait(5)  # blocks the thread inside a task: `loop` has a current task meanwhile
        return asyncio.current_task()

    try:
        loop.run_until_complete(_both())  # `loop` is now this thread's cached loop
        other: list[Any] = []
        thread = threading.Thread(target=lambda: other.append(loop.run_until_complete(block())))
        thread.start()
        assert entered.wait(5)
        try:
            ours, theirs = asyncio.run(_both())  # a new loop here while `loop` runs there
        finally:
            release.set()
            thread.join()
        assert ours is theirs and ours is not other[0]
    finally:
        loop.close()
