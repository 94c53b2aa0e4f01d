"""The registered functions of the GSM8K replay problem: steps, merges, conditions, classifiers,
a loop evaluator and a state updater.

Every function takes the `MathState` flowing through the topology (a dict, JSON or a bare
question is coerced; see `state.coerce_state`) and none blocks. "The answer" of a state is
`current_answer(state)`: the `final_answer` a selection step set, else the last candidate's.
`make_functions(params)` lists them with their role(s) and one-line description, in the order
they are registered.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from core.ir.dataflow import NameEffect
from core.runtime import EvalResult

from .answers import answers_equal, majority, parse_number, vote_answer
from .arith import check_arithmetic
from .replay import ReplayParams
from .state import MathState, coerce_state, current_answer, merge_states

__all__ = [
    "ACCEPT",
    "DONE",
    "ESCALATE",
    "LONG",
    "SHORT",
    "RegisteredFunction",
    "answer_is_missing",
    "answer_is_nonnegative_integer",
    "candidates_agree",
    "candidates_disagree",
    "carry_state",
    "eval_agreement",
    "eval_arithmetic",
    "extract_final_answer",
    "keep_answer",
    "last_answer_suspect",
    "last_fails_arithmetic",
    "last_passes_arithmetic",
    "majority_vote",
    "make_functions",
    "merge_candidates",
    "merge_vote",
    "question_has_decimal",
    "question_has_fraction",
    "question_mentions_money",
    "question_mentions_percent",
    "route_by_check",
    "vote_arithmetic_checked",
]

ACCEPT = "accept"
"""`route_by_check`'s route when the last answer looks sound."""
ESCALATE = "escalate"
"""`route_by_check`'s route when it does not (`last_answer_suspect`)."""
LONG = "long"
"""`route_by_question_length`'s route for a long question."""
SHORT = "short"
"""... and for a short one."""
DONE = "done"
"""`next_unused_run`'s answer when every run in the escalation order has a candidate."""


# -- steps (state -> state) -------------------------------------------------------------------


def extract_final_answer(state: Any) -> MathState:
    """Set `final_answer` to the last candidate's answer (None if there is none or it was cut
    off)."""
    s = coerce_state(state)
    return s.with_final_answer(s.candidates[-1].answer if s.candidates else None)


def keep_answer(state: Any) -> MathState:
    """The state unchanged: accept the current answer (the accept route of a cascade)."""
    return coerce_state(state)


def majority_vote(state: Any) -> MathState:
    """Set `final_answer` to the majority answer of all candidates (`answers.vote_answer`: numeric
    comparison, ties to the earliest candidate)."""
    s = coerce_state(state)
    return s.with_final_answer(vote_answer(s.candidates))


def vote_arithmetic_checked(state: Any) -> MathState:
    """Majority vote over the candidates that pass the arithmetic check (all candidates when
    none passes)."""
    s = coerce_state(state)
    passing = [
        c for c in s.candidates if c.answer is not None and check_arithmetic(c.solution).passed
    ]
    return s.with_final_answer(vote_answer(passing or s.candidates))


# -- merges (list of branch outputs -> value) -------------------------------------------------


def merge_candidates(outputs: Sequence[Any]) -> MathState:
    """One state holding every branch's candidates, in branch order; `final_answer` cleared."""
    return merge_states(list(outputs))


def merge_vote(outputs: Sequence[Any]) -> MathState:
    """`merge_candidates`, then `majority_vote`."""
    return majority_vote(merge_states(list(outputs)))


# -- conditions (state -> bool) ---------------------------------------------------------------


def answer_is_nonnegative_integer(state: Any) -> bool:
    """The answer is a whole number >= 0 (`12`, `12.0`, `$1,200`; not `-3`, `2.5`, none)."""
    value = parse_number(current_answer(coerce_state(state)))
    return value is not None and value >= 0 and value.denominator == 1


def answer_is_missing(state: Any) -> bool:
    """There is no answer: no candidate yet, or the last solution was cut off."""
    return current_answer(coerce_state(state)) is None


