"""Parallel (semantics section 3), including field case F8."""

from __future__ import annotations

import asyncio
import gc
import time
from typing import Any

import pytest

from core.runtime import MergeStrategy, Parallel, ParallelResult, capture_trace
from core.runtime._tasks import CANCEL_GRACE_S, detached_count


def _run(coro: Any) -> Any:
    return asyncio.run(coro)


def after(delay: float, value: Any) -> Any:
    async def step(x: Any) -> Any:
        await asyncio.sleep(delay)
        return value

    step.__name__ = f"after_{delay}"
    return step


def fails(message: str) -> Any:
    async def step(x: Any) -> Any:
        raise ValueError(message)

    return step


async def returns_none(x: Any) -> None:
    return None


async def stubborn_sleeper(x: Any) -> str:
    """F8: catches its cancellation and keeps sleeping 0.5 s, then answers."""
    try:
        await asyncio.sleep(10)
    except asyncio.CancelledError:
        await asyncio.sleep(0.5)
    return "late"


async def cancel_returner(x: Any) -> str:
    """F8 variant: returns a value when cancelled."""
    try:
        await asyncio.sleep(10)
    except asyncio.CancelledError:
        return "late value"
    return "never"


class AsyncioReports:
    """Collects everything asyncio reports to the loop's exception handler."""

    def __init__(self) -> None:
        self.contexts: list[dict[str, Any]] = []

    def install(self) -> None:
        asyncio.get_running_loop().set_exception_handler(
            lambda loop, context: self.contexts.append(context)
        )

    @property
    def messages(self) -> list[str]:
        return [str(c.get("message")) for c in self.contexts]


def test_construction_rules() -> None:
    with pytest.raises(ValueError, match="at least one step"):
        Parallel([])
    with pytest.raises(ValueError, match="timeout"):
        Parallel([returns_none], timeout=0)
    with pytest.raises(ValueError, match="timeout"):
        Parallel([returns_none], timeout=-1.0)
    with pytest.raises(ValueError, match="unknown merge 'vote'"):
        Parallel([returns_none], merge="vote")
    with pytest.raises(TypeError, match="int"):
        Parallel([returns_none], merge=3)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="int"):
        Parallel([returns_none, 3])
    assert [m.value for m in MergeStrategy] == ["collect_all", "first_wins", "fastest"]
    assert MergeStrategy("fastest") is MergeStrategy.fastest


def test_same_input_concurrently_one_slot_per_step_in_order() -> None:
    seen: list[int] = []

    def record(tag: int) -> Any:
        async def step(x: int) -> int:
            seen.append(x)
            await asyncio.sleep(0.02)
            return x + tag

        return step

    par = Parallel([record(1), record(2), record(3)])
    start = time.perf_counter()
    result = _run(par.run(10))
    elapsed = time.perf_counter() - start
    assert result == ParallelResult([11, 12, 13], [None, None, None], [11, 12, 13])
    assert seen == [10, 10, 10]
    assert elapsed < 0.05  # concurrent: about one sleep, not three (generous bound)


def test_failures_fill_error_slots_and_never_raise() -> None:
    par = Parallel([after(0, "a"), fails("bad"), returns_none, after(0.01, "d")])
    result = _run(par.run(0))
    assert result.outputs == ["a", None, None, "d"]
    assert [type(e).__name__ if e else None for e in result.errors] == [
        None,
        "ValueError",
        None,
        None,
    ]
    assert str(result.errors[1]) == "bad"
    # success is decided by the error slot: the None output of step 2 is a success
    assert result.succeeded == [0, 2, 3]
    assert result.merged == ["a", None, "d"]


def test_all_failing_gives_empty_merges() -> None:
    steps = [fails("x"), fails("y")]
    assert _run(Parallel(steps).run(0)).merged == []
    assert _run(Parallel(steps, merge="first_wins").run(0)).merged is None
    assert _run(Parallel(steps, merge=MergeStrategy.fastest).run(0)).merged is None
    assert _run(Parallel(steps).execute(0)) == []


def test_first_wins_is_first_success_in_step_order() -> None:
    par = Parallel([fails("x"), after(0.03, "slow"), after(0, "fast")], merge="first_wins")
    result = _run(par.run(0))
    assert result.merged == "slow"
    assert result.outputs == [None, "slow", "fast"]


