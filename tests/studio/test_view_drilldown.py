"""The per-example drill-down's view data: spans matched to the spec's nodes without node ids, the
route taken and why, per-step tokens and cost, the path highlighted, and the answer read from a
stored summary that leads with it."""

from __future__ import annotations

import json

from pydantic import BaseModel

from core.evaluation._run import _answer_first
from core.evaluation.pricing import ModelPrice
from core.ir import parse_topology
from studio.views.drilldown import PATH_COLOUR, answer_text, trace_detail, trace_paths

SPEC = parse_topology(
    json.dumps(
        {
            "kind": "pipeline",
            "steps": [
                {"operation": {"kind": "agent_step", "agent_name": "small"}},
                {
                    "operation": {
                        "kind": "router",
                        "routes": [
                            {
                                "name": "accept",
                                "condition_name": "agree",
                                "step": {"kind": "function_step", "callable_name": "keep"},
                            }
                        ],
                        "fallback_step": {"kind": "agent_step", "agent_name": "big"},
                    }
                },
            ],
        }
    )
)


def _span(i: int, parent: int | None, kind: str, name: str, **extra: object) -> dict:
    return {"span_id": i, "parent_id": parent, "node_id": None, "kind": kind, "name": name,
            "start_ns": i, "duration_ms": 1.0, "usage": [], "attributes": {}, "error": None, **extra}  # fmt: skip


SPANS = [
    _span(0, None, "pipeline", "pipeline"),
    _span(
        1,
        0,
        "agent_step",
        "small",
        usage=[{"model_name": "m:small", "requests": 1, "input_tokens": 100, "output_tokens": 50}],
        attributes={"model_latency_ms": 800.0},
    ),  # fmt: skip
    _span(
        2,
        0,
        "router",
        "router",
        attributes={"route": None, "fallback": True, "reason": "no_condition_matched"},
    ),  # fmt: skip
    _span(
        3,
        2,
        "agent_step",
        "big",
        usage=[{"model_name": "m:big", "requests": 1, "input_tokens": 1000, "output_tokens": 500}],
    ),  # fmt: skip
]
PRICES = {"m:small": ModelPrice(input_usd_per_1k=1.0, output_usd_per_1k=2.0),
          "m:big": ModelPrice(input_usd_per_1k=10.0, output_usd_per_1k=20.0)}  # fmt: skip


def test_spans_match_nodes_by_structure_and_the_route_taken() -> None:
    assert trace_paths(SPEC, SPANS) == {
        0: "$",
        1: "$.steps[0].operation",
        2: "$.steps[1].operation",
        3: "$.steps[1].operation.fallback_step",
    }
    d = trace_detail(SPEC, SPANS, PRICES)
    assert d.routes == ("router [router_1]: fallback (no_condition_matched)",)
    assert d.steps["cost_usd"].tolist() == [0.0, 0.2, 0.0, 20.0]
    assert d.steps["latency_ms"].tolist()[1] == 800.0  # the replayed model latency
    assert d.totals["input_tokens"] == 1100.0
    # the path is yellow: pipeline, small, router, big; not the route's function step
    assert d.dot.count(PATH_COLOUR) == 2 * 4  # fill and border of each


def test_a_chosen_route_names_its_condition() -> None:
    spans = [*SPANS[:2], _span(2, 0, "router", "router", attributes={"route": "accept"}),
             _span(3, 2, "function_step", "keep")]  # fmt: skip
    d = trace_detail(SPEC, spans, PRICES)
    assert d.routes == ("router [router_1]: route 'accept' (condition agree held)",)
    assert d.steps["node"].tolist()[-1] == "$.steps[1].operation.routes[0].step"


def test_no_trace_says_so() -> None:
    d = trace_detail(SPEC, [], PRICES)
    assert d.message is not None and "--traces" in d.message


class _Cand(BaseModel):
    run: str
    answer: str | None


class _State(BaseModel):
    question: str
    candidates: tuple[_Cand, ...] = ()
    final_answer: str | None = None


def test_the_summary_leads_with_the_answer_and_the_drilldown_reads_it() -> None:
    state = _State(
        question="q" * 300, candidates=(_Cand(run="a", answer="7"), _Cand(run="b", answer="18"))
    )
    text = _answer_first(state)
    assert isinstance(text, str) and text.startswith('{"answer":"18","question":"qqq')
    assert answer_text(text[:200] + "…") == "18"
    chosen = state.model_copy(update={"final_answer": "9"})
    assert answer_text(str(_answer_first(chosen))[:200]) == "9"
    assert _answer_first(_State(question="q")) == _State(question="q")  # no answer: unchanged
    assert answer_text('{"question": "long…') == "(not in the stored summary)"
    assert answer_text("42") == "42"
