"""Search events refuse what the run store cannot hold: a time that is not finite, an integer
beyond its DuckDB column's range. The error is pydantic's `ValidationError` (as for every other
bad field of an event), located at the event type and the field."""

from __future__ import annotations

import json
import math
from typing import Any

import pydantic
import pytest

from core.search.events import (
    INT32_MAX,
    INT32_MIN,
    INT64_MAX,
    INT64_MIN,
    ArchiveSnapshot,
    CandidateEvaluated,
    CandidateProposed,
    ExampleEvaluated,
    LogMessage,
    RunFinished,
    RunStarted,
    parse_event,
)
from core.storage import encode_event
from core.storage._ingest import _COLUMNS  # the types ingest reads each field as

HEAD: dict[str, Any] = {"run_id": "r", "seq": 3, "ts": 1_700_000_000.0}

VALID: dict[str, dict[str, Any]] = {
    "run_started": {"problem": "p", "strategy": "random", "seed": 7},
    "candidate_proposed": {"candidate_idx": 1, "generation": 0, "spec_hash": "h", "spec_json": "{}",
                           "parent_idx": 0, "design_requests": 2, "design_input_tokens": 900,
                           "design_output_tokens": 80},
    "example_evaluated": {"candidate_idx": 1, "spec_hash": "h", "split": "validation",
                          "example_id": "e1", "trial": 0, "accuracy": 1.0, "input_tokens": 5,
                          "output_tokens": 6, "requests": 1},
    "candidate_evaluated": {"candidate_idx": 1, "spec_hash": "h", "split": "validation",
                            "n_examples": 2, "accuracy": 1.0, "cost_usd": 0.1, "latency_ms": 2.0,
                            "n_agents": 1, "depth": 1, "aggregate_score": 0.9, "same_as": 0},
    "archive_snapshot": {"generation": 0, "entries": [0, 1], "front": [1], "best_idx": 1,
                         "best_score": 0.9, "n_evaluations": 4},
    "log": {"message": "m"},
    "run_finished": {"status": "completed", "best_idx": 1},
}  # fmt: skip
"""A valid event of each type, with every integer field set."""

MODELS: dict[str, type[pydantic.BaseModel]] = {
    "run_started": RunStarted,
    "candidate_proposed": CandidateProposed,
    "example_evaluated": ExampleEvaluated,
    "candidate_evaluated": CandidateEvaluated,
    "archive_snapshot": ArchiveSnapshot,
    "log": LogMessage,
    "run_finished": RunFinished,
}

RANGES = {"INTEGER": (INT32_MIN, INT32_MAX), "BIGINT": (INT64_MIN, INT64_MAX)}

LOWER_BOUNDS = {
    "seq": 0,
    "candidate_idx": 0,
    "same_as": 0,
    ("candidate_proposed", "generation"): -1,
}
"""Fields whose own rule starts above their column type's minimum (by name, or by event type
and name)."""


def line(kind: str, **changes: Any) -> str:
    """A journal line of `kind` (as an older version could have written it: unchecked)."""
    data = {**HEAD, "type": kind, **VALID[kind], **changes}
    return json.dumps(data, allow_nan=True)


def integer_fields() -> list[tuple[str, str, str]]:
    """`(event type, field, DuckDB type)` for every field the store keeps as an integer."""
    out: list[tuple[str, str, str]] = []
    for kind, model in MODELS.items():
        for name in model.model_fields:
            column = _COLUMNS.get(name, "")
            if column in ("INTEGER", "BIGINT", "INTEGER[]"):
                out.append((kind, name, column))
    return out


def refusal(text: str) -> dict[str, Any]:
    with pytest.raises(pydantic.ValidationError) as info:
        parse_event(text)
    return dict(info.value.errors()[0])


