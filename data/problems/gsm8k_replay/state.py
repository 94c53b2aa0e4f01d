"""The typed state that flows between the steps of a GSM8K topology.

A topology's input is a `MathState` with only the question. Every replay agent returns the
state with its recorded solution appended as a `Candidate` (and `final_answer` cleared);
selection steps (`extract_final_answer`, `majority_vote`, ...) set `final_answer`. The answer a
state stands for is `current_answer(state)`: `final_answer` when a selection step set it, else
the last candidate's answer.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from pydantic import BaseModel, ConfigDict, ValidationError

__all__ = ["Candidate", "MathState", "coerce_state", "current_answer", "merge_states"]

_CONFIG = ConfigDict(frozen=True, extra="forbid", use_attribute_docstrings=True)


class Candidate(BaseModel):
    """One candidate solution, as a recorded run produced it."""

    model_config = _CONFIG

    run: str
    """The run (agent) that produced it, e.g. `"175b_finetuning"`."""
    solution: str
    """The solution text, ending in a line `A: <number>` unless it was cut off."""
    answer: str | None
    """The final answer text after `A:` (e.g. `"18"`), None when the solution was cut off."""


class MathState(BaseModel):
    """A GSM8K problem and the candidate solutions gathered so far."""

    model_config = _CONFIG

    question: str
    """The problem text, exactly as in the dataset (the replay looks recordings up by it)."""
    candidates: tuple[Candidate, ...] = ()
    """Candidate solutions in the order the steps produced them."""
    final_answer: str | None = None
    """The answer chosen by a selection step; cleared whenever a candidate is added."""

    def with_candidate(self, candidate: Candidate) -> MathState:
        """This state with `candidate` appended and `final_answer` cleared."""
        return MathState(question=self.question, candidates=(*self.candidates, candidate))

    def with_final_answer(self, answer: str | None) -> MathState:
        """This state with `final_answer` set."""
        return self.model_copy(update={"final_answer": answer})


def coerce_state(value: Any) -> MathState:
    """A `MathState` from a state, its dict or JSON, or a bare question string.

    Raises:
        TypeError: for any other value (e.g. a list: merge branch outputs first).
    """
    if isinstance(value, MathState):
        return value
    if isinstance(value, dict):
        return MathState.model_validate(value)
    if isinstance(value, str):
        text = value.strip()
        if text.startswith("{"):
            try:
                return MathState.model_validate_json(text)
            except ValidationError:
                pass
        return MathState(question=value)
    raise TypeError(
        f"expected a MathState (or its JSON, or a question), got {type(value).__name__}"
    )


def current_answer(state: MathState) -> str | None:
    """`final_answer` if set, else the last candidate's answer, else None."""
    if state.final_answer is not None:
        return state.final_answer
    if state.candidates:
        return state.candidates[-1].answer
    return None


def merge_states(states: Sequence[Any]) -> MathState:
    """One state from several branch states of the same question: every candidate, in branch
    order then step order; `final_answer` cleared.

    Raises:
        ValueError: no states, or states of different questions.
    """
    coerced = [coerce_state(s) for s in states]
    if not coerced:
        raise ValueError("nothing to merge: no branch produced a state")
    question = coerced[0].question
    if any(s.question != question for s in coerced):
        raise ValueError("cannot merge states of different questions")
    return MathState(question=question, candidates=tuple(c for s in coerced for c in s.candidates))
