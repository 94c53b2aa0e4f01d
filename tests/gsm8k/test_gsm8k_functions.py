"""The registered functions: steps, merges, conditions, classifiers, loop evaluator/updater."""

from __future__ import annotations

import tomllib
from pathlib import Path

import pytest

import core
from core.problems import import_problem_module
from core.runtime import EvalResult

PKG = Path(core.__file__).resolve().parents[1] / "data" / "problems" / "gsm8k_replay"
fx = import_problem_module(PKG / "functions.py")
state_mod = import_problem_module(PKG / "state.py")
replay = import_problem_module(PKG / "replay.py")
MathState = state_mod.MathState
Candidate = state_mod.Candidate
PARAMS = replay.ReplayParams.model_validate(
    tomllib.loads((PKG / "problem.toml").read_text())["params"]
)
FUNCS = {f.name: f for f in fx.make_functions(PARAMS)}

Q = "Tom has 3 apples and buys 4 more. How many apples does he have?"
GOOD = "3 + 4 = <<3+4=7>>7\nA: 7"
BAD_ARITH = "3 + 4 = <<3+4=8>>8\nA: 8"
CUT = "3 + 4 = <<3+4=7>>7 and then"


def st(*cands: tuple[str, str], final: str | None = None, question: str = Q) -> object:
    from_answers = [
        Candidate(
            run=run,
            solution=sol,
            answer=import_problem_module(PKG / "answers.py").extract_solution_answer(sol),
        )
        for run, sol in cands
    ]
    return MathState(question=question, candidates=tuple(from_answers), final_answer=final)


def call(name: str, *args: object) -> object:
    return FUNCS[name].fn(*args)


def test_every_function_has_a_role_and_a_one_line_description() -> None:
    assert list(FUNCS) == [
        "extract_final_answer",
        "keep_answer",
        "majority_vote",
        "vote_arithmetic_checked",
        "merge_candidates",
        "merge_vote",
        "answer_is_nonnegative_integer",
        "answer_is_missing",
        "last_passes_arithmetic",
        "last_fails_arithmetic",
        "last_answer_suspect",
        "candidates_agree",
        "candidates_disagree",
        "question_is_long",
        "question_has_many_numbers",
        "question_has_fraction",
        "question_mentions_percent",
        "question_mentions_money",
        "question_has_decimal",
        "route_by_check",
        "route_by_question_length",
        "next_unused_run",
        "eval_arithmetic",
        "eval_agreement",
        "carry_state",
    ]
    roles = {"step", "merge", "condition", "classifier", "evaluator", "state_updater"}
    for f in FUNCS.values():
        assert f.roles and set(f.roles) <= roles
        assert f.description and "\n" not in f.description and len(f.description) <= 160


def test_keep_answer_returns_the_state_unchanged_and_is_declared_an_identity() -> None:
    s = st(("6b_finetuning", GOOD), ("175b_finetuning", BAD_ARITH), final="7")
    assert call("keep_answer", s) == s
    assert FUNCS["keep_answer"].effect.identity is True
    assert FUNCS["candidates_agree"].effect.needs_candidates == 2
    assert FUNCS["candidates_agree"].effect.verdict == "accept"
    assert FUNCS["last_fails_arithmetic"].effect.complement_of == "last_passes_arithmetic"


def test_extract_final_answer() -> None:
    s = st(("a", GOOD), ("b", BAD_ARITH))
    assert call("extract_final_answer", s).final_answer == "8"
    assert call("extract_final_answer", st(("a", CUT))).final_answer is None
    assert call("extract_final_answer", MathState(question=Q)).final_answer is None


def test_majority_vote_and_the_checked_vote() -> None:
    s = st(("a", BAD_ARITH), ("b", GOOD), ("c", BAD_ARITH))
    assert call("majority_vote", s).final_answer == "8"
    assert call("vote_arithmetic_checked", s).final_answer == "7"
    only_bad = st(("a", BAD_ARITH), ("b", "x\nA: 9"))
    assert call("vote_arithmetic_checked", only_bad).final_answer == "9"  # passing candidates only
    all_bad = st(("a", BAD_ARITH), ("b", "<<1+1=3>>\nA: 3"))
    assert call("vote_arithmetic_checked", all_bad).final_answer == "8"  # none pass: all vote
    assert (
        call("majority_vote", st(("a", "A: 2"), ("b", "A: 1"))).final_answer == "2"
    )  # tie: earliest


