"""`search PROBLEM --then-prompts` (two-phase optimisation): phase 2, GEPA on the winner, as its own
run linked to the search; its refusals are one clear line before anything runs."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from cli_text import kv
from pydantic_ai.models.test import TestModel

from core.storage import DuckDBRunStore
from studio.cli import main
from tests.fixtures.phase_two import TINY  # phase 1: 2 evaluations on 10 problems

REPO = Path(__file__).resolve().parents[2]
DATASETS = os.environ.get("TOPOLOGY_STUDIO_DATASETS") or str(REPO.parent / "shared" / "datasets")


@pytest.fixture
def isolated(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    monkeypatch.setenv("TOPOLOGY_STUDIO_DATASETS", DATASETS)
    monkeypatch.setenv("TOPOLOGY_STUDIO_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv("TOPOLOGY_STUDIO_DB", str(tmp_path / "runs.duckdb"))
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.chdir(tmp_path)
    return tmp_path


def _error(argv: list[str], capsys: pytest.CaptureFixture[str], isolated: Path) -> str:
    code = main(argv)
    cap = capsys.readouterr()
    assert (code, cap.out) == (2, "")
    assert not (isolated / "runs.duckdb.journals").exists()  # refused before the search
    (line,) = cap.err.splitlines()
    return line


def test_then_prompts_without_a_reflection_model_is_refused(
    isolated: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    line = _error(["search", "gsm8k_replay", *TINY, "--then-prompts"], capsys, isolated)
    assert line == (
        "topology-studio: error: --then-prompts needs --reflection-model PROVIDER:MODEL: GEPA's "
        "reflection model writes the new prompts, and no offline model can (a replay problem's "
        "models only replay recorded answers); give e.g. --reflection-model openai:gpt-4.1-mini "
        "(its API key in the environment), or --reflection-model test (pydantic-ai's TestModel, "
        "offline, proposes a fixed text)"
    )


def test_phase_2_options_need_then_prompts(
    isolated: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    line = _error(
        ["search", "gsm8k_replay", "--reflection-model", "test", "--prompt-budget", "5"],
        capsys,
        isolated,
    )
    assert line == (
        "topology-studio: error: --reflection-model and --prompt-budget need --then-prompts "
        "(phase 2)"
    )


def test_bad_budget_and_unbuildable_model_are_refused_before_the_search(
    isolated: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = ["search", "gsm8k_replay", "--then-prompts", "--reflection-model"]
    line = _error([*argv, "test", "--prompt-budget", "0"], capsys, isolated)
    assert line == "topology-studio: error: --prompt-budget must be at least 1 metric call, got 0"
    line = _error([*argv, "openai:gpt-4.1-mini"], capsys, isolated)
    assert line.startswith(
        "topology-studio: error: --reflection-model: reflection model 'openai:gpt-4.1-mini' "
        "cannot be built: "
    )
    assert "OPENAI_API_KEY" in line


def test_two_phases_record_a_linked_prompt_run(
    isolated: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = ["search", "gsm8k_replay", *TINY, "--then-prompts", "--reflection-model", "test"]
    code = main([*argv, "--prompt-budget", "12"])
    cap = capsys.readouterr()
    out = cap.out
    assert code == 0
    # a replay problem's prompts change nothing, and the run says so (found by a newcomer)
    assert (
        "note: gsm8k_replay's agents replay recorded answers, which no prompt changes: phase 2 "
        "can only match the starting accuracy here (it shows the workflow; run it on a problem "
        "with live models to improve prompts)"
    ) in cap.err.splitlines()
    assert "at most one pass" not in cap.err  # 12 metric calls > the 10 validation problems
    text = out.split("== Phase 2: prompts (GEPA) ==")[1]
    phase2 = {
        key: kv(text, key)
        for key in (
            "run", "parent run", "start accuracy", "end accuracy", "metric calls",
            "model requests", "175b_finetuning.system_prompt",
        )
    }  # fmt: skip
    assert (phase2["start accuracy"], phase2["end accuracy"]) == ("0.4000", "0.4000")
    # GEPA stops at the first iteration boundary past the budget: the seed on the 10 validation
    # problems, then one reflection step (3 minibatch runs before and 3 after the new prompt)
    assert phase2["metric calls"] == "16 of 12"
    assert phase2["model requests"] == "16 task + 1 reflection"
    assert phase2["175b_finetuning.system_prompt"] == ""  # the replay agent has no instructions
    store = DuckDBRunStore(str(isolated / "runs.duckdb"))
    try:
        run = store.get_run(phase2["run"])
        parent = store.get_run(phase2["parent run"])
        snaps = store.snapshots(phase2["run"])
    finally:
        store.close()
    assert run is not None and parent is not None
    assert (run.strategy, run.status, run.best_idx) == ("gepa", "completed", 0)
    assert run.config["phase"] == "prompts"
    assert run.config["parent_run_id"] == parent.run_id
    assert run.config["genes"] == ["175b_finetuning.system_prompt"]
    assert run.config["budget"] == {"max_metric_calls": 12}
    assert parent.strategy == "evolutionary"
    # a snapshot per candidate at the metric calls GEPA found it at (the seed: 0), then the
    # run's last one at the calls made in all
    assert snaps["n_evaluations"].tolist() == [0, 16]
    assert snaps["best_idx"].tolist() == [0, 0]


def test_the_default_budget_is_three_validation_passes_and_a_given_one_is_kept() -> None:
    """GEPA scores the starting prompts on the whole validation split first, so the default
    budget (150 before) must exceed one pass: on gsm8k_replay's 300 problems it proposed
    nothing (found by a newcomer)."""
    from studio.cli._prompts import DEFAULT_PROMPT_BUDGET_PASSES, PromptPhase

    assert DEFAULT_PROMPT_BUDGET_PASSES == 3
    default = PromptPhase("test", TestModel(), None)
    assert (default.budget_for(300), default.budget_for(10), default.budget_for(0)) == (900, 30, 3)
    assert PromptPhase("test", TestModel(), 12).budget_for(300) == 12


def test_one_phase_2_flag_alone_is_named_in_the_singular(
    capsys: pytest.CaptureFixture[str], isolated: Path
) -> None:
    line = _error(["search", "gsm8k_replay", "--reflection-model", "test"], capsys, isolated)
    assert line == "topology-studio: error: --reflection-model needs --then-prompts (phase 2)"


def test_phase_2_journals_each_prompt_candidate_while_gepa_runs(
    isolated: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The Live page's refresh shows prompt candidates during phase 2. At
    GEPA's first reflection (mid-run) phase 2's journal already holds the seed, scored, and a
    store reading the journals (as the studio does) lists it with its metric calls."""
    import json

    from core.optimization.replay import PromptCallLog
    from studio.views.prompts_chart import prompt_table

    db = isolated / "runs.duckdb"
    append = PromptCallLog.append
    mid_run: list[tuple[list[dict[str, object]], list[dict[str, object]]]] = []

    def looking(self: PromptCallLog, kind: str, key: str, answer: dict[str, object]) -> None:
        if kind == "reflect" and not mid_run:
            (settings,) = Path(f"{db}.prompts").glob("*.json")
            run_id = json.loads(settings.read_text())["run_id"]
            journal = Path(f"{db}.journals") / f"{run_id}.jsonl"
            events = [json.loads(line) for line in journal.read_text().splitlines()]
            store = DuckDBRunStore(str(db))
            try:
                table = prompt_table(
                    store.archive(run_id, include_unevaluated=True),
                    store.snapshots(run_id),
                    ["175b_finetuning.system_prompt"],
                )
                status = store.get_run(run_id).status  # type: ignore[union-attr]
            finally:
                store.close()
            rows = table[["candidate_idx", "metric_calls", "score", "accuracy"]]
            mid_run.append((events, [{**r, "status": status} for r in rows.to_dict("records")]))
        append(self, kind, key, answer)

    monkeypatch.setattr(PromptCallLog, "append", looking)
    argv = ["search", "gsm8k_replay", *TINY, "--then-prompts", "--reflection-model", "test"]
    assert main([*argv, "--prompt-budget", "12"]) == 0
    capsys.readouterr()
    ((events, rows),) = mid_run
    assert [e["type"] for e in events] == [
        "run_started", "candidate_proposed", "candidate_evaluated", "archive_snapshot",
    ]  # fmt: skip
    evaluated, snapshot = events[2], events[3]
    # accuracy 0.4 on the 10 validation problems; its aggregate score with gsm8k_replay's cost
    # and latency weights, as phase 1 scores
    assert [evaluated[k] for k in ("candidate_idx", "n_examples", "accuracy", "aggregate_score")] == [
        0, 10, 0.4, 0.3961356,
    ]  # fmt: skip
    assert (snapshot["entries"], snapshot["best_idx"], snapshot["n_evaluations"]) == ([0], 0, 0)
    assert events[1]["thought"] == "175b_finetuning.system_prompt: "
    assert rows == [
        {
            "candidate_idx": 0,
            "metric_calls": 0,
            "score": 0.3961356,
            "accuracy": 0.4,
            "status": "running",
        }
    ]


