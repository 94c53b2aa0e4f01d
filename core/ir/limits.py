"""Parsing specs with structural limits checked before deep parsing (semantics section 6, F1).

`parse_topology` / `parse_operation` accept JSON text (str or bytes), a mapping, or an already
built node, and return a validated spec. The order is fixed so that no input, however deep,
reaches a recursive parser before the limits are checked:

0. JSON text longer than `SpecLimits.text_bytes` (default `max_nodes * TEXT_BYTES_PER_NODE`,
   3,276,800 bytes for 200 nodes) is refused before anything reads it, so a text's size never
   decides the cost (a 58 MB text of 10^6 steps used to take seconds and half a gigabyte
   before `max_nodes` refused it);
1. JSON text is pre-scanned (iteratively, strings skipped) for container nesting deeper than any
   spec within `max_depth` can have (`3 * max_depth + 2` containers), counting nodes as it
   streams: it stops at node `max_nodes + 1`, before `json.loads` builds anything;
2. the decoded data is walked iteratively: node count (`max_nodes`) and spec depth (`max_depth`,
   section 6: 0 for an atomic step, 1 + the deepest child for a composite) are checked, and a
   plain copy is made;
3. only then does Pydantic validate the copy (`validate_python`, never `validate_json`, whose
   parser has its own recursion limit and message).

Fast path: JSON text within the size limit, and short enough that it cannot hold more than
`max_nodes` nodes (`_NODE_MIN_CHARS` a node) or else whose `"kind"` tokens are within `max_nodes`,
is validated by pydantic-core's `validate_json` with a schema derived from the models' own
(`core.ir._fast`): the node union is unrolled per level, so pydantic-core itself refuses a
composite past `max_depth`, and the models' Python rules are core rules there (a name's
blank check, an agent step's exactly-one) or checked once after it (unique ids, from the ids it
noted); a spec with an inline `AgentSpec` is also bounded by `_bound.within_limits` (its nesting
does not follow from its depth). A validation error there, or text the checks cannot vouch for,
takes the full path above (steps 1-3), so every error, limit errors with their JSON paths
included, is the full path's. On a 31-node spec the fast path costs about 1.15x the reference
library's plain `validate_json` (the full pre-scan alone took about 500 us).

Errors: `SpecLimitError` (names the limit, its value and the JSON path, e.g.
`$.steps[0].operation.step.steps[1]`) or `SpecError` (one `(path, message)` per problem in
`.errors`). Nothing else escapes, whatever the input.
"""

from __future__ import annotations

import json
import re
import sys
from collections.abc import Mapping
from functools import cache
from typing import Any, cast

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter, ValidationError

from core.errors import SpecError, SpecLimitError
from core.ir._bound import within_limits
from core.ir._fast import AGENT_MARK, IDS_MARK, fast_validator
from core.ir._paths import spec_error_from_validation
from core.ir._scan import check_instance_limits, normalize_raw, scan_json_text
from core.ir.models import (
    COMPOSITE_KINDS,
    ID_MEMO_CONTEXT_KEY,
    NODE_TYPES,
    AnyNode,
    OperationSpec,
    TopologySpec,
)

__all__ = [
    "DEFAULT_MAX_DEPTH",
    "DEFAULT_MAX_NODES",
    "MAX_DEPTH_CEILING",
    "TEXT_BYTES_PER_NODE",
    "SpecLimits",
    "check_limits",
    "parse_operation",
    "parse_topology",
]

DEFAULT_MAX_DEPTH = 8
"""Default `SpecLimits.max_depth`: eight nested composites is far beyond any useful topology
(the meta search's genes default to 4) and small enough for a designer's debug retry to fix."""
DEFAULT_MAX_NODES = 200
"""Default `SpecLimits.max_nodes`: nodes of all six kinds, counted over the whole tree."""
MAX_DEPTH_CEILING = 64
"""The largest `max_depth` allowed. pydantic-core has a fixed recursion guard (255 nested
definitions/containers): it validates a chain of pipelines at most 126 deep and dumps one to JSON
at most 84 deep (measured with pydantic 2.13). 64 keeps every spec that passes the limits
serializable, with room left for the models that embed a spec (a design, an archive entry)."""
TEXT_BYTES_PER_NODE = 16_384
"""Bytes of JSON text allowed per node of `max_nodes` when `SpecLimits.max_text_bytes` is not
set: 16 KiB, room for a node with a long inline prompt; the default limits allow 200 x 16 KiB =
3,276,800 bytes (a canonical 200-node spec of short names is about 15 KB)."""


