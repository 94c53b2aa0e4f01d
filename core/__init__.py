"""Topology Studio's engine: the IR, runtime, hydration, evaluation, search and store.

Every public name of the design contract is importable from here directly. The list is curated
in `__all__` and pinned by `tests/test_public_api.py`.
"""

from core.errors import (
    ApplyError,
    BudgetError,
    DatasetError,
    DegenerateSeedError,
    EvaluationError,
    HydrationError,
    PipelineStepError,
    ProblemError,
    RouterError,
    SchemaVersionError,
    SearchError,
    SpecError,
    SpecLimitError,
    StaleTargetError,
    StepExecutionError,
    StoreBusyError,
    StoreError,
    TopologyStudioError,
    UnknownNamesError,
)

__all__ = [
    "ApplyError",
    "BudgetError",
    "DatasetError",
    "DegenerateSeedError",
    "EvaluationError",
    "HydrationError",
    "PipelineStepError",
    "ProblemError",
    "RouterError",
    "SchemaVersionError",
    "SearchError",
    "SpecError",
    "SpecLimitError",
    "StaleTargetError",
    "StepExecutionError",
    "StoreBusyError",
    "StoreError",
    "TopologyStudioError",
    "UnknownNamesError",
]
