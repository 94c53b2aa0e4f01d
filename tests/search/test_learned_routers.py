"""Learned routers end to end (`core.search.learned`): the front bridges fit them on the train
split, the run registers and journals their artefacts, a resume registers them by digest
before anything is checked, `apply` writes them beside the spec, and without a train split
nothing of it happens."""

from __future__ import annotations

import asyncio
import logging
import sys
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "contracts"))

from learned_problem import is_short, write_problem  # noqa: E402
from strategy_contract import archive_fingerprint, history_fingerprint  # noqa: E402

from core.combinators.learned import (  # noqa: E402
    LEARNED_PREFIX,
    read_artefacts,
    register_learned,
)
from core.errors import ApplyError  # noqa: E402
from core.evaluation._run import example_key  # noqa: E402
from core.evaluation.executor import Done, RemoteBatch  # noqa: E402
from core.evaluation.worker import run_batch  # noqa: E402
from core.hydrate import CallableRegistry  # noqa: E402
from core.problems import load_problem  # noqa: E402
from core.problems.problem import Problem  # noqa: E402
from core.search.apply import apply_result  # noqa: E402
from core.search.engine import build_search  # noqa: E402
from core.search.events import SearchEvent  # noqa: E402
from core.search.learned import artefacts_from_events, learned_names  # noqa: E402
from core.search.registry import TopologyRegistry  # noqa: E402
from core.search.result import OptimizationResult  # noqa: E402
from core.storage import DuckDBRunStore  # noqa: E402
from core.storage.journal import RunJournal, journal_path, read_journal  # noqa: E402
from studio.cli import main  # noqa: E402

RUN = "20261207-230000-abc123"
CONFIG: dict[str, Any] = {
    "n_generations": 4,
    "population_size": 4,
    "minibatch_size": 12,
    "bridge_order": ("learned", "mix", "cascade"),  # learned first: one short run shows all
}

OPERATORS = [
    "seed",
    "opening:single",
    "opening:cascade",
    "opening:self_consistency",
    "opening:cascade",
    "opening:self_consistency",
    "bridge:learned",
    "bridge:learned",
    "mutate:escalate_after",
    "mutate:wrap_in_parallel",
    "bridge:learned",
    "bridge:learned",
    "mutate:wrap_in_loop",
    "mutate:wrap_in_parallel",
]
"""The run's candidates: generation 2 bridges the (cheap, dear) gap with two learned routers
first (of three thresholds), generation 3 the next gap."""


def search(
    problem: Problem,
    subscribers: list[Any],
    resume_from: list[SearchEvent] | None = None,
    config: dict[str, Any] | None = None,
) -> Any:
    return build_search(
        problem,
        "evolutionary",
        config=config or CONFIG,
        run_id=RUN,
        subscribers=subscribers,
        resume_from=resume_from,
        handle_sigint=False,
    )


def routes(problem: Problem, registry: CallableRegistry, name: str) -> list[bool]:
    """Where condition `name` sends each validation input: True = the cheaper neighbour."""
    return [bool(registry.get(name)(e.input)) for e in problem.splits["validation"]]


@pytest.fixture(scope="module")
def reference(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, OptimizationResult]:
    """An uninterrupted run on the problem with a train split, journaled."""
    root = tmp_path_factory.mktemp("learned")
    problem = load_problem(write_problem(root))
    path = root / "full.jsonl"
    with RunJournal.create(path) as journal:
        result = asyncio.run(search(problem, [journal.append]).run())
    return path, result


