"""The JSON schema of a topology (validation mode), for editors, docs and designers."""

from __future__ import annotations

import copy
from functools import cache
from typing import Any

from pydantic import TypeAdapter

from core.ir.models import OperationSpec, TopologySpec

__all__ = ["operation_json_schema", "topology_json_schema"]


@cache
def _schema(topology: bool) -> dict[str, Any]:
    adapter: TypeAdapter[Any] = TypeAdapter(TopologySpec if topology else OperationSpec)
    schema = adapter.json_schema(mode="validation")
    schema["title"] = "TopologySpec" if topology else "OperationSpec"
    return schema


def topology_json_schema() -> dict[str, Any]:
    """JSON schema (draft 2020-12) of `TopologySpec`: one of the four composites, recursive
    through `$defs`. A fresh copy on every call (safe to modify)."""
    return copy.deepcopy(_schema(True))


def operation_json_schema() -> dict[str, Any]:
    """JSON schema of `OperationSpec` (any of the six kinds). A fresh copy on every call."""
    return copy.deepcopy(_schema(False))