def test_first_wins_takes_a_successful_none() -> None:
    par = Parallel([fails("x"), returns_none, after(0, "b")], merge=MergeStrategy.first_wins)
    assert _run(par.execute(0)) is None
    assert _run(par.run(0)).errors[1] is None


def test_fastest_takes_the_first_to_succeed_and_cancels_the_others() -> None:
    cancelled: list[str] = []

    def slow(tag: str) -> Any:
        async def step(x: Any) -> str:
            try:
                await asyncio.sleep(1)
            except asyncio.CancelledError:
                cancelled.append(tag)
                raise
            return tag

        return step

    par = Parallel(
        [slow("a"), fails("quick failure"), after(0.01, "b"), slow("c")], merge="fastest"
    )
    start = time.perf_counter()
    result = _run(par.run(0))
    assert time.perf_counter() - start < 0.5
    assert result.merged == "b"
    assert result.outputs == [None, None, "b", None]
    assert [type(e).__name__ if e else None for e in result.errors] == [
        "CancelledError",
        "ValueError",
        None,
        "CancelledError",
    ]
    assert sorted(cancelled) == ["a", "c"]


def test_custom_merge_gets_successful_outputs_in_step_order() -> None:
    got: list[list[Any]] = []

    def vote(outputs: list[Any]) -> Any:
        got.append(outputs)
        return max(set(outputs), key=outputs.count)

    par = Parallel([after(0.02, 1), fails("x"), after(0, 2), after(0.01, 2)], merge=vote)
    assert _run(par.execute(0)) == 2
    assert got == [[1, 2, 2]]

    async def amerge(outputs: list[Any]) -> int:
        return sum(outputs)

    assert _run(Parallel([after(0, 1), after(0, 2)], merge=amerge).execute(0)) == 3


def test_a_merge_that_raises_propagates() -> None:
    def bad_merge(outputs: list[Any]) -> Any:
        raise KeyError("merge failed")

    with pytest.raises(KeyError, match="merge failed"):
        _run(Parallel([after(0, 1)], merge=bad_merge).run(0))


def test_a_step_cancelled_from_within_is_an_error_not_an_output() -> None:
    async def self_cancel(x: Any) -> Any:
        raise asyncio.CancelledError

    result = _run(Parallel([self_cancel, after(0, "ok")]).run(0))
    assert isinstance(result.errors[0], asyncio.CancelledError)
    assert result.outputs == [None, "ok"]
    assert result.merged == ["ok"]


class Fatal(BaseException):
    """Not an `Exception`: like `KeyboardInterrupt` / `SystemExit`, it is not a step failure."""


def test_a_base_exception_in_a_branch_cancels_the_others_and_propagates() -> None:
    cancelled: list[str] = []

    async def fatal(x: Any) -> Any:
        await asyncio.sleep(0.01)
        raise Fatal("stop everything")

    async def long(x: Any) -> str:
        try:
            await asyncio.sleep(10)
        except asyncio.CancelledError:
            cancelled.append("long")
            raise
        return "never"

    reports = AsyncioReports()

    async def go() -> float:
        reports.install()
        start = time.perf_counter()
        with pytest.raises(Fatal, match="stop everything"):
            await Parallel([after(0, "ok"), fatal, long]).run(0)
        return time.perf_counter() - start

    elapsed = asyncio.run(go())
    gc.collect()
    assert elapsed < 0.5  # it did not wait for the long branch
    assert cancelled == ["long"]
    assert reports.messages == []  # no "Task exception was never retrieved"


def test_timeout_is_one_budget_for_the_group() -> None:
    par = Parallel([after(0.01, "a"), after(0.03, "b"), after(5, "c")], timeout=0.06)
    start = time.perf_counter()
    result = _run(par.run(0))
    assert time.perf_counter() - start < 0.5
    assert result.outputs == ["a", "b", None]
    assert result.errors[:2] == [None, None]
    assert isinstance(result.errors[2], TimeoutError)
    assert result.merged == ["a", "b"]


# ---- F8 ------------------------------------------------------------------------------------


def _f8(
    second: Any, merge: Any = MergeStrategy.collect_all
) -> tuple[ParallelResult, float, list[str]]:
    reports = AsyncioReports()
    timing: dict[str, float] = {}

    async def go() -> ParallelResult:
        reports.install()
        par = Parallel([after(0.01, "quick"), second], merge=merge, timeout=0.05)
        start = time.perf_counter()
        result = await par.run("q")
        timing["elapsed"] = time.perf_counter() - start
        return result

    result = asyncio.run(go())  # asyncio.run waits for the detached branch at shutdown
    gc.collect()
    return result, timing["elapsed"], reports.messages