def test_every_integer_field_of_every_event_is_covered() -> None:
    fields = {(kind, name) for kind, name, _ in integer_fields()}
    assert len(fields) == 30  # seq of each of 7 types, and 23 others (v6: design tokens)
    for kind, name in fields:
        assert name in VALID[kind] or name == "seq", (kind, name)


@pytest.mark.parametrize(("kind", "name", "column"), integer_fields())
def test_an_integer_field_holds_exactly_its_columns_range(
    kind: str, name: str, column: str
) -> None:
    low, high = RANGES[column.removesuffix("[]")]
    low = LOWER_BOUNDS.get((kind, name), LOWER_BOUNDS.get(name, low))
    wrap = (lambda v: [v]) if column.endswith("[]") else (lambda v: v)  # noqa: E731
    where = (kind, name, 0) if column.endswith("[]") else (kind, name)
    for ok in (low, high):
        event = parse_event(line(kind, **{name: wrap(ok)}))
        assert getattr(event, name) == wrap(ok)
        assert parse_event(encode_event(event)) == event  # and it goes through a journal
    too_high = refusal(line(kind, **{name: wrap(high + 1)}))
    assert (too_high["loc"], too_high["type"], too_high["input"]) == (
        where,
        "less_than_equal",
        high + 1,
    )
    assert too_high["msg"] == f"Input should be less than or equal to {high}"
    too_low = refusal(line(kind, **{name: wrap(low - 1)}))
    assert (too_low["loc"], too_low["type"]) == (where, "greater_than_equal")


@pytest.mark.parametrize("kind", list(MODELS))
@pytest.mark.parametrize("ts", [math.nan, math.inf, -math.inf])
def test_a_time_that_is_not_finite_is_refused(kind: str, ts: float) -> None:
    err = refusal(line(kind, ts=ts))
    assert (err["loc"], err["type"], err["msg"]) == (
        (kind, "ts"),
        "finite_number",
        "Input should be a finite number",
    )


def test_making_an_event_out_of_range_is_refused_too() -> None:
    with pytest.raises(pydantic.ValidationError) as info:
        ExampleEvaluated(**HEAD, **VALID["example_evaluated"] | {"input_tokens": 10**20})
    assert info.value.errors()[0]["loc"] == ("input_tokens",)
    with pytest.raises(pydantic.ValidationError) as info:
        LogMessage(run_id="r", seq=0, ts=math.nan, message="m")
    assert info.value.errors()[0]["loc"] == ("ts",)
    with pytest.raises(pydantic.ValidationError) as info:
        RunStarted(**HEAD, problem="p", strategy="s", seed=2**63)
    assert info.value.errors()[0]["loc"] == ("seed",)


def test_other_floats_keep_nan_and_infinity() -> None:
    """F7: an invalid result keeps its NaN accuracy or infinite cost, so the store can mark it
    invalid; only the time must be finite."""
    event = parse_event(line("candidate_evaluated", accuracy=math.nan, cost_usd=math.inf))
    assert isinstance(event, CandidateEvaluated)
    assert math.isnan(event.accuracy) and event.cost_usd == math.inf
    assert (
        parse_event(line("example_evaluated", accuracy=math.nan, latency_ms=math.inf)).ts
        == (HEAD["ts"])
    )


def test_the_bounds_are_duckdbs() -> None:
    import duckdb

    with duckdb.connect() as con:
        row = con.execute(
            f"SELECT {INT32_MAX}::INTEGER, ({INT32_MIN})::INTEGER, {INT64_MAX}::BIGINT, "
            f"({INT64_MIN})::BIGINT"
        ).fetchone()
        assert row == (INT32_MAX, INT32_MIN, INT64_MAX, INT64_MIN)
        for sql in (
            f"{INT32_MAX + 1}::INTEGER",
            f"({INT32_MIN - 1})::INTEGER",
            f"{INT64_MAX + 1}::BIGINT",
            f"({INT64_MIN - 1})::BIGINT",
        ):
            with pytest.raises(duckdb.ConversionException):
                con.execute(f"SELECT {sql}")
