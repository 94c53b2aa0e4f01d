"""Canonical form and content hash of a spec (semantics section 6).

The canonical form is the spec's JSON with every field written (defaults included, so a field
set explicitly to its default hashes like one left out), node `id`s stripped, keys sorted, no
whitespace, non-ASCII kept as UTF-8, `-0.0` written as `0.0` (the two are equal). Two specs
have the same canonical form exactly when they describe the same topology: ids and key order do not matter; any structural or value change
does (names, order of steps and routes, numbers). It is what the evaluation cache, the archive's
de-duplication and the run store key on.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any, cast

from core.ir.models import AnyNode

__all__ = ["canonical_dict", "canonical_json", "spec_hash", "strip_node_ids"]


def strip_node_ids(data: dict[str, Any]) -> dict[str, Any]:
    """Remove `id` from every node object (objects with a `kind`) of plain spec data (e.g. a
    `model_dump(mode="json")`) and write every `-0.0` as `0.0`, iteratively, in place.

    Returns:
        `data` itself.
    """
    stack: list[Any] = [data]
    while stack:
        current = stack.pop()
        if isinstance(current, dict):
            obj = cast(dict[str, Any], current)
            if "kind" in obj:
                obj.pop("id", None)
            for key, value in obj.items():
                if type(value) is float and value == 0.0:
                    obj[key] = 0.0  # -0.0 == 0.0, and passes `>= 0`: one value, one hash
                elif isinstance(value, dict | list):
                    stack.append(value)
        elif isinstance(current, list):
            items = cast(list[Any], current)
            for index, value in enumerate(items):
                if type(value) is float and value == 0.0:
                    items[index] = 0.0
                elif isinstance(value, dict | list):
                    stack.append(value)
    return data


def canonical_dict(spec: AnyNode) -> dict[str, Any]:
    """The canonical form as plain data: `spec.model_dump(mode="json")` without node ids (and
    `-0.0` as `0.0`)."""
    return strip_node_ids(spec.model_dump(mode="json"))


def canonical_json(spec: AnyNode) -> str:
    """The canonical JSON text of a spec (sorted keys, ids stripped, defaults included).

    Example: `{"id":"p1","kind":"pipeline",...}` and the same spec without ids give the same
    text.
    """
    return json.dumps(
        canonical_dict(spec),
        sort_keys=True,
        separators=(",", ":"),
        ensure_ascii=False,
        allow_nan=False,
    )


def spec_hash(spec: AnyNode) -> str:
    """SHA-256 of `canonical_json(spec)` (UTF-8), as 64 lowercase hex characters."""
    return hashlib.sha256(canonical_json(spec).encode("utf-8")).hexdigest()
