"""The GSM8K replay problem end to end: loading, split, registries, the scorer against every
`is_correct` label, the four single-run counts (286 / 515 / 458 / 742), dataset errors."""

from __future__ import annotations

import asyncio
import os
import shutil
from pathlib import Path
from typing import Any

import pytest
from pydantic_ai import models

import core
from core.errors import DatasetError
from core.hydrate import topology_from_spec
from core.ir import parse_topology
from core.problems import DATASETS_ENV, Problem, load_problem, split_examples

models.ALLOW_MODEL_REQUESTS = False  # replay models are in-process: they never need it

REPO = Path(core.__file__).resolve().parents[1]
DATASETS = os.environ.get(DATASETS_ENV) or str(REPO.parent / "shared" / "datasets")
RUNS = ("6b_finetuning", "6b_verification", "175b_finetuning", "175b_verification")
LABELLED_CORRECT = {
    "6b_finetuning": 286,
    "6b_verification": 515,
    "175b_finetuning": 458,
    "175b_verification": 742,
}


@pytest.fixture(scope="module")
def problem() -> Problem:
    return load_problem("gsm8k_replay", datasets_dir=DATASETS, overrides={"models.time_scale": 0})


def replay_data(problem: Problem) -> Any:
    replay = problem.module.replay
    d = Path(DATASETS) / "gsm8k"
    return replay.load_replay_data(d / "test.jsonl", d / "example_model_solutions.jsonl")


def single_run(run: str) -> Any:
    return parse_topology(
        {"kind": "pipeline", "steps": [{"operation": {"kind": "agent_step", "agent_name": run}}]}
    )


def test_the_problem_loads(problem: Problem) -> None:
    assert problem.name == "gsm8k_replay"
    assert problem.score_function_name == "final_answer"
    assert problem.time_scale == 0
    assert problem.search.max_evaluations == 48
    assert problem.search.patience is None
    assert problem.agent_registry.names() == sorted(RUNS)
    for run in RUNS:
        assert problem.agent_registry.describe(run)
        assert "\n" not in problem.agent_registry.describe(run)
    assert len(problem.callable_registry.names()) == 25
    assert problem.roles["merge"] == ["merge_candidates", "merge_vote"]
    assert problem.roles["state_updater"] == ["carry_state"]
    assert problem.roles["evaluator"] == ["eval_agreement", "eval_arithmetic"]
    assert problem.roles["classifier"] == [
        "next_unused_run",
        "route_by_check",
        "route_by_question_length",
    ]
    assert problem.prices["replay:175b_finetuning"].input_usd_per_1k == 0.06
    assert problem.prices["replay:6b_verification"].output_usd_per_1k == 0.006
    assert problem.is_blank is problem.module.answers.is_blank


def test_the_default_search_budget_lets_the_search_explore() -> None:
    # patience 15 stopped the default search after 16 evaluations with the seed as the winner
    # (no new best before candidate 24 with seed 1); 48 evaluations (6 generations of 8) take
    # ~2.4 min on a loaded 2-core machine and find a cascade
    defaults = load_problem("gsm8k_replay", datasets_dir=DATASETS)
    assert defaults.search.max_evaluations == 48
    assert defaults.search.patience is None
    assert defaults.search.max_usd == 20000.0  # a run of 48 spends ~$5,700 of modelled money
    assert defaults.search.max_wall_time_s == 600.0
    assert defaults.time_scale == 0.0  # no wall-clock timer: the same run twice is identical


def test_the_problem_modules_are_one_package(problem: Problem) -> None:
    from core.problems import import_problem_module

    pkg = REPO / "data" / "problems" / "gsm8k_replay"
    assert import_problem_module(pkg / "state.py") is problem.module.state
    assert import_problem_module(pkg / "registries.py") is problem.module
    assert isinstance(problem.splits["validation"][0].input, problem.module.state.MathState)


def test_the_seed_is_the_single_175b_finetuning_run(problem: Problem) -> None:
    spec = problem.seed_spec
    assert spec.kind == "pipeline"
    assert len(spec.steps) == 1
    op = spec.steps[0].operation
    assert op.kind == "agent_step"
    assert op.agent_name == "175b_finetuning"


