"""The Runs page's Resume continues an interrupted phase 2 (resume works in either phase): a search
run with `--then-prompts` cut in phase 2 is listed as its phase 2, and its Resume button ends phase
2 as the uninterrupted run does, no metric call made twice."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from studio.cli import main
from tests.fixtures.phase_two import TINY, record_calls

REPO = Path(__file__).resolve().parents[2]
APP = str(REPO / "studio" / "app.py")
DATASETS = os.environ.get("TOPOLOGY_STUDIO_DATASETS") or str(REPO.parent / "shared" / "datasets")
PHASES = [*TINY, "--then-prompts", "--reflection-model", "test", "--prompt-budget", "12"]


def test_the_runs_page_resumes_an_interrupted_phase_2(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from studio._st_common import _manager

    db = tmp_path / "runs.duckdb"
    monkeypatch.setenv("TOPOLOGY_STUDIO_DATASETS", DATASETS)
    monkeypatch.setenv("TOPOLOGY_STUDIO_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv("TOPOLOGY_STUDIO_DB", str(db))
    monkeypatch.setenv("TOPOLOGY_STUDIO_REGISTRY", str(tmp_path / "registry"))
    monkeypatch.chdir(tmp_path)
    record_calls(monkeypatch, stop_at_evaluate=2)  # the seed's validation pass, a minibatch
    assert main(["search", "gsm8k_replay", *PHASES]) == 130
    capsys.readouterr()
    live = record_calls(monkeypatch)
    (settings_path,) = Path(f"{db}.prompts").glob("*.json")
    search, phase2 = settings_path.stem, json.loads(settings_path.read_text())["run_id"]

    at = AppTest.from_file(APP, default_timeout=120)
    at.run()
    at.switch_page(str(REPO / "pages" / "runs.py"))
    at.run()
    manager = _manager(str(db.resolve()))
    try:
        assert not at.exception, [e.value for e in at.exception]
        # listed as phase 2 of its search, interrupted, with a Resume button
        assert "Interrupted runs" in [s.value for s in at.subheader]
        assert any(
            f"`{search}` phase 2 (prompts) gsm8k_replay / gepa: 1 candidates recorded" == m.value
            for m in at.markdown
        )
        at.button(key=f"resume_run_{phase2}").click().run()
        assert not at.exception, [e.value for e in at.exception]
        bg = manager.search(search)
        assert bg is not None and bg._thread is not None
        bg._thread.join(timeout=120)
        assert (bg.state, bg.error) == ("completed", "")
        # only the calls after the cut: the reflection and its new prompt's 3-run minibatch
        assert live == ["reflect", "evaluate"]
        run = manager.store.get_run(phase2)
        assert run is not None
        assert (run.status, run.best_idx, run.n_resumes) == ("completed", 0, 1)
        assert run.budget_used["metric_calls"] == 16.0  # as the uninterrupted run
        assert json.loads(settings_path.read_text())["status"] == "completed"
        archive = manager.store.archive(phase2, include_unevaluated=True)
        assert archive["candidate_idx"].tolist() == [0]  # journaled once, not again on replay
        assert archive["accuracy"].tolist() == [0.4]
    finally:
        manager.close()
        _manager.clear()