def test_merges_combine_branch_candidates_in_branch_order() -> None:
    b1 = st(("6b_finetuning", "A: 5"))
    b2 = st(("175b_finetuning", "A: 6"), ("6b_verification", "A: 6"))
    merged = call("merge_candidates", [b1, b2])
    assert [c.run for c in merged.candidates] == [
        "6b_finetuning",
        "175b_finetuning",
        "6b_verification",
    ]
    assert merged.final_answer is None
    assert call("merge_vote", [b1, b2]).final_answer == "6"


@pytest.mark.parametrize(
    ("answer", "expected"),
    [
        ("12", True),
        ("12.0", True),
        ("$1,200", True),
        ("0", True),
        ("-3", False),
        ("2.5", False),
        ("lots", False),
    ],
)
def test_answer_is_nonnegative_integer(answer: str, expected: bool) -> None:
    assert call("answer_is_nonnegative_integer", st(("a", f"A: {answer}"))) is expected


def test_answer_conditions_use_the_final_answer_first() -> None:
    s = st(("a", "A: 2.5"), final="3")
    assert call("answer_is_nonnegative_integer", s) is True
    assert call("answer_is_missing", s) is False
    assert call("answer_is_missing", st(("a", CUT))) is True
    assert call("answer_is_missing", MathState(question=Q)) is True
    assert call("answer_is_nonnegative_integer", MathState(question=Q)) is False


def test_arithmetic_conditions() -> None:
    assert call("last_passes_arithmetic", st(("a", GOOD))) is True
    assert call("last_passes_arithmetic", st(("a", GOOD), ("b", BAD_ARITH))) is False
    assert call("last_passes_arithmetic", st(("a", CUT))) is False  # cut off: no answer
    assert call("last_passes_arithmetic", MathState(question=Q)) is False
    assert call("last_fails_arithmetic", st(("a", BAD_ARITH))) is True
    assert call("last_fails_arithmetic", st(("a", GOOD))) is False


def test_last_answer_suspect() -> None:
    assert call("last_answer_suspect", st(("a", GOOD))) is False
    assert call("last_answer_suspect", st(("a", BAD_ARITH))) is True
    assert call("last_answer_suspect", st(("a", CUT))) is True
    assert call("last_answer_suspect", st(("a", "no annotations\nA: 2.5"))) is True
    assert call("last_answer_suspect", st(("a", "no annotations\nA: -1"))) is True


def test_agreement_conditions() -> None:
    agree = st(("a", "A: 7"), ("b", "A: 7.0"))
    disagree = st(("a", "A: 7"), ("b", "A: 8"))
    one = st(("a", "A: 7"))
    missing = st(("a", "A: 7"), ("b", CUT))
    assert (call("candidates_agree", agree), call("candidates_disagree", agree)) == (True, False)
    assert (call("candidates_agree", disagree), call("candidates_disagree", disagree)) == (
        False,
        True,
    )
    assert (call("candidates_agree", one), call("candidates_disagree", one)) == (False, False)
    assert (call("candidates_agree", missing), call("candidates_disagree", missing)) == (
        False,
        True,
    )


def test_question_length() -> None:
    assert PARAMS.long_question_chars == 300
    assert call("question_is_long", MathState(question="x" * 300)) is False
    assert call("question_is_long", MathState(question="x" * 301)) is True
    assert call("route_by_question_length", MathState(question="x" * 301)) == "long"
    assert call("route_by_question_length", MathState(question="short")) == "short"
    assert "300 characters" in FUNCS["question_is_long"].description


