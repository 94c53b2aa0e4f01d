"""Property tests over random valid specs (strategies from `core.ir.testing`)."""

from __future__ import annotations

import json
import random
import warnings
from typing import Any

import pydot
import pyparsing
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from core.errors import SpecError
from core.ir import (
    AnyNode,
    FunctionStepSpec,
    PipelineSpec,
    PipelineStepEntry,
    assign_ids,
    iter_nodes,
    parse_design,
    parse_topology,
    replace_at,
    spec_hash,
    spec_metrics,
    to_dot,
)
from core.ir.testing import corrupted_spec_texts, topology_specs

SETTINGS = settings(
    max_examples=75,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)

specs = topology_specs(inline_agents=True)


def shuffled(data: Any, rng: random.Random) -> Any:
    """The same JSON data with every object's keys in a random order."""
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
@given(specs, st.booleans())
def test_json_round_trip(spec: AnyNode, exclude_defaults: bool) -> None:
    text = spec.model_dump_json(exclude_defaults=exclude_defaults)
    assert parse_topology(text) == spec
    assert parse_topology(json.loads(text)) == spec


@SETTINGS
@given(specs, st.randoms(use_true_random=False))
def test_hash_stable_under_ids_and_key_order(spec: AnyNode, rng: random.Random) -> None:
    data = spec.model_dump(mode="json")
    reordered = parse_topology(json.dumps(shuffled(data, rng)))
    without_ids = parse_topology(strip_ids(data))
    assert spec_hash(reordered) == spec_hash(spec)
    assert spec_hash(without_ids) == spec_hash(spec)
    assert spec_hash(assign_ids(without_ids)) == spec_hash(spec)


@SETTINGS
@given(specs, st.data())
def test_hash_differs_when_structure_differs(spec: AnyNode, data: st.DataObject) -> None:
    paths = [p for p, _ in iter_nodes(spec)]
    path = data.draw(st.sampled_from(paths[1:] or ["$"]))
    marker = FunctionStepSpec(callable_name="never_in_the_pools")
    if path == "$":
        changed: AnyNode = PipelineSpec(steps=[PipelineStepEntry(operation=spec)])
    else:
        changed = replace_at(spec, path, marker)
    assert spec_hash(changed) != spec_hash(spec)
    wrapped = PipelineSpec(steps=[PipelineStepEntry(operation=spec)])
    assert spec_hash(wrapped) != spec_hash(spec)


@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(topology_specs(max_depth=2, inline_agents=True))
def test_dot_parses_and_has_one_node_per_spec_node(spec: AnyNode) -> None:
    with warnings.catch_warnings():
        # pydot's use of deprecated pyparsing APIs (not our warnings): ignore both bases of
        # PyparsingDeprecationWarning, DeprecationWarning and PyparsingWarning
        warnings.simplefilter("ignore", DeprecationWarning)
        warnings.simplefilter("ignore", getattr(pyparsing, "PyparsingWarning", DeprecationWarning))
        graphs = pydot.graph_from_dot_data(to_dot(assign_ids(spec), title="t"))
    assert graphs is not None and len(graphs) == 1

    def count(graph: Any) -> int:
        own = [n for n in graph.get_nodes() if n.get_name() not in ("node", "edge", "graph")]
        return len(own) + sum(count(sub) for sub in graph.get_subgraphs())

    assert count(graphs[0]) == spec_metrics(spec).n_nodes


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.one_of(corrupted_spec_texts(max_depth=2), st.text(max_size=200), st.binary(max_size=200)))
def test_random_invalid_input_only_raises_spec_error(payload: str | bytes) -> None:
    for parse in (parse_topology, parse_design):
        try:
            parse(payload)
        except SpecError:
            pass


@SETTINGS
@given(specs)
def test_ids_assigned_are_unique_and_complete(spec: AnyNode) -> None:
    ids = [n.id for _, n in iter_nodes(assign_ids(spec))]
    assert None not in ids
    assert len(set(ids)) == len(ids)
