"""Every path that applies or evaluates a spec routing on learned conditions finds their
artefacts and registers them, digests checked: the studio's approve (from the proposal's run
journal) and evaluate, the CLI `evaluate` of an applied spec file (the `learned/` folder
beside it); and a registry's `learned/` folder survives a damaged or stray file."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest
import test_learned_routers as T
from learned_problem import write_problem

from core.errors import ApplyError
from core.hydrate import CallableRegistry
from core.ir import parse_topology
from core.problems import load_problem
from core.search.apply import apply_result, apply_specs
from core.search.learned import learned_names
from core.search.registry import TopologyRegistry
from core.storage import DuckDBRunStore
from core.storage.journal import RunJournal, journal_path
from studio.cli import main
from studio.manager import StudioManager


@pytest.fixture(scope="module")
def run_db(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Any]:
    """The learned-router reference run of test_learned_routers.py, journaled into a run
    store's journal folder and ingested (what `search` leaves behind)."""
    root = tmp_path_factory.mktemp("learned_paths")
    problem = load_problem(write_problem(root))
    db = root / "runs.duckdb"
    path = journal_path(db, T.RUN)
    path.parent.mkdir(parents=True)
    with RunJournal.create(path) as journal:
        result = asyncio.run(T.search(problem, [journal.append]).run())
    with DuckDBRunStore(db) as store:
        store.ingest()
    return db, result


def test_the_studio_approves_a_learned_router_candidate_of_a_run(
    tmp_path: Path, run_db: tuple[Path, Any]
) -> None:
    db, result = run_db
    best = result.raw["best_idx"]
    spec = result.best_decoded["short_long"]
    (name,) = learned_names(spec)
    digest = result.raw["learned"][name].digest
    m = StudioManager(db, registry_root=tmp_path / "reg")
    try:
        pid = m.propose("short_long", spec, run_id=T.RUN, candidate_idx=best, who="ann")
        shown = m.dry_run("short_long", spec)
        done = m.approve(pid, "short_long", spec, shown, who="ann")
        assert done.new_version == 1
        folder = tmp_path / "reg" / "short_long" / "learned"
        assert sorted(p.name for p in folder.iterdir()) == [f"{digest}.json"]
        fresh = CallableRegistry()
        assert m.registry.load("short_long", fresh) == (1, spec)
        assert fresh.names() == [name]
    finally:
        m.close()


def test_the_studio_refuses_to_approve_a_learned_router_it_has_no_artefact_of(
    tmp_path: Path, run_db: tuple[Path, Any]
) -> None:
    _, result = run_db
    spec = result.best_decoded["short_long"]
    m = StudioManager(tmp_path / "empty.duckdb", registry_root=tmp_path / "reg")
    try:
        pid = m.propose("short_long", spec, who="ann")
        shown = m.dry_run("short_long", spec)
        with pytest.raises(ApplyError, match="learned conditions whose artefacts were not given"):
            m.approve(pid, "short_long", spec, shown, who="ann")
        assert not (tmp_path / "reg" / "short_long").exists()
    finally:
        m.close()


@pytest.mark.parametrize("run_id", [T.RUN, None])
def test_the_studio_evaluates_a_learned_router_candidate_of_a_run(
    tmp_path: Path, run_db: tuple[Path, Any], run_id: str | None
) -> None:
    db, result = run_db
    spec = result.best_decoded["short_long"]
    problem_dir = write_problem(tmp_path)
    m = StudioManager(db, registry_root=tmp_path / "reg")
    try:
        ev = m.evaluate(str(problem_dir), spec, limit=None, run_id=run_id)
    finally:
        m.close()
    assert not ev.rejected, ev.reason
    assert (ev.accuracy, ev.n_examples) == (1.0, 12)


def test_cli_evaluate_reads_the_artefacts_beside_an_applied_spec_file(
    tmp_path: Path, run_db: tuple[Path, Any], capsys: pytest.CaptureFixture[str]
) -> None:
    db, result = run_db
    to = tmp_path / "registry"
    best = str(result.raw["best_idx"])
    assert main(["apply", T.RUN, best, "--db", str(db), "--to", str(to), "--yes", "--by", "a"]) == 0
    current = to / "short_long" / "current.json"
    problem = str(write_problem(tmp_path / "p"))
    capsys.readouterr()
    assert main(["evaluate", problem, str(current), "--split", "validation"]) == 0
    out = capsys.readouterr().out
    assert "== validation: 12 examples ==" in out
    assert "accuracy:               1.0000" in out
    # without the folder beside it, the condition has no artefact: refused, by name
    (name,) = learned_names(result.best_decoded["short_long"])
    alone = tmp_path / "alone.json"
    alone.write_text(current.read_text())
    assert main(["evaluate", problem, str(alone)]) == 2
    err = capsys.readouterr().err
    assert name in err


def test_apply_over_a_damaged_artefact_file_writes_it_again_and_the_version_loads(
    tmp_path: Path, run_db: tuple[Path, Any]
) -> None:
    _, result = run_db
    spec = result.best_decoded["short_long"]
    (name,) = learned_names(spec)
    cond = result.raw["learned"][name]
    folder = tmp_path / "reg" / "short_long" / "learned"
    folder.mkdir(parents=True)
    damaged = json.loads(cond.to_json())
    damaged["threshold"] = 0.0
    (folder / f"{cond.digest}.json").write_text(json.dumps(damaged))
    registry = TopologyRegistry(tmp_path / "reg")
    (diff,) = apply_result(result, registry, dry_run=False)
    assert diff.written
    assert (folder / f"{cond.digest}.json").read_text() == cond.to_json() + "\n"
    assert registry.load("short_long", CallableRegistry()) == (1, spec)


def test_a_stray_damaged_file_in_learned_blocks_no_version(
    tmp_path: Path, run_db: tuple[Path, Any]
) -> None:
    _, result = run_db
    registry = TopologyRegistry(tmp_path / "reg")
    plain = parse_topology(result.history[0].spec_json)
    assert not learned_names(plain)
    apply_specs({"short_long": plain}, registry, dry_run=False)
    stray = tmp_path / "reg" / "short_long" / "learned"
    stray.mkdir(parents=True)
    (stray / "notes.json").write_text("{}")
    (stray / f"{'0' * 64}.json").write_text("")
    assert registry.load("short_long", CallableRegistry()) == (1, plain)
    # and a version that routes on a learned condition loads beside them
    spec = result.best_decoded["short_long"]
    apply_result(result, registry, dry_run=False)
    fresh = CallableRegistry()
    assert registry.load("short_long", fresh) == (2, spec)
    assert fresh.names() == list(learned_names(spec))
