"""Property tests over random valid specs *at* the default limits (depth 8, 200 nodes).

`core.ir.testing.topology_specs` draws shallow specs (depth <= 3 by default, and rarely that
deep); the IR's properties (the JSON round trip, the canonical hash stable under ids and key
order, the DOT output's node count, only our validation error on invalid JSON) must hold up to the
limits, so this strategy builds a spine of nested composites of a drawn depth (the maximum, 8, half
of the time), each a random depth-1 composite with the deeper part in one of its child slots,
optionally widened at the top with atomic parallel branches up to the node limit.
"""

from __future__ import annotations

import json
import random
import warnings
from typing import Any

import pydot
import pyparsing
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis.strategies import DrawFn

from core.errors import SpecLimitError
from core.ir import (
    DEFAULT_MAX_DEPTH,
    DEFAULT_MAX_NODES,
    AgentStepSpec,
    AnyNode,
    FunctionStepSpec,
    ParallelSpec,
    PipelineSpec,
    PipelineStepEntry,
    assign_ids,
    check_limits,
    iter_nodes,
    parse_topology,
    replace_at,
    spec_hash,
    spec_metrics,
    to_dot,
)
from core.ir.testing import DEFAULT_AGENT_NAMES, DEFAULT_CALLABLE_NAMES, topology_specs

SETTINGS = settings(
    max_examples=40,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)

atomic = st.one_of(
    st.builds(AgentStepSpec, agent_name=st.sampled_from(DEFAULT_AGENT_NAMES)),
    st.builds(FunctionStepSpec, callable_name=st.sampled_from(DEFAULT_CALLABLE_NAMES)),
)
wrappers = topology_specs(max_depth=1, max_children=2, inline_agents=True, ids="none")


@st.composite
def limit_specs(draw: DrawFn) -> AnyNode:
    depth = draw(st.just(DEFAULT_MAX_DEPTH) | st.integers(1, DEFAULT_MAX_DEPTH))
    node: AnyNode = draw(atomic)
    for level in range(depth):
        if level == depth - 1 and draw(st.booleans()):  # widen the top towards max_nodes
            room = DEFAULT_MAX_NODES - spec_metrics(node).n_nodes - 1
            extra = draw(st.sampled_from([room, 0]) | st.integers(0, room))
            node = ParallelSpec(steps=[node, *[draw(atomic) for _ in range(extra)]])
            break
        wrapper = draw(wrappers)
        slots = [path for path, _ in iter_nodes(wrapper)][1:]  # its (atomic) children
        node = replace_at(wrapper, draw(st.sampled_from(slots)), node)
    return assign_ids(node) if draw(st.booleans()) else node


def shuffled(data: Any, rng: random.Random) -> Any:
    if isinstance(data, dict):
        items = list(data.items())
        rng.shuffle(items)
        return {k: shuffled(v, rng) for k, v in items}
    if isinstance(data, list):
        return [shuffled(v, rng) for v in data]
    return data


def strip_ids(data: Any) -> Any:
    if isinstance(data, dict):
        return {k: strip_ids(v) for k, v in data.items() if not (k == "id" and "kind" in data)}
    if isinstance(data, list):
        return [strip_ids(v) for v in data]
    return data


@SETTINGS
@given(limit_specs())
def test_specs_reach_and_respect_the_limits(spec: AnyNode) -> None:
    metrics = spec_metrics(spec)
    assert 1 <= metrics.depth <= DEFAULT_MAX_DEPTH
    assert metrics.n_nodes <= DEFAULT_MAX_NODES
    check_limits(spec)
    if metrics.depth == DEFAULT_MAX_DEPTH:  # one more level is refused, at the root's child
        deeper = PipelineSpec(steps=[PipelineStepEntry(operation=spec)])
        with pytest.raises(SpecLimitError) as exc:
            parse_topology(deeper.model_dump(mode="json"))
        assert (exc.value.limit, exc.value.value) == ("max_depth", DEFAULT_MAX_DEPTH)


@SETTINGS
@given(limit_specs(), st.booleans())
def test_json_round_trip_at_the_limits(spec: AnyNode, exclude_defaults: bool) -> None:
    text = spec.model_dump_json(exclude_defaults=exclude_defaults)
    assert parse_topology(text) == spec
    assert parse_topology(json.loads(text)) == spec


@SETTINGS
@given(limit_specs(), st.randoms(use_true_random=False), st.data())
def test_hash_at_the_limits(spec: AnyNode, rng: random.Random, data: st.DataObject) -> None:
    dumped = spec.model_dump(mode="json")
    assert spec_hash(parse_topology(json.dumps(shuffled(dumped, rng)))) == spec_hash(spec)
    assert spec_hash(parse_topology(strip_ids(dumped))) == spec_hash(spec)
    path = data.draw(st.sampled_from([p for p, _ in iter_nodes(spec)][1:]))
    changed = replace_at(spec, path, FunctionStepSpec(callable_name="never_in_the_pools"))
    assert spec_hash(changed) != spec_hash(spec)


@settings(max_examples=8, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(limit_specs())
def test_dot_at_the_limits_parses_with_one_node_per_spec_node(spec: AnyNode) -> None:
    with warnings.catch_warnings():
        # pydot's use of deprecated pyparsing APIs (not our warnings)
        warnings.simplefilter("ignore", DeprecationWarning)
        warnings.simplefilter("ignore", getattr(pyparsing, "PyparsingWarning", DeprecationWarning))
        graphs = pydot.graph_from_dot_data(to_dot(spec))
    assert graphs is not None and len(graphs) == 1

    def count(graph: Any) -> int:
        own = [n for n in graph.get_nodes() if n.get_name() not in ("node", "edge", "graph")]
        return len(own) + sum(count(sub) for sub in graph.get_subgraphs())

    assert count(graphs[0]) == spec_metrics(spec).n_nodes
