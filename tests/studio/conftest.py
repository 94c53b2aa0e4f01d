"""Shared fixtures of the studio tests: small run stores built from search events."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from core.ir import parse_topology, spec_hash
from core.search.events import (
    ArchiveSnapshot,
    CandidateEvaluated,
    CandidateProposed,
    ExampleEvaluated,
    LogMessage,
    RunFinished,
    RunStarted,
    SearchEvent,
)
from core.storage import DuckDBRunStore

REPO = Path(__file__).resolve().parents[2]
DATASETS = os.environ.get("TOPOLOGY_STUDIO_DATASETS") or str(REPO.parent / "shared" / "datasets")

RUN_ID = "20250101-120000-abc123"

SPECS: dict[int, str] = {
    0: '{"kind": "pipeline", "id": "seed", "name": "seed", "steps": [{"operation": '
    '{"kind": "agent_step", "id": "solve", "agent_name": "6b_finetuning"}}]}',
    1: '{"kind": "pipeline", "id": "seed", "name": "seed", "steps": [{"operation": '
    '{"kind": "agent_step", "id": "solve", "agent_name": "175b_verification"}}]}',
    2: '{"kind": "pipeline", "id": "seed", "name": "seed", "steps": [{"operation": '
    '{"kind": "agent_step", "id": "solve", "agent_name": "6b_finetuning"}}, {"operation": '
    '{"kind": "function_step", "id": "extract", "callable_name": "extract_final_answer"}}]}',
    3: '{"kind": "parallel", "id": "vote", "merge": "merge_vote", "steps": ['
    '{"kind": "agent_step", "agent_name": "6b_finetuning"}, '
    '{"kind": "agent_step", "agent_name": "175b_finetuning"}]}',
}
"""Candidate specs: 0 the seed, 1 dearer and better, 2 a dominated variant, 3 invalid (NaN)."""

# (accuracy, cost_usd, latency_ms, n_agents, depth, aggregate score, valid)
RESULTS: dict[int, tuple[float, float, float, int, int, float, bool]] = {
    0: (0.25, 0.001, 1000.0, 1, 1, 0.20, True),
    1: (0.60, 0.500, 9000.0, 1, 1, 0.45, True),
    2: (0.20, 0.002, 1500.0, 1, 1, 0.15, True),
    3: (float("nan"), 0.010, 2000.0, 2, 1, float("nan"), False),
}
"""Candidate results on the validation split."""

THOUGHTS = {1: "Use the strongest run: accuracy matters most here."}

EXAMPLES = ("q1", "q2", "q3", "q4")
RIGHT: dict[int, tuple[int, ...]] = {
    0: (1, 0, 0, 0),
    1: (1, 1, 1, 0),
    2: (0, 1, 0, 0),
    3: (0, 0, 0, 0),
}
"""Per-example correctness of each candidate (so 0 and 1 flip on q2 and q3)."""


def run_events(
    run_id: str = RUN_ID, *, finished: bool = True, t0: float = 1_735_732_800.0
) -> list[SearchEvent]:
    """The events of a small finished search of four candidates."""
    seq = iter(range(10_000))
    ev: list[SearchEvent] = [
        RunStarted(
            run_id=run_id,
            seq=next(seq),
            ts=t0,
            problem="gsm8k_replay",
            strategy="evolutionary",
            seed=1,
        )
    ]
    for idx, text in SPECS.items():
        h = spec_hash(parse_topology(text))
        ev.append(
            CandidateProposed(
                run_id=run_id,
                seq=next(seq),
                ts=t0 + idx,
                candidate_idx=idx,
                generation=-1 if idx == 0 else 0,
                spec_hash=h,
                spec_json=text,
                parent_idx=None if idx == 0 else 0,
                operator="seed" if idx == 0 else "mutate:change_agent",
                thought=THOUGHTS.get(idx, ""),
            )
        )
        for ex, right in zip(EXAMPLES, RIGHT[idx], strict=True):
            acc = float("nan") if idx == 3 else float(right)
            ev.append(
                ExampleEvaluated(
                    run_id=run_id,
                    seq=next(seq),
                    ts=t0 + idx + 0.1,
                    candidate_idx=idx,
                    spec_hash=h,
                    split="validation",
                    example_id=ex,
                    accuracy=acc,
                    cost_usd=RESULTS[idx][1],
                    latency_ms=RESULTS[idx][2],
                    status="invalid" if idx == 3 else "ok",
                    output_summary=f"answer of {idx} to {ex}",
                )
            )
        acc, cost, lat, n_agents, depth, score, valid = RESULTS[idx]
        ev.append(
            CandidateEvaluated(
                run_id=run_id,
                seq=next(seq),
                ts=t0 + idx + 0.5,
                candidate_idx=idx,
                spec_hash=h,
                split="validation",
                n_examples=len(EXAMPLES),
                accuracy=acc,
                cost_usd=cost,
                latency_ms=lat,
                n_agents=n_agents,
                depth=depth,
                aggregate_score=score,
                valid=valid,
                invalid_reason=None if valid else "nan_accuracy",
            )
        )
        ev.append(
            ArchiveSnapshot(
                run_id=run_id,
                seq=next(seq),
                ts=t0 + idx + 0.6,
                generation=idx - 1,
                entries=list(range(idx + 1)),
                front=[0] if idx == 0 else [0, 1],
                best_idx=0 if idx == 0 else 1,
                best_score=0.20 if idx == 0 else 0.45,
                hypervolume=0.1 * (idx + 1),
                n_evaluations=4 * (idx + 1),
                cost_usd_total=0.01 * (idx + 1),
            )
        )
    ev.append(LogMessage(run_id=run_id, seq=next(seq), ts=t0 + 9, message="done"))
    if finished:
        ev.append(
            RunFinished(
                run_id=run_id,
                seq=next(seq),
                ts=t0 + 10,
                status="completed",
                reason="done",
                best_idx=1,
            )
        )
    return ev


@pytest.fixture
def small_db(tmp_path: Path) -> Path:
    """A run database holding one finished four-candidate run (`RUN_ID`), closed again."""
    db = tmp_path / "runs.duckdb"
    with DuckDBRunStore(db) as store:
        store.record_events(run_events())
    return db


@pytest.fixture
def studio_env(small_db: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """The studio's environment pointed at `small_db`, a fresh registry, and the datasets."""
    monkeypatch.setenv("TOPOLOGY_STUDIO_DB", str(small_db))
    monkeypatch.setenv("TOPOLOGY_STUDIO_REGISTRY", str(tmp_path / "registry"))
    monkeypatch.setenv("TOPOLOGY_STUDIO_DATASETS", DATASETS)
    monkeypatch.setenv("TOPOLOGY_STUDIO_USER", "tester")
    yield small_db


@pytest.fixture
def make_events():  # noqa: ANN201 (the run_events function)
    """`run_events(run_id, finished=..., t0=...)`: the events of a small four-candidate run."""
    return run_events