def last_passes_arithmetic(state: Any) -> bool:
    """The last candidate has a final answer and every checkable `<<a*b=c>>` annotation in it
    recomputes correctly."""
    s = coerce_state(state)
    if not s.candidates or s.candidates[-1].answer is None:
        return False
    return check_arithmetic(s.candidates[-1].solution).passed


def last_fails_arithmetic(state: Any) -> bool:
    """Not `last_passes_arithmetic`: no candidate, a cut-off solution, or a wrong annotation."""
    return not last_passes_arithmetic(state)


def last_answer_suspect(state: Any) -> bool:
    """The answer is missing, not a non-negative integer, or the last solution fails the
    arithmetic check (GSM8K answers are non-negative integers)."""
    return last_fails_arithmetic(state) or not answer_is_nonnegative_integer(state)


def candidates_agree(state: Any) -> bool:
    """At least two candidates, and all their answers are the same number."""
    cands = coerce_state(state).candidates
    if len(cands) < 2:
        return False
    first = cands[0].answer
    return all(answers_equal(first, c.answer) for c in cands)


def candidates_disagree(state: Any) -> bool:
    """At least two candidates whose answers are not all the same number (a missing answer
    disagrees)."""
    return len(coerce_state(state).candidates) >= 2 and not candidates_agree(state)


def _question_is_long(limit: int) -> Callable[[Any], bool]:
    def question_is_long(state: Any) -> bool:
        return len(coerce_state(state).question) > limit

    question_is_long.__doc__ = f"The question has more than {limit} characters."
    return question_is_long


_NUMBER = re.compile(r"\d+(?:[.,]\d+)*")
_DECIMAL = re.compile(r"\d\.\d|(?<![\d.])\.\d")
_PERCENT = re.compile(r"%|\bpercent", re.IGNORECASE)
_PARTS = r"(?:halfs?|halves|thirds?|quarters?|fourths?|fifths?|sixths?|sevenths?|eighths?|ninths?|tenths?)"
_FRACTION = re.compile(
    r"\d+/\d+|\bhal(?:f|ves)\b"
    rf"|\b(?:a|one|two|three|four|five|six|seven|eight|nine)[- ]{_PARTS}\b"
    rf"|\b{_PARTS} of\b",
    re.IGNORECASE,
)


@lru_cache(maxsize=1 << 12)
def _features(question: str) -> tuple[bool, bool, bool, int]:
    """(decimal, percent, fraction, count of numbers) of one question, computed once: every
    router on a question feature asks again for every example of every candidate."""
    return (
        _DECIMAL.search(question) is not None,
        _PERCENT.search(question) is not None,
        _FRACTION.search(question) is not None,
        len(_NUMBER.findall(question)),
    )


def question_has_decimal(state: Any) -> bool:
    """The question has a decimal number: a digit, a point, a digit (`2.5`, `$1.25`), or a point
    then a digit with no number before it (`$.25`, `.5 hours`)."""
    return _features(coerce_state(state).question)[0]


def question_mentions_money(state: Any) -> bool:
    """The question has a `$` sign."""
    return "$" in coerce_state(state).question


def question_mentions_percent(state: Any) -> bool:
    """The question has a `%` sign or the word "percent" (any case)."""
    return _features(coerce_state(state).question)[1]


def question_has_fraction(state: Any) -> bool:
    """The question has a fraction: `a/b`; half or halves; a part (third, quarter, fourth ...
    tenth, singular or plural) after a number word or "a" (`two-thirds`, `a quarter`) or before
    "of" (`thirds of`). Ordinals stay out: "the third day", "the fifth worker", "5 quarters"."""
    return _features(coerce_state(state).question)[2]


def _question_has_many_numbers(count: int) -> Callable[[Any], bool]:
    def question_has_many_numbers(state: Any) -> bool:
        return _features(coerce_state(state).question)[3] >= count

    question_has_many_numbers.__doc__ = (
        f"The question has at least {count} numbers written in digits (`1,200` and `2.5` count "
        "once each)."
    )
    return question_has_many_numbers


# -- classifiers (state -> route name) --------------------------------------------------------