@pytest.mark.parametrize("second", [stubborn_sleeper, cancel_returner])
def test_f8_a_stubborn_branch_does_not_stretch_the_deadline(second: Any) -> None:
    result, elapsed, reports = _f8(second)
    assert elapsed < 0.2  # about timeout + grace (0.05 + 0.02)
    assert elapsed >= 0.05
    assert result.outputs == ["quick", None]
    assert result.errors[0] is None
    assert isinstance(result.errors[1], TimeoutError)
    assert str(result.errors[1]) == (
        f"step 1 ({second.__name__!r}) of parallel 'parallel' did not finish within the "
        "0.05 s timeout"
    )
    assert result.merged == ["quick"]  # the late value is never merged
    assert reports == []  # no "Task was destroyed but it is pending!", nothing unretrieved
    assert detached_count() == 0


@pytest.mark.parametrize("merge", ["first_wins", "fastest"])
def test_f8_late_values_never_merged_by_other_merges(merge: str) -> None:
    result, elapsed, reports = _f8(cancel_returner, merge)
    assert elapsed < 0.2
    assert result.merged == "quick"
    assert result.outputs == ["quick", None]
    assert reports == []


def test_f8_only_stubborn_branches_timed_out_nothing_merged() -> None:
    async def go() -> tuple[ParallelResult, float]:
        par = Parallel([cancel_returner, stubborn_sleeper], merge="first_wins", timeout=0.05)
        start = time.perf_counter()
        result = await par.run(0)
        return result, time.perf_counter() - start

    result, elapsed = asyncio.run(go())
    assert elapsed < 0.2
    assert result.outputs == [None, None]
    assert all(isinstance(e, TimeoutError) for e in result.errors)
    assert result.merged is None


def test_f8_cancelling_the_parallel_from_outside_propagates() -> None:
    cancelled: list[str] = []

    async def long(x: Any) -> str:
        try:
            await asyncio.sleep(10)
        except asyncio.CancelledError:
            cancelled.append("long")
            raise
        return "never"

    reports = AsyncioReports()

    async def go() -> float:
        reports.install()
        task = asyncio.create_task(Parallel([long, stubborn_sleeper], timeout=5).run(0))
        await asyncio.sleep(0.02)
        start = time.perf_counter()
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        return time.perf_counter() - start

    elapsed = asyncio.run(go())
    gc.collect()
    assert elapsed < 0.2  # the stubborn branch does not hold the cancellation up either
    assert cancelled == ["long"]
    assert reports.messages == []


def test_f8_outside_timeout_propagates_as_cancellation() -> None:
    async def go() -> None:
        async with asyncio.timeout(0.02):
            await Parallel([after(5, "x")]).run(0)

    with pytest.raises(TimeoutError):
        asyncio.run(go())


def test_detached_branch_is_kept_alive_and_reaped() -> None:
    async def go() -> tuple[int, int]:
        await Parallel([stubborn_sleeper], timeout=0.01).run(0)
        during = detached_count()
        await asyncio.sleep(0.5 + CANCEL_GRACE_S + 0.1)
        return during, detached_count()

    during, after_ = asyncio.run(go())
    assert (during, after_) == (1, 0)


def test_tracing_records_branch_spans_and_errors() -> None:
    par = Parallel([after(0, "a"), fails("bad"), after(5, "c")], timeout=0.03, node_id="par1")

    async def go() -> Any:
        with capture_trace() as trace:
            result = await par.run("in")
        return result, trace

    result, trace = asyncio.run(go())
    assert result.merged == ["a"]
    root = trace.spans[0]
    assert (root.kind, root.name, root.node_id, root.parent_id) == (
        "parallel",
        "parallel",
        "par1",
        None,
    )
    assert root.output_summary == "['a']"
    assert root.attributes == {
        "timed_out": [2],
        "errors": [
            None,
            "ValueError: bad",
            "TimeoutError: step 2 ('after_5') of parallel 'parallel' did not finish within the "
            "0.03 s timeout",
        ],
    }
    branches = [(s.parent_id, s.kind, s.name, s.error) for s in trace.spans[1:]]
    assert branches == [
        (0, "function_step", "after_0", None),
        (0, "function_step", "step", "ValueError: bad"),
        (0, "function_step", "after_5", "CancelledError: "),
    ]
