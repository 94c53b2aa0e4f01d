"""The race clock (a virtual clock for replayed models, no tick loop): a request in a `fastest` race
passes its turns without resuming its coroutine stack (`replay.pass_turns`), and every race ends
exactly as it did with one `asyncio.sleep(0)` a tick (`race_clock = "ticks"`, the rule before the
virtual clock).

The reference is `race_clock_races.json`, recorded with the tick loop as it was before the
change (the problem directory of commit 5ef6701, see `record`): for each topology below and each
of the first 30 validation problems, at time scale 0, the winner of every `fastest` span, the
example's cost, latency, accuracy, request count, a digest of its output, and a digest of its
whole trace (every span's kind, name, parent, input and output, usage, attributes and error, in
start order; only wall-clock fields left out, see `_span`), so the order in which spans of
concurrent branches started is pinned too. The clocks must reproduce it exactly.

At a time scale above 0 a request sleeps for real after its turns, and the tick loop's outcome
then depends on the wall clock wherever a branch makes more than one call or a race ends within
a sleep of another branch's end (two recordings of the same tick loop at 0.0005 picked
different winners for `pipeline_branch` and `nested_parallel_in_race` on one problem each,
different costs for a race inside a race, and a loser counted as finished or as cancelled in
single-call races). So the reference there holds only the single-call races (`SCALED`) and only
their outcome (winners, cost, latency, accuracy, requests, output), which the real sleeps
cannot reorder: a sleep's deadline keeps the order of the turns it follows.

Record again (only if a topology is added; the reference must come from the tick loop, so this
sets `race_clock = "ticks"`; `--as-is` for a problem directory older than that switch):
`python tests/gsm8k/test_gsm8k_race_clock.py record data/problems/gsm8k_replay >
tests/gsm8k/race_clock_races.json`
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import os
import sys
from pathlib import Path
from typing import Any

import pytest

REPO = Path(__file__).resolve().parents[2]
if str(REPO) not in sys.path:  # (run as a script by `record`)
    sys.path.insert(0, str(REPO))

from core.problems import DATASETS_ENV, Problem, load_problem  # noqa: E402

DATASETS = os.environ.get(DATASETS_ENV) or str(REPO.parent / "shared" / "datasets")
RECORDED = Path(__file__).with_name("race_clock_races.json")
N_EXAMPLES = 30
SCALE = 0.0005
"""The time scale above 0 that is recorded: a real sleep of 25 us a tick after the turns (a
100-tick request sleeps 2.5 ms)."""


def _agent(run: str) -> dict[str, Any]:
    return {"kind": "agent_step", "agent_name": run}


def _fn(name: str) -> dict[str, Any]:
    return {"kind": "function_step", "callable_name": name}


def _pipe(*steps: dict[str, Any]) -> dict[str, Any]:
    return {"kind": "pipeline", "steps": [{"operation": s} for s in steps]}


def _par(merge: str, *steps: dict[str, Any]) -> dict[str, Any]:
    return {"kind": "parallel", "merge": merge, "steps": list(steps)}


def _race(*steps: dict[str, Any]) -> dict[str, Any]:
    return _par("fastest", *steps)


TOPOLOGIES: dict[str, dict[str, Any]] = {
    "two_agents": _pipe(_race(_agent("6b_verification"), _agent("175b_finetuning"))),
    "two_agents_reversed": _pipe(_race(_agent("175b_finetuning"), _agent("6b_verification"))),
    "three_agents": _pipe(
        _race(_agent("6b_verification"), _agent("175b_finetuning"), _agent("175b_verification"))
    ),
    "four_agents": _pipe(
        _race(
            _agent("175b_verification"),
            _agent("6b_verification"),
            _agent("175b_finetuning"),
            _agent("6b_finetuning"),
        )
    ),
    "same_agent_twice": _pipe(_race(_agent("175b_finetuning"), _agent("175b_finetuning"))),
    "pipeline_branch": _pipe(
        _race(
            _agent("175b_verification"),
            _pipe(_agent("6b_finetuning"), _agent("175b_finetuning")),
        )
    ),
    "two_pipeline_branches": _pipe(
        _race(
            _pipe(_agent("175b_finetuning"), _agent("6b_finetuning")),
            _pipe(_agent("6b_finetuning"), _agent("175b_finetuning")),
            _agent("175b_verification"),
        )
    ),
    "function_before_agent": _pipe(
        _race(
            _pipe(_fn("keep_answer"), _agent("175b_finetuning")),
            _agent("6b_verification"),
            _pipe(_fn("extract_final_answer"), _fn("keep_answer"), _agent("6b_finetuning")),
        ),
        _fn("extract_final_answer"),
    ),
    "nested_parallel_in_race": _pipe(
        _race(
            _par("merge_vote", _agent("6b_finetuning"), _agent("175b_finetuning")),
            _agent("6b_verification"),
            _pipe(
                _par("merge_candidates", _agent("6b_finetuning"), _agent("6b_verification")),
                _fn("majority_vote"),
            ),
        )
    ),
    "gate_in_race": _pipe(
        _race(
            _pipe(
                _par("merge_candidates", _agent("6b_finetuning"), _agent("175b_finetuning")),
                {
                    "kind": "router",
                    "routes": [
                        {
                            "name": "candidates_agree",
                            "condition_name": "candidates_agree",
                            "step": _fn("keep_answer"),
                        }
                    ],
                    "fallback_step": _agent("6b_verification"),
                },
            ),
            _agent("175b_verification"),
        )
    ),
    "race_in_pipeline": _pipe(
        _agent("6b_finetuning"),
        _race(_agent("175b_finetuning"), _agent("6b_verification")),
        _race(_agent("6b_finetuning"), _agent("175b_finetuning")),
        _fn("majority_vote"),
    ),
}
"""The recorded races: 2-4 agents, pipelines of agent calls, function steps before an agent,
nested merges and a cascade inside a race, and races in a pipeline.

