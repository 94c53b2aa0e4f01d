"""The replay agents: real pydantic-ai agents on a FunctionModel, with modelled usage, cost and
latency, and an error (never a guess) for a question with no recording."""

from __future__ import annotations

import asyncio
import math
import os
from pathlib import Path
from typing import Any

import pytest
from pydantic_ai import Agent, models

import core
from core.errors import PipelineStepError
from core.evaluation.pricing import Pricer
from core.hydrate import topology_from_spec
from core.ir import parse_topology
from core.problems import DATASETS_ENV, Problem, load_problem
from core.runtime.tracing import MODEL_LATENCY_KEY, capture_trace, critical_path_ms

models.ALLOW_MODEL_REQUESTS = False  # replay models are in-process: they never need it

REPO = Path(core.__file__).resolve().parents[1]
DATASETS = os.environ.get(DATASETS_ENV) or str(REPO.parent / "shared" / "datasets")


@pytest.fixture(scope="module")
def problem() -> Problem:
    return load_problem("gsm8k_replay", datasets_dir=DATASETS, overrides={"models.time_scale": 0})


def pipeline(*steps: dict[str, Any]) -> Any:
    return parse_topology({"kind": "pipeline", "steps": [{"operation": s} for s in steps]})


def agent(run: str) -> dict[str, Any]:
    return {"kind": "agent_step", "agent_name": run}


def fn(name: str) -> dict[str, Any]:
    return {"kind": "function_step", "callable_name": name}


def run(problem: Problem, spec: Any, value: Any) -> tuple[Any, Any]:
    topology = topology_from_spec(
        spec, callable_registry=problem.callable_registry, agent_registry=problem.agent_registry
    )

    async def go() -> tuple[Any, Any]:
        with capture_trace() as trace:
            out = await topology.execute(value)
        return out, trace

    return asyncio.run(go())


def first_example(problem: Problem) -> Any:
    data = problem.module.replay.load_replay_data(
        Path(DATASETS) / "gsm8k" / "test.jsonl",
        Path(DATASETS) / "gsm8k" / "example_model_solutions.jsonl",
    )
    return data.items[0]


def test_a_replay_agent_is_a_pydantic_ai_agent_with_a_function_model(problem: Problem) -> None:
    from pydantic_ai.models.function import FunctionModel

    replay = problem.module.replay
    item = first_example(problem)
    data = problem.module.replay.load_replay_data(
        Path(DATASETS) / "gsm8k" / "test.jsonl",
        Path(DATASETS) / "gsm8k" / "example_model_solutions.jsonl",
    )
    settings = replay.RunSettings(description="d", throughput_tokens_per_s=20.0)
    a = replay.make_replay_agent(
        "175b_finetuning", data, settings, chars_per_token=4.0, time_scale=0.0
    )
    assert isinstance(a, Agent)
    assert isinstance(a.model, FunctionModel)
    assert a.model.system == "replay"
    assert a.model.model_name == "175b_finetuning"
    result = asyncio.run(
        a.run(problem.module.state.MathState(question=item.question).model_dump_json())
    )
    out = result.output
    assert out.question == item.question
    assert [c.run for c in out.candidates] == ["175b_finetuning"]
    assert out.candidates[0].solution == item.recordings["175b_finetuning"].solution
    usage = result.usage
    assert usage.requests == 1
    assert usage.input_tokens == math.ceil(len(item.question) / 4)
    assert usage.output_tokens == math.ceil(len(item.recordings["175b_finetuning"].solution) / 4)


def test_a_replay_step_returns_the_recorded_solution_and_its_answer(problem: Problem) -> None:
    item = first_example(problem)
    start = problem.module.state.MathState(question=item.question)
    out, trace = run(problem, pipeline(agent("6b_finetuning")), start)
    rec = item.recordings["6b_finetuning"]
    assert out.candidates[0].run == "6b_finetuning"
    assert out.candidates[0].solution == rec.solution
    assert out.candidates[0].answer == problem.module.answers.extract_solution_answer(rec.solution)
    assert out.final_answer is None


