"""A stand-in for a command-line search in another process: writes a run journal, one new
candidate every 100 ms, until it has written `N` candidates or the stop file appears.

Usage: `python journal_writer.py DB RUN_ID N STOP_FILE`.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

from core.ir import parse_topology, spec_hash
from core.search.events import (
    ArchiveSnapshot,
    CandidateEvaluated,
    CandidateProposed,
    RunFinished,
    RunStarted,
)
from core.storage import RunJournal, journal_path

AGENTS = ("6b_finetuning", "175b_finetuning", "6b_verification", "175b_verification")


def main(db: str, run_id: str, n: int, stop_file: str) -> None:
    seq = 0
    with RunJournal.create(journal_path(db, run_id)) as journal:

        def emit(cls: type, **fields: object) -> None:
            nonlocal seq
            journal.append(cls(run_id=run_id, seq=seq, ts=time.time(), **fields))
            seq += 1

        emit(RunStarted, problem="gsm8k_replay", strategy="evolutionary", seed=1)
        for i in range(n):
            if Path(stop_file).exists():
                break
            steps = ", ".join(
                f'{{"operation": {{"kind": "agent_step", "agent_name": "{AGENTS[(i + k) % 4]}"}}}}'
                for k in range(1 + i % 3)
            )
            text = f'{{"kind": "pipeline", "name": "c{i}", "steps": [{steps}]}}'
            h = spec_hash(parse_topology(text))
            emit(
                CandidateProposed,
                candidate_idx=i,
                generation=i - 1,
                spec_hash=h,
                spec_json=text,
                parent_idx=None if i == 0 else 0,
                operator="seed" if i == 0 else "mutate",
            )
            acc = 0.2 + 0.6 * ((i * 37) % 100) / 100
            emit(
                CandidateEvaluated,
                candidate_idx=i,
                spec_hash=h,
                split="validation",
                n_examples=10,
                accuracy=acc,
                cost_usd=0.001 * (1 + (i * 53) % 97),
                latency_ms=1000.0 + 10 * i,
                n_agents=1 + i % 3,
                depth=1,
                aggregate_score=acc - 0.01 * (i % 3),
            )
            emit(
                ArchiveSnapshot,
                generation=i - 1,
                entries=list(range(i + 1)),
                front=[0],
                best_idx=0,
                best_score=0.2,
                n_evaluations=10 * (i + 1),
            )
            time.sleep(0.1)
        emit(RunFinished, status="completed", reason="done")


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4])