class SpecLimits(BaseModel):
    """Structural limits checked before a spec is deep-parsed.

    Depth is the section-6 depth: 0 for an atomic step, 1 + the deepest child for a composite, so
    a pipeline of agent steps has depth 1 (classifiers and evaluators add none).
    """

    model_config = ConfigDict(frozen=True, extra="forbid", use_attribute_docstrings=True)

    max_depth: int = Field(default=DEFAULT_MAX_DEPTH, ge=1, le=MAX_DEPTH_CEILING)
    """Maximum spec depth (default 8, at most `MAX_DEPTH_CEILING` = 64)."""
    max_nodes: int = Field(default=DEFAULT_MAX_NODES, ge=1, le=100_000)
    """Maximum number of nodes of any kind (default 200)."""
    max_text_bytes: int | None = Field(default=None, ge=1)
    """Maximum size of a spec given as JSON text, UTF-8 bytes; None: `max_nodes *
    TEXT_BYTES_PER_NODE` (3,276,800 for the default 200 nodes). See `text_bytes`."""

    @property
    def text_bytes(self) -> int:
        """The text size limit in force, bytes: `max_text_bytes`, else `max_nodes *
        TEXT_BYTES_PER_NODE`."""
        if self.max_text_bytes is not None:
            return self.max_text_bytes
        return self.max_nodes * TEXT_BYTES_PER_NODE


_DEFAULT_LIMITS = SpecLimits()
"""`SpecLimits()`, built once (a frozen model): the limits when a caller gives none."""


@cache
def _topology_adapter() -> TypeAdapter[TopologySpec]:
    return TypeAdapter(TopologySpec)


@cache
def _operation_adapter() -> TypeAdapter[OperationSpec]:
    return TypeAdapter(OperationSpec)


def _text_too_big(size: int, unit: str, limits: SpecLimits) -> SpecLimitError:
    limit = limits.text_bytes
    rule = (
        "its max_text_bytes"
        if limits.max_text_bytes is not None
        else f"max_nodes={limits.max_nodes} x {TEXT_BYTES_PER_NODE:,} bytes per node"
    )
    return SpecLimitError(
        f"spec text is {size:,} {unit}, over the limit of {limit:,} bytes ({rule}): refused "
        "before parsing",
        limit="max_text_bytes",
        value=limit,
        path="$",
    )


def _check_size(data: str | bytes | bytearray, limits: SpecLimits) -> None:
    """Refuse text over `limits.text_bytes` (UTF-8 bytes) without decoding or copying a large
    one: a str longer than the limit in characters is over it in bytes too; one within it is
    measured exactly only when it could be over (more than a quarter of the limit)."""
    limit = limits.text_bytes
    if isinstance(data, bytes | bytearray):
        if len(data) > limit:
            raise _text_too_big(len(data), "bytes", limits)
        return
    if len(data) > limit:
        raise _text_too_big(len(data), "characters", limits)
    if len(data) * 4 > limit:
        size = len(data.encode("utf-8", "surrogatepass"))
        if size > limit:
            raise _text_too_big(size, "bytes", limits)


def _decode(data: str | bytes | bytearray, limits: SpecLimits) -> Any:
    _check_size(data, limits)
    if isinstance(data, bytes | bytearray):
        try:
            text = bytes(data).decode("utf-8-sig")
        except UnicodeDecodeError as exc:
            raise SpecError(
                f"invalid spec: not UTF-8 text ({exc.reason} at byte {exc.start})",
                [("$", f"not UTF-8 text ({exc.reason} at byte {exc.start})")],
            ) from None
    else:
        text = data
    scan_json_text(text, max_depth=limits.max_depth, max_nodes=limits.max_nodes)
    try:
        return json.loads(text)
    except RecursionError:  # pragma: no cover - the pre-scan caps nesting well below this
        raise SpecLimitError(
            f"JSON nesting too deep for max_depth={limits.max_depth}",
            limit="max_depth",
            value=limits.max_depth,
            path="$",
        ) from None
    except ValueError as exc:  # JSONDecodeError, and int-conversion limits
        raise SpecError(f"invalid JSON: {exc}", [("$", f"invalid JSON: {exc}")]) from None


_LETTER_ESCAPE = re.compile(r"\\u00[4-7]")  # \u0040..\u007F: the escapes that spell letters


@cache
def _long_int(digits: int) -> re.Pattern[str]:
    return re.compile(f"[0-9]{{{digits + 1}}}")


_NODE_MIN_CHARS = 17
"""Characters of JSON text that each node of a valid spec without an inline `AgentSpec` holds
apart from every other node: its braces, the key `"kind"`, a colon and its kind as a string, at
least `"router"` (2 + 6 + 1 + 8). Such a spec has no other object with a `kind` key (every model
forbids unknown fields), so its node count is at most `len(text) // 17`, and a text shorter than
`17 * (max_nodes + 1)` characters needs no count."""


