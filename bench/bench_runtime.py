"""Runtime overhead benchmark: the engine's per-step figures against the reference library's.

Every runtime figure of the first side-by-side comparison with the reference library (Orqest),
ours against the reference.

Measures, with instant steps (async functions that return their input), what the engine itself
costs:

- pipeline, us per step: a 20-step `Pipeline`, minus calling the same functions directly,
  divided by 20; tracing off, and tracing on (minus the cost of opening a trace, which the
  evaluator pays once per example);
- parallel, us per branch: a 16-branch `Parallel`, likewise;
- router, us per dispatch: 4 routes with sync conditions, the 3rd one true (the whole
  `run`, the chosen step included);
- router with an async classifier, us per dispatch (the whole `run`);
- refinement loop, us per iteration: 10 iterations of a sync evaluator returning a constant
  failing verdict and a sync state updater (the whole `run`, divided by 10).

Each figure is printed in us and as a ratio to the reference library's figure (Orqest, whose
docs are in `shared/reference/`). When `orqest` can be imported (it needs Python >= 3.12 to
install, but its orchestration package imports on 3.11: put an unpacked wheel on `PYTHONPATH`),
the reference is measured here, in rounds interleaved with ours; otherwise the ratios use
`REFERENCE_US`, the reference's figures measured on this machine kind with this script (the
first comparison's own figures, `FIRST_COMPARISON_US`, are printed beside them).

To measure the reference here (it is no dependency of the project): `pip download --no-deps
--python-version 3.12 --only-binary=:all: -d /tmp/ref orqest==0.8.0 loguru`, unzip both wheels
into one folder and run with `PYTHONPATH=<that folder>`.

Targets (the acceptance figures of that comparison): router and loop at most 1.0x the reference;
pipeline and parallel no worse than before the performance work it asked for (`BEFORE_US`, as a
ratio to the reference measured beside it, so that a slower or faster machine does not move the
bar); tracing on at most 0.2x the reference's *untraced* pipeline step, measured in the same run
(on the first comparison's figures: 0.2 x 3.80 = 0.76 us).

Usage: `python bench/bench_runtime.py [--iterations N] [--rounds K]`. Times are CPU seconds of
this process (`time.process_time`: the 2 cores are shared), best of K rounds.
"""

from __future__ import annotations

import argparse
import asyncio
import importlib
import time
from collections.abc import Awaitable, Callable
from typing import Any

from core.runtime import EvalResult, capture_trace

N_PIPELINE_STEPS = 20
N_PARALLEL_BRANCHES = 16
N_ROUTES = 4
MATCHING_ROUTE = 2  # the 3rd condition is the first true one
N_LOOP_ITERATIONS = 10

REFERENCE_US: dict[str, float] = {
    # The reference (orqest 0.8.0) measured on this machine kind by this script, interleaved
    # with ours: the median over 4-17 runs of 2026-12-02 (each run's figure the best of its
    # rounds). Used when `orqest` cannot be imported. The first comparison's own figures
    # (`FIRST_COMPARISON_US`) came from a faster setup: its reference router took 0.39 us
    # where this one takes 0.79, so a ratio to them would compare two machines.
    "pipeline": 4.08,  # us per step, tracing off
    "parallel": 4.42,  # us per branch
    "router": 0.79,  # us per dispatch, 4 routes, 3rd condition matches
    "router_async_classifier": 0.92,  # us per dispatch
    "loop": 2.00,  # us per iteration
}
FIRST_COMPARISON_US: dict[str, float] = {
    # The reference's figures from the first side-by-side measurement (Python 3.11,
    # interleaved rounds, medians): printed for comparison; the tracing target is defined on
    # its untraced step (0.2 x 3.80 us).
    "pipeline": 3.80,
    "parallel": 2.64,
    "router": 0.39,
    "router_async_classifier": 0.44,
    "loop": 1.51,
}
BEFORE_US: dict[str, float] = {
    # Ours before the performance work on these machines, as the task that asked for it stated
    # them (this script at 50d0018 printed 0.20 and 2.89 in the same run that measured the
    # router at 4.19 us, the async classifier at 3.05 and the loop at 2.88 against the
    # reference's 0.80, 0.89 and 1.94): the "no worse than today" bar of the pipeline and the
    # parallel, with 10% for noise.
    "pipeline": 0.22,
    "parallel": 2.80,
}
TARGET_RATIO: dict[str, float] = {"router": 1.0, "router_async_classifier": 1.0, "loop": 1.0}
TRACING_SHARE = 0.2
"""Tracing on costs at most this share of the reference's untraced pipeline step: the absolute
target that replaced the earlier "at most 2x tracing off" (an untraced step already costs what one
span's two clock reads cost)."""

