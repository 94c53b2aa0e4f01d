"""Limit checks that run before any deep parsing: a JSON text pre-scan and a raw-data walk.

Both are iterative (no recursion), so absurdly deep input costs time linear in its size and never
reaches a recursive parser (`json.loads`, Pydantic) that would fail with a recursion message.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator, Mapping, Sequence
from typing import Any, cast

from core.errors import SpecError, SpecLimitError
from core.ir._paths import join_index, join_key
from core.ir.models import COMPOSITE_KINDS, NODE_TYPES, AnyNode, child_slots

__all__ = [
    "TEXT_NESTING_CAP",
    "check_instance_limits",
    "json_nesting_cap",
    "normalize_raw",
    "scan_json_text",
]

# JSON tokens that matter for nesting and paths: strings (skipped whole), brackets, ',' and ':'.
_TOKEN = re.compile(r'"[^"\\]*(?:\\.[^"\\]*)*"|[\[\]{},:]')

# One composite level adds at most 3 JSON containers before its child node (e.g. a pipeline's
# `steps` list, the entry object, then the operation object), and a leaf adds at most 2 more (the
# node object and an inline `AgentSpec`), so a spec of depth D nests at most 3*D + 2 containers.
_CONTAINERS_PER_LEVEL = 3
# keys whose values are JSON Schemas (an inline AgentSpec's output, a generated tool's
# parameters), copied as they are and checked by their own model against `SchemaLimits`
_OPAQUE_KEYS = frozenset({"output_schema", "parameters"})
_LEAF_CONTAINERS = 2


def json_nesting_cap(max_depth: int) -> int:
    """The most JSON containers a spec of depth `max_depth` can nest (`3 * max_depth + 2`)."""
    return _CONTAINERS_PER_LEVEL * max_depth + _LEAF_CONTAINERS


def _frames_path(frames: list[list[Any]]) -> str:
    path = "$"
    for frame in frames[:-1]:
        kind, where = frame[0], frame[1]
        if kind == "a":
            path = join_index(path, cast(int, where))
        else:
            path = join_key(path, cast(str, where) if where is not None else "?")
    return path


def _decode_key(token: str) -> str:
    try:
        value = json.loads(token)
    except ValueError:
        return token.strip('"')
    return value if isinstance(value, str) else token


TEXT_NESTING_CAP = 256
"""JSON text may nest up to this many containers before `json.loads` sees it (at least): far
below the interpreter's recursion limit, and loose enough that a spec a little past `max_depth`
is reported by the precise spec-level check, with the composite's path."""


def _is_kind_key(token: str) -> bool:
    """Whether a JSON string token is the key `kind` (escapes decoded: `"kin\\u0064"` is too)."""
    return token == '"kind"' or (
        "\\" in token and len(token) <= 40 and _decode_key(token) == "kind"
    )


def scan_json_text(text: str, *, max_depth: int, max_nodes: int | None = None) -> None:
    """Check that JSON text nests at most `max(json_nesting_cap(max_depth), TEXT_NESTING_CAP)`
    containers, so the recursive JSON parser never sees absurd nesting, and (with `max_nodes`)
    that it holds at most `max_nodes` nodes, counted while streaming: the scan stops at node
    `max_nodes + 1`, so a huge text costs no more than its first `max_nodes` nodes.

    A node is an object with a `kind` key (as in `normalize_raw`), counted once when its first
    `kind` key is met. Strings are skipped whole (brackets and `"kind"` inside them do not
    count). Invalid JSON is not reported here (the JSON parser does that next); only nesting
    that no spec within `max_depth` can have, and more nodes than `max_nodes`.

    Raises:
        SpecLimitError: `limit="max_depth"`, with the JSON path of the first container too deep;
            `limit="max_nodes"`, with the path of the first node past the limit (the same
            message as `normalize_raw`'s).
    """
    cap = max(json_nesting_cap(max_depth), TEXT_NESTING_CAP)
    # Each frame: ["o", current key, counted as a node] for objects, ["a", current index] for
    # arrays.
    frames: list[list[Any]] = []
    nodes = 0
    last_string: str | None = None
    for match in _TOKEN.finditer(text):
        token = match.group()
        first = token[0]
        if first == '"':
            last_string = token
        elif first in "{[":
            frames.append(["o", None, False] if first == "{" else ["a", 0])
            if len(frames) > cap:
                # the path of the container just opened: every enclosing frame's key/index
                path = _frames_path(frames)
                raise SpecLimitError(
                    f"JSON nesting deeper than {cap} levels at {path}: no spec within "
                    f"max_depth={max_depth} nests that deep",
                    limit="max_depth",
                    value=max_depth,
                    path=path,
                )
        elif first in "}]":
            if frames:
                frames.pop()
        elif first == ":":
            if frames and frames[-1][0] == "o" and last_string is not None:
                frame = frames[-1]
                if max_nodes is not None and not frame[2] and _is_kind_key(last_string):
                    frame[2] = True
                    nodes += 1
                    if nodes > max_nodes:
                        raise _limit_nodes(_frames_path(frames), max_nodes)
                frame[1] = _decode_key(last_string)
        elif frames and frames[-1][0] == "a":  # ','
            frames[-1][1] = cast(int, frames[-1][1]) + 1


def _limit_depth(path: str, level: int, max_depth: int) -> SpecLimitError:
    return SpecLimitError(
        f"spec nesting depth exceeds max_depth={max_depth}: the composite at {path} is at depth "
        f"{level}",
        limit="max_depth",
        value=max_depth,
        path=path,
    )


