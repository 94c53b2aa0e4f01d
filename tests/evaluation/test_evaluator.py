"""TopologyEvaluator: concurrency, real cost, statuses (F3, F5, F7), rejections (F4), cache."""

import asyncio
import math
from collections.abc import Iterable
from typing import Any

import pytest
from pydantic import BaseModel
from pydantic_ai import Agent, models
from pydantic_ai.messages import ModelMessage, ModelResponse, TextPart, ToolCallPart
from pydantic_ai.models.function import AgentInfo, FunctionModel
from pydantic_ai.usage import RequestUsage

from core.errors import EvaluationError
from core.evaluation.cache import InMemoryEvaluationCache
from core.evaluation.evaluator import (
    CandidateEvaluation,
    EvaluatorConfig,
    ExampleResult,
    TopologyEvaluator,
)
from core.evaluation.metrics import GoldExample
from core.evaluation.pricing import CostQuote, ModelPrice, Pricer
from core.hydrate import AgentRegistry, CallableRegistry
from core.runtime.tracing import ModelUsage, record_model_latency, record_usage

models.ALLOW_MODEL_REQUESTS = False


def exact(output: Any, example: GoldExample) -> float:
    return 1.0 if str(output).strip() == str(example.expected) else 0.0


def fn_step(name: str) -> dict[str, Any]:
    return {"operation": {"kind": "function_step", "callable_name": name}}


def agent_step(name: str) -> dict[str, Any]:
    return {"operation": {"kind": "agent_step", "agent_name": name}}


def pipeline(*entries: dict[str, Any]) -> dict[str, Any]:
    return {"kind": "pipeline", "steps": list(entries)}


def examples(n: int, expected: Any = None) -> list[GoldExample]:
    return [
        GoldExample(input=i, expected=i if expected is None else expected, id=f"ex{i}")
        for i in range(n)
    ]


def make_evaluator(
    callables: dict[str, Any] | None = None,
    agents: dict[str, Any] | None = None,
    **kwargs: Any,
) -> TopologyEvaluator:
    creg = CallableRegistry()
    for name, fn in (callables or {}).items():
        creg.register(name, fn)
    areg = AgentRegistry()
    for name, factory in (agents or {}).items():
        areg.register(name, factory)
    kwargs.setdefault("score_fn", exact)
    return TopologyEvaluator(callable_registry=creg, agent_registry=areg, **kwargs)


def evaluate(
    evaluator: TopologyEvaluator, spec: Any, exs: Iterable[GoldExample], **kwargs: Any
) -> CandidateEvaluation:
    return asyncio.run(evaluator.evaluate(spec, list(exs), **kwargs))


def identity(x: Any) -> Any:
    return x


# ---------------------------------------------------------------------------------------------
# concurrency


def test_concurrency_limit_is_reached_and_never_exceeded() -> None:
    in_flight = 0
    peak = 0

    async def slow(x: Any) -> Any:
        nonlocal in_flight, peak
        in_flight += 1
        peak = max(peak, in_flight)
        await asyncio.sleep(0.01)
        in_flight -= 1
        return x

    ev = make_evaluator({"slow": slow}, concurrency=4)
    result = evaluate(ev, pipeline(fn_step("slow")), examples(20))
    assert peak == 4
    assert result.status == "ok"
    assert result.accuracy == 1.0
    assert [r.example_id for r in result.results] == [f"ex{i}" for i in range(20)]


def test_trials_share_the_limit() -> None:
    in_flight = 0
    peak = 0

    async def slow(x: Any) -> Any:
        nonlocal in_flight, peak
        in_flight += 1
        peak = max(peak, in_flight)
        await asyncio.sleep(0.01)
        in_flight -= 1
        return x

    ev = make_evaluator({"slow": slow}, concurrency=3, n_trials=2)
    result = evaluate(ev, pipeline(fn_step("slow")), examples(5))
    assert peak == 3
    assert len(result.results) == 10
    assert [(r.example_id, r.trial) for r in result.results[:4]] == [
        ("ex0", 0),
        ("ex0", 1),
        ("ex1", 0),
        ("ex1", 1),
    ]
    assert len(result.bundles) == 5