LABELS = {
    "pipeline": f"pipeline ({N_PIPELINE_STEPS} steps), us/step, tracing off",
    "parallel": f"parallel ({N_PARALLEL_BRANCHES} branches), us/branch",
    "router": f"router ({N_ROUTES} routes, condition {MATCHING_ROUTE + 1}), us/dispatch",
    "router_async_classifier": "router, async classifier, us/dispatch",
    "loop": f"refinement loop ({N_LOOP_ITERATIONS} iterations), us/iteration",
}


def _make_fns(n: int) -> list[Callable[[Any], Awaitable[Any]]]:
    def make(i: int) -> Callable[[Any], Awaitable[Any]]:
        async def fn(x: Any) -> Any:
            return x

        fn.__name__ = f"f{i}"
        return fn

    return [make(i) for i in range(n)]


class _Lib:
    """One library's primitives under a common shape (ours, or the reference's)."""

    def __init__(self, name: str, module: Any, eval_result: Any) -> None:
        self.name = name
        self.m = module
        self.eval_result = eval_result


def _ours() -> _Lib:
    import core.runtime as ours

    return _Lib("ours", ours, EvalResult)


def _reference() -> _Lib | None:
    try:
        ref = importlib.import_module("orqest.orchestration")
    except Exception:  # not installed (the usual case): fall back to REFERENCE_US
        return None
    return _Lib("reference", ref, ref.EvalResult)


class _Cases:
    """The benchmark's runnables for one library: name -> (run, direct baseline or None, per)."""

    def __init__(self, lib: _Lib) -> None:
        m = lib.m
        pipe_fns = _make_fns(N_PIPELINE_STEPS)
        par_fns = _make_fns(N_PARALLEL_BRANCHES)
        pipeline = m.Pipeline(pipe_fns)
        parallel = m.Parallel(par_fns)
        route_fns = _make_fns(N_ROUTES)

        def condition(i: int) -> Callable[[Any], bool]:
            def cond(x: Any) -> bool:
                return i >= MATCHING_ROUTE

            return cond

        router = m.Router(
            [m.Route(f"r{i}", fn, condition=condition(i)) for i, fn in enumerate(route_fns)]
        )

        async def classify(x: Any) -> str:
            return f"r{MATCHING_ROUTE}"

        classified = m.Router(
            [m.Route(f"r{i}", fn) for i, fn in enumerate(route_fns)], classifier=classify
        )
        verdict = lib.eval_result(passed=False, feedback="", score=0.5)

        def evaluate(output: Any) -> Any:
            return verdict

        def update(current: Any, output: Any, result: Any) -> Any:
            return output

        loop = m.RefinementLoop(
            _make_fns(1)[0], evaluate, state_updater=update, max_iterations=N_LOOP_ITERATIONS
        )

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

        async def run_router() -> Any:
            return await router.run(0)

        async def run_classified() -> Any:
            return await classified.run(0)

        async def run_loop() -> Any:
            return await loop.run(0)

        self.cases: dict[str, tuple[Callable[[], Awaitable[Any]], Any, int]] = {
            "pipeline": (run_pipeline, direct_pipeline, N_PIPELINE_STEPS),
            "parallel": (run_parallel, direct_parallel, N_PARALLEL_BRANCHES),
            "router": (run_router, None, 1),
            "router_async_classifier": (run_classified, None, 1),
            "loop": (run_loop, None, N_LOOP_ITERATIONS),
        }


async def _cpu_per_call(run: Callable[[], Awaitable[Any]], iterations: int) -> float:
    """CPU seconds of this process per call of `run`, over `iterations` calls (CPU time, not
    wall time, so that other processes on the machine disturb the figure less)."""
    start = time.process_time()
    for _ in range(iterations):
        await run()
    return (time.process_time() - start) / iterations