def test_the_split_is_pinned(problem: Problem) -> None:
    val, test = problem.splits["validation"], problem.splits["test"]
    train = problem.splits["train"]
    assert (len(val), len(train), len(test)) == (300, 300, 719)
    all_ids = sorted(ex.id or "" for ex in val + train + test)
    assert all_ids == [f"gsm8k-test-{i:04d}" for i in range(1319)]
    assert [ex.id for ex in val[:5]] == PINNED_VALIDATION_HEAD  # the same as with two splits
    assert [ex.id for ex in test[:5]] == PINNED_TEST_HEAD
    assert [ex.id for ex in train[:5]] == PINNED_TRAIN_HEAD
    first = val[0]
    assert first.input.candidates == ()
    assert first.expected == PINNED_FIRST_EXPECTED


def test_the_split_is_deterministic_and_ignores_file_order(problem: Problem) -> None:
    again = load_problem("gsm8k_replay", datasets_dir=DATASETS, overrides={"models.time_scale": 0})
    assert [e.id for e in again.splits["validation"]] == [
        e.id for e in problem.splits["validation"]
    ]
    everything = problem.splits["validation"] + problem.splits["train"] + problem.splits["test"]
    shuffled = list(reversed(everything))
    resplit = split_examples(
        shuffled, validation_size=300, salt="gsm8k_replay/v1", key=lambda ex: ex.input.question
    )
    assert {e.id for e in resplit["validation"]} == {e.id for e in problem.splits["validation"]}


def test_a_smaller_validation_split_is_an_override(problem: Problem) -> None:
    small = load_problem(
        "gsm8k_replay", datasets_dir=DATASETS, overrides={"gold.validation_size": 20}
    )
    assert len(small.splits["validation"]) == 20
    # train keeps its size and follows validation's ranks: 20 + 300, and 999 left for test
    assert (len(small.splits["train"]), len(small.splits["test"])) == (300, 999)
    # the 20 are the 20 best-ranked of the 300
    assert {e.id for e in small.splits["validation"]} <= {
        e.id for e in problem.splits["validation"]
    }


def test_the_scorer_agrees_with_every_is_correct_label(problem: Problem) -> None:
    data = replay_data(problem)
    state_mod, answers = problem.module.state, problem.module.answers
    GoldExample = type(problem.splits["validation"][0])
    counts = dict.fromkeys(RUNS, 0)
    disagreements = []
    for item in data.items:
        ex = GoldExample(
            input=state_mod.MathState(question=item.question), expected=item.gold_answer, id=item.id
        )
        for run in RUNS:
            rec = item.recordings[run]
            cand = state_mod.Candidate(
                run=run, solution=rec.solution, answer=answers.extract_solution_answer(rec.solution)
            )
            out = state_mod.MathState(question=item.question, candidates=(cand,))
            score = problem.score_fn(out, ex)
            counts[run] += int(score == 1.0)
            if (score == 1.0) != rec.is_correct:
                disagreements.append((item.id, run))
    assert len(data.items) == 1319
    assert disagreements == []
    assert counts == LABELLED_CORRECT


async def _run_all(problem: Problem, run: str, examples: list[Any]) -> int:
    topology = topology_from_spec(
        single_run(run),
        callable_registry=problem.callable_registry,
        agent_registry=problem.agent_registry,
    )
    sem = asyncio.Semaphore(64)

    async def one(ex: Any) -> float:
        async with sem:
            return problem.score_fn(await topology.execute(ex.input), ex)

    scores = await asyncio.gather(*(one(ex) for ex in examples))
    return sum(1 for s in scores if s == 1.0)


@pytest.mark.slow
@pytest.mark.parametrize("run", RUNS)
def test_each_single_run_topology_scores_its_labelled_count(problem: Problem, run: str) -> None:
    examples = problem.splits["validation"] + problem.splits["train"] + problem.splits["test"]
    assert len(examples) == 1319
    assert asyncio.run(_run_all(problem, run, examples)) == LABELLED_CORRECT[run]


def test_wrong_checksum_is_a_dataset_error(tmp_path: Path) -> None:
    bad = tmp_path / "gsm8k"
    bad.mkdir()
    shutil.copy(Path(DATASETS) / "gsm8k" / "test.jsonl", bad / "test.jsonl")
    with (bad / "test.jsonl").open("a") as f:
        f.write('{"question": "extra", "answer": "#### 1"}\n')
    with pytest.raises(DatasetError) as info:
        load_problem("gsm8k_replay", datasets_dir=tmp_path, cache_root=tmp_path / "cache")
    msg = str(info.value)
    assert str(bad / "test.jsonl") in msg
    assert "expected sha256 3730d312f6e3440559ace48831e51066acaca737f6eabec99bccb9e4b3c39d14" in msg
    assert "actual sha256 " in msg


