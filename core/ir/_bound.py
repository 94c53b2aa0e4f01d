"""A cheap, conservative limit check of JSON text: the fast path of `parse_topology`.

The full pre-scan (`_scan.scan_json_text`, then `normalize_raw`) walks every token in Python and
cost about 3x the Pydantic validation it protects. `within_limits` answers a weaker question
with a few C-level string operations and one short loop: "if this text is valid JSON, is it
certainly within the limits?". True lets the text go straight to Pydantic's `validate_json`;
False (or any validation error) sends it down the full path, which explains the problem with
the limit and the JSON path as before. So the answer may be False for text that is within the
limits (a bound, not a measure), never True for text that is not.

The rule, for text that is valid JSON (anything else fails `validate_json` and takes the full
path anyway):

- strings are dropped whole, except a composite kind token (`"pipeline"`, `"parallel"`,
  `"router"`, `"refinement_loop"`), which becomes a mark on the innermost enclosing container
  (a string with such a value elsewhere, e.g. a route named `"router"`, only makes the bound
  looser); escaped backslashes and quotes are removed first, so every remaining `"` delimits a
  string; a text with `\\u00XX` escapes of ASCII letters (which could spell a kind) is not
  bounded;
- nodes (objects with a `kind` key) <= `"kind"` tokens, checked against `max_nodes`;
- container nesting <= `json_nesting_cap(max_depth)` (what `normalize_raw` allows);
- spec depth <= the largest number of marked containers on one path (every composite node is
  an object holding its kind string), checked against `max_depth`;
- an integer of more digits than `sys.get_int_max_str_digits()` is not bounded (`json.loads`
  refuses it where pydantic-core might not).
"""

from __future__ import annotations

import re
import sys
from functools import cache

from core.ir._scan import json_nesting_cap
from core.ir.models import COMPOSITE_KINDS

__all__ = ["within_limits"]

_MARK = "\x01"  # a raw control character cannot appear in valid JSON, so it is free to use
_COMPOSITE_TOKENS = tuple(f'"{kind}"' for kind in COMPOSITE_KINDS)
_LETTER_ESCAPE = re.compile(r"\\u00[4-7]")  # \u0040..\u007F: the escapes that spell letters
_KEEP = "{}[]" + _MARK
_DROP = {i: None for i in range(128) if chr(i) not in _KEEP}
"""`str.translate` table deleting every ASCII character but brackets and the mark."""


@cache
def _long_int(digits: int) -> re.Pattern[str]:
    return re.compile(f"[0-9]{{{digits + 1}}}")


def within_limits(text: str, *, max_depth: int, max_nodes: int) -> bool:
    """Whether `text`, if it is valid JSON, is certainly within the limits (see the module
    docstring): at most `max_nodes` nodes, containers nested at most
    `json_nesting_cap(max_depth)` deep, and spec depth at most `max_depth`.

    Costs about a tenth of validating a 31-node spec; False means "use the full check", not
    "over the limit".
    """
    # first what reads the text without copying it (a huge text is refused here, cheaply)
    if text.count('"kind"') > max_nodes:  # every node's key; escapes only add matches
        return False
    escaped = "\\" in text
    if escaped and _LETTER_ESCAPE.search(text) is not None:
        return False
    digits = sys.get_int_max_str_digits()
    if digits and len(text) > digits and _long_int(digits).search(text) is not None:
        return False
    if escaped:
        text = text.replace("\\\\", "").replace('\\"', "")
    for token in _COMPOSITE_TOKENS:
        text = text.replace(token, _MARK)
    # every remaining `"` delimits a string: the even parts are what lies outside strings
    compact = "".join(text.split('"')[::2]).translate(_DROP)
    cap = json_nesting_cap(max_depth) + 1  # + the sentinel level below the top container
    deepest = [0]  # per open container: the most marked containers on a path below it
    marked = [0]  # per open container: 1 if a composite kind token is directly inside
    for char in compact:
        if char == "{" or char == "[":
            deepest.append(0)
            marked.append(0)
            if len(deepest) > cap:
                return False
        elif char == _MARK:
            marked[-1] = 1
        elif char == "}" or char == "]":
            if len(deepest) == 1:
                return False  # unbalanced: not JSON
            depth = deepest.pop() + marked.pop()
            if depth > deepest[-1]:
                deepest[-1] = depth
        else:
            return False  # a character (non-ASCII) that JSON allows only inside strings
    return len(deepest) == 1 and deepest[0] <= max_depth
