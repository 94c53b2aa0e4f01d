"""Final-answer extraction, numeric comparison, voting and the score function."""

from __future__ import annotations

from fractions import Fraction
from pathlib import Path

import pytest

import core
from core.evaluation.metrics import GoldExample
from core.problems import import_problem_module

PKG = Path(core.__file__).resolve().parents[1] / "data" / "problems" / "gsm8k_replay"
answers = import_problem_module(PKG / "answers.py")
state_mod = import_problem_module(PKG / "state.py")
MathState = state_mod.MathState
Candidate = state_mod.Candidate


def cand(answer: str | None, run: str = "6b_finetuning", solution: str | None = None) -> object:
    text = solution if solution is not None else ("..." if answer is None else f"work\nA: {answer}")
    return Candidate(run=run, solution=text, answer=answer)


def test_solution_answer_is_after_a_colon_on_the_last_line() -> None:
    assert answers.extract_solution_answer("x = <<2+2=4>>4\nA: 4") == "4"
    assert answers.extract_solution_answer("x\nA: $1,200.\n\n") == "$1,200."
    assert answers.extract_solution_answer("x\nA:   -3.5  ") == "-3.5"
    assert answers.extract_solution_answer("A: 1 is wrong\nthen cut off mid-") is None
    assert answers.extract_solution_answer("") is None


def test_gold_answer_is_after_the_last_hashes() -> None:
    assert answers.extract_gold_answer("a\n#### 18") == "18"
    assert answers.extract_gold_answer("#### 1\n#### 1,000") == "1,000"
    with pytest.raises(ValueError):
        answers.extract_gold_answer("no marker")


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ("18", Fraction(18)),
        ("$18", Fraction(18)),
        ("18.", Fraction(18)),
        ("1,234", Fraction(1234)),
        ("$1,234.50.", Fraction(246900, 200)),
        ("-3", Fraction(-3)),
        ("-0.5", Fraction(-1, 2)),
        (".5", Fraction(1, 2)),
        ("18.00", Fraction(18)),
        ("3/4", Fraction(3, 4)),
        (" 7 ", Fraction(7)),
        ("10+John's age", None),
        ("-1.8 billion", None),
        ("1/0", None),
        ("", None),
        (None, None),
        ("1" * 65, None),
    ],
)
def test_parse_number(text: str | None, value: Fraction | None) -> None:
    assert answers.parse_number(text) == value


def test_answers_equal_numerically() -> None:
    assert answers.answers_equal("18", "18.0")
    assert answers.answers_equal("$1,000", "1000")
    assert answers.answers_equal("0.5", "1/2")
    assert not answers.answers_equal("18", "19")
    assert not answers.answers_equal("x", "x")  # unparsable equals nothing
    assert not answers.answers_equal(None, "1")


def test_majority_vote_ties_go_to_the_earliest() -> None:
    assert answers.majority([cand("3"), cand("4"), cand("4.0")]) == ("4", 2)
    assert answers.majority([cand("3"), cand("4"), cand("4"), cand("3")]) == ("3", 2)
    assert answers.majority([cand("5"), cand("6")]) == ("5", 1)
    assert answers.majority([cand(None), cand("7"), cand(None)]) == ("7", 1)
    assert answers.majority([cand(None)]) == (None, 0)
    assert answers.majority([]) == (None, 0)
    # unparsable answers never pool together
    assert answers.majority([cand("a lot"), cand("a lot"), cand("2")]) == ("a lot", 1)
    assert answers.vote_answer([cand("1"), cand("2"), cand("2")]) == "2"


def test_final_answer_of_each_output_shape() -> None:
    q = "How many?"
    st = MathState(question=q, candidates=(cand("3"), cand("4")))
    assert answers.final_answer_of(st) == "4"
    assert answers.final_answer_of(st.with_final_answer("3")) == "3"
    assert answers.final_answer_of(st.model_dump()) == "4"
    assert answers.final_answer_of(st.model_dump_json()) == "4"
    assert answers.final_answer_of(MathState(question=q)) is None
    # a list of branch states (collect_all): majority vote over all their candidates
    branches = [
        MathState(question=q, candidates=(cand("3"),)),
        MathState(question=q, candidates=(cand("5"), cand("5"))),
    ]
    assert answers.final_answer_of(branches) == "5"
    assert answers.final_answer_of(12) == "12"
    assert answers.final_answer_of("work\nA: 9") == "9"
    assert answers.final_answer_of("#### 10") == "10"
    assert answers.final_answer_of(" 11 ") == "11"
    assert answers.final_answer_of(None) is None


def test_score_is_numeric_equality_with_the_gold_answer() -> None:
    ex = GoldExample(input=MathState(question="q"), expected="1,000", id="x")
    right = MathState(question="q", candidates=(cand("1000.0"),))
    wrong = MathState(question="q", candidates=(cand("999"),))
    cut = MathState(question="q", candidates=(cand(None),))
    assert answers.score_final_answer(right, ex) == 1.0
    assert answers.score_final_answer(wrong, ex) == 0.0
    assert answers.score_final_answer(cut, ex) == 0.0
    assert answers.score_final_answer(MathState(question="q"), ex) == 0.0
    assert answers.score_final_answer(right, GoldExample(input="q")) == 0.0


def test_state_helpers() -> None:
    q = "Q?"
    s = MathState(question=q)
    s2 = s.with_candidate(cand("1")).with_final_answer("1").with_candidate(cand("2"))
    assert s2.final_answer is None  # cleared when a candidate is added
    assert [c.answer for c in s2.candidates] == ["1", "2"]
    assert state_mod.coerce_state("Plain question?") == MathState(question="Plain question?")
    assert state_mod.coerce_state(s2.model_dump_json()) == s2
    assert state_mod.coerce_state(s2.model_dump()) == s2
    with pytest.raises(TypeError, match="expected a MathState"):
        state_mod.coerce_state([s2])
    merged = state_mod.merge_states([s2, MathState(question=q, candidates=(cand("3"),))])
    assert [c.answer for c in merged.candidates] == ["1", "2", "3"]
    with pytest.raises(ValueError, match="different questions"):
        state_mod.merge_states([s, MathState(question="other")])
    with pytest.raises(ValueError, match="nothing to merge"):
        state_mod.merge_states([])
    with pytest.raises(Exception, match="frozen"):
        s.question = "changed"  # type: ignore[misc]


def test_is_blank_means_no_candidate_at_all() -> None:
    q = "Q?"
    assert answers.is_blank(None)
    assert answers.is_blank("  ")
    assert answers.is_blank([])
    assert answers.is_blank(MathState(question=q))
    assert answers.is_blank(MathState(question=q).model_dump_json())
    assert answers.is_blank([MathState(question=q), MathState(question=q)])
    cut = MathState(question=q, candidates=(cand(None),))
    assert not answers.is_blank(cut)  # a cut-off solution is a wrong answer, not a blank
    assert not answers.is_blank([MathState(question=q), cut])
    assert not answers.is_blank("A: 4")
    assert not answers.is_blank(4)
