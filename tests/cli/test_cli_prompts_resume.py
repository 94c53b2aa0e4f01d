"""`search PROBLEM --resume RUN` after an interrupted phase 2 (resume works in either phase): the
complete search is replayed, phase 2 continues with its recorded settings from its call log, no
metric call is made twice, and it prints what the uninterrupted run printed."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from cli_text import kv

from studio.cli import main
from tests.fixtures.phase_two import TINY, record_calls

REPO = Path(__file__).resolve().parents[2]
DATASETS = os.environ.get("TOPOLOGY_STUDIO_DATASETS") or str(REPO.parent / "shared" / "datasets")
ROWS = ("start accuracy", "end accuracy", "best aggregate score", "gepa best accuracy",
        "metric calls", "model requests", "candidates")  # fmt: skip


def _env(monkeypatch: pytest.MonkeyPatch, folder: Path) -> None:
    folder.mkdir()
    monkeypatch.setenv("TOPOLOGY_STUDIO_DATASETS", DATASETS)
    monkeypatch.setenv("TOPOLOGY_STUDIO_CACHE", str(folder / "cache"))
    monkeypatch.setenv("TOPOLOGY_STUDIO_DB", str(folder / "runs.duckdb"))
    monkeypatch.chdir(folder)


def _phase2(out: str) -> dict[str, str]:
    text = out.split("== Phase 2: prompts (GEPA) ==")[1]
    return {key: kv(text, key) for key in ROWS}


def test_phase_2_resumes_from_its_call_log(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = ["search", "gsm8k_replay", *TINY, "--then-prompts", "--reflection-model", "test"]
    _env(monkeypatch, tmp_path / "whole")
    assert main([*argv, "--prompt-budget", "12"]) == 0
    whole = _phase2(capsys.readouterr().out)
    assert (whole["metric calls"], whole["model requests"]) == (
        "16 of 12",
        "16 task + 1 reflection",
    )

    _env(monkeypatch, tmp_path / "cut")
    made = record_calls(monkeypatch, stop_at_evaluate=2)  # the seed's validation, a minibatch
    assert main([*argv, "--prompt-budget", "12"]) == 130
    cap = capsys.readouterr()
    search_run = kv(cap.out, "run")
    assert cap.err.splitlines()[-1] == (
        f"interrupted in phase 2: the search run {search_run} is recorded and "
        "so is every call phase 2 made; continue with 'topology-studio search gsm8k_replay "
        f"--resume {search_run} --db {tmp_path / 'cut' / 'runs.duckdb'}'"
    )
    # the seed's validation pass, its re-scoring as GEPA accepted it, one minibatch
    assert made == ["evaluate", "rescore", "evaluate"]
    db = tmp_path / "cut" / "runs.duckdb"
    settings = json.loads((Path(f"{db}.prompts") / f"{search_run}.json").read_text())
    phase2 = settings["run_id"]
    assert settings["status"] == "running"
    phase2_journal = Path(f"{db}.journals") / f"{phase2}.jsonl"
    # phase 2's own journal holds the seed, journaled as GEPA accepted it, and no end
    cut_events = [json.loads(line) for line in phase2_journal.read_text().splitlines()]
    assert [(e["type"], e.get("candidate_idx")) for e in cut_events] == [
        ("run_started", None), ("candidate_proposed", 0), ("candidate_evaluated", 0),
        ("archive_snapshot", None),
    ]  # fmt: skip

    journal = tmp_path / "cut" / "runs.duckdb.journals" / f"{search_run}.jsonl"
    recorded = journal.read_text().splitlines()
    live = record_calls(monkeypatch)
    assert main(["search", "gsm8k_replay", "--resume", search_run]) == 0  # no phase 2 flag
    cap = capsys.readouterr()
    added = [json.loads(line)["type"] for line in journal.read_text().splitlines()[len(recorded) :]]
    assert added == ["run_started", "run_finished"]  # phase 1 replayed: no candidate run again
    # phase 2 continues its own journal: the seed (replayed) is not journaled twice
    events = [json.loads(line) for line in phase2_journal.read_text().splitlines()]
    assert events[: len(cut_events)] == cut_events
    assert [(e["type"], e.get("resumed")) for e in events[len(cut_events) :]] == [
        ("run_started", True), ("archive_snapshot", None), ("run_finished", None),
    ]  # fmt: skip
    assert json.loads((Path(f"{db}.prompts") / f"{search_run}.json").read_text()) == {
        **settings, "status": "completed"
    }  # fmt: skip
    assert _phase2(cap.out) == whole
    text = cap.out.split("== Phase 2: prompts (GEPA) ==")[1]
    assert kv(text, "replayed") == "13 metric calls from the log"  # 10 validation + 3 minibatch
    # only the calls after the interruption are made: the reflection and its new prompt's
    # 3-run minibatch (not better: GEPA keeps only the seed, re-scored before the cut)
    assert whole["candidates"] == "1"
    assert live == ["reflect", "evaluate"]
    assert f"resuming phase 2 of run {search_run}: 3 recorded calls" in cap.err
