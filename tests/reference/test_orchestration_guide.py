"""orchestration-guide.txt, every code example, with `from core import ...`."""

from __future__ import annotations

import asyncio

import pytest
from reference_fakes import answering, replying

from core import (
    AgentStep,
    ErrorStrategy,
    EvalResult,
    FunctionStep,
    MergeStrategy,
    Parallel,
    Pipeline,
    PipelineStepError,
    RefinementLoop,
    Route,
    Router,
    RouterError,
    StepConfig,
)


def test_step_protocol_coerces_functions_and_agents() -> None:
    # "Pass a BaseAgent or an async function and it gets auto-coerced"
    async def clean_text(data: str) -> str:
        return data.strip().lower()

    my_agent = answering(lambda prompt: f"agent saw {prompt!r}")
    pipeline = Pipeline([clean_text, my_agent])

    assert asyncio.run(pipeline.run("  Hello World ")) == "agent saw 'hello world'"
    steps = pipeline.steps
    assert [type(s) for s in steps] == [FunctionStep, AgentStep]
    assert steps[0].step_name == "clean_text"
    given = FunctionStep(clean_text)
    assert Pipeline([given]).steps[0] is given  # a Step instance is used as-is


def test_pipeline_runs_steps_in_sequence() -> None:
    async def fetch_data(query: str) -> str:
        return f"Raw data for: {query}"

    async def summarize(data: str) -> str:
        return f"Summary of: {data}"

    async def main() -> str:
        pipeline = Pipeline(
            [
                fetch_data,
                summarize,
            ],
            name="research",
        )
        return await pipeline.run("quantum computing")

    assert asyncio.run(main()) == "Summary of: Raw data for: quantum computing"


def test_pipeline_error_strategies_per_step() -> None:
    calls: list[str] = []

    async def fetch_data(query: str) -> str:
        calls.append("fetch")
        if calls.count("fetch") < 3:  # fails twice, then succeeds within max_retries=3
            raise ConnectionError("flaky")
        return f"Raw data for: {query}"

    async def summarize(data: str) -> str:
        calls.append("summarize")
        raise RuntimeError("summarizer down")

    async def validate(data: str) -> str:
        calls.append("validate")
        return f"valid: {data}"

    pipeline = Pipeline(
        [
            (fetch_data, StepConfig(name="fetch", on_error=ErrorStrategy.RETRY, max_retries=3)),
            (summarize, StepConfig(name="summarize", on_error=ErrorStrategy.SKIP)),
            validate,  # defaults to ErrorStrategy.STOP
        ]
    )
    # SKIP passes the previous output through
    assert asyncio.run(pipeline.run("q")) == "valid: Raw data for: q"
    assert calls == ["fetch", "fetch", "fetch", "summarize", "validate"]

    async def broken(data: str) -> str:
        raise ValueError("no")

    with pytest.raises(PipelineStepError) as stop:  # STOP raises PipelineStepError (default)
        asyncio.run(Pipeline([validate, broken]).run("x"))
    assert (stop.value.step_name, stop.value.step_index) == ("broken", 1)


def test_pipeline_run_stream_event_types() -> None:
    async def fetch_data(query: str) -> str:
        return f"Raw data for: {query}"

    async def summarize(data: str) -> str:
        return f"Summary of: {data}"

    pipeline = Pipeline([fetch_data, summarize])

    async def collect() -> list[str]:
        seen: list[str] = []
        async for event in pipeline.run_stream("input"):
            seen.append(f"{event.event_type}: {event.step_name}")
        return seen

    assert asyncio.run(collect()) == [
        "pipeline_start: None",
        "step_start: fetch_data",
        "step_complete: fetch_data",
        "step_start: summarize",
        "step_complete: summarize",
        "pipeline_complete: None",
    ]


def test_parallel_collects_all_results() -> None:
    async def search_web(query: str) -> str:
        return f"Web result for: {query}"

    async def search_docs(query: str) -> str:
        return f"Docs result for: {query}"

    async def main() -> tuple[object, object]:
        parallel = Parallel(
            [search_web, search_docs],
            merge=MergeStrategy.collect_all,
            timeout=10.0,
            name="search",
        )
        result = await parallel.run("quantum computing")
        return result.merged, result.errors

    merged, errors = asyncio.run(main())
    assert merged == ["Web result for: quantum computing", "Docs result for: quantum computing"]
    assert errors == [None, None]


def test_parallel_merge_strategies_and_timeouts() -> None:
    async def fails(query: str) -> str:
        raise RuntimeError("down")

    async def answers(query: str) -> str:
        return f"ok {query}"

    async def slow(query: str) -> str:
        await asyncio.sleep(5)
        return "late"

    first = asyncio.run(Parallel([fails, answers], merge=MergeStrategy.first_wins).run("q"))
    assert first.merged == "ok q"
    assert first.outputs == [None, "ok q"]
    assert isinstance(first.errors[0], RuntimeError) and first.errors[1] is None

    custom = asyncio.run(Parallel([answers, answers], merge=lambda outs: " | ".join(outs)).run("q"))
    assert custom.merged == "ok q | ok q"

    timed = asyncio.run(Parallel([slow, answers], timeout=0.05).run("q"))
    assert isinstance(timed.errors[0], TimeoutError)  # cancelled, recorded as TimeoutError
    assert timed.merged == ["ok q"]