def test_missing_dataset_with_no_network_is_a_dataset_error(tmp_path: Path) -> None:
    with pytest.raises(DatasetError) as info:
        load_problem(
            "gsm8k_replay",
            datasets_dir=tmp_path / "nothing",
            cache_root=tmp_path / "cache",
            overrides={
                "datasets.gsm8k.url": "http://127.0.0.1:9/{file}",
                "datasets.gsm8k.timeout_s": 2.0,
            },
        )
    msg = str(info.value)
    assert "dataset 'gsm8k' file 'test.jsonl' is not available" in msg
    assert str(tmp_path / "nothing" / "gsm8k" / "test.jsonl") in msg
    assert str(tmp_path / "cache" / "datasets" / "gsm8k" / "test.jsonl") in msg
    assert f"Set {DATASETS_ENV}" in msg


PINNED_VALIDATION_HEAD = [
    "gsm8k-test-0003",
    "gsm8k-test-0006",
    "gsm8k-test-0031",
    "gsm8k-test-0042",
    "gsm8k-test-0043",
]
PINNED_TEST_HEAD = [
    "gsm8k-test-0000",
    "gsm8k-test-0002",
    "gsm8k-test-0004",
    "gsm8k-test-0005",
    "gsm8k-test-0007",
]
PINNED_TRAIN_HEAD = [  # carved from the old test split: 0001 was its second problem
    "gsm8k-test-0001",
    "gsm8k-test-0008",
    "gsm8k-test-0010",
    "gsm8k-test-0012",
    "gsm8k-test-0026",
]
PINNED_FIRST_EXPECTED = "540"


FUNCTIONS_ONLY = {
    "kind": "pipeline",
    "steps": [
        {"operation": {"kind": "function_step", "callable_name": "extract_final_answer"}},
        {"operation": {"kind": "function_step", "callable_name": "majority_vote"}},
    ],
}


def test_a_function_only_candidate_is_degenerate_with_zero_latency_every_time(
    problem: Problem,
) -> None:
    # what mutate:remove_step makes of the seed: no agent, no answer. It must be degenerate
    # (off the front, F5), and, with no model called, take 0 ms of model time in every run
    assert problem.latency_source == "model"
    examples = problem.splits["validation"][:4]
    for _ in range(2):
        result = asyncio.run(problem.evaluator().evaluate(FUNCTIONS_ONLY, examples))
        assert result.status == "degenerate"
        assert result.valid is False
        assert result.blank_rate == 1.0
        assert result.cost_usd == 0.0
        assert [r.latency_ms for r in result.results] == [0.0, 0.0, 0.0, 0.0]
        assert result.latency_ms == 0.0


def test_the_seed_latency_is_model_time(problem: Problem) -> None:
    example = problem.splits["validation"][:1]
    first = asyncio.run(problem.evaluator().evaluate(problem.seed_spec, example))
    second = asyncio.run(problem.evaluator().evaluate(problem.seed_spec, example))
    assert first.status == "ok"
    assert [r.example_id for r in first.results] == ["gsm8k-test-0003"]
    assert first.results[0].bundle.output_tokens == 24
    assert first.latency_ms == second.latency_ms == 1200.0  # 24 output tokens at 20 tokens/s


def test_the_question_features_split_the_validation_problems(problem: Problem) -> None:
    # the shares the problem's README states, on the 300 validation problems
    val = problem.splits["validation"]
    counts = {
        name: sum(bool(problem.callable_registry.get(name)(e.input)) for e in val)
        for name in (
            "question_is_long",
            "question_has_many_numbers",
            "question_has_fraction",
            "question_mentions_percent",
            "question_mentions_money",
            "question_has_decimal",
        )
    }
    assert counts == {
        "question_is_long": 75,
        "question_has_many_numbers": 68,
        "question_has_fraction": 76,
        "question_mentions_percent": 40,
        "question_mentions_money": 94,
        "question_has_decimal": 36,
    }
    assert all(problem.effects.callable(name).needs_candidates == 0 for name in counts)
