"""`search --strategy meta-agent` with a designer model that cannot be built.

Without `OPENAI_API_KEY`, an `openai:` designer used to fail at its first call, after the seed
had been evaluated: exit 1 and a failed run left in the journal. The meta agent's preflight now
builds the model first, so the command prints one clear line naming the model and the missing
setting, exits 2 (a bad input), evaluates nothing and leaves no run behind.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

from core.evaluation.evaluator import CandidateEvaluation, TopologyEvaluator
from studio.cli import main

REPO = Path(__file__).resolve().parents[2]
DATASETS = os.environ.get("TOPOLOGY_STUDIO_DATASETS") or str(REPO.parent / "shared" / "datasets")

SMALL = [
    "--seed", "1",
    "--max-evaluations", "4",
    "--minibatch-size", "5",
    "--set", "gold.validation_size=20",
    "--time-scale", "0",
]  # fmt: skip


@pytest.fixture
def workdir(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    """Datasets from the shared folder, an empty cache, the database under tmp_path, no key."""
    monkeypatch.setenv("TOPOLOGY_STUDIO_DATASETS", DATASETS)
    monkeypatch.setenv("TOPOLOGY_STUDIO_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv("TOPOLOGY_STUDIO_DB", str(tmp_path / "runs.duckdb"))
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    monkeypatch.chdir(tmp_path)
    return tmp_path


def test_a_designer_without_its_api_key_fails_before_the_seed_with_one_line(
    workdir: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    evaluated: list[int] = []
    inner = TopologyEvaluator.evaluate

    async def counting(self: TopologyEvaluator, spec: Any, examples: Any, **kw: Any) -> Any:
        evaluated.append(len(examples))
        result: CandidateEvaluation = await inner(self, spec, examples, **kw)
        return result

    monkeypatch.setattr(TopologyEvaluator, "evaluate", counting)
    argv = ["search", "gsm8k_replay", "--strategy", "meta-agent"]
    code = main([*argv, "--meta-model", "openai:gpt-4o-mini", *SMALL])
    cap = capsys.readouterr()
    assert code == 2
    assert cap.out == ""
    assert cap.err == (
        "topology-studio: error: designer model 'openai:gpt-4o-mini' cannot be built: the "
        "OPENAI_API_KEY environment variable is not set (set it, or choose another designer "
        "model)\n"
    )
    assert evaluated == []  # the seed was never evaluated
    journals = workdir / "runs.duckdb.journals"
    assert not journals.exists() or list(journals.iterdir()) == []  # no half run
    assert not (workdir / "runs.duckdb").exists()  # nothing was recorded


def test_the_problems_own_designer_model_is_checked_the_same_way(
    workdir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = ["search", "gsm8k_replay", "--strategy", "meta-agent"]
    code = main([*argv, "--set", "search.meta_model=openai:gpt-4o", *SMALL])
    cap = capsys.readouterr()
    assert code == 2
    assert cap.err.splitlines() == [
        "topology-studio: error: designer model 'openai:gpt-4o' cannot be built: the "
        "OPENAI_API_KEY environment variable is not set (set it, or choose another designer "
        "model)"
    ]
    journals = workdir / "runs.duckdb.journals"
    assert not journals.exists() or list(journals.iterdir()) == []
