"""`search --traces` and `[search] traces` (small journals: traces only when asked): per-example
traces reach the journal only when asked, the setting is recorded, and `--resume` keeps it."""

from __future__ import annotations

import contextlib
import io
import json
import os
from pathlib import Path

import pytest
from cli_text import kv

from core.problems import load_problem
from core.search.events import ExampleEvaluated
from core.storage import journal_path, read_journal
from studio.cli import main

pytestmark = pytest.mark.slow

REPO = Path(__file__).resolve().parents[2]
DATASETS = os.environ.get("TOPOLOGY_STUDIO_DATASETS") or str(REPO.parent / "shared" / "datasets")

SMALL = [
    "--strategy", "random",
    "--max-evaluations", "3",
    "--seed", "1",
    "--minibatch-size", "5",
    "--set", "gold.validation_size=10",
    "--time-scale", "0",
    "--no-test",
]  # fmt: skip


@pytest.fixture(autouse=True)
def _env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("TOPOLOGY_STUDIO_DATASETS", DATASETS)
    monkeypatch.setenv("TOPOLOGY_STUDIO_CACHE", str(tmp_path / "cache"))
    monkeypatch.delenv("TOPOLOGY_STUDIO_DB", raising=False)
    monkeypatch.chdir(tmp_path)


def _search(db: Path, *extra: str) -> tuple[str, Path]:
    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        code = main(["search", "gsm8k_replay", *SMALL, *extra, "--db", str(db)])
    assert code == 0, buf.getvalue()
    run_id = kv(buf.getvalue(), "run")
    return run_id, journal_path(db, run_id)


def _example_lines(path: Path) -> list[dict[str, object]]:
    return [json.loads(x) for x in path.read_text().splitlines() if x.startswith('{"e":')]


def test_the_problem_setting_turns_the_evaluators_traces_on() -> None:
    assert load_problem("gsm8k_replay").evaluator().config.capture_traces is False
    on = load_problem("gsm8k_replay", overrides={"search.traces": True})
    assert on.search.traces is True
    assert on.evaluator().config.capture_traces is True


def test_without_traces_no_line_holds_one_and_the_store_has_none(tmp_path: Path) -> None:
    db = tmp_path / "runs.duckdb"
    run_id, path = _search(db)
    lines = _example_lines(path)
    assert len(lines) > 0
    assert [x for x in lines if "tr" in x] == []
    events = [e for e in read_journal(path) if isinstance(e, ExampleEvaluated)]
    assert {len(e.trace) for e in events} == {0}
    started = read_journal(path)[0]
    assert started.type == "run_started"
    assert started.config["evaluator"]["capture_traces"] is False


def test_with_traces_every_run_line_holds_its_spans(tmp_path: Path) -> None:
    db = tmp_path / "runs.duckdb"
    _, path = _search(db, "--traces")
    fresh = [x for x in _example_lines(path) if not x.get("k")]
    assert len(fresh) > 0
    assert all(isinstance(x.get("tr"), list) and x["tr"] for x in fresh)
    started = read_journal(path)[0]
    assert started.type == "run_started"
    assert started.problem_config["overrides"]["search.traces"] is True


def test_resume_with_traces_of_a_run_without_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db = tmp_path / "runs.duckdb"
    run_id, path = _search(db)
    capsys.readouterr()
    before = path.read_bytes()
    code = main(["search", "gsm8k_replay", "--resume", run_id, "--db", str(db), "--traces"])
    err = capsys.readouterr().err
    assert code == 2
    assert err.splitlines() == [
        f"topology-studio: error: cannot resume run {run_id} with other options than it was "
        "started with: --traces (recorded: traces off); resume it without them (it keeps its "
        "own, so it ends as the uninterrupted run would), or start a new search with them"
    ]
    assert path.read_bytes() == before


def test_resume_keeps_the_recorded_traces_setting(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db = tmp_path / "runs.duckdb"
    run_id, path = _search(db, "--traces")
    assert main(["search", "gsm8k_replay", "--resume", run_id, "--db", str(db)]) == 0
    capsys.readouterr()
    resumed = [e for e in read_journal(path) if e.type == "run_started"]
    assert [e.resumed for e in resumed] == [False, True]
    assert resumed[1].config["evaluator"]["capture_traces"] is True