def test_question_features_read_the_question_only() -> None:
    q = MathState
    assert PARAMS.many_numbers == 5
    many = FUNCS["question_has_many_numbers"]
    assert many.effect.needs_candidates == 0
    assert many.fn(q(question="1 2 3 4")) is False
    assert many.fn(q(question="1, 2, 3, 4 and 5")) is True
    # a thousands separator and a decimal point join one number
    assert many.fn(q(question="1,200 and 2.5 and 3 and 4")) is False
    assert "at least 5 numbers" in many.description
    assert call("question_has_fraction", q(question="She ate 3/4 of it.")) is True
    assert call("question_has_fraction", q(question="Half of them left.")) is True
    assert call("question_has_fraction", q(question="He ate two thirds.")) is True
    assert call("question_has_fraction", q(question="The halfway point.")) is False
    assert call("question_has_fraction", q(question="One-fourth of them left.")) is True
    assert call("question_has_fraction", q(question="A third of the class came.")) is True
    # ordinals and coins are not fractions
    assert call("question_has_fraction", q(question="On the third day she rested.")) is False
    assert call("question_has_fraction", q(question="The fifth worker came late.")) is False
    assert call("question_has_fraction", q(question="He has 5 quarters and 2 dimes.")) is False
    assert call("question_mentions_percent", q(question="a 20% discount")) is True
    assert call("question_mentions_percent", q(question="Twenty Percent off")) is True
    assert call("question_mentions_percent", q(question="perfect")) is False
    assert call("question_mentions_money", q(question="It costs $3.")) is True
    assert call("question_mentions_money", q(question="It costs 3 dollars.")) is False
    assert call("question_has_decimal", q(question="It weighs 2.5 kg.")) is True
    assert call("question_has_decimal", q(question="It weighs 2 kg. Then 5 more.")) is False
    assert call("question_has_decimal", q(question="They cost $.25 each.")) is True
    assert call("question_has_decimal", q(question="It takes .5 hours.")) is True
    # the features read the question only: candidates full of the feature change nothing
    noisy = st(("a", "It is 2.5 = 3/4 of 10% of $7, a third. A: 1,2,3,4,5"))
    for name in (
        "question_has_decimal",
        "question_has_fraction",
        "question_mentions_percent",
        "question_mentions_money",
        "question_has_many_numbers",
    ):
        assert call(name, noisy) is False, name


def test_classifiers() -> None:
    assert call("route_by_check", st(("a", GOOD))) == "accept"
    assert call("route_by_check", st(("a", BAD_ARITH))) == "escalate"
    assert call("route_by_check", MathState(question=Q)) == "escalate"
    nxt = FUNCS["next_unused_run"].fn
    assert nxt(MathState(question=Q)) == "6b_finetuning"
    assert nxt(st(("6b_finetuning", GOOD))) == "175b_finetuning"
    assert nxt(st(("6b_finetuning", GOOD), ("175b_finetuning", GOOD))) == "6b_verification"
    all_runs = st(*((r, GOOD) for r in replay.RUNS))
    assert nxt(all_runs) == "done"


def test_loop_evaluators() -> None:
    assert call("eval_arithmetic", st(("a", GOOD))) == EvalResult(
        passed=True, feedback="", score=1.0
    )
    assert call("eval_arithmetic", st(("a", BAD_ARITH))) == EvalResult(
        passed=False, feedback="wrong annotations: 3+4=8", score=0.0
    )
    assert call("eval_arithmetic", MathState(question=Q)) == EvalResult(
        passed=False, feedback="no candidate yet", score=0.0
    )
    assert call("eval_agreement", st(("a", "A: 7"), ("b", "A: 8"), ("c", "A: 7"))) == EvalResult(
        passed=True, feedback="", score=2 / 3
    )
    assert call("eval_agreement", st(("a", "A: 7"), ("b", "A: 8"))) == EvalResult(
        passed=False, feedback="no two candidates agree (2 so far)", score=0.5
    )
    assert call("eval_agreement", MathState(question=Q)) == EvalResult(
        passed=False, feedback="no candidate yet", score=0.0
    )


def test_carry_state_keeps_the_output() -> None:
    out = st(("a", GOOD))
    assert call("carry_state", MathState(question=Q), out, EvalResult(passed=False)) == out


def test_functions_accept_a_bare_question_or_json() -> None:
    assert call("question_is_long", "short question") is False
    assert call("answer_is_missing", st(("a", GOOD)).model_dump_json()) is False