def _validate_fast(
    data: str | bytes | bytearray, limits: SpecLimits, *, topology: bool
) -> AnyNode | None:
    """The spec `data` holds, validated by the fast schema (`core.ir._fast`, where pydantic-core
    enforces the depth limit) after the size check and the node count, or None: take the full
    path (it explains any problem).

    Raises:
        SpecLimitError: the text is over `limits.text_bytes` (the full path's first check too).
    """
    _check_size(data, limits)
    if isinstance(data, str):
        text = data
    else:
        if data[:3] == b"\xef\xbb\xbf":  # a BOM: the full path decodes it
            return None
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError:
            return None
    max_nodes = limits.max_nodes
    if len(text) >= _NODE_MIN_CHARS * (max_nodes + 1):  # long enough to hold too many nodes
        if "\\" in text and _LETTER_ESCAPE.search(text) is not None:
            return None  # an escaped letter could spell a `kind` key the count would miss
        if text.count('"kind"') > max_nodes:  # every node's key
            return None
    digits = sys.get_int_max_str_digits()
    if digits and len(text) > digits and _long_int(digits).search(text) is not None:
        return None  # json.loads refuses it on the full path, pydantic-core might not
    context: dict[str, Any] = {}
    try:
        spec = fast_validator(limits.max_depth, topology=topology).validate_json(
            data, context=context
        )
    except ValidationError:
        return None
    ids: list[str] | None = context.get(IDS_MARK)
    if ids is not None and len(set(ids)) != len(ids):
        return None  # a repeated node id: the full path names both places
    if AGENT_MARK in context and not within_limits(
        text, max_depth=limits.max_depth, max_nodes=max_nodes
    ):
        return None  # an inline AgentSpec: the nesting does not follow from the depth
    return cast(AnyNode, spec)


def check_limits(spec: AnyNode, limits: SpecLimits | None = None) -> None:
    """Check an already-built spec against `limits` (default `SpecLimits()`).

    Raises:
        SpecLimitError: names the limit and the JSON path where it is crossed.
    """
    lim = limits or SpecLimits()
    check_instance_limits(spec, max_depth=lim.max_depth, max_nodes=lim.max_nodes)


def _parse(data: Any, limits: SpecLimits | None, *, topology: bool, fast: bool = True) -> Any:
    """`parse_topology` / `parse_operation`; `fast=False` skips the fast path (for tests that
    compare the two)."""
    lim = limits or _DEFAULT_LIMITS
    if fast and isinstance(data, str | bytes | bytearray):
        spec = _validate_fast(data, lim, topology=topology)
        if spec is not None:
            return spec
    what = "topology spec" if topology else "operation spec"
    if isinstance(data, NODE_TYPES):
        node: AnyNode = data
        if topology and node.node_kind not in COMPOSITE_KINDS:
            msg = (
                f"a topology must be a composite ({', '.join(COMPOSITE_KINDS)}), got the atomic "
                f"kind {node.node_kind!r}"
            )
            raise SpecError(f"invalid {what}: {msg}", [("$", msg)])
        check_limits(node, lim)
        return node
    if isinstance(data, str | bytes | bytearray):
        data = _decode(data, lim)
    if not isinstance(data, Mapping):
        msg = f"a spec must be a JSON object, got {type(data).__name__}"
        raise SpecError(f"invalid {what}: {msg}", [("$", msg)])
    raw = normalize_raw(
        cast(Mapping[str, Any], data), max_depth=lim.max_depth, max_nodes=lim.max_nodes
    )
    adapter = _topology_adapter() if topology else _operation_adapter()
    try:
        return adapter.validate_python(raw, context={ID_MEMO_CONTEXT_KEY: {}})
    except ValidationError as exc:
        raise spec_error_from_validation(exc, raw, what=what, topology=topology) from None


def parse_topology(
    data: str | bytes | Mapping[str, Any] | BaseModel, limits: SpecLimits | None = None
) -> TopologySpec:
    """Parse and validate a whole topology (one of the four composites).

    Args:
        data: JSON text (str, or UTF-8 bytes), a mapping, or an already-built spec (checked
            against the limits and returned as is).
        limits: structural limits; default `SpecLimits()` (depth 8, 200 nodes, and JSON text
            of at most 3,276,800 bytes).

    Returns:
        The validated `TopologySpec`.

    Raises:
        SpecLimitError: text over `limits.text_bytes` (checked first, `limit="max_text_bytes"`),
            too deep or too many nodes (names the limit and the JSON path).
        SpecError: anything else (invalid JSON, unknown kind, a field out of range, ...), with
            one `(json_path, message)` per problem in `.errors`.
    """
    return cast(TopologySpec, _parse(data, limits, topology=True))


def parse_operation(
    data: str | bytes | Mapping[str, Any] | BaseModel, limits: SpecLimits | None = None
) -> OperationSpec:
    """Parse and validate any node (atomic or composite); see `parse_topology`.

    Raises:
        SpecLimitError: text over `limits.text_bytes`, too deep or too many nodes.
        SpecError: anything else.
    """
    return cast(OperationSpec, _parse(data, limits, topology=False))