def test_usage_cost_and_latency_follow_the_documented_model(problem: Problem) -> None:
    item = first_example(problem)
    q_tokens = math.ceil(len(item.question) / 4)
    start = problem.module.state.MathState(question=item.question)
    pricer = Pricer(problem.prices)
    expected = {
        # run: (calls, usd per 1k, throughput, passes)
        "6b_finetuning": (1, 0.006, 50.0, 1),
        "6b_verification": (200, 0.006, 50.0, 2),
        "175b_finetuning": (1, 0.06, 20.0, 1),
        "175b_verification": (200, 0.06, 20.0, 2),
    }
    for name, (calls, usd, tps, passes) in expected.items():
        _, trace = run(problem, pipeline(agent(name)), start)
        s_tokens = math.ceil(len(item.recordings[name].solution) / 4)
        usage = trace.usage_by_model()
        assert list(usage) == [f"replay:{name}"]
        u = usage[f"replay:{name}"]
        assert (u.requests, u.input_tokens, u.output_tokens) == (
            1,
            calls * q_tokens,
            calls * s_tokens,
        )
        cost = pricer.total(usage.values()).cost_usd
        assert cost == pytest.approx(calls * (q_tokens + s_tokens) * usd / 1000, rel=1e-12)
        [span] = [sp for sp in trace.spans if sp.kind == "agent_step"]
        assert span.attributes[MODEL_LATENCY_KEY] == pytest.approx(1000 * passes * s_tokens / tps)
        assert critical_path_ms(trace) == pytest.approx(1000 * passes * s_tokens / tps)


def test_pipelines_accumulate_candidates_and_latency_adds_up(problem: Problem) -> None:
    item = first_example(problem)
    start = problem.module.state.MathState(question=item.question)
    spec = pipeline(
        agent("6b_finetuning"),
        agent("175b_finetuning"),
        agent("6b_verification"),
        fn("majority_vote"),
    )
    out, trace = run(problem, spec, start)
    assert [c.run for c in out.candidates] == [
        "6b_finetuning",
        "175b_finetuning",
        "6b_verification",
    ]
    assert out.final_answer == problem.module.answers.vote_answer(out.candidates)
    tok = {r: math.ceil(len(item.recordings[r].solution) / 4) for r in item.recordings}
    expected_ms = 1000 * (
        tok["6b_finetuning"] / 50 + tok["175b_finetuning"] / 20 + 2 * tok["6b_verification"] / 50
    )
    assert critical_path_ms(trace) == pytest.approx(expected_ms)


def test_parallel_latency_is_the_slowest_branch(problem: Problem) -> None:
    item = first_example(problem)
    start = problem.module.state.MathState(question=item.question)
    spec = parse_topology(
        {
            "kind": "parallel",
            "merge": "merge_vote",
            "steps": [agent("6b_finetuning"), agent("175b_finetuning")],
        }
    )
    out, trace = run(problem, spec, start)
    merged = out.merged if hasattr(out, "merged") else out
    assert [c.run for c in merged.candidates] == ["6b_finetuning", "175b_finetuning"]
    tok = {r: math.ceil(len(item.recordings[r].solution) / 4) for r in item.recordings}
    assert critical_path_ms(trace) == pytest.approx(
        1000 * max(tok["6b_finetuning"] / 50, tok["175b_finetuning"] / 20)
    )


def test_a_bare_question_prompt_works(problem: Problem) -> None:
    item = first_example(problem)
    out, _ = run(problem, pipeline(agent("175b_verification")), item.question)
    assert out.question == item.question
    assert out.candidates[0].run == "175b_verification"


