"""Final answers: extraction from solution text, numeric comparison, and the score function.

Rules (checked against every `is_correct` label of the dataset, 4 x 1,319 solutions):

- a model solution's final answer is the text after `A:` on its last non-empty line; a solution
  whose last line does not start with `A:` was cut off and has no answer (it is wrong);
- a gold answer (GSM8K's `answer` field) is the text after its last `####`;
- two answers are equal when both parse as numbers and the numbers are equal. Parsing strips
  spaces, `$` and thousands commas and a trailing `.`, and accepts integers, decimals (`-1.50`,
  `.5`) and simple fractions (`3/4`); anything else (`10+John's age`, `1.8 billion`) is not a
  number, and an unparsable answer is never equal to anything.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from fractions import Fraction
from functools import lru_cache
from typing import Any

from .state import Candidate, MathState, coerce_state, current_answer, merge_states

__all__ = [
    "answers_equal",
    "extract_gold_answer",
    "extract_solution_answer",
    "final_answer_of",
    "is_blank",
    "majority",
    "parse_number",
    "score_final_answer",
    "vote_answer",
]

_NUMBER = re.compile(r"^[+-]?(?:\d+(?:\.\d*)?|\.\d+)$")
_FRACTION = re.compile(r"^([+-]?\d+)/(\d+)$")
_MAX_CHARS = 64


def extract_solution_answer(solution: str) -> str | None:
    """The text after `A:` on the last non-empty line, or None when the solution was cut off.

    >>> extract_solution_answer("2 + 2 = <<2+2=4>>4\\nA: 4")
    '4'
    """
    lines = [ln for ln in solution.splitlines() if ln.strip()]
    if not lines:
        return None
    last = lines[-1].strip()
    if not last.startswith("A:"):
        return None
    return last[2:].strip()


def extract_gold_answer(answer: str) -> str:
    """The text after the last `####` of a GSM8K gold answer, stripped.

    Raises:
        ValueError: there is no `####`.
    """
    if "####" not in answer:
        raise ValueError("a GSM8K gold answer ends with '#### <number>'")
    return answer.rsplit("####", 1)[1].strip()


@lru_cache(maxsize=1 << 16)
def parse_number(text: str | None) -> Fraction | None:
    """The exact number an answer text stands for, or None (see the module rules).

    Cached per text (a `Fraction` is immutable): a search scores the same few thousand answer
    texts tens of thousands of times, and parsing them was 4% of a warm default search.

    >>> parse_number("$1,234.50."), parse_number("3/4"), parse_number("1.8 billion")
    (Fraction(2469, 2), Fraction(3, 4), None)
    """
    if text is None:
        return None
    t = text.strip().replace(" ", "").replace("$", "")
    t = re.sub(r"(?<=\d),(?=\d)", "", t).rstrip(".")
    if not t or len(t) > _MAX_CHARS:
        return None
    if _NUMBER.match(t):
        return Fraction(t)
    m = _FRACTION.match(t)
    if m and int(m.group(2)) != 0:
        return Fraction(int(m.group(1)), int(m.group(2)))
    return None


def answers_equal(a: str | None, b: str | None) -> bool:
    """Whether two answer texts are the same number (False if either is not a number)."""
    x, y = parse_number(a), parse_number(b)
    return x is not None and y is not None and x == y


def majority(candidates: Sequence[Candidate]) -> tuple[str | None, int]:
    """The majority answer of `candidates` and its number of votes; `(None, 0)` if none has an
    answer.

    Answers are compared numerically. Candidates without an answer do not vote; an unparsable
    answer is a group of its own (it equals nothing, not even an identical text). Ties go to the
    group whose first member comes earliest (step order); the returned text is that first
    member's.
    """
    groups: dict[object, list[int]] = {}
    for i, cand in enumerate(candidates):
        if cand.answer is None:
            continue
        value = parse_number(cand.answer)
        groups.setdefault(("n", value) if value is not None else ("t", i), []).append(i)
    if not groups:
        return None, 0
    best = min(groups.values(), key=lambda members: (-len(members), members[0]))
    return candidates[best[0]].answer, len(best)


def vote_answer(candidates: Sequence[Candidate]) -> str | None:
    """The majority answer of `candidates` (see `majority`), or None."""
    return majority(candidates)[0]


def final_answer_of(output: Any) -> str | None:
    """The answer a topology's output stands for.

    A `MathState` (or its dict / JSON): `current_answer`. A list or tuple of states (e.g. a
    `Parallel` with `collect_all`): the majority vote over all their candidates (see
    `vote_answer`). A number: its text. Any other text: the answer after `A:`, else
    after `####`, else the text itself. None: None.
    """
    if output is None:
        return None
    if isinstance(output, MathState | dict):
        return current_answer(coerce_state(output))
    if isinstance(output, list | tuple):
        return vote_answer(merge_states(list(output)).candidates)  # pyright: ignore[reportUnknownArgumentType]
    if isinstance(output, int | float | Fraction) and not isinstance(output, bool):
        return str(output)
    if isinstance(output, str):
        text = output.strip()
        if text.startswith("{"):
            return current_answer(coerce_state(text))
        answer = extract_solution_answer(text)
        if answer is not None:
            return answer
        if "####" in text:
            return extract_gold_answer(text)
        return text
    return None


def is_blank(output: Any) -> bool:
    """Whether a topology output holds no candidate solution at all (the evaluator counts such
    runs as blank, apart from wrong answers: field case F5).

    Blank: None, empty text, an empty list, a `MathState` (or list of them) without candidates
    (e.g. a topology of functions only). A cut-off solution is not blank: it is a wrong answer.
    """
    if output is None:
        return True
    if isinstance(output, str):
        text = output.strip()
        if not text:
            return True
        return text.startswith("{") and not coerce_state(text).candidates
    if isinstance(output, MathState | dict):
        return not coerce_state(output).candidates
    if isinstance(output, list | tuple):
        items: list[Any] = list(output)  # pyright: ignore[reportUnknownArgumentType]
        return all(is_blank(x) for x in items)
    return False


def score_final_answer(output: Any, example: Any) -> float:
    """1.0 when the output's final answer equals `example.expected` numerically, else 0.0.

    `example` is a `GoldExample` whose `expected` is the gold answer text (e.g. `"18"`).
    """
    expected = example.expected
    return (
        1.0
        if answers_equal(final_answer_of(output), None if expected is None else str(expected))
        else 0.0
    )
