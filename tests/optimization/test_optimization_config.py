"""`OptimizationConfig`: GEPA's parameter names, defaults and refusals."""

from __future__ import annotations

import inspect

import gepa
import pytest
from pydantic import ValidationError

from core.optimization import OptimizationConfig


def test_config_maps_to_gepa_optimize_parameters() -> None:
    kwargs = OptimizationConfig().gepa_kwargs()
    assert kwargs == {
        "max_metric_calls": 150,
        "reflection_minibatch_size": 3,
        "candidate_selection_strategy": "pareto",
        "frontier_type": "instance",
        "seed": 0,
    }
    params = inspect.signature(gepa.optimize).parameters
    assert [name for name in kwargs if name not in params] == []


@pytest.mark.parametrize(
    ("field", "value", "message"),
    [
        ("max_metric_calls", 0, "greater than or equal to 1"),
        ("reflection_minibatch_size", 0, "greater than or equal to 1"),
        ("candidate_selection_strategy", "best", "'pareto', 'current_best', 'epsilon_greedy'"),
        ("frontier_type", "global", "'instance', 'objective', 'hybrid' or 'cartesian'"),
    ],
)
def test_config_refuses_bad_values_naming_the_field(
    field: str, value: object, message: str
) -> None:
    with pytest.raises(ValidationError) as exc:
        OptimizationConfig.model_validate({field: value})
    assert exc.value.errors()[0]["loc"] == (field,)
    assert message in str(exc.value)