def test_a_question_without_a_recording_is_an_error_never_a_guess(problem: Problem) -> None:
    replay = problem.module.replay
    start = problem.module.state.MathState(question="What is 2 + 2?")
    with pytest.raises(PipelineStepError) as info:
        run(problem, pipeline(agent("175b_finetuning")), start)
    cause = info.value.__cause__
    while cause is not None and not isinstance(cause, replay.NoRecordingError):
        cause = cause.__cause__
    assert isinstance(cause, replay.NoRecordingError)
    assert "no recorded 175b_finetuning solution for the question 'What is 2 + 2?'" in str(cause)


def test_a_time_scale_sleeps_but_reports_model_time(problem: Problem) -> None:
    scaled = load_problem(
        "gsm8k_replay", datasets_dir=DATASETS, overrides={"models.time_scale": 0.0001}
    )
    item = first_example(problem)
    start = scaled.module.state.MathState(question=item.question)
    _, trace = run(scaled, pipeline(agent("175b_finetuning")), start)
    tok = math.ceil(len(item.recordings["175b_finetuning"].solution) / 4)
    assert critical_path_ms(trace) == pytest.approx(1000 * tok / 20)
    [span] = [sp for sp in trace.spans if sp.kind == "agent_step"]
    assert span.duration_ms is not None and span.duration_ms > 0


def test_the_token_rule(problem: Problem) -> None:
    count = problem.module.replay.count_tokens
    assert count("") == 0
    assert count("abc") == 1
    assert count("abcd") == 1
    assert count("abcde") == 2
    assert count("a" * 10, 2.5) == 4


def replay_tick(p: Problem) -> float:
    tick: float = p.module.replay.MODEL_TICK_MS
    return tick


def _fastest(*runs: str) -> Any:
    return parse_topology(
        {"kind": "parallel", "merge": "fastest", "steps": [agent(r) for r in runs]}
    )


@pytest.mark.parametrize("time_scale", [0.0, 0.0001])
def test_fastest_merge_picks_the_run_with_less_model_time_every_time(
    problem: Problem, time_scale: float
) -> None:
    # a `fastest` race between replayed runs is decided by model time, never by wall-clock
    # jitter (with time_scale 0.001 the same candidate scored 0.2200, then 0.2233) nor by the
    # branch order (with time_scale 0 the first branch always won)
    p = load_problem(
        "gsm8k_replay", datasets_dir=DATASETS, overrides={"models.time_scale": time_scale}
    )
    examples = p.splits["validation"][:12]
    spec = _fastest("175b_finetuning", "6b_finetuning")
    models_ = {r: p.agent_registry.get(r)().model for r in ("175b_finetuning", "6b_finetuning")}
    tick = replay_tick(p)
    winners: list[str] = []
    for ex in examples:
        latency = {
            r: m.latency_ms(m.replay_data.recording(r, ex.input.question).solution)
            for r, m in models_.items()
        }
        # fewer ticks of model time first; a tie goes to the branch listed first (175B here)
        expected = min(
            latency, key=lambda r: (math.ceil(latency[r] / tick), r != "175b_finetuning")
        )
        outcomes: list[tuple[list[str], float | None, dict[str, Any]]] = []
        for _ in range(2):
            out, trace = run(p, spec, ex.input)
            merged = out.merged if hasattr(out, "merged") else out
            usage = {k: v.to_dict() for k, v in sorted(trace.usage_by_model().items())}
            outcomes.append(([c.run for c in merged.candidates], critical_path_ms(trace), usage))
        # the loser is charged in full whether or not it finished before its cancellation
        # landed, so cost is the same in every run; latency is the winner's model time (the
        # run waits for the winner only), also the same in every run
        assert outcomes[0] == outcomes[1]
        assert outcomes[0][0] == [expected]
        assert outcomes[0][1] == pytest.approx(latency[expected])
        assert sorted(outcomes[0][2]) == ["replay:175b_finetuning", "replay:6b_finetuning"]
        assert [u["requests"] for u in outcomes[0][2].values()] == [1, 1]
        winners.append(expected)
    assert winners.count("6b_finetuning") == 12  # the later branch wins: its run is faster
