"""Parse cost is bounded by the limits, not by the text.

A 58 MB spec text of 10^6 steps used to take 7.3 s and 525 MB before `max_nodes=200` refused
it: the whole text was pre-scanned, then decoded by `json.loads`, and only the walk of the
decoded data counted nodes. Now a text over `SpecLimits.text_bytes` (default `max_nodes *
TEXT_BYTES_PER_NODE`) is refused before anything reads it, and a text within it has its nodes
counted while it is scanned, stopping at node `max_nodes + 1`. The speed and memory of the
refusal are figures printed by `bench/bench_ir.py`, not asserted here.
"""

from __future__ import annotations

import json

import pytest

from core.errors import SpecLimitError
from core.ir import SpecLimits, parse_topology
from core.ir.limits import TEXT_BYTES_PER_NODE

STEP = '{"operation": {"kind": "agent_step", "agent_name": "a"}}'


def pipeline_text(n_steps: int) -> str:
    """A pipeline of `n_steps` agent steps as JSON text, 58 bytes a step."""
    return '{"kind": "pipeline", "steps": [' + ", ".join([STEP] * n_steps) + "]}"


def refusal(data: str | bytes, limits: SpecLimits | None = None) -> SpecLimitError:
    with pytest.raises(SpecLimitError) as exc:
        parse_topology(data, limits)
    return exc.value


def test_the_default_text_limit_comes_from_the_node_limit() -> None:
    assert TEXT_BYTES_PER_NODE == 16_384
    assert SpecLimits().text_bytes == 200 * 16_384 == 3_276_800
    assert SpecLimits(max_nodes=10).text_bytes == 163_840
    assert SpecLimits(max_nodes=10, max_text_bytes=1_000).text_bytes == 1_000


def test_a_58_mb_spec_is_refused_by_its_size_first() -> None:
    text = pipeline_text(1_000_000)
    assert len(text) == 58_000_031  # 58 MB
    err = refusal(text)
    assert (err.limit, err.value, err.path) == ("max_text_bytes", 3_276_800, "$")
    assert str(err) == (
        f"spec text is {len(text):,} characters, over the limit of 3,276,800 bytes "
        "(max_nodes=200 x 16,384 bytes per node): refused before parsing"
    )
    as_bytes = refusal(text.encode())
    assert str(as_bytes).startswith(f"spec text is {len(text):,} bytes, over the limit")


def test_text_within_the_characters_but_over_the_bytes_is_refused() -> None:
    """UTF-8 bytes count, not characters: 'é' is two bytes."""
    spec = {"kind": "pipeline", "steps": [{"operation": {"kind": "agent_step",
            "agent_name": "a", "id": "é" * 600}}]}  # fmt: skip
    text = json.dumps(spec, ensure_ascii=False)
    size = len(text.encode())
    limits = SpecLimits(max_text_bytes=len(text) + 10)
    assert len(text) < limits.text_bytes < size
    err = refusal(text, limits)
    assert str(err) == (
        f"spec text is {size:,} bytes, over the limit of {len(text) + 10:,} bytes "
        "(its max_text_bytes): refused before parsing"
    )


def test_within_the_size_limit_the_node_count_stops_at_the_limit() -> None:
    """A text the size limit lets through (it is raised here) still stops at node 201, with
    the same message and path as the count over decoded data gives."""
    text = pipeline_text(1_000_000)
    err = refusal(text, SpecLimits(max_text_bytes=10**9))
    assert (err.limit, err.value, err.path) == ("max_nodes", 200, "$.steps[199].operation")
    assert str(err) == (
        "spec has more than max_nodes=200 nodes (node 201 is at $.steps[199].operation)"
    )
    decoded = refusal(json.loads(pipeline_text(300)))  # the same spec as a mapping
    assert str(decoded) == str(err)


def test_the_streaming_count_reads_keys_not_strings() -> None:
    """`"kind"` inside a string value is no node; a key spelled with an escape is one; an
    object with two `kind` keys is one node."""
    quoted = '{"operation": {"kind": "agent_step", "agent_name": "x\\"kind\\": 1"}}'
    text = '{"kind": "pipeline", "steps": [' + ", ".join([quoted] * 199) + "]}"
    assert len(parse_topology(text).steps) == 199  # 200 nodes: at the limit
    escaped = '{"operation": {"kin\\u0064": "agent_step", "agent_name": "x"}}'
    text = '{"kind": "pipeline", "steps": [' + ", ".join([escaped] * 200) + "]}"
    assert refusal(text).path == "$.steps[199].operation"
    twice = '{"kind": "pipeline", "kind": "pipeline", "steps": [' + ", ".join([STEP] * 199) + "]}"
    assert len(parse_topology(twice).steps) == 199


def test_a_spec_at_the_limits_still_parses() -> None:
    spec = parse_topology(pipeline_text(199))
    assert len(spec.steps) == 199
    limits = SpecLimits(max_nodes=3, max_text_bytes=len(pipeline_text(2).encode()))
    assert len(parse_topology(pipeline_text(2), limits).steps) == 2