def route_by_check(state: Any) -> str:
    """`"escalate"` when `last_answer_suspect`, else `"accept"`."""
    return ESCALATE if last_answer_suspect(state) else ACCEPT


def _route_by_question_length(limit: int) -> Callable[[Any], str]:
    def route_by_question_length(state: Any) -> str:
        return LONG if len(coerce_state(state).question) > limit else SHORT

    route_by_question_length.__doc__ = (
        f'"long" when the question has more than {limit} characters, else "short".'
    )
    return route_by_question_length


def _next_unused_run(order: Sequence[str]) -> Callable[[Any], str]:
    def next_unused_run(state: Any) -> str:
        used = {c.run for c in coerce_state(state).candidates}
        return next((r for r in order if r not in used), DONE)

    next_unused_run.__doc__ = (
        f'The first run of {", ".join(order)} without a candidate yet, else "done".'
    )
    return next_unused_run


# -- loop evaluators (state -> EvalResult) and state updaters ---------------------------------


def eval_arithmetic(state: Any) -> EvalResult:
    """Passed when the last answer is not suspect (`last_answer_suspect`); score = share of the
    last solution's checkable annotations that are right (0.0 without a candidate)."""
    s = coerce_state(state)
    if not s.candidates:
        return EvalResult(passed=False, feedback="no candidate yet", score=0.0)
    check = check_arithmetic(s.candidates[-1].solution)
    passed = not last_answer_suspect(s)
    feedback = (
        ""
        if passed
        else (
            f"wrong annotations: {', '.join(check.failures)}"
            if check.failures
            else "answer missing or not a non-negative integer"
        )
    )
    return EvalResult(passed=passed, feedback=feedback, score=check.score)


def eval_agreement(state: Any) -> EvalResult:
    """Passed when two or more candidates give the majority answer; score = the majority's
    share of the candidates (0.0 without a candidate)."""
    s = coerce_state(state)
    if not s.candidates:
        return EvalResult(passed=False, feedback="no candidate yet", score=0.0)
    _, votes = majority(s.candidates)
    passed = votes >= 2
    return EvalResult(
        passed=passed,
        feedback="" if passed else f"no two candidates agree ({len(s.candidates)} so far)",
        score=votes / len(s.candidates),
    )


def carry_state(current_input: Any, output: Any, eval_result: Any) -> MathState:
    """The next iteration starts from this iteration's output, so candidates accumulate."""
    del current_input, eval_result
    return coerce_state(output)


# -- the registration table -------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class RegisteredFunction:
    """One function as registered: name, callable, roles, one-line description, and what it
    reads and produces (`core.ir.dataflow.NameEffect`: candidates needed, merge kind, verdict)."""

    name: str
    fn: Callable[..., Any]
    roles: tuple[str, ...]
    description: str
    effect: NameEffect = NameEffect()