def test_bridges_fit_on_train_only_and_propose_a_curve_of_learned_routers(
    tmp_path: Path, reference: tuple[Path, OptimizationResult]
) -> None:
    path, result = reference
    assert [r.operator for r in result.history] == OPERATORS
    events = read_journal(path)
    problem = load_problem(write_problem(tmp_path))
    train_ids = sorted(e.id or "" for e in problem.splits["train"])
    learned = result.raw["learned"]
    assert len(learned) == 6  # two fits (two gaps), three thresholds each
    for cond in learned.values():
        assert list(cond.train_ids) == train_ids  # fitted on the train split, all of it
        assert cond.name.startswith(LEARNED_PREFIX) and cond.name == f"learned_{cond.digest[:12]}"
    fits: dict[tuple[str, str], list[float]] = {}
    for cond in learned.values():
        fits.setdefault((cond.cheaper, cond.dearer), []).append(cond.threshold)
    assert [len(t) == len(set(t)) == 3 for t in fits.values()] == [True, True]
    # train runs are journaled as such, on train examples only; nothing learned reads others
    train_events = [e for e in events if e.type == "example_evaluated" and e.split == "train"]
    assert len(train_events) == 60  # cheap, dear, then the second gap's new end: 3 x 20
    assert {e.example_id for e in train_events} == set(train_ids)
    # the first proposal naming an artefact carries it, once
    carried = [n for e in events if e.type == "candidate_proposed" for n in e.learned]
    named = {n for r in result.history for n in learned_names_of(r.spec_json)}
    assert len(carried) == len(named) == 4 and set(artefacts_from_events(events)) == named
    # the widest share's router sends exactly the short questions (cheap is right there) to
    # cheap, at 1.0 accuracy and 3 short of 12 at the cheap price
    first = result.history[6]
    (name,) = learned_names_of(first.spec_json)
    registry = CallableRegistry()
    registry.register(name, _route_of(learned[name]))
    inputs = [e.input for e in problem.splits["validation"]]
    assert routes(problem, registry, name) == [is_short(str(q)) for q in inputs]
    assert sum(map(is_short, map(str, inputs))) == 3
    assert (first.accuracy, first.cost_usd) == (1.0, pytest.approx((3 * 0.001 + 9 * 0.01) / 12))


def learned_names_of(spec_json: str) -> tuple[str, ...]:
    from core.ir import parse_topology

    return learned_names(parse_topology(spec_json))


def _route_of(cond: Any) -> Any:
    from core.combinators.ballot import input_text
    from core.combinators.learned import learned_entry

    return learned_entry(cond, input_text).fn


def test_a_resumed_run_registers_the_artefacts_by_digest_first_and_routes_the_same(
    tmp_path: Path, reference: tuple[Path, OptimizationResult]
) -> None:
    path, result = reference
    recorded = read_journal(path)
    lines = path.read_bytes().splitlines(keepends=True)
    first = next(i for i, e in enumerate(recorded) if e.type == "candidate_proposed" and e.learned)
    crashed = tmp_path / "crashed.jsonl"
    crashed.write_bytes(b"".join(lines[: first + 1]))  # died before it was evaluated
    (carried,) = artefacts_from_events(recorded[: first + 1]).values()

    problem = load_problem(write_problem(tmp_path))  # a new process: fresh registries
    with RunJournal.resume(crashed) as journal:
        run = search(problem, [journal.append], resume_from=list(journal.recorded))
        registry = run.evaluator.callable_registry
        # registered by digest before anything is checked or evaluated
        assert carried.name in registry
        again = read_artefacts_of(registry, carried.name)
        assert again.digest == carried.digest
        resumed = asyncio.run(run.run())

    assert archive_fingerprint(resumed) == archive_fingerprint(result)
    assert history_fingerprint(resumed) == history_fingerprint(result)
    assert sorted(resumed.raw["learned"]) == sorted(result.raw["learned"])
    for name, cond in result.raw["learned"].items():
        assert resumed.raw["learned"][name].digest == cond.digest
        reference_registry = CallableRegistry()
        reference_registry.register(name, _route_of(cond))
        assert routes(problem, registry, name) == routes(problem, reference_registry, name)
    # the resumed journal's new proposals carry no artefact a recorded one carried
    after = read_journal(crashed)
    assert artefacts_from_events(after) == artefacts_from_events(recorded)
    assert sum(len(e.learned) for e in after if e.type == "candidate_proposed") == 4


def read_artefacts_of(registry: CallableRegistry, name: str) -> Any:
    from core.combinators.learned import learned_condition_of

    cond = learned_condition_of(registry.get(name))
    assert cond is not None
    return cond


