"""Archive edge cases: the hypervolume of a single entry, and of no valid entry."""

from __future__ import annotations

import json
import math

import pytest

from core.evaluation.metrics import MetricBundle
from core.search.archive import Archive, ArchiveEntry


def entry(name: str, accuracy: float, cost: float, split: str = "validation") -> ArchiveEntry:
    spec = {
        "kind": "pipeline",
        "steps": [{"operation": {"kind": "agent_step", "agent_name": name}}],
    }
    return ArchiveEntry(
        generation=0,
        spec_json=json.dumps(spec),
        bundles=[MetricBundle(accuracy=accuracy, cost_usd=cost)],
        aggregate_score=accuracy,
        split=split,
    )


def test_the_hypervolume_of_a_single_entry() -> None:
    a = Archive()
    a.add(entry("a", 0.5, 0.01))
    # a fixed reference: the box between the point and the reference
    assert a.hypervolume(reference=[0.0, 0.02]) == pytest.approx(0.5 * 0.01, rel=1e-12)
    assert a.hypervolume(["accuracy"], reference=[0.0]) == 0.5
    assert a.hypervolume(["accuracy", "cost_usd", "depth"], reference=[0.0, 0.02, 2.0]) == (
        pytest.approx(0.5 * 0.01 * 1.0, rel=1e-12)
    )
    # the default reference is the worst value among the valid entries (0 for accuracy): a
    # single entry sits on it along the cost axis and encloses nothing (documented)
    assert a.hypervolume() == 0.0
    # a reference the point does not beat on every axis encloses nothing either
    assert a.hypervolume(reference=[0.0, 0.005]) == 0.0


def test_the_hypervolume_ignores_invalid_entries_and_other_splits() -> None:
    a = Archive()
    a.add(entry("nan", math.nan, 0.0))
    assert a.hypervolume(reference=[0.0, 1.0]) == 0.0
    a.add(entry("mb", 0.9, 0.1, split="minibatch"))
    a.add(entry("val", 0.5, 0.1))
    assert a.hypervolume(reference=[0.0, 1.0], split="validation") == pytest.approx(0.45)
    assert a.hypervolume(reference=[0.0, 1.0]) == pytest.approx(0.81)