def make_functions(params: ReplayParams) -> list[RegisteredFunction]:
    """Every registered function of the problem, configured by `[params]`."""
    limit = params.long_question_chars
    order = params.escalation_order
    R = RegisteredFunction
    return [
        R(
            "extract_final_answer",
            extract_final_answer,
            ("step",),
            "Set the final answer to the last candidate's answer (the text after 'A:'; none if cut off).",
            NameEffect(needs_candidates=2),
        ),
        R(
            "keep_answer",
            keep_answer,
            ("step",),
            "Keep the state as it is: accept the current answer (a cascade's accept route).",
            NameEffect(identity=True),
        ),
        R(
            "majority_vote",
            majority_vote,
            ("step",),
            "Set the final answer to the most common candidate answer (numeric; ties go to the earliest).",
            NameEffect(needs_candidates=2),
        ),
        R(
            "vote_arithmetic_checked",
            vote_arithmetic_checked,
            ("step",),
            "Majority vote over candidates whose <<a*b=c>> annotations recompute correctly (all if none do).",
            NameEffect(needs_candidates=2),
        ),
        R(
            "merge_candidates",
            merge_candidates,
            ("merge",),
            "Parallel merge: one state with every branch's candidates in branch order, no final answer.",
            NameEffect(combine="all"),
        ),
        R(
            "merge_vote",
            merge_vote,
            ("merge",),
            "Parallel merge: combine every branch's candidates, then majority-vote the final answer.",
            NameEffect(combine="all"),
        ),
        R(
            "answer_is_nonnegative_integer",
            answer_is_nonnegative_integer,
            ("condition",),
            "The current answer is a whole number >= 0 (GSM8K answers always are).",
            NameEffect(needs_candidates=1, verdict="accept"),
        ),
        R(
            "answer_is_missing",
            answer_is_missing,
            ("condition",),
            "No answer yet: no candidate, or the last solution was cut off.",
            NameEffect(needs_candidates=1, verdict="reject"),
        ),
        R(
            "last_passes_arithmetic",
            last_passes_arithmetic,
            ("condition",),
            "The last solution has an answer and all its calculator annotations recompute correctly.",
            NameEffect(needs_candidates=1, verdict="accept"),
        ),
        R(
            "last_fails_arithmetic",
            last_fails_arithmetic,
            ("condition",),
            "The last solution is missing, cut off, or has a calculator annotation that recomputes wrong.",
            NameEffect(
                needs_candidates=1, verdict="reject", complement_of="last_passes_arithmetic"
            ),
        ),
        R(
            "last_answer_suspect",
            last_answer_suspect,
            ("condition",),
            "The answer is missing, not a non-negative integer, or the last solution fails the arithmetic check.",
            NameEffect(needs_candidates=1, verdict="reject"),
        ),
        R(
            "candidates_agree",
            candidates_agree,
            ("condition",),
            "At least two candidates and all their answers are the same number.",
            NameEffect(needs_candidates=2, verdict="accept"),
        ),
        R(
            "candidates_disagree",
            candidates_disagree,
            ("condition",),
            "At least two candidates whose answers are not all the same number.",
            NameEffect(needs_candidates=2, verdict="reject", complement_of="candidates_agree"),
        ),
        R(
            "question_is_long",
            _question_is_long(limit),
            ("condition",),
            f"The question has more than {limit} characters.",
        ),
        R(
            "question_has_many_numbers",
            _question_has_many_numbers(params.many_numbers),
            ("condition",),
            f"The question has at least {params.many_numbers} numbers written in digits.",
        ),
        R(
            "question_has_fraction",
            question_has_fraction,
            ("condition",),
            "The question has a fraction (a/b, half, two-thirds, a quarter, fifths of ...), not an ordinal.",
        ),
        R(
            "question_mentions_percent",
            question_mentions_percent,
            ("condition",),
            "The question has a % sign or the word percent.",
        ),
        R(
            "question_mentions_money",
            question_mentions_money,
            ("condition",),
            "The question has a $ sign.",
        ),
        R(
            "question_has_decimal",
            question_has_decimal,
            ("condition",),
            "The question has a decimal number (2.5, $1.25, $.25).",
        ),
        R(
            "route_by_check",
            route_by_check,
            ("classifier",),
            "Routes 'escalate' when the last answer is suspect (missing, not a non-negative integer, bad arithmetic), else 'accept'.",
            NameEffect(needs_candidates=1),
        ),
        R(
            "route_by_question_length",
            _route_by_question_length(limit),
            ("classifier",),
            f"Routes 'long' when the question has more than {limit} characters, else 'short'.",
        ),
        R(
            "next_unused_run",
            _next_unused_run(order),
            ("classifier",),
            f"Routes to the first run of {', '.join(order)} that has no candidate yet, else 'done'.",
            NameEffect(needs_candidates=1),
        ),
        R(
            "eval_arithmetic",
            eval_arithmetic,
            ("evaluator",),
            "Loop evaluator: passes when the last answer is not suspect; score = share of annotations right.",
            NameEffect(needs_candidates=1),
        ),
        R(
            "eval_agreement",
            eval_agreement,
            ("evaluator",),
            "Loop evaluator: passes when two or more candidates give the majority answer; score = its share.",
            NameEffect(needs_candidates=1),
        ),
        R(
            "carry_state",
            carry_state,
            ("state_updater",),
            "Loop state updater: the next iteration starts from this output, so candidates accumulate.",
        ),
    ]