# ---------------------------------------------------------------------------------------------
# cost (F3 mechanism)


class Answer(BaseModel):
    value: int


def flaky_model(n_bad: int) -> tuple[FunctionModel, dict[str, int]]:
    """Returns invalid structured output `n_bad` times per run, then a valid one."""
    counter = {"calls": 0}

    def respond(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        counter["calls"] += 1
        attempt = sum(1 for m in messages if m.kind == "response")
        args = '{"value": "not a number"}' if attempt < n_bad else '{"value": 42}'
        return ModelResponse(
            parts=[ToolCallPart(info.output_tools[0].name, args)],
            usage=RequestUsage(input_tokens=100, output_tokens=10),
        )

    return FunctionModel(respond, model_name="flaky"), counter


PRICES = Pricer({"function:flaky": ModelPrice(input_usd_per_1k=1.0, output_usd_per_1k=2.0)})


def test_cost_sums_every_request_including_structured_output_retries() -> None:
    model, counter = flaky_model(n_bad=2)
    ev = make_evaluator(
        agents={"solver": lambda: Agent(model, output_type=Answer, retries=2)},
        score_fn=lambda out, ex: 1.0 if out == Answer(value=42) else 0.0,
        pricer=PRICES,
    )
    result = evaluate(ev, pipeline(agent_step("solver")), [GoldExample(input="q", id="q")])
    assert counter["calls"] == 3
    run = result.results[0]
    assert run.status == "ok"
    assert run.requests == 3
    assert (run.bundle.input_tokens, run.bundle.output_tokens) == (300, 30)
    assert run.cost_usd == 0.36  # 300 x $1/1k + 30 x $2/1k
    assert result.cost_usd == 0.36
    assert result.fresh_cost_usd == 0.36
    assert result.n_model_requests == 3
    assert result.accuracy == 1.0


def test_a_run_that_never_succeeds_still_pays_for_every_attempt() -> None:
    model, counter = flaky_model(n_bad=99)
    ev = make_evaluator(
        agents={"solver": lambda: Agent(model, output_type=Answer, retries=2)}, pricer=PRICES
    )
    result = evaluate(ev, pipeline(agent_step("solver")), [GoldExample(input="q", id="q")])
    assert counter["calls"] == 3
    run = result.results[0]
    assert run.status == "error"
    assert run.error is not None and "UnexpectedModelBehavior" in run.error
    assert run.cost_usd == 0.36
    assert run.accuracy == 0.0
    assert result.error_rate == 1.0
    assert result.status == "degenerate"


def test_unpriced_model_makes_the_evaluation_invalid_not_free() -> None:
    def local_llm(x: Any) -> str:
        record_usage("ollama:my-local", requests=1, input_tokens=10, output_tokens=5)
        return str(x)

    ev = make_evaluator({"llm": local_llm})
    result = evaluate(ev, pipeline(fn_step("llm")), examples(2))
    assert result.status == "invalid"
    assert result.valid is False
    assert (
        result.reason
        == "unpriced_model: ollama:my-local (example 'ex0', trial 0; 2 of 2 runs invalid)"
    )
    assert result.results[0].status == "invalid"
    assert result.results[0].accuracy == 1.0
    assert math.isnan(result.results[0].cost_usd)
    assert result.fresh_cost_usd == 0.0


# ---------------------------------------------------------------------------------------------
# blank and degenerate (F5)


def empty_model() -> tuple[FunctionModel, dict[str, int]]:
    counter = {"calls": 0}

    def respond(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        counter["calls"] += 1
        return ModelResponse(parts=[TextPart("")], usage=RequestUsage(input_tokens=5))

    return FunctionModel(respond, model_name="empty"), counter


def test_empty_replies_with_an_optional_output_are_blank_and_degenerate() -> None:
    model, _ = empty_model()
    ev = make_evaluator(agents={"solver": lambda: Agent(model, output_type=str | None)})
    result = evaluate(ev, pipeline(agent_step("solver")), examples(4))
    assert result.status == "degenerate"
    assert result.valid is False
    assert result.blank_rate == 1.0
    assert result.error_rate == 0.0
    assert result.reason == (
        "degenerate: 100% blank or failed runs (4 blank, 0 error of 4; threshold 50%)"
    )
    assert [r.status for r in result.results] == ["degenerate"] * 4
    assert result.results[0].error == "blank_output"
    assert result.results[0].blank is True


def test_empty_replies_with_a_text_output_are_errors_and_degenerate() -> None:
    # pydantic-ai re-prompts on an empty reply and fails after the retries: an error, not 0.0
    model, counter = empty_model()
    ev = make_evaluator(agents={"solver": lambda: Agent(model)})
    result = evaluate(ev, pipeline(agent_step("solver")), examples(3))
    assert counter["calls"] == 6  # 2 requests per run, all recorded
    assert result.n_model_requests == 6
    assert result.status == "degenerate"
    assert result.error_rate == 1.0
    assert result.blank_rate == 0.0
    assert result.valid is False


def test_whitespace_and_empty_collections_are_blank_and_a_few_do_not_condemn() -> None:
    outputs = {0: "  \n", 1: [], 2: "2", 3: "3"}
    ev = make_evaluator({"answer": lambda x: outputs[x]})
    result = evaluate(ev, pipeline(fn_step("answer")), examples(4))
    assert [r.blank for r in result.results] == [True, True, False, False]
    assert result.blank_rate == 0.5
    assert result.status == "degenerate"  # 50% >= the default threshold 0.5
    ev = make_evaluator({"answer": lambda x: outputs[x]}, degenerate_threshold=0.75)
    result = evaluate(ev, pipeline(fn_step("answer")), examples(4))
    assert result.status == "ok"
    assert result.accuracy == 0.5
    assert result.blank_rate == 0.5


def test_problem_is_blank_hook() -> None:
    ev = make_evaluator(
        {"answer": lambda x: {"answer": None}},
        is_blank=lambda out: out.get("answer") is None,
    )
    result = evaluate(ev, pipeline(fn_step("answer")), examples(2))
    assert result.blank_rate == 1.0
    assert result.status == "degenerate"


# ---------------------------------------------------------------------------------------------
# invalid measurements (F7)


def test_nan_score_marks_the_candidate_invalid_with_a_reason() -> None:
    ev = make_evaluator({"id": identity}, score_fn=lambda out, ex: math.nan if out == 1 else 1.0)
    result = evaluate(ev, pipeline(fn_step("id")), examples(3))
    assert result.status == "invalid"
    assert result.valid is False
    assert (
        result.invalid_reason
        == "non_finite_score: nan (example 'ex1', trial 0; 1 of 3 runs invalid)"
    )
    assert result.results[1].status == "invalid"
    assert math.isnan(result.results[1].accuracy)


class InfinitePricer(Pricer):
    """A pricer whose cost comes out infinite (e.g. a broken price source)."""

    def total(self, usages: Iterable[ModelUsage]) -> CostQuote:
        return CostQuote(math.inf)


def test_infinite_cost_marks_the_candidate_invalid_with_a_reason() -> None:
    ev = make_evaluator({"id": identity}, pricer=InfinitePricer())
    result = evaluate(ev, pipeline(fn_step("id")), examples(2))
    assert result.status == "invalid"
    assert result.reason == "non_finite_cost: inf (example 'ex0', trial 0; 2 of 2 runs invalid)"
    assert result.fresh_cost_usd == 0.0


@pytest.mark.parametrize(
    ("score", "reason"),
    [
        (1.5, "score_out_of_range: 1.5 outside [0, 1]"),
        ("yes", "score_not_a_number: str"),
        (math.inf, "non_finite_score: inf"),
    ],
)
def test_bad_scores_are_invalid(score: Any, reason: str) -> None:
    ev = make_evaluator({"id": identity}, score_fn=lambda out, ex: score)
    result = evaluate(ev, pipeline(fn_step("id")), examples(1))
    assert result.status == "invalid"
    assert result.results[0].error == reason


def test_a_score_function_that_raises_is_invalid_not_a_crash() -> None:
    def broken(out: Any, ex: GoldExample) -> float:
        raise KeyError("expected")

    ev = make_evaluator({"id": identity}, score_fn=broken)
    result = evaluate(ev, pipeline(fn_step("id")), examples(1))
    assert result.results[0].error == "score_error: KeyError: 'expected'"
    assert result.status == "invalid"


def test_async_score_function() -> None:
    async def score(out: Any, ex: GoldExample) -> float:
        await asyncio.sleep(0)
        return 0.25

    ev = make_evaluator({"id": identity}, score_fn=score)
    assert evaluate(ev, pipeline(fn_step("id")), examples(2)).accuracy == 0.25


# ---------------------------------------------------------------------------------------------
# per-example failures


def test_one_example_raising_does_not_stop_the_others() -> None:
    def picky(x: int) -> int:
        if x == 2:
            raise ValueError("cannot handle 2")
        return x

    ev = make_evaluator({"picky": picky})
    result = evaluate(ev, pipeline(fn_step("picky")), examples(5))
    assert [r.status for r in result.results] == ["ok", "ok", "error", "ok", "ok"]
    failed = result.results[2]
    assert failed.error is not None
    assert failed.error.startswith("PipelineStepError: ")
    assert "cannot handle 2" in failed.error
    assert failed.accuracy == 0.0
    assert failed.output_summary == ""
    assert result.error_rate == 0.2
    assert result.accuracy == 0.8
    assert result.status == "ok"


def test_example_timeout_is_an_error_and_not_cached() -> None:
    calls = 0

    async def sometimes_slow(x: int) -> int:
        nonlocal calls
        calls += 1
        if x == 0:
            await asyncio.sleep(30)
        return x

    cache = InMemoryEvaluationCache()
    ev = make_evaluator({"s": sometimes_slow}, example_timeout_s=0.05, cache=cache)
    result = evaluate(ev, pipeline(fn_step("s")), examples(3))
    assert result.results[0].status == "error"
    assert result.results[0].error == "example_timeout: timed out after 0.05 s"
    assert [r.status for r in result.results[1:]] == ["ok", "ok"]
    assert len(cache) == 2
    evaluate(ev, pipeline(fn_step("s")), examples(3))
    assert calls == 4  # only the timed-out example ran again


# ---------------------------------------------------------------------------------------------
# latency


def test_latency_is_model_time_on_the_critical_path_when_recorded() -> None:
    async def model_a(x: Any) -> Any:
        record_model_latency(120.0)
        await asyncio.sleep(0)
        return x

    def model_b(x: Any) -> Any:
        record_model_latency(30.5)
        return x

    ev = make_evaluator({"a": model_a, "b": model_b})
    spec = pipeline(
        fn_step("a"),
        {
            "operation": {
                "kind": "parallel",
                "steps": [
                    {"kind": "function_step", "callable_name": "a"},
                    {"kind": "function_step", "callable_name": "b"},
                ],
                "merge": "first_wins",
            }
        },
    )
    result = evaluate(ev, spec, examples(3))
    assert [r.latency_ms for r in result.results] == [240.0, 240.0, 240.0]
    assert result.latency_ms == 240.0
    assert result.status == "ok"


def test_latency_falls_back_to_wall_time() -> None:
    async def wait(x: Any) -> Any:
        await asyncio.sleep(0.02)
        return x

    ev = make_evaluator({"w": wait})
    result = evaluate(ev, pipeline(fn_step("w")), examples(1))
    assert 15.0 <= result.results[0].latency_ms < 5000.0  # wall time of a 20 ms sleep


def _latencies(ev: TopologyEvaluator, spec: Any) -> list[float]:
    return [r.latency_ms for r in evaluate(ev, spec, examples(3)).results]


def test_model_latency_source_gives_zero_for_a_run_with_no_model_time() -> None:
    # a function-only candidate calls no model: in model time it takes 0 ms, in every run
    # (wall time gave 0.1 ms in one run and 0.0 ms in the next: fronts differed)
    ev = make_evaluator({"f": identity}, latency_source="model")
    first, second = _latencies(ev, pipeline(fn_step("f"))), _latencies(ev, pipeline(fn_step("f")))
    assert first == [0.0, 0.0, 0.0]
    assert second == [0.0, 0.0, 0.0]
    assert ev.config.latency_source == "model"


def test_model_latency_source_keeps_the_critical_path() -> None:
    def model(x: Any) -> Any:
        record_model_latency(42.5)
        return x

    ev = make_evaluator({"m": model, "f": identity}, latency_source="model")
    assert _latencies(ev, pipeline(fn_step("f"), fn_step("m"), fn_step("m"))) == [85.0] * 3


def test_wall_latency_source_ignores_recorded_model_time() -> None:
    async def slow_model(x: Any) -> Any:
        record_model_latency(1e9)
        await asyncio.sleep(0.02)
        return x

    ev = make_evaluator({"m": slow_model}, latency_source="wall")
    for latency in _latencies(ev, pipeline(fn_step("m"))):
        assert 15.0 <= latency < 5000.0  # wall time of a 20 ms sleep, not the 1e9 ms recorded


def test_auto_latency_source_is_the_default_and_falls_back_to_wall_time() -> None:
    assert EvaluatorConfig().latency_source == "auto"
    with pytest.raises(ValueError, match="latency_source"):
        EvaluatorConfig(latency_source="cpu")  # type: ignore[arg-type]


# ---------------------------------------------------------------------------------------------
# rejections before anything runs (F4)


def counting() -> tuple[dict[str, Any], dict[str, int]]:
    counter = {"calls": 0}

    def f(x: Any) -> Any:
        counter["calls"] += 1
        return x

    return {"f": f, "g": f, "update": lambda inp, out, res: inp, "is_math": lambda x: True}, counter


def assert_rejected(result: CandidateEvaluation, reason_start: str) -> None:
    assert result.status == "rejected"
    assert result.reason is not None and result.reason.startswith(reason_start), result.reason
    assert result.invalid_reason == result.reason
    assert result.valid is False
    assert result.results == []
    assert result.bundles == []
    assert result.cost_usd == 0.0
    assert result.fresh_cost_usd == 0.0
    assert result.n_model_requests == 0
    assert math.isnan(result.aggregate_score)


def test_max_depth_exceeded_is_rejected_with_the_depths() -> None:
    fns, counter = counting()
    ev = make_evaluator(fns, max_depth=1)
    nested = pipeline(fn_step("f"), {"operation": pipeline(fn_step("g"))})
    result = evaluate(ev, nested, examples(3))
    assert_rejected(result, "max_depth_exceeded: depth 2 > 1")
    assert result.reason == "max_depth_exceeded: depth 2 > 1"
    assert result.depth == 2
    assert counter["calls"] == 0


def test_ir_limits_are_named_too() -> None:
    from core.ir import SpecLimits

    fns, counter = counting()
    ev = make_evaluator(fns, limits=SpecLimits(max_nodes=2))
    result = evaluate(ev, pipeline(fn_step("f"), fn_step("g")), examples(1))
    assert_rejected(result, "max_nodes_exceeded: ")
    assert counter["calls"] == 0


def test_step_kind_not_allowed_names_kind_and_path() -> None:
    fns, counter = counting()
    ev = make_evaluator(fns, allowed_step_kinds=("agent_step",))
    result = evaluate(ev, pipeline(fn_step("f"), fn_step("g")), examples(2))
    assert result.reason == (
        "step_kind_not_allowed: function_step at $.steps[0].operation; "
        "function_step at $.steps[1].operation (allowed: agent_step)"
    )
    assert_rejected(result, "step_kind_not_allowed")
    assert counter["calls"] == 0


def test_allowed_composites_are_checked_when_listed() -> None:
    fns, _ = counting()
    ev = make_evaluator(fns, allowed_step_kinds=("function_step", "pipeline"))
    spec = pipeline(
        {
            "operation": {
                "kind": "parallel",
                "steps": [{"kind": "function_step", "callable_name": "f"}],
            }
        }
    )
    result = evaluate(ev, spec, examples(1))
    assert result.reason == (
        "step_kind_not_allowed: parallel at $.steps[0].operation (allowed: function_step, pipeline)"
    )
    ok = evaluate(ev, pipeline(fn_step("f")), examples(1))
    assert ok.status == "ok"


def test_unknown_names_are_all_listed_with_paths_before_anything_runs() -> None:
    fns, counter = counting()
    model, model_counter = empty_model()
    ev = make_evaluator(fns, agents={"solver": lambda: Agent(model)})
    spec = pipeline(
        fn_step("f"),
        {
            "operation": {
                "kind": "router",
                "routes": [
                    {
                        "name": "math",
                        "step": {"kind": "agent_step", "agent_name": "solver"},
                        "condition_name": "is_math",
                    },
                    {
                        "name": "other",
                        "step": {"kind": "agent_step", "agent_name": "ghost_agent"},
                        "condition_name": "is_math",
                    },
                ],
            }
        },
        {
            "operation": {
                "kind": "refinement_loop",
                "step": {"kind": "function_step", "callable_name": "ghost_fn"},
                "evaluator": "solver",
                "state_updater_name": "update",
            }
        },
    )
    result = evaluate(ev, spec, examples(3))
    assert_rejected(result, "unknown_names: ")
    assert result.reason is not None
    assert "$.steps[1].operation.routes[1].step.agent_name" in result.reason
    assert "'ghost_agent'" in result.reason
    assert "$.steps[2].operation.step.callable_name" in result.reason
    assert "'ghost_fn'" in result.reason
    paths = {(path, name) for path, _, name in result.unknown_names}
    assert paths == {
        ("$.steps[1].operation.routes[1].step.agent_name", "ghost_agent"),
        ("$.steps[2].operation.step.callable_name", "ghost_fn"),
    }
    assert "solver" in result.known_names["agent"]
    assert counter["calls"] == 0
    assert model_counter["calls"] == 0


def test_invalid_spec_text_is_rejected() -> None:
    ev = make_evaluator({"f": identity})
    result = evaluate(ev, '{"kind": "pipeline", "steps": []}', examples(1))
    assert_rejected(result, "invalid_spec: ")
    assert result.spec_hash == ""
    assert result.n_agents is None
    result = evaluate(ev, "not json", examples(1))
    assert_rejected(result, "invalid_spec: ")


def test_inline_agents_are_refused_unless_enabled() -> None:
    ev = make_evaluator({"f": identity})
    spec = pipeline(
        {
            "operation": {
                "kind": "agent_step",
                "inline_spec": {
                    "name": "i",
                    "model": "test",
                    "system_prompt": "hi",
                    "output_schema": {"type": "string"},
                },
            }
        }
    )
    result = evaluate(ev, spec, examples(1))
    assert result.reason == (
        "inline_agents_disabled: inline AgentSpec at $.steps[0].operation.inline_spec; "
        "use a registered agent name"
    )
    assert_rejected(result, "inline_agents_disabled")
    with pytest.raises(EvaluationError, match="agent_factory"):
        make_evaluator({}, allow_inline_agents=True)


def test_an_unknown_merge_is_an_unknown_name() -> None:
    ev = make_evaluator({"f": identity})
    spec = {
        "kind": "parallel",
        "steps": [{"kind": "function_step", "callable_name": "f"}],
        "merge": "no_such_merge",
    }
    result = evaluate(ev, spec, examples(1))
    assert_rejected(result, "unknown_names: ")
    assert result.unknown_names == [("$.merge", "merge", "no_such_merge")]


def test_a_failing_agent_factory_is_a_hydration_rejection_not_a_crash() -> None:
    fns, counter = counting()

    def broken_factory() -> Any:
        raise RuntimeError("no API key")

    ev = make_evaluator(fns, agents={"solver": broken_factory})
    result = evaluate(ev, pipeline(fn_step("f"), agent_step("solver")), examples(2))
    assert_rejected(result, "hydration_error: HydrationError: ")
    assert result.reason is not None and "no API key" in result.reason
    assert counter["calls"] == 0


# ---------------------------------------------------------------------------------------------
# cache


def test_a_re_proposed_spec_costs_zero_model_calls() -> None:
    counter = {"calls": 0}

    def respond(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        counter["calls"] += 1
        return ModelResponse(
            parts=[TextPart("7")], usage=RequestUsage(input_tokens=10, output_tokens=1)
        )

    model = FunctionModel(respond, model_name="m")
    cache = InMemoryEvaluationCache()
    seen: list[ExampleResult] = []
    ev = make_evaluator(
        agents={"solver": lambda: Agent(model)},
        cache=cache,
        pricer=Pricer({"function:m": ModelPrice(input_usd_per_1k=1.0, output_usd_per_1k=1.0)}),
    )
    spec = pipeline(agent_step("solver"))
    exs = examples(4, expected="7")
    first = evaluate(ev, spec, exs, on_example=seen.append)
    assert counter["calls"] == 4
    assert first.n_model_requests == 4
    assert first.fresh_cost_usd == 0.044
    assert len(cache) == 4
    # the same topology, with node ids and another key order: same canonical hash
    again = {
        "steps": [{"operation": {"agent_name": "solver", "kind": "agent_step", "id": "s"}}],
        "kind": "pipeline",
        "id": "p",
    }
    second = evaluate(ev, again, exs, on_example=seen.append)
    assert counter["calls"] == 4
    assert second.spec_hash == first.spec_hash
    assert second.n_model_requests == 0
    assert second.fresh_cost_usd == 0.0
    assert second.n_cached == 4
    assert all(r.cached for r in second.results)
    assert second.cost_usd == first.cost_usd == 0.011
    assert second.accuracy == first.accuracy == 1.0
    assert second.aggregate_score == first.aggregate_score
    assert len(seen) == 8
    assert [r.cached for r in seen].count(True) == 4


def test_cache_is_per_trial_and_per_example() -> None:
    counter = {"calls": 0}

    def f(x: Any) -> Any:
        counter["calls"] += 1
        return x

    ev = make_evaluator({"f": f}, cache=InMemoryEvaluationCache(), n_trials=2)
    evaluate(ev, pipeline(fn_step("f")), examples(2))
    assert counter["calls"] == 4
    result = evaluate(ev, pipeline(fn_step("f")), examples(3))
    assert counter["calls"] == 6  # only ex2's two trials ran
    assert result.n_cached == 4


# ---------------------------------------------------------------------------------------------
# trials, records, config


def test_n_trials_stdev_exact() -> None:
    calls = 0

    def alternate(x: Any) -> Any:
        nonlocal calls
        calls += 1
        return x if calls % 2 == 1 else "wrong"

    # concurrency 1: runs go example by example, trial by trial
    ev = make_evaluator({"alt": alternate}, concurrency=1, n_trials=2)
    result = evaluate(ev, pipeline(fn_step("alt")), examples(2))
    assert [r.accuracy for r in result.results] == [1.0, 0.0, 1.0, 0.0]
    assert [b.accuracy for b in result.bundles] == [0.5, 0.5]
    assert [b.stdev for b in result.bundles] == [0.7071067811865476, 0.7071067811865476]
    assert [b.n_trials for b in result.bundles] == [2, 2]
    assert result.stdev == 0.7071067811865476  # per-trial means [1.0, 0.0]
    assert result.accuracy == 0.5


def test_records_carry_structure_tokens_and_traces() -> None:
    ev = make_evaluator({"f": identity, "g": identity}).with_options(capture_traces=True)
    result = evaluate(ev, pipeline(fn_step("f"), fn_step("g")), examples(1), split="minibatch")
    assert result.split == "minibatch"
    assert (result.n_agents, result.depth) == (0, 1)
    run = result.results[0]
    assert run.split == "minibatch"
    assert (run.n_agents, run.depth) == (0, 1)
    assert run.output_summary == "0"
    assert [s["kind"] for s in run.trace] == ["pipeline", "function_step", "function_step"]
    assert len(result.spec_hash) == 64
    assert run.spec_hash == result.spec_hash
    assert result.valid is True
    assert result.invalid_reason is None
    # the aggregate is the mean of scalarized bundles with the default weights
    assert result.aggregate_score == pytest.approx(1.0 - 0.00002 * result.latency_ms, abs=1e-12)


def test_example_weights_weight_the_means() -> None:
    ev = make_evaluator({"f": lambda x: "a"})
    exs = [
        GoldExample(input=0, expected="a", id="right", weight=3.0),
        GoldExample(input=1, expected="b", id="wrong", weight=1.0),
    ]
    assert evaluate(ev, pipeline(fn_step("f")), exs).accuracy == 0.75


def test_examples_without_ids_get_content_ids_and_duplicates_are_refused() -> None:
    ev = make_evaluator({"f": identity})
    result = evaluate(ev, pipeline(fn_step("f")), [GoldExample(input="x", expected="x")])
    assert result.results[0].example_id.startswith("sha256:")
    with pytest.raises(EvaluationError, match="duplicate example ids"):
        evaluate(
            ev, pipeline(fn_step("f")), [GoldExample(input=1, id="a"), GoldExample(input=2, id="a")]
        )
    with pytest.raises(EvaluationError, match="at least one example"):
        evaluate(ev, pipeline(fn_step("f")), [])


def test_config_record_and_validation() -> None:
    ev = make_evaluator(
        {}, concurrency=3, max_depth=4, allowed_step_kinds=["function_step", "agent_step"]
    )
    assert ev.config == EvaluatorConfig(
        concurrency=3, max_depth=4, allowed_step_kinds=("agent_step", "function_step")
    )
    with pytest.raises(ValueError):
        make_evaluator({}, concurrency=0)
    with pytest.raises(ValueError, match="unknown step kind"):
        make_evaluator({}, allowed_step_kinds=("agnet_step",))
    with pytest.raises(EvaluationError, match="not both"):
        make_evaluator({}, concurrency=2, config=EvaluatorConfig())
    from_config = make_evaluator({}, config=EvaluatorConfig(n_trials=3))
    assert from_config.config.n_trials == 3


def test_on_example_errors_propagate_plainly() -> None:
    def boom(result: ExampleResult) -> None:
        raise OSError("journal full")

    ev = make_evaluator({"f": identity})
    with pytest.raises(OSError, match="journal full"):
        evaluate(ev, pipeline(fn_step("f")), examples(3), on_example=boom)


def test_public_names_are_exported_from_core_evaluation() -> None:
    import core.evaluation

    for name in (
        "CandidateEvaluation",
        "CostQuote",
        "EvaluationCache",
        "EvaluatorConfig",
        "ExampleResult",
        "InMemoryEvaluationCache",
        "ModelPrice",
        "Pricer",
        "TopologyEvaluator",
    ):
        assert name in core.evaluation.__all__, name
        assert getattr(core.evaluation, name) is not None
