"""seed_library_from_run: a real search's validation front as a seed library, written to a library
file and read back; runs that cannot be a library refused by name."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from core.ir import parse_topology
from core.problems import load_problem
from core.runtime_design.seed import (
    LIBRARY_FORMAT,
    SeedLibraryError,
    library_to_json,
    load_library,
    seed_library_from_run,
)
from core.storage import DuckDBRunStore
from core.vocab.events import RunStarted
from studio.cli import main

# 10 validation problems, 4 candidate evaluations, no test split, no sleeping: ~5 s
SMALL = [
    "--seed", "1", "--max-evaluations", "4", "--minibatch-size", "5",
    "--set", "gold.validation_size=10", "--time-scale", "0", "--no-test",
]  # fmt: skip


@pytest.fixture(scope="module")
def recorded(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Path, str]]:
    """A small evolutionary search on gsm8k_replay recorded in a fresh database."""
    work = tmp_path_factory.mktemp("seed_run")
    db = work / "runs.duckdb"
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("TOPOLOGY_STUDIO_CACHE", str(work / "cache"))
        mp.chdir(work)
        assert main(["search", "gsm8k_replay", *SMALL, "--db", str(db)]) == 0
    with DuckDBRunStore(db) as store:
        run_id = str(store.list_runs()["run_id"].iloc[0])
    yield db, run_id


def test_the_library_is_the_runs_validation_front(recorded: tuple[Path, str]) -> None:
    db, run_id = recorded
    with DuckDBRunStore(db) as store:
        library = seed_library_from_run(store, run_id)
        archive = store.archive(run_id, split="validation")
        specs = {
            int(r["candidate_idx"]): parse_topology(store.get_spec(str(r["spec_hash"])) or "")
            for r in archive.to_dict("records")
        }
    # the search evaluated candidates 0..3; only 0 (the seed) and 1 are on the front
    assert sorted(specs) == [0, 1, 2, 3]
    assert [e.label for e in library] == ["candidate 0", "candidate 1 (best)"]
    figures = [(e.accuracy, e.cost_usd, e.latency_ms) for e in library]
    assert figures == [
        pytest.approx((0.4, 0.007194, 3145.0), rel=1e-12),  # per problem: share, USD, ms
        pytest.approx((0.7, 1.458, 6450.0), rel=1e-12),
    ]
    assert library[0].spec == specs[0]
    assert library[0].spec == load_problem("gsm8k_replay").seed_spec
    assert library[1].spec == specs[1]
    assert library[1].spec == parse_topology(
        {
            "kind": "pipeline",
            "steps": [{"operation": {"kind": "agent_step", "agent_name": "175b_verification"}}],
        }
    )


def test_a_library_file_round_trips(recorded: tuple[Path, str], tmp_path: Path) -> None:
    db, run_id = recorded
    with DuckDBRunStore(db) as store:
        library = seed_library_from_run(store, run_id)
    path = tmp_path / "lib.json"
    path.write_text(library_to_json(library, run_id=run_id))
    document = json.loads(path.read_text())
    assert document["format"] == LIBRARY_FORMAT
    assert document["run_id"] == run_id
    assert [e["label"] for e in document["entries"]] == ["candidate 0", "candidate 1 (best)"]
    assert load_library(path) == library


def test_an_unknown_run_is_refused(tmp_path: Path) -> None:
    with DuckDBRunStore(tmp_path / "runs.duckdb") as store:
        with pytest.raises(SeedLibraryError, match=r"^no run 'nope' in the store$"):
            seed_library_from_run(store, "nope")


def test_a_run_with_no_validated_candidate_is_refused(tmp_path: Path) -> None:
    with DuckDBRunStore(tmp_path / "runs.duckdb") as store:
        store.record_events(
            [RunStarted(run_id="r1", seq=0, ts=time.time(), problem="p", strategy="random", seed=1)]
        )
        with pytest.raises(SeedLibraryError, match=r"^run 'r1' has no valid candidate on a "):
            seed_library_from_run(store, "r1")


def test_bad_library_files_name_what_is_wrong(tmp_path: Path) -> None:
    path = tmp_path / "lib.json"
    path.write_text("{not json")
    with pytest.raises(SeedLibraryError, match=r"lib\.json is not JSON"):
        load_library(path)
    path.write_text(json.dumps({"format": "other", "entries": []}))
    with pytest.raises(SeedLibraryError, match=r"has format 'other', expected "):
        load_library(path)
    path.write_text(json.dumps({"format": LIBRARY_FORMAT, "entries": []}))
    with pytest.raises(SeedLibraryError, match=r"holds no entries"):
        load_library(path)
    spec = {"kind": "pipeline", "steps": [{"operation": {"kind": "agent_step", "agent_name": "a"}}]}
    path.write_text(json.dumps([{"spec": spec, "accuracy": 0.5}, {"spec": spec, "accuracy": 2}]))
    with pytest.raises(
        SeedLibraryError, match=r"entries\[1\] is invalid: .*less than or equal to 1"
    ):
        load_library(path)
    with pytest.raises(SeedLibraryError, match=r"cannot read the library .*missing\.json"):
        load_library(tmp_path / "missing.json")
