"""Determinism and resume: the same seed and inputs give the same archive; a run killed part-way
and resumed from its journal ends with the archive an uninterrupted run ends with, without
re-running what was recorded."""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "contracts"))

from strategy_contract import (  # noqa: E402
    ToyWorld,
    archive_fingerprint,
    history_fingerprint,
    toy_world,
)

from core.errors import SearchError  # noqa: E402
from core.search._engine import SearchRun  # noqa: E402
from core.search.events import SearchEvent  # noqa: E402
from core.search.result import OptimizationResult  # noqa: E402
from core.search.strategies import (  # noqa: E402
    EvolutionaryConfig,
    EvolutionarySearch,
    RandomConfig,
    RandomSearch,
    Strategy,
)
from core.storage.journal import RunJournal, read_journal  # noqa: E402


def evolutionary(seed: int = 5) -> Strategy:
    return EvolutionarySearch(
        EvolutionaryConfig(seed=seed, n_generations=3, population_size=3, minibatch_size=4)
    )


def run(
    world: ToyWorld,
    strategy: Strategy,
    subscribers: list[Any],
    resume_from: list[SearchEvent] | None = None,
) -> OptimizationResult:
    search = SearchRun(
        strategy,
        gene=world.gene,
        evaluator=world.evaluator,
        validation=world.validation,
        test=world.test,
        callable_registry=world.callables,
        agent_registry=world.agents,
        run_id="run-1",
        subscribers=subscribers,
        resume_from=resume_from,
        handle_sigint=False,
    )
    return asyncio.run(search.run())


def keys(events: list[SearchEvent]) -> set[tuple[Any, ...]]:
    out: set[tuple[Any, ...]] = set()
    for e in events:
        if e.type == "example_evaluated":
            out.add(("e", e.spec_hash, e.example_id, e.trial))
        elif e.type == "candidate_proposed":
            out.add(("p", e.candidate_idx, e.spec_hash, e.status))
        elif e.type == "candidate_evaluated":
            out.add(("c", e.candidate_idx, e.split, e.aggregate_score))
    return out


@pytest.mark.parametrize(
    "make",
    [
        evolutionary,
        lambda: RandomSearch(
            RandomConfig(seed=9, n_generations=2, proposals_per_generation=3, minibatch_size=4)
        ),
    ],
)
def test_same_seed_same_archive_whatever_the_cache_held(make: Any) -> None:
    first_world = toy_world(n_test=4)
    first = run(first_world, make(), [])
    second = run(toy_world(n_test=4), make(), [])
    assert archive_fingerprint(first) == archive_fingerprint(second)
    assert history_fingerprint(first) == history_fingerprint(second)
    # a warm cache (every result already known) changes nothing but what is paid
    warm = run(first_world, make(), [])
    assert archive_fingerprint(warm) == archive_fingerprint(first)
    assert history_fingerprint(warm) == history_fingerprint(first)
    used, warm_used = first.raw["budget_used"], warm.raw["budget_used"]
    assert warm_used["usd"] == used["usd"] and warm_used["usd_spent"] == 0.0
    assert warm_used["example_evaluations"] == used["example_evaluations"]


@pytest.mark.parametrize("cut_after", ["seed", "mid_candidate", "generation_1"])
def test_resume_from_a_journal_ends_like_an_uninterrupted_run(
    tmp_path: Path, cut_after: str
) -> None:
    # the uninterrupted run, journaled
    full_path = tmp_path / "full.jsonl"
    with RunJournal.create(full_path) as journal:
        reference = run(toy_world(n_test=4), evolutionary(), [journal.append])
    recorded = read_journal(full_path)
    lines = full_path.read_bytes().splitlines(keepends=True)

    # where the process "died"
    if cut_after == "seed":
        cut = next(i for i, e in enumerate(recorded) if e.type == "archive_snapshot") + 1
    elif cut_after == "mid_candidate":
        proposals = [i for i, e in enumerate(recorded) if e.type == "candidate_proposed"]
        cut = proposals[2] + 3  # two example results of candidate 2 recorded, then death
    else:
        snaps = [i for i, e in enumerate(recorded) if e.type == "archive_snapshot"]
        cut = snaps[2] + 2
    crashed = tmp_path / "run-1.jsonl"
    crashed.write_bytes(b"".join(lines[:cut]) + b'{"run_id": "run-1", "seq": 9')  # torn line

    world = toy_world(n_test=4)
    with RunJournal.resume(crashed) as journal:
        assert len(journal.recorded) == cut
        resumed = run(world, evolutionary(), [journal.append], resume_from=list(journal.recorded))
    after = read_journal(crashed)

    assert archive_fingerprint(resumed) == archive_fingerprint(reference)
    assert history_fingerprint(resumed) == history_fingerprint(reference)
    assert resumed.best_candidate == reference.best_candidate
    assert resumed.raw["test"] == reference.raw["test"]
    ref_used, res_used = reference.raw["budget_used"], resumed.raw["budget_used"]
    for key in ("evaluations", "example_evaluations", "usd"):
        assert res_used[key] == ref_used[key]

    # the journal continues: contiguous seq, a RunStarted(resumed=True) first, nothing twice
    new = after[cut:]
    assert [e.seq for e in after] == list(range(len(after)))
    assert new[0].type == "run_started" and new[0].resumed is True
    assert keys(after) == keys(recorded)
    n_examples = [e for e in after if e.type == "example_evaluated"]
    assert len(n_examples) == len({(e.spec_hash, e.example_id, e.trial) for e in n_examples})
    # recorded work was not run again: the resumed process paid only for the rest
    recorded_cost = sum(e.cost_usd for e in recorded[:cut] if e.type == "example_evaluated")
    assert res_used["usd_spent"] == pytest.approx(ref_used["usd"] - recorded_cost, abs=1e-12)
    assert len(world.calls) < sum(1 for e in recorded if e.type == "example_evaluated") * 4


def test_resume_refuses_another_runs_events() -> None:
    events: list[SearchEvent] = []
    run(toy_world(), evolutionary(), [events.append])
    world = toy_world()
    with pytest.raises(SearchError, match="resume events are of run 'run-1', not 'other'"):
        SearchRun(
            evolutionary(),
            gene=world.gene,
            evaluator=world.evaluator,
            validation=world.validation,
            callable_registry=world.callables,
            agent_registry=world.agents,
            run_id="other",
            resume_from=events,
        )
