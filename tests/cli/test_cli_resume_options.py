"""`search PROBLEM --resume RUN` with options: the recorded ones win, so a different one is refused.

A resumed run replays its recorded proposals and results and runs the same deterministic loop
on, so it continues only with the budget, seed, strategy, strategy options, problem settings
and test split it was started with. Options that differ used to be ignored without a word (the
run went on to its recorded 30 evaluations with its recorded strategy and seed); now each is
named with the recorded value in one line, exit 2, and the journal is left as it was. Options
equal to the recorded ones are accepted, and so are those that change only how fast the run
goes (`--concurrency`, `--time-scale`).

A budget cannot be raised either: the engine keys a finished run's final snapshot, its
re-scoring and its held-out test evaluation by position, so a longer run would skip its own
events at those positions and the test split would be looked at twice.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest
from cli_text import kv, section

from core.problems import load_problem
from core.storage import journal_path
from studio.cli import main

pytestmark = pytest.mark.slow

REPO = Path(__file__).resolve().parents[2]
DATASETS = os.environ.get("TOPOLOGY_STUDIO_DATASETS") or str(REPO.parent / "shared" / "datasets")

RECORDED = [
    "--strategy", "random",
    "--max-evaluations", "30",
    "--seed", "3",
    "--minibatch-size", "5",
    "--set", "gold.validation_size=20",
    "--time-scale", "0",
    "--no-test",
]  # fmt: skip
"""The recorded run: 30 random-search evaluations on 20 validation problems, without the
held-out test (scoring the front on the other 1,299 problems took 100 s of CI and plays no
part in which options a resume accepts; tests/cli/test_cli_signals.py resumes through the
test)."""


@pytest.fixture(autouse=True)
def _env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("TOPOLOGY_STUDIO_DATASETS", DATASETS)
    monkeypatch.setenv("TOPOLOGY_STUDIO_CACHE", str(tmp_path / "cache"))
    monkeypatch.delenv("TOPOLOGY_STUDIO_DB", raising=False)
    monkeypatch.chdir(tmp_path)


@pytest.fixture(scope="module")
def recorded(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """The whole run, and its journal cut after the seed's evaluation (an interrupted run)."""
    work = tmp_path_factory.mktemp("resume_options")
    mp = pytest.MonkeyPatch()
    mp.setenv("TOPOLOGY_STUDIO_DATASETS", DATASETS)
    mp.setenv("TOPOLOGY_STUDIO_CACHE", str(work / "cache"))
    db = work / "whole.duckdb"
    capture = work / "stdout.txt"
    try:
        import contextlib

        with capture.open("w") as fh, contextlib.redirect_stdout(fh):
            code = main(["search", "gsm8k_replay", *RECORDED, "--db", str(db)])
    finally:
        mp.undo()
    stdout = capture.read_text()
    assert code == 0, stdout
    run_id = kv(stdout, "run")
    lines = journal_path(db, run_id).read_text().splitlines(keepends=True)
    cut = next(i for i, x in enumerate(lines) if '"type":"archive_snapshot"' in x) + 1
    return {"run_id": run_id, "stdout": stdout, "cut": "".join(lines[:cut])}


def _interrupted(recorded: dict[str, Any], tmp_path: Path, text: str | None = None) -> Path:
    """A database folder holding only the interrupted run's journal; returns the database."""
    db = tmp_path / "runs.duckdb"
    path = journal_path(db, recorded["run_id"])
    path.parent.mkdir(parents=True)
    path.write_text(recorded["cut"] if text is None else text)
    return db


def _refused(
    capsys: pytest.CaptureFixture[str],
    db: Path,
    run_id: str,
    *options: str,
    problem: str = "gsm8k_replay",
) -> list[str]:
    before = journal_path(db, run_id).read_bytes()
    code = main(["search", problem, "--resume", run_id, "--db", str(db), *options])
    cap = capsys.readouterr()
    assert code == 2, cap.err
    assert cap.out == ""
    assert journal_path(db, run_id).read_bytes() == before  # nothing changed
    assert not db.exists()  # nothing ingested either
    return cap.err.splitlines()


def _line(run_id: str, changes: str) -> str:
    return (
        f"topology-studio: error: cannot resume run {run_id} with other options than it was "
        f"started with: {changes}; resume it without them (it keeps its own, so it ends as the "
        "uninterrupted run would), or start a new search with them"
    )