def test_router_rule_based_first_match_wins() -> None:
    async def handle_code(query: str) -> str:
        return f"Code answer: {query}"

    async def handle_general(query: str) -> str:
        return f"General answer: {query}"

    async def main() -> str:
        router = Router(
            routes=[
                Route("code", handle_code, condition=lambda q: "code" in q.lower()),
                Route("general", handle_general, condition=lambda q: True),
            ],
            name="topic_router",
        )
        return await router.run("Write code for sorting")

    assert asyncio.run(main()) == "Code answer: Write code for sorting"


def test_router_llm_classifier_with_fallback() -> None:
    code_agent = replying("code answer")
    research_agent = replying("research answer")
    creative_agent = replying("creative answer")
    general_agent = replying("general answer")

    def routed(classifier_says: str) -> str:
        router = Router(
            routes=[
                Route("code", code_agent),
                Route("research", research_agent),
                Route("creative", creative_agent),
            ],
            classifier=replying(classifier_says),
            fallback=general_agent,
        )
        return asyncio.run(router.run("What is known about qubits?"))

    assert routed("research") == "research answer"  # str(result) names the route
    assert routed("poetry") == "general answer"  # no route matches: the fallback runs

    class Choice:
        route = "creative"

    async def classify(query: str) -> Choice:  # duck typing: a .route attribute
        return Choice()

    by_attr = Router([Route("code", code_agent), Route("creative", creative_agent)], classify)
    assert asyncio.run(by_attr.run("q")) == "creative answer"

    without_fallback = Router([Route("code", code_agent)], classifier=replying("nothing"))
    with pytest.raises(RouterError):
        asyncio.run(without_fallback.run("q"))


def test_refinement_loop_until_converged() -> None:
    async def write_draft(prompt: str) -> str:
        return f"Draft based on: {prompt}"

    def evaluate(output: str) -> EvalResult:
        score = 0.8 if "draft" in output.lower() else 0.3
        return EvalResult(
            passed=score > 0.9,
            feedback="Needs more detail" if score <= 0.9 else "Good",
            score=score,
        )

    def update_state(current_input: str, output: str, eval_result: EvalResult) -> str:
        return f"{current_input}\n\nFeedback: {eval_result.feedback}\nPrevious: {output}"

    async def main():  # noqa: ANN202 - the doc's shape
        loop = RefinementLoop(
            step=write_draft,
            evaluator=evaluate,
            state_updater=update_state,
            max_iterations=5,
            timeout=30.0,
            convergence_window=3,
            convergence_threshold=0.01,
        )
        return await loop.run("Write about quantum computing")

    result = asyncio.run(main())
    assert (result.exit_reason, result.iterations) == ("converged", 3)
    rows = [(r.iteration, r.eval_result.passed, r.eval_result.score) for r in result.history]
    assert rows == [(1, False, 0.8), (2, False, 0.8), (3, False, 0.8)]
    assert all(r.duration_ms >= 0 for r in result.history)
    first = "Write about quantum computing"
    second = f"{first}\n\nFeedback: Needs more detail\nPrevious: Draft based on: {first}"
    third = f"{second}\n\nFeedback: Needs more detail\nPrevious: Draft based on: {second}"
    assert result.output == f"Draft based on: {third}"  # ties keep the latest
    assert (result.best_iteration, result.best_score) == (3, 0.8)


def test_refinement_loop_keep_best_returns_the_highest_scoring_iteration() -> None:
    fractions = iter([0.5, 0.75, 0.25])

    async def coder(problem: str) -> str:
        return f"attempt for {problem}"

    def run_visible_tests(output: str) -> EvalResult:
        return EvalResult(passed=False, score=next(fractions))

    def feed_failures_to_fixer(current: str, output: str, result: EvalResult) -> str:
        return f"{current}+"

    loop = RefinementLoop(
        step=coder,
        evaluator=run_visible_tests,  # returns EvalResult(passed=False, score=fraction_passing)
        state_updater=feed_failures_to_fixer,
        max_iterations=3,
        # keep_best=True is the default — no need to set it
    )
    result = asyncio.run(loop.run("p"))
    assert result.exit_reason == "max_iterations"
    assert result.output == "attempt for p+"  # iteration 2 scored 0.75, the best
    assert (result.best_iteration, result.best_score) == (2, 0.75)

    fractions = iter([0.5, 0.75, 0.25])
    strict = RefinementLoop(
        coder, run_visible_tests, feed_failures_to_fixer, max_iterations=3, keep_best=False
    )
    latest = asyncio.run(strict.run("p"))
    assert latest.output == "attempt for p++"  # migration: strict last-iteration semantics
    assert (latest.best_iteration, latest.best_score) == (2, 0.75)  # still populated
