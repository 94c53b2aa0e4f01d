"""Evaluation cache: keyed by (spec_hash, example_id, trial); values are plain records."""

import math

from core.evaluation._records import CandidateEvaluation, ExampleResult
from core.evaluation.cache import EvaluationCache, InMemoryEvaluationCache
from core.evaluation.metrics import MetricBundle


def _result(spec: str = "h1", example: str = "q1", trial: int = 0, **kw: object) -> ExampleResult:
    bundle = MetricBundle(accuracy=1.0, cost_usd=0.25, latency_ms=12.0, input_tokens=3)
    fields: dict[str, object] = {
        "requests": 2,
        "output_summary": "42",
        "trace": [{"span_id": 0, "kind": "pipeline", "usage": []}],
    }
    fields.update(kw)
    return ExampleResult(
        spec_hash=spec,
        example_id=example,
        trial=trial,
        bundle=bundle,
        **fields,  # type: ignore[arg-type]
    )


def test_get_put_by_key() -> None:
    cache = InMemoryEvaluationCache()
    assert isinstance(cache, EvaluationCache)
    assert cache.get("h1", "q1", 0) is None
    r = _result()
    cache.put(r)
    assert cache.get("h1", "q1", 0) == r
    assert cache.get("h1", "q1", 1) is None
    assert cache.get("h2", "q1", 0) is None
    assert cache.get("h1", "q2", 0) is None
    assert len(cache) == 1


def test_put_replaces_and_stores_uncached_flag() -> None:
    cache = InMemoryEvaluationCache()
    cache.put(_result(trial=1))
    cache.put(_result(trial=1, cached=True, requests=5))
    stored = cache.get("h1", "q1", 1)
    assert stored is not None
    assert stored.requests == 5
    assert stored.cached is False
    assert cache.keys() == [("h1", "q1", 1)]


def test_records_round_trip_through_json_for_a_journal() -> None:
    # a resumed run prefills the cache from JSON lines; NaN / inf survive the round trip
    bad = ExampleResult(
        spec_hash="h",
        example_id="q",
        bundle=MetricBundle(
            accuracy=math.nan, cost_usd=math.inf, status="invalid", error="non_finite_score: nan"
        ),
    )
    for r in (_result(), bad):
        line = r.model_dump_json()
        back = ExampleResult.model_validate_json(line)
        assert back.model_dump_json() == line
    back = ExampleResult.model_validate_json(bad.model_dump_json())
    assert math.isnan(back.accuracy)
    assert back.cost_usd == math.inf
    assert back.status == "invalid"
    assert back.error == "non_finite_score: nan"


def test_a_prefilled_cache_from_dicts() -> None:
    cache = InMemoryEvaluationCache()
    record = _result(example="q7").model_dump()
    assert isinstance(record["bundle"], dict)
    cache.put(ExampleResult.model_validate(record))
    hit = cache.get("h1", "q7", 0)
    assert hit is not None
    assert hit.bundle.accuracy == 1.0
    assert hit.trace == [{"span_id": 0, "kind": "pipeline", "usage": []}]


def test_candidate_evaluation_round_trips_with_nan_means() -> None:
    ev = CandidateEvaluation(
        spec_hash="", split="validation", status="rejected", reason="invalid_spec: x"
    )
    assert math.isnan(ev.aggregate_score)
    back = CandidateEvaluation.model_validate_json(ev.model_dump_json())
    assert back.status == "rejected"
    assert math.isnan(back.accuracy)
    assert back.rejected


def test_results_convert_to_and_from_journal_event_fields() -> None:
    from core.search.events import ExampleEvaluated

    r = ExampleResult(
        spec_hash="h",
        example_id="q3",
        trial=1,
        split="validation",
        bundle=MetricBundle(
            accuracy=0.0,
            cost_usd=0.5,
            latency_ms=7.0,
            status="degenerate",
            error="blank_output",
            input_tokens=4,
            output_tokens=1,
        ),
        requests=2,
        blank=True,
        output_summary="",
        trace=[{"span_id": 0}],
    )
    event = ExampleEvaluated(run_id="r", seq=5, ts=1.0, candidate_idx=2, **r.event_fields())
    back = ExampleResult.from_event_fields(event.model_dump())
    assert back == r
    cache = InMemoryEvaluationCache()
    cache.put(back)
    assert cache.get("h", "q3", 1) == r


def test_a_result_without_a_trace_is_rebuilt_equal_with_its_fields_set() -> None:
    # kept packed (plain tuples) and rebuilt on every get: equal, same JSON, same fields set,
    # a new object each time (so a caller cannot change what is stored)
    cache = InMemoryEvaluationCache()
    r = _result(trace=[])
    cache.put(r)
    first, second = cache.get("h1", "q1", 0), cache.get("h1", "q1", 0)
    assert first is not None and second is not None
    assert first == r and second == r
    assert first is not second and first is not r
    assert first.model_dump_json() == r.model_dump_json()
    assert first.model_fields_set == r.model_fields_set
    assert (
        first.bundle.model_fields_set
        == r.bundle.model_fields_set
        == {
            "accuracy",
            "cost_usd",
            "latency_ms",
            "input_tokens",
        }
    )
    assert (first.bundle.accuracy, first.bundle.cost_usd, first.requests) == (1.0, 0.25, 2)


def test_a_result_with_a_trace_is_kept_as_it_is() -> None:
    cache = InMemoryEvaluationCache()
    r = _result()
    cache.put(r)
    assert cache.get("h1", "q1", 0) is r


def test_a_packed_model_with_private_state_is_rebuilt_by_model_construct() -> None:
    # the direct rebuild sets no private attributes: a class with any goes through
    # model_construct, which gives them their defaults
    from pydantic import BaseModel, PrivateAttr

    from core.evaluation.cache import _pack, _unpack  # pyright: ignore[reportPrivateUsage]

    class WithPrivate(BaseModel):
        x: int
        inner: MetricBundle
        _seen: int = PrivateAttr(default=7)

    m = WithPrivate(x=3, inner=MetricBundle(accuracy=0.5))
    again = _unpack(_pack(m))
    assert again == m and again is not m
    assert again._seen == 7  # pyright: ignore[reportPrivateUsage]
    assert again.model_fields_set == {"x", "inner"}
    assert again.inner.model_fields_set == {"accuracy"}
