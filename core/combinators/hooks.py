"""How a problem that uses the standard library runs its agents on ballots (hydration hooks).

`BallotHooks` is passed to `core.hydrate.topology_from_spec(hooks=...)` (the problem's evaluator
does it: `Problem.hydration_hooks`). It changes no runtime primitive:

- every agent step is wrapped: given a `Ballot` it is prompted with the ballot's ORIGINAL input
  (so its call, and its call-cache key, is the one the agent alone makes) and returns the ballot
  with its candidate appended; given anything else (the example's raw input, or what a
  problem's own step returned) it is prompted with that value, as a plain agent step is, and
  returns a new ballot over it. When a refinement loop's state updater left a critique on the
  ballot, the prompt asks to revise the current answer with it (`revision_prompt`);
- the topology's output is unwrapped (`ballot_output`), so the evaluator, the score function,
  the blank test and the stored outputs see what a plain agent would have returned;
- an agent used as a router's classifier or a loop's evaluator is prompted with `plain_value`
  of its input (the current output, or the input before any candidate), as without the library.
"""

from __future__ import annotations

from typing import Any

from core.combinators.ballot import (
    Answer,
    Ballot,
    BallotCandidate,
    ballot_output,
    input_text,
    plain_value,
)
from core.runtime import AgentStep, Step

__all__ = ["BallotAgentStep", "BallotHooks", "revision_prompt"]


def revision_prompt(ballot: Ballot) -> str:
    """The prompt of an agent step that revises the current answer with the ballot's critique."""
    current = ballot.current()
    previous = "" if current is None else input_text(current.output)
    return (
        f"{input_text(ballot.input)}\n\nA previous answer was:\n{previous}\n\n"
        f"A reviewer said:\n{ballot.critique or ''}\n\nGive a corrected answer."
    )


class BallotAgentStep:
    """An agent step on ballots (module docstring): the same name, node id and calls.

    Args:
        inner: the hydrated agent step.
        answer: how its output's answer is read and normalised.
    """

    __slots__ = ("_answer", "_inner", "node_id")

    def __init__(self, inner: AgentStep, answer: Answer) -> None:
        self._inner = inner
        self._answer = answer
        self.node_id = inner.node_id

    @property
    def step_name(self) -> str:
        return self._inner.step_name

    @property
    def inner(self) -> AgentStep:
        """The wrapped agent step."""
        return self._inner

    async def execute(self, input_data: Any) -> Ballot:
        if isinstance(input_data, Ballot):
            ballot = input_data
            revising = ballot.critique is not None and ballot.current() is not None
            prompt_input = revision_prompt(ballot) if revising else ballot.input
        else:
            ballot = Ballot(input=input_data)
            prompt_input = input_data
        output = await self._inner.execute(prompt_input)
        candidate = BallotCandidate(
            agent=self.step_name, output=output, answer=self._answer.key(output)
        )
        return ballot.with_candidate(candidate)

    def __repr__(self) -> str:
        return f"BallotAgentStep({self.step_name!r})"


class _Unwrapped:
    """The topology's root, returning the answer its ballot stands for."""

    __slots__ = ("_inner", "node_id")

    def __init__(self, inner: Step) -> None:
        self._inner = inner
        self.node_id = getattr(inner, "node_id", None)

    @property
    def step_name(self) -> str:
        return self._inner.step_name

    async def execute(self, input_data: Any) -> Any:
        return ballot_output(await self._inner.execute(input_data))


class BallotHooks:
    """Hydration hooks of a ballot-using problem (`core.hydrate.HydrationHooks`).

    Args:
        answer: how answers are read and normalised (the problem's `[answer]`).
    """

    __slots__ = ("answer",)

    def __init__(self, answer: Answer) -> None:
        self.answer = answer

    def agent_step(self, step: AgentStep) -> Step:
        """`step` on ballots."""
        return BallotAgentStep(step, self.answer)

    def root(self, step: Step) -> Step:
        """`step` returning the answer of its ballot."""
        return _Unwrapped(step)

    def agent_input(self, value: Any) -> Any:
        """An agent classifier or evaluator sees what it would without the library: the current
        output (`plain_value`), or the input before any candidate."""
        return plain_value(value)
