"""A safe arithmetic evaluator and the checker of a solution's `<<a*b=c>>` annotations.

GSM8K solutions mark every calculation with a calculator annotation, e.g. `<<48/2=24>>24`. The
checker recomputes the left side with `safe_eval` (an AST walk, never `eval`) and compares it
with the stated result.

`safe_eval` accepts only: numeric literals (ints and decimals, not bools or complex), the binary
operators `+ - * /`, unary `-` and `+`, and parentheses. Anything else (names, calls,
attributes, `**`, `//`, `%`, comparisons, strings, subscripts, ...) is rejected, and so is input
longer than `MAX_EXPR_CHARS` characters or with more than `MAX_NODES` syntax nodes. Arithmetic
is exact (`fractions.Fraction`), so `0.1 + 0.2` is exactly `3/10`.

An annotation is **checkable** when it has exactly one `=` and its left side passes `safe_eval`
(thousands commas between digits are removed first); otherwise (variables like `x`, `%`, times
like `2:15`, a division by zero) it is **uncheckable** and neither passes nor fails. A checkable
annotation is **correct** when the stated result is within `1e-6` relative of the computed value
(float noise such as `10/3=3.3333333333333335`), or, for a result shown with `d` decimals,
within half a unit of its last decimal (`10/3=3.33`).
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass
from fractions import Fraction
from functools import lru_cache

__all__ = [
    "MAX_EXPR_CHARS",
    "MAX_NODES",
    "ArithmeticCheck",
    "UnsafeExpressionError",
    "check_arithmetic",
    "safe_eval",
]

MAX_EXPR_CHARS = 200
"""Longest expression `safe_eval` accepts, in characters."""
MAX_NODES = 100
"""Most syntax nodes `safe_eval` accepts in one expression."""

_ANNOTATION = re.compile(r"<<([^<>]*)>>")
_THOUSANDS = re.compile(r"(?<=\d),(?=\d{3}(?!\d))")
_REL_TOL = Fraction(1, 10**6)


class UnsafeExpressionError(ValueError):
    """An expression `safe_eval` refuses or cannot compute (the message says why)."""


def _literal(value: object) -> Fraction:
    if type(value) is int:
        return Fraction(value)
    if type(value) is float:
        try:
            return Fraction(repr(value))
        except (ValueError, OverflowError) as exc:
            raise UnsafeExpressionError(f"number out of range: {value!r}") from exc
    raise UnsafeExpressionError(f"only numbers are allowed, not {type(value).__name__} {value!r}")


def _walk(node: ast.AST) -> Fraction:
    if isinstance(node, ast.Expression):
        return _walk(node.body)
    if isinstance(node, ast.Constant):
        return _literal(node.value)
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub | ast.UAdd):
        v = _walk(node.operand)
        return -v if isinstance(node.op, ast.USub) else v
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add | ast.Sub | ast.Mult | ast.Div):
        a, b = _walk(node.left), _walk(node.right)
        if isinstance(node.op, ast.Add):
            return a + b
        if isinstance(node.op, ast.Sub):
            return a - b
        if isinstance(node.op, ast.Mult):
            return a * b
        if b == 0:
            raise UnsafeExpressionError("division by zero")
        return a / b
    what = (
        type(node.op).__name__ if isinstance(node, ast.BinOp | ast.UnaryOp) else type(node).__name__
    )
    raise UnsafeExpressionError(f"not allowed in arithmetic: {what}")


def safe_eval(expr: str) -> Fraction:
    """The exact value of an arithmetic expression of numbers, `+ - * /`, unary `-`/`+` and
    parentheses.

    >>> safe_eval("(16 - 3 - 4) * 2"), safe_eval("10/4")
    (Fraction(18, 1), Fraction(5, 2))

    Raises:
        UnsafeExpressionError: anything else, too long or too large input, or division by zero.
    """
    if len(expr) > MAX_EXPR_CHARS:
        raise UnsafeExpressionError(f"expression longer than {MAX_EXPR_CHARS} characters")
    try:
        tree = ast.parse(expr.strip(), mode="eval")
    except (SyntaxError, ValueError, MemoryError, RecursionError) as exc:
        raise UnsafeExpressionError(f"not an arithmetic expression: {expr!r}") from exc
    n_nodes = sum(1 for _ in ast.walk(tree))
    if n_nodes > MAX_NODES:
        raise UnsafeExpressionError(f"expression has {n_nodes} nodes, more than {MAX_NODES}")
    return _walk(tree)


@dataclass(frozen=True, slots=True)
class ArithmeticCheck:
    """The result of checking one solution's annotations.

    Attributes:
        n_annotations: every `<<...>>` annotation found.
        n_checked: the checkable ones.
        n_correct: the checkable ones whose stated result is right.
        failures: the wrong ones, as written (e.g. `"25*3=7500"`).
    """

    n_annotations: int
    n_checked: int
    n_correct: int
    failures: tuple[str, ...]

    @property
    def passed(self) -> bool:
        """No checkable annotation is wrong (a solution without annotations passes)."""
        return self.n_correct == self.n_checked

    @property
    def score(self) -> float:
        """Share of checkable annotations that are right; 1.0 when none is checkable."""
        return 1.0 if self.n_checked == 0 else self.n_correct / self.n_checked


def _decimals(text: str) -> int:
    return len(text.split(".", 1)[1]) if "." in text else 0


def _result_matches(computed: Fraction, stated_text: str) -> bool:
    stated = Fraction(stated_text)
    diff = abs(computed - stated)
    if diff <= _REL_TOL * max(Fraction(1), abs(computed)):
        return True
    d = _decimals(stated_text)
    return d > 0 and diff <= Fraction(1, 2 * 10**d)


@lru_cache(maxsize=1 << 14)
def check_arithmetic(solution: str) -> ArithmeticCheck:
    """Recompute every `<<expr=result>>` annotation of `solution` (rules in the module docstring).

    Cached per solution text (the result is frozen): a search checks the same recorded
    solutions thousands of times, and parsing their expressions was 4% of a warm default search.

    >>> check_arithmetic("<<2+3=5>>5 and <<25*3=7500>>7500 and <<x+1=2>>")
    ArithmeticCheck(n_annotations=3, n_checked=2, n_correct=1, failures=('25*3=7500',))
    """
    found = _ANNOTATION.findall(solution)
    checked = correct = 0
    failures: list[str] = []
    for raw in found:
        text = _THOUSANDS.sub("", raw)
        if text.count("=") != 1:
            continue
        left, right = (s.strip() for s in text.split("="))
        if not re.fullmatch(r"[+-]?(?:\d+(?:\.\d*)?|\.\d+)", right):
            continue
        try:
            computed = safe_eval(left)
        except UnsafeExpressionError:
            continue
        checked += 1
        if _result_matches(computed, right):
            correct += 1
        else:
            failures.append(raw)
    return ArithmeticCheck(len(found), checked, correct, tuple(failures))
