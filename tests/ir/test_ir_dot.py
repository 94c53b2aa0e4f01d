"""DOT rendering: structure, escaping, highlight; the output parses with pydot."""

from __future__ import annotations

import warnings
from typing import Any

import pydot
import pyparsing

from core.ir import (
    AgentStepSpec,
    FunctionStepSpec,
    ParallelSpec,
    PipelineSpec,
    PipelineStepEntry,
    RefinementLoopSpec,
    RouterSpec,
    RouteSpec,
    assign_ids,
    to_dot,
)
from core.ir.dot import dot_escape

A = AgentStepSpec(agent_name="solver")
F = FunctionStepSpec(callable_name="upper")


# pydot's parser calls pyparsing APIs that pyparsing deprecates: not our warnings, and pytest's
# `filterwarnings = error` would fail on them. PyparsingDeprecationWarning is both a
# DeprecationWarning and a PyparsingWarning (a UserWarning); ignoring both bases keeps this
# working if pyparsing moves a warning to its other base.
PARSER_WARNINGS: tuple[type[Warning], ...] = (
    DeprecationWarning,
    getattr(pyparsing, "PyparsingWarning", DeprecationWarning),
)


def parse(dot: str) -> Any:
    """Parse DOT with pydot, its parser's own warnings ignored (see `PARSER_WARNINGS`)."""
    with warnings.catch_warnings():
        for category in PARSER_WARNINGS:
            warnings.simplefilter("ignore", category)
        graphs = pydot.graph_from_dot_data(dot)
    assert graphs is not None and len(graphs) == 1
    return graphs[0]


def dot_nodes(graph: Any) -> list[Any]:
    out = [n for n in graph.get_nodes() if n.get_name() not in ("node", "edge", "graph")]
    for sub in graph.get_subgraphs():
        out.extend(dot_nodes(sub))
    return out


def edges(graph: Any) -> list[tuple[str, str, dict[str, str]]]:
    return [(e.get_source(), e.get_destination(), e.get_attributes()) for e in graph.get_edges()]


def test_escape() -> None:
    assert dot_escape('a"b\\c\nd<e>{f}|g\r') == 'a\\"b\\\\c\\nd\\<e\\>\\{f\\}\\|g'


def test_pipeline_edges_and_labels() -> None:
    spec = PipelineSpec(
        steps=[PipelineStepEntry(operation=A), PipelineStepEntry(operation=F)], name="main"
    )
    graph = parse(to_dot(spec, title="Seed"))
    assert [n.get_name() for n in dot_nodes(graph)] == ["n0", "n1", "n2"]
    assert [(s, d, a["label"]) for s, d, a in edges(graph)] == [
        ("n0", "n1", '"1"'),
        ("n1", "n2", '"2"'),
    ]
    labels = {n.get_name(): n.get_label() for n in dot_nodes(graph)}
    assert labels == {
        "n0": '"pipeline\\nmain\\n2 steps"',
        "n1": '"agent_step\\nagent: solver"',
        "n2": '"function_step\\nfn: upper"',
    }
    assert graph.get_label() == '"Seed"'


def test_router_parallel_loop_edges() -> None:
    router = RouterSpec(
        routes=[
            RouteSpec(name="math", step=A, condition_name="is_math"),
            RouteSpec(name="code", step=ParallelSpec(steps=[F, A], merge="first_wins")),
        ],
        fallback_step=F,
    )
    spec = RefinementLoopSpec(step=router, evaluator="judge", state_updater_name="u")
    graph = parse(to_dot(spec))
    assert len(dot_nodes(graph)) == 7
    assert edges(graph) == [
        ("n0", "n1", {"label": '"step"'}),
        (
            "n1",
            "n0",
            {"style": "dashed", "constraint": "false", "label": '"evaluate: judge\\nmax 5"'},
        ),
        ("n1", "n2", {"label": '"math\\nif is_math"'}),
        ("n1", "n3", {"label": '"code"'}),
        ("n1", "n6", {"style": "dashed", "label": '"fallback"'}),
        ("n3", "n4", {"style": "bold"}),
        ("n3", "n5", {"style": "bold"}),
        ("n4", "n3", {"style": "dotted", "constraint": "false", "label": '"merge: first_wins"'}),
        ("n5", "n3", {"style": "dotted", "constraint": "false", "label": '"merge: first_wins"'}),
    ]


def test_highlight_and_hostile_labels() -> None:
    nasty = 'x"} -> evil [label="<b>|{' + "\\\n"
    spec = assign_ids(
        PipelineSpec(
            steps=[PipelineStepEntry(operation=AgentStepSpec(agent_name=nasty, id='n0"]'))],
            name=nasty,
        )
    )
    dot = to_dot(spec, highlight={'n0"]': "#2ca02c", "pipeline_1": 'red" x'}, title=nasty)
    graph = parse(dot)
    nodes = dot_nodes(graph)
    assert len(nodes) == 2
    agent = next(n for n in nodes if n.get_name() == "n1")
    assert agent.get("fillcolor") == '"#2ca02c"'
    assert agent.get("penwidth") == "3"
    assert agent.get("tooltip") == '"n0\\"]"'
    assert len(edges(graph)) == 1


def test_a_one_step_pipeline_and_a_router_without_classifier_read_right() -> None:
    pipe = PipelineSpec(steps=[PipelineStepEntry(operation=A)], name="main")
    router = RouterSpec(routes=[RouteSpec(name="math", step=A, condition_name="is_math")])
    assert {n.get_name(): n.get_label() for n in dot_nodes(parse(to_dot(pipe)))}["n0"] == (
        '"pipeline\\nmain\\n1 step"'
    )
    assert {n.get_name(): n.get_label() for n in dot_nodes(parse(to_dot(router)))}["n0"] == (
        '"router\\nclassifier: none (route conditions)"'
    )