Not a race inside a race's branch: how many turns a race takes to end depends on how long its
losers take to unwind their cancellation, and `Parallel` waits for that at most
`core.runtime._tasks.CANCEL_GRACE_S` (20 ms) of real time, so on a loaded machine the outer race
is decided by the wall clock, with either clock (two recordings of the tick loop at time scale 0
crowned different outer winners on one of 30 problems)."""

SCALED = ("two_agents", "two_agents_reversed", "three_agents", "four_agents", "same_agent_twice")
"""The races recorded at `SCALE` too: every branch one call (see the module docstring)."""

_WALL_CLOCK = ("start_ns", "end_ns", "duration_ms")


def _span(span: dict[str, Any]) -> dict[str, Any]:
    """A span without its wall-clock fields. A cancelled span keeps only that it did not
    finish: whether its cancellation had landed when the trace was read (its error, its output)
    is wall-clock (`cancel_and_reap` waits 20 ms of real time), with the tick loop too."""
    out = {k: v for k, v in span.items() if k not in _WALL_CLOCK}
    if span.get("end_ns") is None or str(span.get("error")).startswith("CancelledError"):
        out["error"] = "unfinished"
        out["output_summary"] = ""
    return out


def _digest(value: Any) -> str:
    text = json.dumps(value, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def _problem(where: str | Path, time_scale: float, clock: str | None) -> Problem:
    overrides: dict[str, Any] = {"models.time_scale": time_scale}
    if clock is not None:
        overrides["params.race_clock"] = clock
    return load_problem(where, datasets_dir=DATASETS, overrides=overrides)


def race_outcomes(
    problem: Problem, spec: dict[str, Any], *, trace: bool = True
) -> list[dict[str, Any]]:
    """What one evaluation of `spec` on the first `N_EXAMPLES` validation problems recorded,
    per example (see the module docstring); `trace=False` leaves the trace digest out."""
    evaluator = problem.evaluator(concurrency=16).with_options(capture_traces=True)
    ev = asyncio.run(evaluator.evaluate(spec, problem.splits["validation"][:N_EXAMPLES]))
    out: list[dict[str, Any]] = []
    for r in ev.results:
        spans = [_span(s) for s in r.trace]
        outcome: dict[str, Any] = {
            "id": r.example_id,
            "winners": [s["attributes"]["winner"] for s in spans if "winner" in s["attributes"]],
            "cost_usd": r.cost_usd,
            "latency_ms": r.latency_ms,
            "accuracy": r.accuracy,
            "requests": r.requests,
            "status": r.status,
            "output": _digest(r.output_summary),
        }
        if trace:
            outcome["trace"] = _digest(spans)
        out.append(outcome)
    return out


def record(where: str | Path, clock: str | None = "ticks") -> dict[str, Any]:
    """Every topology at time scale 0 and the `SCALED` ones at `SCALE`, with the problem at
    `where` and its race clock set to `clock` (None: as configured)."""
    still, scaled = _problem(where, 0.0, clock), _problem(where, SCALE, clock)
    out = {f"{name}@0": race_outcomes(still, spec) for name, spec in TOPOLOGIES.items()}
    for name in SCALED:
        out[f"{name}@{SCALE}"] = race_outcomes(scaled, TOPOLOGIES[name], trace=False)
    return out


@pytest.fixture(scope="module")
def recorded() -> dict[str, Any]:
    return json.loads(RECORDED.read_text(encoding="utf-8"))


def test_the_recording_covers_every_topology_and_scale(recorded: dict[str, Any]) -> None:
    assert sorted(recorded) == sorted(
        [f"{n}@0" for n in TOPOLOGIES] + [f"{n}@{SCALE}" for n in SCALED]
    )
    assert all(len(v) == N_EXAMPLES for v in recorded.values())
    # the races are not one-sided: each has problems won by different branches, but for the
    # race of a run against itself, a tie on every problem (won by the branch listed first)
    for name in TOPOLOGIES:
        winners = {tuple(e["winners"]) for e in recorded[f"{name}@0"]}
        assert len(winners) > 1 if name != "same_agent_twice" else winners == {(0,)}, name


def test_the_turn_clock_ends_every_recorded_race_as_the_tick_loop_did(
    recorded: dict[str, Any],
) -> None:
    problem = _problem("gsm8k_replay", 0.0, "turns")
    for name, spec in TOPOLOGIES.items():
        assert race_outcomes(problem, spec) == recorded[f"{name}@0"], name


def test_with_real_sleeps_the_turn_clock_gives_the_recorded_outcomes(
    recorded: dict[str, Any],
) -> None:
    problem = _problem("gsm8k_replay", SCALE, "turns")
    for name in SCALED:
        got = race_outcomes(problem, TOPOLOGIES[name], trace=False)
        assert got == recorded[f"{name}@{SCALE}"], name


def test_the_tick_loop_still_gives_the_recording(recorded: dict[str, Any]) -> None:
    problem = _problem("gsm8k_replay", 0.0, "ticks")
    for name, spec in TOPOLOGIES.items():
        assert race_outcomes(problem, spec) == recorded[f"{name}@0"], name


def test_turns_resume_a_task_where_its_own_bare_yields_would() -> None:
    """Three tasks wait 0..5 turns each, by ticks or by `pass_turns`, between steps that log;
    the interleaving of every step is the same."""
    from data.problems.gsm8k_replay import replay

    async def run(by_ticks: bool) -> list[tuple[str, int]]:
        log: list[tuple[str, int]] = []

        async def worker(name: str, waits: list[int]) -> None:
            for k, n in enumerate(waits):
                log.append((name, k))
                if by_ticks:
                    await replay.pass_turns_by_ticks(n)
                else:
                    wait = replay.pass_turns(n)
                    if wait is not None:
                        await wait
            log.append((name, -1))

        async def busy() -> None:
            for k in range(12):
                log.append(("busy", k))
                await asyncio.sleep(0)

        await asyncio.gather(
            worker("a", [3, 0, 2, 5]), busy(), worker("b", [1, 4, 4]), worker("c", [5, 2, 1, 1])
        )
        return log

    assert asyncio.run(run(False)) == asyncio.run(run(True))


def test_a_cancelled_waiter_leaves_the_loop() -> None:
    """The stand-in callback of a cancelled wait stops queueing itself on its next turn."""
    from data.problems.gsm8k_replay import replay

    queued: list[str] = []

    class CountingLoop(asyncio.SelectorEventLoop):
        def call_soon(self, callback: Any, *args: Any, context: Any = None) -> Any:
            queued.append(getattr(callback, "__name__", ""))
            return super().call_soon(callback, *args, context=context)

    async def main() -> bool:
        wait = replay.pass_turns(1000)
        assert wait is not None
        task = asyncio.ensure_future(wait)
        for _ in range(3):
            await asyncio.sleep(0)
        task.cancel()
        for _ in range(5):
            await asyncio.sleep(0)
        return task.cancelled()

    loop = CountingLoop()
    try:
        assert loop.run_until_complete(main())
    finally:
        loop.close()
    # queued when the wait began, then once a turn: 3 turns before the cancellation, and the
    # turn that saw it did not queue again
    assert queued.count("turn") == 4


if __name__ == "__main__":
    args = sys.argv[1:]
    as_is = "--as-is" in args
    args = [a for a in args if a != "--as-is"]
    if len(args) != 2 or args[0] != "record":
        sys.exit(__doc__)
    races = record(Path(args[1]), None if as_is else "ticks")
    print("{")
    for n, key in enumerate(sorted(races)):
        rows = ",\n  ".join(json.dumps(r, sort_keys=True) for r in races[key])
        print(f" {json.dumps(key)}: [\n  {rows}\n ]" + ("," if n < len(races) - 1 else ""))
    print("}")