def test_runs_show_and_apply_present_one_run_with_two_phases(
    isolated: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Both phases are recorded in the run store as one run with two phases. Phase 2
    keeps its own record, but `runs` lists it under its search, `show SEARCH` prints both phases
    and `apply SEARCH N --phase 2` applies its candidate (`studio.views.phases`)."""
    argv = ["search", "gsm8k_replay", *TINY, "--then-prompts", "--reflection-model", "test"]
    assert main([*argv, "--prompt-budget", "12"]) == 0
    text = capsys.readouterr().out.split("== Phase 2: prompts (GEPA) ==")[1]
    search, phase2 = kv(text, "parent run"), kv(text, "run")

    assert main(["runs"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert [line.split()[:2] for line in lines[1:]] == [[search, "gsm8k_replay"], ["phase", "2"]]
    assert lines[2].split()[2:6] == ["(prompts)", "gsm8k_replay", "gepa", "completed"]
    assert phase2 not in "\n".join(lines)  # addressed by the search's run id

    assert main(["show", search]) == 0
    shown = capsys.readouterr().out
    assert f"== Run {search} ==" in shown
    part = shown.split(f"== Run {search}, phase 2: prompts (GEPA) ==")[1]
    assert [kv(part, k) for k in ("status", "candidates", "metric calls", "start accuracy")] == [
        "completed (prompt budget of 12 metric calls reached)", "1", "16 of 12", "0.4000",
    ]  # fmt: skip
    assert kv(part, "best") == "candidate 0: accuracy 0.4000, score 0.3961"
    assert kv(part, "apply") == f"topology-studio apply {search} 0 --phase 2"
    assert kv(text, "show") == f"topology-studio show {search} --db {isolated / 'runs.duckdb'}"

    assert main(["apply", search, "0", "--phase", "2"]) == 0
    applied = capsys.readouterr().out
    assert f"Apply run {phase2} candidate 0 (topology and prompts)" in applied
    assert "(phase 2 changed no prompt: candidate 0's starting prompts)" in applied
    assert "dry run: nothing was written (add --yes to write it)" in applied


def test_apply_phase_2_of_a_run_without_one_is_refused(
    isolated: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["search", "gsm8k_replay", *TINY]) == 0
    search = kv(capsys.readouterr().out, "run")
    assert main(["apply", search, "0", "--phase", "2"]) == 2
    assert capsys.readouterr().err.splitlines()[-1] == (
        f"topology-studio: error: run {search} has no phase 2 (prompts): it was not run with "
        "search --then-prompts"
    )
