"""JSON paths (`$.steps[0].operation.step`): formatting, parsing, and Pydantic `loc` conversion."""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from typing import Any, cast

from pydantic import ValidationError
from pydantic_core import ErrorDetails

from core.errors import SpecError
from core.ir.models import ATOMIC_KINDS, COMPOSITE_KINDS, KINDS

__all__ = ["join_key", "join_index", "parse_path", "spec_error_from_validation"]

_IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")
_SEGMENT = re.compile(r"\.([A-Za-z_][A-Za-z0-9_]*)|\[(\d+)\]|\[(\"(?:[^\"\\]|\\.)*\")\]")

# Labels Pydantic puts in `loc` for the member of a (non-tagged) union it tried.
_STR_LABELS = frozenset({"str", "constrained-str"})
# ... and for a name with an after-validator: `function-after[_not_blank(), constrained-str]`
_STR_LABEL_SUFFIX = "str]"


def _is_str_label(element: object) -> bool:
    return isinstance(element, str) and (
        element in _STR_LABELS
        or (element.startswith("function-after[") and element.endswith(_STR_LABEL_SUFFIX))
    )


_DICT_LABELS = frozenset({"AgentSpec", "StepConfigSpec", "ToolSpec", "GeneratedToolSpec"})


def join_key(path: str, key: str) -> str:
    """`path` + an object key: `.key` for identifiers, `["key"]` (JSON-quoted) otherwise."""
    if _IDENT.match(key):
        return f"{path}.{key}"
    return f"{path}[{json.dumps(key)}]"


def join_index(path: str, index: int) -> str:
    """`path` + a list index: `[i]`."""
    return f"{path}[{index}]"


def parse_path(path: str) -> list[str | int]:
    """Split a JSON path like `$.steps[0].operation` into `["steps", 0, "operation"]`.

    Raises:
        SpecError: the text is not a path this module writes.
    """
    if not path.startswith("$"):
        raise SpecError(f"not a JSON path (must start with '$'): {path!r}")
    out: list[str | int] = []
    pos = 1
    while pos < len(path):
        m = _SEGMENT.match(path, pos)
        if m is None:
            raise SpecError(f"bad JSON path {path!r} at character {pos}")
        if m.group(1) is not None:
            out.append(m.group(1))
        elif m.group(2) is not None:
            out.append(int(m.group(2)))
        else:
            out.append(cast(str, json.loads(m.group(3))))
        pos = m.end()
    return out


def _tag_message(err: ErrorDetails, *, at_root: bool, topology: bool) -> str:
    """A clearer message for discriminator errors than Pydantic's."""
    expected = COMPOSITE_KINDS if (at_root and topology) else KINDS
    if err["type"] == "union_tag_not_found":
        return f"missing 'kind' (expected one of: {', '.join(expected)})"
    ctx: Mapping[str, Any] = err.get("ctx") or {}
    tag = ctx.get("tag", "?")
    if at_root and topology and tag in ATOMIC_KINDS:
        return (
            f"a topology must be a composite ({', '.join(COMPOSITE_KINDS)}), "
            f"got the atomic kind {tag!r}"
        )
    return f"unknown kind {tag!r} (expected one of: {', '.join(expected)})"


def _convert_loc(loc: Sequence[int | str], data: Any) -> str | None:
    """The JSON path of a Pydantic `loc` in `data`, or None if the error belongs to a union
    member that does not match the input's shape (a str branch tried on a dict, or vice versa)."""
    path = "$"
    current: Any = data
    for element in loc:
        if isinstance(current, Mapping):
            mapping = cast(Mapping[Any, Any], current)
            if isinstance(element, str) and element in mapping:
                path = join_key(path, element)
                current = mapping[element]
                continue
            if element == mapping.get("kind") and element in KINDS:
                continue  # the tagged-union member Pydantic chose
            if _is_str_label(element):
                return None  # the str branch of `AgentSpec | str` tried on an object
            if element in _DICT_LABELS or (isinstance(element, str) and "[" in element):
                continue
            path = (
                join_key(path, str(element))
                if isinstance(element, str)
                else join_index(path, element)
            )
            current = None  # a missing or extra key: nothing below it
            continue
        if isinstance(current, list | tuple) and isinstance(element, int):
            seq = cast(Sequence[Any], current)
            path = join_index(path, element)
            current = seq[element] if 0 <= element < len(seq) else None
            continue
        if isinstance(element, str) and (
            element in _DICT_LABELS or element.startswith("function-after[_ir_agent()")
        ):
            if isinstance(current, str):
                return None  # the object branch of `AgentSpec | str` tried on a string
            continue
        if isinstance(element, str) and (_is_str_label(element) or "[" in element):
            continue
        path = join_index(path, element) if isinstance(element, int) else join_key(path, element)
        current = None
    return path


def spec_error_from_validation(
    exc: ValidationError, data: Any, *, what: str, topology: bool
) -> SpecError:
    """Turn a Pydantic `ValidationError` on `data` into a `SpecError` with one `(path, message)`
    per problem, paths in JSON-path form (`$.routes[0].step.agent_name`)."""
    pairs: list[tuple[str, str]] = []
    fallback: list[tuple[str, str]] = []
    for err in exc.errors(include_url=False):
        msg = err["msg"]
        if err["type"] in ("union_tag_invalid", "union_tag_not_found"):
            msg = _tag_message(err, at_root=not err["loc"], topology=topology)
        elif msg.startswith("Value error, "):
            msg = msg[len("Value error, ") :]
        path = _convert_loc(err["loc"], data)
        fallback.append((path or "$", msg))
        if path is not None and (path, msg) not in pairs:
            pairs.append((path, msg))
    if not pairs:
        pairs = fallback
    lines = "\n".join(f"  {p}: {m}" for p, m in pairs)
    return SpecError(f"invalid {what}: {len(pairs)} problem(s):\n{lines}", pairs)