def test_budget_seed_and_strategy_that_differ_are_refused_in_one_line(
    recorded: dict[str, Any], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run_id: str = recorded["run_id"]
    db = _interrupted(recorded, tmp_path)
    err = _refused(
        capsys, db, run_id, "--max-evaluations", "9", "--strategy", "evolutionary", "--seed", "7"
    )
    assert err == [
        _line(
            run_id,
            "--strategy evolutionary (recorded: random), --seed 7 (recorded: 3), "
            "--max-evaluations 9 (recorded: 30)",
        )
    ]


def test_every_kind_of_differing_option_is_named(
    recorded: dict[str, Any], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run_id: str = recorded["run_id"]
    db = _interrupted(recorded, tmp_path)
    err = _refused(
        capsys, db, run_id,
        "--max-usd", "5", "--max-wall-s", "60", "--patience", "4",
        "--generations", "3", "--minibatch-size", "10",
        "--set", "gold.validation_size=50", "--set", "search.weights.accuracy=2.0",
    )  # fmt: skip
    assert err == [
        _line(
            run_id,
            "--max-usd 5 (recorded: 20000), --max-wall-s 60 (recorded: 600), "
            "--patience 4 (recorded: none), --generations 3 (recorded: 10), "
            "--minibatch-size 10 (recorded: 5), "
            "--set gold.validation_size=50 (recorded: 20), "
            "--set search.weights.accuracy=2.0 (recorded: 1)",
        )
    ]


def test_a_budget_cannot_be_raised_on_resume(
    recorded: dict[str, Any], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run_id: str = recorded["run_id"]
    db = _interrupted(recorded, tmp_path)
    err = _refused(capsys, db, run_id, "--max-evaluations", "31")
    assert err == [_line(run_id, "--max-evaluations 31 (recorded: 30)")]


def test_another_problem_is_refused(
    recorded: dict[str, Any], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    import shutil

    run_id: str = recorded["run_id"]
    db = _interrupted(recorded, tmp_path)
    other = tmp_path / "other_problem"
    shutil.copytree(REPO / "data" / "problems" / "gsm8k_replay", other)
    toml = other / "problem.toml"
    toml.write_text(toml.read_text().replace('name = "gsm8k_replay"', 'name = "other"', 1))
    err = _refused(capsys, db, run_id, problem=str(other))
    started = json.loads(recorded["cut"].split("\n", 1)[0])["problem_config"]
    now = load_problem(other).files_sha256
    assert err == [
        f"topology-studio: error: cannot resume run {run_id} with another problem than it was "
        f"started with: recorded problem 'gsm8k_replay' (files sha256 "
        f"{started['files_sha256'][:12]}), given problem 'other' at {other.resolve()} (files "
        f"sha256 {now[:12]}); name the run's own problem, unchanged"
    ]


def test_a_different_designer_model_is_refused(
    recorded: dict[str, Any], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A meta-agent run records its designer (`--meta-model` is recorded as the problem's
    `search.meta_model`): another one is refused; checked on the recorded start alone."""
    run_id: str = recorded["run_id"]
    first, rest = recorded["cut"].split("\n", 1)
    started = json.loads(first)
    started["strategy"] = "meta_agent"
    started["problem_config"]["overrides"]["search.meta_model"] = "openai:gpt-4o-mini"
    db = _interrupted(recorded, tmp_path, json.dumps(started) + "\n" + rest)
    err = _refused(capsys, db, run_id, "--meta-model", "ollama:llama3.1")
    assert err == [_line(run_id, "--meta-model ollama:llama3.1 (recorded: openai:gpt-4o-mini)")]


def test_a_new_search_records_its_designer_model(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`--meta-model` reaches the run's recorded problem settings, where a resume finds it (a
    random search ignores the model; it is recorded all the same)."""
    db = tmp_path / "runs.duckdb"
    argv = ["search", "gsm8k_replay", "--strategy", "random", "--max-evaluations", "1"]
    code = main([*argv, "--meta-model", "openai:gpt-4o-mini", "--set", "gold.validation_size=5",
                 "--time-scale", "0", "--no-test", "--db", str(db)])  # fmt: skip
    cap = capsys.readouterr()
    assert code == 0, cap.err
    first = journal_path(db, kv(cap.out, "run")).read_text().split("\n", 1)[0]
    overrides = json.loads(first)["problem_config"]["overrides"]
    assert overrides == {
        "gold.validation_size": 5,
        "search.meta_model": "openai:gpt-4o-mini",
        "models.time_scale": 0.0,
    }


def test_the_recorded_options_and_speed_settings_are_accepted(
    recorded: dict[str, Any], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Every recorded option given again, plus other speed settings: the run resumes and ends
    with the uninterrupted run's front."""
    run_id: str = recorded["run_id"]
    db = _interrupted(recorded, tmp_path)
    code = main(["search", "gsm8k_replay", "--resume", run_id, "--db", str(db), *RECORDED,
                 "--max-usd", "20000", "--max-wall-s", "600", "--generations", "10",
                 "--concurrency", "4", "--set", "models.time_scale=0"])  # fmt: skip
    cap = capsys.readouterr()
    assert code == 0, cap.err
    n_recorded = len(recorded["cut"].splitlines())
    assert cap.err.splitlines() == [f"resuming run {run_id} after {n_recorded} recorded events"]
    assert kv(cap.out, "status") == "stopped (max_evaluations reached (30))"
    front = section(cap.out, "Pareto front (validation)")
    assert front == section(recorded["stdout"], "Pareto front (validation)")
    held_out = [x for x in cap.out.splitlines() if x.startswith("held-out test:")]
    assert held_out == ["held-out test: not evaluated"]  # the recorded --no-test, kept