def test_apply_writes_the_artefacts_beside_the_spec_and_loading_routes_the_same(
    tmp_path: Path, reference: tuple[Path, OptimizationResult]
) -> None:
    _, result = reference
    spec = result.best_decoded["short_long"]
    (name,) = learned_names(spec)  # type: ignore[arg-type]
    cond = result.raw["learned"][name]
    target = TopologyRegistry(tmp_path / "registry")

    with pytest.raises(ApplyError, match="learned conditions whose artefacts were not given"):
        apply_result(result, target, dry_run=False, artefacts={})
    assert not (tmp_path / "registry").exists()  # nothing written

    (diff,) = apply_result(result, target, dry_run=False)
    assert diff.written and diff.new_version == 1
    folder = tmp_path / "registry" / "short_long" / "learned"
    assert sorted(p.name for p in folder.iterdir()) == [f"{cond.digest}.json"]
    assert list(read_artefacts(folder)) == [cond.digest]

    problem = load_problem(write_problem(tmp_path))
    fresh = CallableRegistry()
    version, loaded = target.load("short_long", fresh)
    assert (version, loaded) == (1, spec)
    assert fresh.names() == [name]
    original = CallableRegistry()
    original.register(name, _route_of(cond))
    assert routes(problem, fresh, name) == routes(problem, original, name)
    # and the loaded spec evaluates: the registry of a problem that never saw the run
    ev = asyncio.run(_evaluate_loaded(problem, target))
    assert (ev.accuracy, ev.n_examples) == (1.0, 12)


async def _evaluate_loaded(problem: Problem, target: TopologyRegistry) -> Any:
    evaluator = problem.evaluator()
    _, spec = target.load("short_long", evaluator.callable_registry)
    return await evaluator.evaluate(spec, problem.splits["validation"])


def test_cli_apply_takes_the_artefacts_from_the_runs_journal(
    tmp_path: Path, reference: tuple[Path, OptimizationResult], capsys: pytest.CaptureFixture[str]
) -> None:
    path, result = reference
    db = tmp_path / "runs.duckdb"
    journal = journal_path(db, RUN)
    journal.parent.mkdir(parents=True)
    journal.write_bytes(path.read_bytes())
    with DuckDBRunStore(db) as store:
        store.ingest()
        assert store.list_ingest_errors() == []  # the artefacts' field is no trouble to it
    best = result.raw["best_idx"]
    to = tmp_path / "registry"
    code = main(["apply", RUN, str(best), "--db", str(db), "--to", str(to), "--yes", "--by", "ann"])
    out = capsys.readouterr().out
    assert code == 0
    (name,) = learned_names(result.best_decoded["short_long"])  # type: ignore[arg-type]
    digest = result.raw["learned"][name].digest
    assert f"learned artefacts beside it: {to / 'short_long' / 'learned'} ({name})" in out
    assert list(read_artefacts(to / "short_long" / "learned")) == [digest]


def test_without_a_train_split_the_bridges_propose_no_learned_router(tmp_path: Path) -> None:
    problem = load_problem(write_problem(tmp_path, train=False))
    assert "train" not in problem.splits
    path = tmp_path / "run.jsonl"
    with RunJournal.create(path) as journal:
        result = asyncio.run(search(problem, [journal.append]).run())
    ops = [r.operator for r in result.history]
    assert "bridge:learned" not in ops
    assert ops[6:8] == ["bridge:mix", "bridge:mix"]  # the same gap, bridged as before
    assert result.raw["learned"] == {}
    events = read_journal(path)
    assert [e for e in events if e.type == "candidate_proposed" and e.learned] == []
    assert [e for e in events if e.type == "example_evaluated" and e.split == "train"] == []
    assert not any(LEARNED_PREFIX in r.spec_json for r in result.history)


class ProblemWorker:
    """A remote executor whose worker is another load of the problem (as a Ray actor's is): it
    knows only what the problem registers; each batch goes through JSON, then `run_batch`."""

    def __init__(self, problem: Problem) -> None:
        self.evaluator = problem.evaluator()
        self.examples = {example_key(e): e for s in problem.splits.values() for e in s}
        self.batches: list[RemoteBatch] = []

    def start(self) -> None:
        """Nothing to start."""

    def describe(self) -> str:
        return "problem worker"

    def health(self) -> list[Any]:
        return []

    def close(self) -> None:
        """Nothing to close."""

    @property
    def rate_limits(self) -> dict[str, Any]:
        return {}

    async def run(self, batch: RemoteBatch, done: Done, call_cache: Any) -> None:
        sent = RemoteBatch.model_validate_json(batch.model_dump_json())
        self.batches.append(sent)
        outcome = await run_batch(self.evaluator, sent, self.examples)
        for index, result, cacheable in outcome.decoded():
            done(index, result, cacheable)


