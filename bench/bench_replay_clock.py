"""Replay race clock benchmark (the virtual clock for replayed models: simulated latency with
no tick loop, the same finishing order and latencies as the tick rule): CPU time of evaluating
`fastest` races on the GSM8K replay problem (time scale 0, no caches), with each racing request
passing its turns by
`pass_turns` (a callback holds its place in the loop's queue; the default) against
`race_clock = "ticks"` (one `asyncio.sleep(0)` a turn, resuming its whole coroutine stack: the
way before). Both give the same results (tests/gsm8k/test_gsm8k_race_clock.py); the script
checks that too.

Races: `four_agents`, the four runs against each other (6B fine-tuned wins most: the race ends
early), and `slow_pipeline`, 175B verification against a pipeline of 175B fine-tuned then 6B
verification (long races, where the turns dominate).

Usage: `python bench/bench_replay_clock.py [--examples N] [--rounds R]` (needs the dataset:
`$TOPOLOGY_STUDIO_DATASETS`). Prints, per race, the best of R rounds of process CPU time for
each clock and the ratio turns / ticks.
"""

from __future__ import annotations

import argparse
import asyncio
import time
from typing import Any

from core.problems import Problem, load_problem


def _agent(run: str) -> dict[str, Any]:
    return {"kind": "agent_step", "agent_name": run}


def _pipe(*steps: dict[str, Any]) -> dict[str, Any]:
    return {"kind": "pipeline", "steps": [{"operation": s} for s in steps]}


def _race(*steps: dict[str, Any]) -> dict[str, Any]:
    return {"kind": "parallel", "merge": "fastest", "steps": list(steps)}


RACES: dict[str, dict[str, Any]] = {
    "four_agents": _pipe(
        _race(
            _agent("6b_finetuning"),
            _agent("6b_verification"),
            _agent("175b_finetuning"),
            _agent("175b_verification"),
        )
    ),
    "slow_pipeline": _pipe(
        _race(
            _agent("175b_verification"),
            _pipe(_agent("175b_finetuning"), _agent("6b_verification")),
        )
    ),
}


def _measure(problem: Problem, spec: dict[str, Any], n: int, rounds: int) -> tuple[float, Any]:
    examples = problem.splits["validation"][:n]
    best = float("inf")
    outcome: Any = None
    for _ in range(rounds):
        evaluator = problem.evaluator()
        t0 = time.process_time()
        ev = asyncio.run(evaluator.evaluate(spec, examples))
        best = min(best, time.process_time() - t0)
        outcome = (ev.cost_usd, ev.latency_ms, ev.accuracy, [r.output_summary for r in ev.results])
    return best, outcome


def main() -> None:
    parser = argparse.ArgumentParser(description="Replay race clock: turns vs ticks, CPU time.")
    parser.add_argument("--examples", type=int, default=100)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    problems = {
        clock: load_problem(
            "gsm8k_replay", overrides={"models.time_scale": 0, "params.race_clock": clock}
        )
        for clock in ("ticks", "turns")
    }
    for p in problems.values():  # warm up: imports, schemas, the dataset
        _measure(p, RACES["four_agents"], 5, 1)
    for name, spec in RACES.items():
        ticks, by_ticks = _measure(problems["ticks"], spec, args.examples, args.rounds)
        turns, by_turns = _measure(problems["turns"], spec, args.examples, args.rounds)
        same = "same results" if by_ticks == by_turns else "RESULTS DIFFER"
        print(
            f"{name}, {args.examples} problems: ticks {ticks:.3f} s CPU, turns {turns:.3f} s "
            f"CPU, turns / ticks = {turns / ticks:.2f} ({same})"
        )


if __name__ == "__main__":
    main()
