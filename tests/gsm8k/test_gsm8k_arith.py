"""The safe arithmetic evaluator (an AST walk, never eval) and the annotation checker."""

from __future__ import annotations

from fractions import Fraction
from pathlib import Path

import pytest

import core
from core.problems import import_problem_module

PKG = Path(core.__file__).resolve().parents[1] / "data" / "problems" / "gsm8k_replay"
arith = import_problem_module(PKG / "arith.py")
safe_eval = arith.safe_eval
check_arithmetic = arith.check_arithmetic
UnsafeExpressionError = arith.UnsafeExpressionError


@pytest.mark.parametrize(
    ("expr", "value"),
    [
        ("16-3-4", Fraction(9)),
        ("9*2", Fraction(18)),
        ("48/2", Fraction(24)),
        ("10/4", Fraction(5, 2)),
        ("0.1+0.2", Fraction(3, 10)),
        ("-(3+4)*2", Fraction(-14)),
        ("+5 - -5", Fraction(10)),
        ("(((2)))", Fraction(2)),
        (" 2 * (3 + 4) / 7 ", Fraction(2)),
        (".5*4", Fraction(2)),
        ("1e3/4", Fraction(250)),
        ("20/100*41.472", Fraction(82944, 10000)),
    ],
)
def test_safe_eval_computes_exactly(expr: str, value: Fraction) -> None:
    assert safe_eval(expr) == value


@pytest.mark.parametrize(
    ("expr", "reason"),
    [
        ("x+1", "Name"),
        ("__import__('os')", "Call"),
        ("abs(-1)", "Call"),
        ("(1).real", "Attribute"),
        ("2**10", "Pow"),
        ("7//2", "FloorDiv"),
        ("7%2", "Mod"),
        ("1<2", "Compare"),
        ("1 if 1 else 2", "IfExp"),
        ("[1][0]", "Subscript"),
        ("(1, 2)", "Tuple"),
        ("~1", "Invert"),
        ("True+1", "not bool True"),
        ("'a'*3", "not str 'a'"),
        ("1j*2", "not complex"),
        ("lambda: 1", "Lambda"),
        ("1/0", "division by zero"),
        ("1/(2-2)", "division by zero"),
        ("1e999", "out of range"),
        ("2+", "not an arithmetic expression"),
        ("import os", "not an arithmetic expression"),
        ("", "not an arithmetic expression"),
    ],
)
def test_safe_eval_rejects_everything_else(expr: str, reason: str) -> None:
    with pytest.raises(UnsafeExpressionError, match=reason):
        safe_eval(expr)


def test_safe_eval_bounds_its_input() -> None:
    assert arith.MAX_EXPR_CHARS == 200
    assert arith.MAX_NODES == 100
    with pytest.raises(UnsafeExpressionError, match="longer than 200 characters"):
        safe_eval("9" * 201)
    with pytest.raises(UnsafeExpressionError, match="longer than 200 characters"):
        safe_eval("(" * 150 + "1" + ")" * 150)
    # within the length bound but too many nodes: 1+1+...+1 (67 terms, 199 chars)
    many = "+".join(["1"] * 67) + "+1"
    assert len(many) <= 200
    with pytest.raises(UnsafeExpressionError, match="more than 100"):
        safe_eval(many)
    # a large but bounded product is fine and exact
    assert safe_eval("*".join(["999999999"] * 10)) == Fraction(999999999) ** 10


def test_safe_eval_is_an_unsafe_expression_value_error() -> None:
    assert issubclass(UnsafeExpressionError, ValueError)


def test_check_arithmetic_counts_and_failures() -> None:
    solution = (
        "Janet sells 16 - 3 - 4 = <<16-3-4=9>>9 duck eggs a day.\n"
        "She makes 9 * 2 = $<<9*2=18>>18 every day.\n"
        "Wrong: <<25*3=7500>>7500; unknown <<x+56=86>>; time <<2:15+2:38=8:40>>\n"
        "A: 18"
    )
    c = check_arithmetic(solution)
    assert c == arith.ArithmeticCheck(
        n_annotations=5, n_checked=3, n_correct=2, failures=("25*3=7500",)
    )
    assert c.passed is False
    assert c.score == pytest.approx(2 / 3)


def test_check_arithmetic_tolerances() -> None:
    # float noise and rounded display pass; integer truncation does not
    assert check_arithmetic("<<10/3=3.3333333333333335>>").passed
    assert check_arithmetic("<<10/3=3.33>>").passed
    assert check_arithmetic("<<2/3=0.67>>").passed
    assert not check_arithmetic("<<10/3=3>>").passed
    assert not check_arithmetic("<<22+21=43.545454545454548>>").passed
    # thousands commas are numbers, not tuples
    assert check_arithmetic("<<12*20,000=240,000>>") == arith.ArithmeticCheck(1, 1, 1, ())


def test_a_solution_without_annotations_passes() -> None:
    c = check_arithmetic("No calculator used.\nA: 3")
    assert c == arith.ArithmeticCheck(0, 0, 0, ())
    assert c.passed
    assert c.score == 1.0


def test_uncheckable_annotations_neither_pass_nor_fail() -> None:
    c = check_arithmetic("<<5*2/5=2.0=2.0>> <<50000*5%=2500>> <<3*3=>> <<1/0=1>>")
    assert c == arith.ArithmeticCheck(4, 0, 0, ())