def _limit_nodes(path: str, max_nodes: int) -> SpecLimitError:
    return SpecLimitError(
        f"spec has more than max_nodes={max_nodes} nodes (node {max_nodes + 1} is at {path})",
        limit="max_nodes",
        value=max_nodes,
        path=path,
    )


def _check_string(value: str, path: str) -> None:
    try:
        value.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise SpecError(
            f"invalid text at {path}: not valid Unicode ({exc.reason})",
            [(path, f"not valid Unicode ({exc.reason})")],
        ) from None


class _Counter:
    __slots__ = ("max_depth", "max_nodes", "nodes")

    def __init__(self, max_depth: int, max_nodes: int) -> None:
        self.max_depth = max_depth
        self.max_nodes = max_nodes
        self.nodes = 0

    def node(self, path: str, kind: object, parent_level: int) -> int:
        """Count one node; return its composite level (composites on its path, itself included)."""
        self.nodes += 1
        if self.nodes > self.max_nodes:
            raise _limit_nodes(path, self.max_nodes)
        level = parent_level + (1 if kind in COMPOSITE_KINDS else 0)
        if level > self.max_depth:
            raise _limit_depth(path, level, self.max_depth)
        return level


def _check_instance(node: AnyNode, path: str, parent_level: int, counter: _Counter) -> None:
    """Count an already-built node instance found inside raw data, and its subtree."""
    stack: list[tuple[str, AnyNode, int]] = [(path, node, parent_level)]
    while stack:
        current_path, current, level = stack.pop()
        own = counter.node(current_path, current.node_kind, level)
        for suffix, child in reversed(child_slots(current)):
            stack.append((current_path + suffix, child, own))


def check_instance_limits(node: AnyNode, *, max_depth: int, max_nodes: int) -> None:
    """Check an already-built spec against the limits (same rules as `normalize_raw`).

    Raises:
        SpecLimitError: the depth or node limit is exceeded (names the limit and the path).
    """
    _check_instance(node, "$", 0, _Counter(max_depth, max_nodes))


def normalize_raw(data: Mapping[str, Any], *, max_depth: int, max_nodes: int) -> dict[str, Any]:
    """Check raw spec data against the limits and return a plain copy (dicts, lists, scalars).

    A node is any object with a `kind` key. Its composite level is the number of composite nodes
    on its path, itself included; a spec's depth (section 6) is the largest such level, so a
    composite at level `max_depth + 1` is where the limit is crossed. Containers nested deeper
    than any spec within `max_depth` could be (`json_nesting_cap`) are refused too, whatever they
    hold. Node instances (already-built specs) inside the data are counted as well.

    Raises:
        SpecLimitError: the depth or node limit is exceeded (names the limit and the path).
        SpecError: a key that is not a string, or text that is not valid Unicode.
    """
    cap = json_nesting_cap(max_depth)
    counter = _Counter(max_depth, max_nodes)

    def too_deep(path: str) -> SpecLimitError:
        return SpecLimitError(
            f"JSON nesting deeper than {cap} levels at {path}: no spec within "
            f"max_depth={max_depth} nests that deep",
            limit="max_depth",
            value=max_depth,
            path=path,
        )

    def items_of(src: Any, path: str) -> Iterator[tuple[str, Any]]:
        if isinstance(src, Mapping):
            for key, value in cast(Mapping[Any, Any], src).items():
                if not isinstance(key, str):
                    raise SpecError(
                        f"invalid key at {path}: keys must be strings, got {type(key).__name__}",
                        [(path, f"keys must be strings, got {type(key).__name__}")],
                    )
                _check_string(key, path)
                yield key, value
        else:
            for index, value in enumerate(cast(Sequence[Any], src)):
                yield join_index(path, index), value

    # Pre-order DFS with an explicit stack: (items iterator, target container, path, depth, level)
    root: dict[str, Any] = {}
    level0 = counter.node("$", data["kind"], 0) if "kind" in data else 0
    stack: list[tuple[Iterator[tuple[str, Any]], Any, str, int, int]] = [
        (items_of(data, "$"), root, "$", 1, level0)
    ]
    while stack:
        items, target, path, depth, level = stack[-1]
        entry = next(items, None)
        if entry is None:
            stack.pop()
            continue
        key_or_path, value = entry
        is_map = isinstance(target, dict)
        child_path = join_key(path, key_or_path) if is_map else key_or_path
        if isinstance(value, str):
            _check_string(value, child_path)
            converted: Any = value
        elif is_map and key_or_path in _OPAQUE_KEYS and isinstance(value, Mapping):
            # a JSON Schema is not spec structure (its `kind` keys are property names): the
            # AgentSpec validator checks it against its own limits (`SchemaLimits`)
            converted = cast(Mapping[str, Any], value)
        elif isinstance(value, Mapping | list | tuple):
            if depth + 1 > cap:
                raise too_deep(child_path)
            child_level = level
            if isinstance(value, Mapping):
                mapping = cast(Mapping[Any, Any], value)
                if "kind" in mapping:
                    child_level = counter.node(child_path, mapping["kind"], level)
                converted = {}
            else:
                converted = []
            stack.append(
                (items_of(value, child_path), converted, child_path, depth + 1, child_level)
            )
        else:
            if isinstance(value, NODE_TYPES):
                _check_instance(value, child_path, level, counter)
            converted = value
        if is_map:
            cast(dict[str, Any], target)[key_or_path] = converted
        else:
            cast(list[Any], target).append(converted)
    return root