def test_a_remote_batch_carries_the_artefacts_its_spec_names_and_the_worker_registers_them(
    tmp_path: Path, reference: tuple[Path, OptimizationResult]
) -> None:
    _, result = reference
    spec = result.best_decoded["short_long"]
    (name,) = learned_names(spec)  # type: ignore[arg-type]
    cond = result.raw["learned"][name]
    worker = ProblemWorker(load_problem(write_problem(tmp_path / "worker")))
    assert name not in worker.evaluator.callable_registry
    driver = load_problem(write_problem(tmp_path / "driver"))
    evaluator = driver.evaluator(executor=worker)
    register_learned(cond, evaluator.callable_registry)
    ev = asyncio.run(evaluator.evaluate(spec, driver.splits["validation"]))
    assert [b.learned for b in worker.batches] == [(cond.to_json(),)]
    assert read_artefacts_of(worker.evaluator.callable_registry, name).digest == cond.digest
    assert (ev.accuracy, ev.n_examples, ev.error_rate) == (1.0, 12, 0.0)


def test_loading_a_spec_whose_artefact_is_missing_is_refused_before_anything_runs(
    tmp_path: Path, reference: tuple[Path, OptimizationResult]
) -> None:
    _, result = reference
    spec = result.best_decoded["short_long"]
    (name,) = learned_names(spec)  # type: ignore[arg-type]
    target = TopologyRegistry(tmp_path / "registry")
    apply_result(result, target, dry_run=False)
    cond = result.raw["learned"][name]
    (tmp_path / "registry" / "short_long" / "learned" / f"{cond.digest}.json").unlink()
    fresh = CallableRegistry()
    with pytest.raises(ApplyError, match=rf"no learned artefact for \['{name}'\] beside the spec"):
        target.load("short_long", fresh)
    assert fresh.names() == []


def test_by_default_a_gaps_learned_routers_come_after_its_input_feature_mixes(
    tmp_path: Path,
) -> None:
    """The default `bridge_order` (mix, learned, cascade): the (cheap, dear) gap gets its
    mixes first; the learned routers come once the widest gap's mixes are all known, and the
    train split is run only then."""
    problem = load_problem(write_problem(tmp_path))
    config = {"n_generations": 6, "population_size": 4, "minibatch_size": 12}
    path = tmp_path / "run.jsonl"
    with RunJournal.create(path) as journal:
        result = asyncio.run(search(problem, [journal.append], config=config).run())
    bridges = [
        (r.generation, r.operator) for r in result.history if r.operator.startswith("bridge")
    ]
    assert bridges == [
        (2, "bridge:mix"),
        (2, "bridge:mix"),
        (3, "bridge:mix"),
        (3, "bridge:mix"),
        (4, "bridge:learned"),
        (4, "bridge:learned"),
        (5, "bridge:learned"),
        (5, "bridge:mix"),
    ]
    events = read_journal(path)
    first_train = next(
        e.seq for e in events if e.type == "example_evaluated" and e.split == "train"
    )
    gen4 = next(e.seq for e in events if e.type == "candidate_proposed" and e.generation == 4)
    assert (
        max(e.seq for e in events if e.type == "archive_snapshot" and e.generation == 3)
        < first_train
        < gen4
    )
    assert len(result.raw["learned"]) == 3  # one fit


def test_forked_workers_resolve_a_learned_condition_registered_after_their_fork(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """Workers inherit the registry at their fork: the train runs fork them, the fit registers
    a new name after, so registering closes them and the next evaluation forks fresh ones that
    know it (no worker fails to hydrate, nothing is run again in the parent)."""
    problem = load_problem(write_problem(tmp_path, n=200, validation=80, train_size=80, workers=2))
    config = {**CONFIG, "n_generations": 3}
    with caplog.at_level(logging.WARNING, logger="core.evaluation._fork"):
        result = asyncio.run(search(problem, [], config=config).run())
    learned = [r for r in result.history if r.operator == "bridge:learned"]
    assert [(r.status, r.split) for r in learned] == [("evaluated", "validation")] * 2
    assert [r.accuracy for r in learned] == [0.9, 0.9]
    assert [m for m in caplog.messages if "evaluation worker" in m] == []
