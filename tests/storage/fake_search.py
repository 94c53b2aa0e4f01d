"""A deterministic stand-in for a search process: it writes a run journal and nothing else.

Used by the store's cross-process tests (F10 live view, crash and resume). Like the real search
engine on resume, it replays its seeded choices and skips emitting what the journal already
recorded, so a killed-and-resumed run ends with the same results as an uninterrupted one.

Run: `python tests/storage/fake_search.py JOURNAL --run-id R --seed S [--resume] ...`. It
prints `started` on stdout once its `run_started` line is written.
"""

from __future__ import annotations

import argparse
import random
import time
from typing import Any

from core.search.events import (
    ArchiveSnapshot,
    CandidateEvaluated,
    CandidateProposed,
    ExampleEvaluated,
    RunFinished,
    RunStarted,
)
from core.storage import ResumeState, RunJournal


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("journal")
    parser.add_argument("--run-id", required=True)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--candidates", type=int, default=10)
    parser.add_argument("--examples", type=int, default=10)
    parser.add_argument("--delay", type=float, default=0.0, help="seconds per example")
    parser.add_argument("--resume", action="store_true")
    args = parser.parse_args()

    journal = RunJournal.resume(args.journal) if args.resume else RunJournal.create(args.journal)
    state = ResumeState.from_events(journal.recorded)
    recorded_snapshots = sum(1 for e in journal.recorded if e.type == "archive_snapshot")
    seq = journal.next_seq

    def emit(cls: Any, **kw: Any) -> None:
        nonlocal seq
        journal.append(cls(run_id=args.run_id, seq=seq, ts=time.time(), **kw))
        seq += 1

    emit(RunStarted, problem="fake", strategy="random", seed=args.seed, resumed=args.resume)
    print("started", flush=True)
    rng = random.Random(args.seed)
    best: tuple[float, int] | None = None
    scores: dict[int, tuple[float, float]] = {}
    n_snapshots = 0
    for c in range(args.candidates):
        spec_hash = f"spec-{rng.randrange(10**9)}"
        parent = None if c == 0 else rng.randrange(c)
        if c not in state.proposals:
            emit(
                CandidateProposed,
                candidate_idx=c,
                generation=c // 3 - 1,
                spec_hash=spec_hash,
                spec_json=f'{{"kind": "pipeline", "name": "{spec_hash}"}}',
                parent_idx=parent,
                operator="seed" if c == 0 else "mutate",
            )
        correct = 0.0
        cost = 0.0
        for e in range(args.examples):
            acc = float(rng.random() < 0.3 + 0.05 * c)
            ex_cost = round(rng.random() * 1e-3, 9)
            correct += acc
            cost += ex_cost
            if (spec_hash, f"ex{e}", 0) in state.evaluations:
                continue
            time.sleep(args.delay)
            emit(
                ExampleEvaluated,
                candidate_idx=c,
                spec_hash=spec_hash,
                split="validation",
                example_id=f"ex{e}",
                accuracy=acc,
                cost_usd=ex_cost,
                latency_ms=10.0 * (e + 1),
                trace=[{"span_id": 0, "name": "solver", "c": c, "e": e}],
            )
        accuracy = correct / args.examples
        mean_cost = cost / args.examples
        score = accuracy - 10 * mean_cost
        scores[c] = (accuracy, mean_cost)
        if best is None or score > best[0]:
            best = (score, c)
        if (c, "validation") not in state.results:
            emit(
                CandidateEvaluated,
                candidate_idx=c,
                spec_hash=spec_hash,
                split="validation",
                n_examples=args.examples,
                accuracy=accuracy,
                cost_usd=mean_cost,
                latency_ms=55.0,
                n_agents=1 + c % 3,
                depth=1 + c % 2,
                aggregate_score=score,
            )
        if c % 3 == 2:
            n_snapshots += 1
            if n_snapshots > recorded_snapshots:
                emit(
                    ArchiveSnapshot,
                    generation=c // 3,
                    entries=sorted(scores),
                    front=[best[1]],
                    best_idx=best[1],
                    best_score=best[0],
                )
    emit(RunFinished, status="completed", best_idx=None if best is None else best[1])
    journal.close()


if __name__ == "__main__":
    main()
