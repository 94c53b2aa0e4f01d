"""Distributed evaluation benchmark: candidate evaluation on Ray against the local executor.

On `bench/problems/burn` (one FunctionModel agent that answers at once; the score function
burns `burn_ms` of CPU per example), evaluate the seed topology on all examples and print the
throughput in examples/s for `LocalExecutor` (this process), `RayExecutor` with 1 worker and
with 2 workers, Ray's start-up time (`ray.init` and the workers' first answer), and the
per-example overhead of Ray (1 worker) over local at zero-cost scoring (`burn_ms = 0`), in ms.

Target: 2 workers reach at least 1.7x the throughput of 1 (on 2 cores). Ray runs locally on
127.0.0.1 without a dashboard. Each figure is the best of `--rounds` evaluations after one
warm-up evaluation (the workers' imports), so noise from other processes is damped.

Usage: `python bench/bench_distributed.py [--examples N] [--burn-ms MS] [--rounds R]`.
"""

from __future__ import annotations

import argparse
import asyncio
import time
from pathlib import Path
from typing import Any

from core.distributed.ray_executor import RayExecutor
from core.evaluation.executor import Executor
from core.problems import load_problem

PROBLEM = Path(__file__).resolve().parent / "problems" / "burn"
TARGET_SPEEDUP = 1.7


def _throughput(overrides: dict[str, Any], executor: Executor | None, rounds: int) -> float:
    """Best examples/s over `rounds` evaluations of every example (one warm-up first)."""
    problem = load_problem(PROBLEM, overrides=overrides)
    evaluator = problem.evaluator(workers=1, executor=executor)
    examples = problem.splits["validation"] + problem.splits.get("test", [])
    best = 0.0
    for i in range(rounds + 1):
        began = time.perf_counter()
        ev = asyncio.run(evaluator.evaluate(problem.seed_spec, examples))
        elapsed = time.perf_counter() - began
        assert ev.status == "ok", ev.reason
        if i:
            best = max(best, len(examples) / elapsed)
    return best


def _ray(overrides: dict[str, Any], workers: int, rounds: int) -> tuple[float, float]:
    """(examples/s, start-up s) with `workers` Ray workers."""
    executor = RayExecutor(PROBLEM, overrides=overrides, num_workers=workers)
    try:
        executor.start()
        startup = executor.startup_s or 0.0
        return _throughput(overrides, executor, rounds), startup
    finally:
        executor.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--examples", type=int, default=240)
    parser.add_argument("--burn-ms", type=float, default=20.0)
    parser.add_argument("--rounds", type=int, default=2)
    args = parser.parse_args()
    n = args.examples
    burn = {"params.burn_ms": args.burn_ms, "params.n_examples": n, "gold.validation_size": n - 1}
    free = {**burn, "params.burn_ms": 0.0}

    local = _throughput(burn, None, args.rounds)
    one, startup = _ray(burn, 1, args.rounds)
    two, _ = _ray(burn, 2, args.rounds)
    local_free = _throughput(free, None, args.rounds)
    one_free, _ = _ray(free, 1, args.rounds)
    overhead_ms = 1000.0 * (1.0 / one_free - 1.0 / local_free)
    speedup = two / one
    print(f"examples: {n}, score burns {args.burn_ms:g} ms of CPU each")
    print(f"LocalExecutor:          {local:8.1f} examples/s")
    print(f"RayExecutor, 1 worker:  {one:8.1f} examples/s")
    print(f"RayExecutor, 2 workers: {two:8.1f} examples/s")
    verdict = "ok" if speedup >= TARGET_SPEEDUP else "MISSED"
    print(f"2 workers / 1 worker:   {speedup:8.2f}x (target >= {TARGET_SPEEDUP}x: {verdict})")
    print(f"Ray start-up:           {startup:8.2f} s")
    print(
        f"Ray overhead at zero-cost scoring: {overhead_ms:.3f} ms per example "
        f"(local {local_free:.1f}/s, Ray 1 worker {one_free:.1f}/s)"
    )


if __name__ == "__main__":
    main()
