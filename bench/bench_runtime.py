"""Runtime overhead benchmark: what Pipeline and Parallel add per step, tracing off and on.

Runs a 20-step `Pipeline` and a 16-branch `Parallel` of instant async functions many times and
prints the engine's own overhead per step execution (the total time minus the time of calling
the same functions directly, divided by the number of step executions), with tracing off and
on, and the on/off ratio. Targets (issue 2): <= 6 us per pipeline step and <= 5 us per
parallel branch with tracing off; tracing on <= 2x off.

Usage: `python bench/bench_runtime.py [--iterations N] [--rounds K]`. Prints one line per
measurement. Times are CPU seconds of this process (`time.process_time`), best of several
rounds, to damp noise from other processes.
"""

from __future__ import annotations

import argparse
import asyncio
import time
from collections.abc import Awaitable, Callable
from typing import Any

from core.runtime import Parallel, Pipeline, capture_trace

N_PIPELINE_STEPS = 20
N_PARALLEL_BRANCHES = 16
TARGET_PIPELINE_US = 6.0
TARGET_PARALLEL_US = 5.0
TARGET_RATIO = 2.0


def _make_fns(n: int) -> list[Callable[[Any], Awaitable[Any]]]:
    def make(i: int) -> Callable[[Any], Awaitable[Any]]:
        async def fn(x: Any) -> Any:
            return x

        fn.__name__ = f"f{i}"
        return fn

    return [make(i) for i in range(n)]


async def _time_per_call(run: Callable[[], Awaitable[Any]], iterations: int, rounds: int) -> float:
    """Best-of-`rounds` CPU seconds of this process per call of `run` (CPU time, not wall
    time, so that other processes on the machine disturb the figure less)."""
    for _ in range(min(iterations, 200)):  # warm up
        await run()
    best = float("inf")
    for _ in range(rounds):
        start = time.process_time()
        for _ in range(iterations):
            await run()
        best = min(best, (time.process_time() - start) / iterations)
    return best


async def _bench(iterations: int, rounds: int) -> dict[str, float]:
    pipe_fns = _make_fns(N_PIPELINE_STEPS)
    par_fns = _make_fns(N_PARALLEL_BRANCHES)
    pipeline = Pipeline(pipe_fns)
    parallel = Parallel(par_fns)

    async def direct_pipeline() -> Any:
        x = 0
        for fn in pipe_fns:
            x = await fn(x)
        return x

    async def direct_parallel() -> Any:
        return [await fn(0) for fn in par_fns]

    async def run_pipeline() -> Any:
        return await pipeline.run(0)

    async def run_parallel() -> Any:
        return await parallel.run(0)

    async def traced(run: Callable[[], Awaitable[Any]]) -> Any:
        with capture_trace():
            return await run()

    async def nothing() -> Any:
        return None

    async def traced_nothing() -> Any:
        return await traced(nothing)

    base_pipe = await _time_per_call(direct_pipeline, iterations, rounds)
    base_par = await _time_per_call(direct_parallel, iterations, rounds)
    base_trace = await _time_per_call(traced_nothing, iterations, rounds) - await _time_per_call(
        nothing, iterations, rounds
    )  # the cost of opening a trace, which the evaluator pays once per example, not per step
    pipe_off = await _time_per_call(run_pipeline, iterations, rounds)
    pipe_on = await _time_per_call(lambda: traced(run_pipeline), iterations, rounds) - base_trace
    par_off = await _time_per_call(run_parallel, iterations, rounds)
    par_on = await _time_per_call(lambda: traced(run_parallel), iterations, rounds) - base_trace
    us = 1e6
    return {
        "pipeline_off": (pipe_off - base_pipe) / N_PIPELINE_STEPS * us,
        "pipeline_on": (pipe_on - base_pipe) / N_PIPELINE_STEPS * us,
        "parallel_off": (par_off - base_par) / N_PARALLEL_BRANCHES * us,
        "parallel_on": (par_on - base_par) / N_PARALLEL_BRANCHES * us,
    }


def _span_floor_us(iterations: int, rounds: int) -> float:
    """CPU microseconds of the least a span with start and end times can cost in this Python:
    two `time.perf_counter_ns()` reads and one list appended, minus an empty loop."""
    now = time.perf_counter_ns
    best_full = best_empty = float("inf")
    n = iterations * 20
    for _ in range(rounds):
        items: list[list[Any]] = []
        start = time.process_time()
        for _ in range(n):
            record = [None, None, None, now(), None, None]
            items.append(record)
            record[4] = now()
        best_full = min(best_full, time.process_time() - start)
        start = time.process_time()
        for _ in range(n):
            pass
        best_empty = min(best_empty, time.process_time() - start)
    return (best_full - best_empty) / n * 1e6


def main() -> None:
    parser = argparse.ArgumentParser(description="Runtime overhead per step, tracing off/on.")
    parser.add_argument("--iterations", type=int, default=2000, help="runs per round")
    parser.add_argument("--rounds", type=int, default=5, help="rounds (best is kept)")
    args = parser.parse_args()
    r = asyncio.run(_bench(args.iterations, args.rounds))
    rows = [
        (f"pipeline ({N_PIPELINE_STEPS} steps)", "step", "pipeline", TARGET_PIPELINE_US),
        (f"parallel ({N_PARALLEL_BRANCHES} branches)", "branch", "parallel", TARGET_PARALLEL_US),
    ]
    for label, unit, key, target in rows:
        off, on = r[f"{key}_off"], r[f"{key}_on"]
        ratio = on / off if off > 0 else float("inf")
        print(
            f"{label:24s}tracing off {off:5.2f} us/{unit} (target <= {target:g}: "
            + f"{'ok' if off <= target else 'OVER'}) | tracing on {on:5.2f} us/{unit} "
            + f"(+{on - off:4.2f} us per span) | on/off {ratio:5.2f}x (target <= {TARGET_RATIO:g}x: "
            + f"{'ok' if ratio <= TARGET_RATIO else 'OVER'})"
        )
    floor = _span_floor_us(args.iterations, args.rounds)
    print(
        f"{'span floor':24s}two clock reads and one record appended cost {floor:4.2f} us here: "
        + f"the least any span with start and end times adds (2x needs <= {r['pipeline_off']:.2f})"
    )


if __name__ == "__main__":
    main()
