"""The value that flows between the steps of a problem that uses the standard library.

A `Ballot` holds the original input, the candidates gathered so far (each with the agent that
gave it, its raw output and its normalised answer), a chosen final answer, the latest judge
verdict and the latest critique. Agent steps are prompted with the ORIGINAL input whatever ballot
they are given (`core.combinators.hooks`), so a gate's call of agent X is the same call as X
alone (one call-cache key, one price).

The answer a ballot stands for (`ballot_output`): the candidate a selection step chose (its raw
output), else the last candidate's raw output, else None; score functions receive exactly what
a plain agent would have returned.
"""

from __future__ import annotations

import math
import re
import unicodedata
from collections.abc import Callable, Sequence
from typing import Any, Literal, cast

from pydantic import BaseModel, ConfigDict

__all__ = [
    "Answer",
    "AnswerReader",
    "Ballot",
    "BallotCandidate",
    "Normalization",
    "ballot_output",
    "input_text",
    "normalize_numeric",
    "normalize_text",
    "plain_value",
]

_CONFIG = ConfigDict(frozen=True, extra="forbid", use_attribute_docstrings=True)

Normalization = Literal["text", "numeric", "exact"]
"""How answers are compared: `"text"` strips and casefolds (the default), `"numeric"` compares
the first number in the answer (`"$1,200.0"` and `"1200"` agree; text without a number falls
back to `"text"`), `"exact"` compares the text as is."""


class BallotCandidate(BaseModel):
    """One candidate answer."""

    model_config = _CONFIG

    agent: str
    """The step that produced it (the agent's name)."""
    output: Any = None
    """The agent's raw output (text or a structured output)."""
    answer: str = ""
    """The normalised answer compared by votes and agreement; `""` when there is none."""


class Ballot(BaseModel):
    """The original input and what the steps made of it so far."""

    model_config = _CONFIG

    input: Any = None
    """The example's input, exactly as the gold set gives it."""
    candidates: tuple[BallotCandidate, ...] = ()
    """Candidates in the order the steps produced them (a parallel: branch order)."""
    chosen: int | None = None
    """Index into `candidates` of the one a selection step chose; cleared when a candidate is
    added."""
    verdict: bool | None = None
    """The latest judge verdict on the current answer (True: judged correct)."""
    critique: str | None = None
    """Feedback for the next agent step (a refinement loop's state updater sets it): that step
    is prompted to revise the current answer with it."""

    def with_candidate(self, candidate: BallotCandidate) -> Ballot:
        """This ballot with `candidate` appended; `chosen`, `verdict` and `critique` cleared."""
        return Ballot(input=self.input, candidates=(*self.candidates, candidate))

    def choose(self, index: int | None) -> Ballot:
        """This ballot with `chosen` set (None: no choice)."""
        return self.model_copy(update={"chosen": index})

    def current(self) -> BallotCandidate | None:
        """The chosen candidate, else the last one, else None."""
        if self.chosen is not None and 0 <= self.chosen < len(self.candidates):
            return self.candidates[self.chosen]
        return self.candidates[-1] if self.candidates else None


def ballot_output(value: Any) -> Any:
    """The answer `value` stands for: a ballot's current candidate's raw output (None without
    one); anything else as is."""
    if isinstance(value, Ballot):
        current = value.current()
        return None if current is None else current.output
    return value


def plain_value(value: Any) -> Any:
    """What a problem's own callable receives instead of a ballot: its current output, or its
    input when it has no candidate yet; lists and tuples element by element; others as is."""
    if isinstance(value, Ballot):
        return value.input if not value.candidates else ballot_output(value)
    if isinstance(value, list | tuple):
        items = cast(Sequence[Any], value)
        return [plain_value(v) for v in items]
    return value


def input_text(value: Any) -> str:
    """The text of an input: a ballot's original input; a str as is; a Pydantic model as JSON;
    anything else with `str`."""
    if isinstance(value, Ballot):
        value = value.input
    if isinstance(value, str):
        return value
    if isinstance(value, BaseModel):
        return value.model_dump_json()
    return "" if value is None else str(value)


def normalize_text(text: str) -> str:
    """Strip, collapse inner whitespace and casefold (Unicode NFKC first)."""
    return " ".join(unicodedata.normalize("NFKC", text).split()).casefold()


_NUMBER = re.compile(r"-?\d[\d,]*(?:\.\d+)?|-?\.\d+")


def normalize_numeric(text: str) -> str:
    """The first number in `text` in a canonical form (`"$1,200.50"` -> `"1200.5"`, `"12.0"` ->
    `"12"`); `normalize_text(text)` when there is none."""
    m = _NUMBER.search(text)
    if m is None:
        return normalize_text(text)
    try:
        number = float(m.group(0).replace(",", ""))
    except ValueError:  # pragma: no cover - the pattern only matches numbers
        return normalize_text(text)
    if not math.isfinite(number):  # pragma: no cover - digits only
        return normalize_text(text)
    if number == int(number):
        return str(int(number))
    return repr(number)


_NORMALIZERS: dict[str, Callable[[str], str]] = {
    "text": normalize_text,
    "numeric": normalize_numeric,
    "exact": lambda s: s,
}

AnswerReader = Callable[[Any], Any]
"""`output -> answer value`: reads the answer out of an agent's (structured) output."""


class Answer:
    """How the answer of an output is read and compared (the problem's `[answer]` table).

    Args:
        field: the answer field of a structured output (an attribute, or a key of a mapping);
            None: the output itself.
        normalization: `Normalization` (default `"text"`).
        answer_of: the problem's own reader `output -> answer` (replaces `field`).
        normalize: the problem's own `answer text -> comparable text` (replaces
            `normalization`).
    """

    __slots__ = ("_answer_of", "_field", "_normalize", "normalization")

    def __init__(
        self,
        field: str | None = None,
        normalization: Normalization = "text",
        *,
        answer_of: AnswerReader | None = None,
        normalize: Callable[[str], str] | None = None,
    ) -> None:
        self._field = field
        self.normalization: Normalization = normalization
        self._answer_of = answer_of
        self._normalize = normalize if normalize is not None else _NORMALIZERS[normalization]

    def value(self, output: Any) -> Any:
        """The answer value of `output` (None when the field is missing)."""
        if isinstance(output, Ballot):
            output = ballot_output(output)
        if self._answer_of is not None:
            return self._answer_of(output)
        if self._field is None or output is None:
            return output
        if isinstance(output, dict):
            return cast(dict[str, Any], output).get(self._field)
        return getattr(output, self._field, None)

    def key(self, output: Any) -> str:
        """The normalised answer of `output`, `""` when it has none (None or blank)."""
        value = self.value(output)
        if value is None:
            return ""
        text = value if isinstance(value, str) else str(value)
        return self._normalize(text) if text.strip() else ""