async def _bench(iterations: int, rounds: int, libs: list[_Lib]) -> dict[str, dict[str, float]]:
    """`{library: {figure: us}}`, best of `rounds`, the libraries' rounds interleaved."""
    cases = {lib.name: _Cases(lib).cases for lib in libs}

    async def nothing() -> Any:
        return None

    async def traced_nothing() -> Any:
        with capture_trace():
            return None

    def traced(run: Callable[[], Awaitable[Any]]) -> Callable[[], Awaitable[Any]]:
        async def go() -> Any:
            with capture_trace():
                return await run()

        return go

    timed: dict[str, dict[str, Callable[[], Awaitable[Any]]]] = {}
    for lib in libs:
        entry: dict[str, Callable[[], Awaitable[Any]]] = {}
        for key, (run, direct, _) in cases[lib.name].items():
            entry[key] = run
            if direct is not None:
                entry[f"{key}_direct"] = direct
        if lib.name == "ours":
            entry["pipeline_on"] = traced(cases["ours"]["pipeline"][0])
            entry["trace_open"] = traced_nothing
            entry["nothing"] = nothing
        timed[lib.name] = entry
    for entry in timed.values():  # warm up
        for run in entry.values():
            for _ in range(min(iterations, 200)):
                await run()
    best: dict[str, dict[str, float]] = {name: {} for name in timed}
    for _ in range(rounds):
        for name, entry in timed.items():
            for key, run in entry.items():
                t = await _cpu_per_call(run, iterations)
                best[name][key] = min(best[name].get(key, float("inf")), t)
    us = 1e6
    out: dict[str, dict[str, float]] = {}
    for name, b in best.items():
        figures: dict[str, float] = {}
        for key, (_, direct, per) in cases[name].items():
            total = b[key] - (b[f"{key}_direct"] if direct is not None else 0.0)
            figures[key] = total / per * us
        if name == "ours":
            trace_open = b["trace_open"] - b["nothing"]
            on = b["pipeline_on"] - trace_open - b["pipeline_direct"]
            figures["pipeline_on"] = on / N_PIPELINE_STEPS * us
        out[name] = figures
    return out


def _span_floor_us(iterations: int, rounds: int) -> float:
    """CPU microseconds of the least a span with start and end times can cost in this Python:
    two `time.perf_counter_ns()` reads and one list appended, minus an empty loop."""
    now = time.perf_counter_ns
    best_full = best_empty = float("inf")
    n = min(iterations, 2000) * 20  # more records would time the garbage collector too
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


def _verdict(ok: bool) -> str:
    return "ok" if ok else "OVER"


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--iterations", type=int, default=5000, help="runs per round")
    parser.add_argument("--rounds", type=int, default=9, help="rounds (best is kept)")
    args = parser.parse_args()
    reference = _reference()
    libs = [_ours()] + ([reference] if reference is not None else [])
    r = asyncio.run(_bench(args.iterations, args.rounds, libs))
    ours = r["ours"]
    measured = r.get("reference")
    source = (
        "measured now, interleaved"
        if measured is not None
        else "REFERENCE_US (measured on this machine kind, 2026-12-02)"
    )
    print(f"reference: {source}; CPU time, best of {args.rounds} rounds of {args.iterations}")
    for key, label in LABELS.items():
        ref = measured[key] if measured is not None else REFERENCE_US[key]
        ratio = ours[key] / ref
        line = f"{label:52s} ours {ours[key]:6.2f} us | reference {ref:6.2f} us | {ratio:5.2f}x"
        if key in TARGET_RATIO:
            target = TARGET_RATIO[key]
            line += f" (target <= {target:g}x: {_verdict(ratio <= target)})"
        else:
            # the bar as a ratio: ours before the performance work over the reference measured
            # beside it
            before = BEFORE_US[key] / REFERENCE_US[key]
            line += f" (before {before:.2f}x, no worse: {_verdict(ratio <= before * 1.1)})"
        line += f" [first comparison's reference: {FIRST_COMPARISON_US[key]:.2f} us]"
        print(line)
    on = ours["pipeline_on"]
    untraced = measured["pipeline"] if measured is not None else REFERENCE_US["pipeline"]
    bar = TRACING_SHARE * untraced
    print(
        f"{'pipeline, us/step, tracing on':52s} ours {on:6.2f} us | "
        f"{TRACING_SHARE:g} x the reference's untraced step = {bar:.2f} us | "
        f"{on / untraced:5.2f}x (target <= {TRACING_SHARE:g}x: {_verdict(on <= bar)})"
    )
    floor = _span_floor_us(args.iterations, args.rounds)
    print(
        f"{'span floor':52s} two clock reads and one record appended cost {floor:4.2f} us here "
        f"(tracing adds {on - ours['pipeline']:.2f} us per step)"
    )


if __name__ == "__main__":
    main()
