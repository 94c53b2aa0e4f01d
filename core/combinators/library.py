"""The standard library's entries: each a registered callable with its roles and declared effect.

`Library` is an ordered registry of `CombinatorEntry`s (name, callable, one-line description, roles,
`NameEffect`); `standard_library(...)` builds the default one for a problem, and other modules
(learned conditions) add their entries to it with `Library.add`. `Library.register_into` puts
every entry into a problem's callable registry, roles and effect table.
"""

from __future__ import annotations

import re
import statistics
import unicodedata
from collections import Counter
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from core.combinators.ballot import Answer, Ballot, BallotCandidate, input_text
from core.hydrate import AgentRegistry, CallableRegistry
from core.ir.dataflow import NameEffect
from core.runtime import AgentStep, EvalResult

__all__ = [
    "COLLECT",
    "KEEP",
    "VOTE",
    "CombinatorEntry",
    "Library",
    "agreement_entries",
    "all_agree",
    "answer_present",
    "ballot_entries",
    "input_feature_entries",
    "judge_entries",
    "judge_prompt",
    "majority_agrees",
    "plurality_choice",
    "said_yes",
    "standard_library",
]

COLLECT = "collect_candidates"
"""The collecting merge's name."""
VOTE = "plurality_vote"
"""The plurality vote's name."""
KEEP = "keep_answer"
"""The keep-answer identity step's name."""

_ROLES = ("step", "merge", "condition", "classifier", "evaluator", "state_updater")


@dataclass(frozen=True, slots=True)
class CombinatorEntry:
    """One library entry.

    Attributes:
        name: its registered name.
        fn: the callable (sync or async).
        description: one line, for people and the meta agent.
        roles: the callable roles it can play (`core.problems.CallableRole`).
        effect: what it reads and produces (`core.ir.dataflow.NameEffect`).
    """

    name: str
    fn: Callable[..., Any]
    description: str
    roles: tuple[str, ...]
    effect: NameEffect

    def __post_init__(self) -> None:
        bad = [r for r in self.roles if r not in _ROLES]
        if bad or not self.roles:
            raise ValueError(f"entry {self.name!r}: roles must be some of {list(_ROLES)}")


class Library:
    """Entries in registration order; names are unique."""

    def __init__(self, entries: Sequence[CombinatorEntry] = ()) -> None:
        self._entries: dict[str, CombinatorEntry] = {}
        for entry in entries:
            self.add(entry)

    def add(self, entry: CombinatorEntry) -> None:
        """Add `entry`.

        Raises:
            ValueError: an entry of that name is already there.
        """
        if entry.name in self._entries:
            raise ValueError(f"the library already has an entry {entry.name!r}")
        self._entries[entry.name] = entry

    def __iter__(self) -> Iterator[CombinatorEntry]:
        return iter(self._entries.values())

    def __len__(self) -> int:
        return len(self._entries)

    def __contains__(self, name: object) -> bool:
        return name in self._entries

    def names(self) -> list[str]:
        """CombinatorEntry names in registration order."""
        return list(self._entries)

    def register_into(
        self,
        callables: CallableRegistry,
        roles: Mapping[str, Sequence[str]],
        effects: Mapping[str, NameEffect],
    ) -> tuple[dict[str, list[str]], dict[str, NameEffect]]:
        """Register every entry whose name `callables` does not hold yet (a problem's own name
        wins), and return `roles` and `effects` with the added entries appended.

        Returns:
            `(roles, effects)`: new mappings; the problem's own names come first in each role.
        """
        out_roles = {r: list(roles.get(r, ())) for r in _ROLES}
        out_effects = dict(effects)
        for entry in self:
            if entry.name in callables:
                continue
            callables.register(entry.name, entry.fn, entry.description)
            for role in entry.roles:
                out_roles[role].append(entry.name)
            out_effects[entry.name] = entry.effect
        return out_roles, out_effects


# --- merge, vote, keep ---------------------------------------------------------------------------


def _ballots_merged(outputs: Sequence[Any], answer: Answer) -> Ballot:
    """One ballot from a parallel's branch outputs (module docstring of `core.combinators`)."""
    ballots = [o for o in outputs if isinstance(o, Ballot)]
    if not ballots:
        raise ValueError(f"{COLLECT}: no branch returned a ballot (its branches must run agents)")
    candidates: list[BallotCandidate] = []
    for out in outputs:
        if isinstance(out, Ballot):
            candidates.extend(out.candidates)
        else:
            candidates.append(BallotCandidate(agent="", output=out, answer=answer.key(out)))
    return Ballot(input=ballots[0].input, candidates=tuple(candidates))


def plurality_choice(candidates: Sequence[BallotCandidate]) -> int | None:
    """The index of the plurality answer's first candidate; ties go to the answer whose first
    candidate comes earliest (the operators list vote branches dearest agent first, so a tie
    sides with the dearest agent). Blank answers (`""`) do not vote; None when no candidate
    has an answer."""
    counts = Counter(c.answer for c in candidates if c.answer)
    if not counts:
        return None
    best = max(counts.values())
    return next(i for i, c in enumerate(candidates) if c.answer and counts[c.answer] == best)


def _as_ballot(value: Any) -> Ballot:
    return value if isinstance(value, Ballot) else Ballot(input=value)


def ballot_entries(answer: Answer) -> list[CombinatorEntry]:
    """The collecting merge, the plurality vote and keep-answer."""

    def collect_candidates(outputs: Sequence[Any]) -> Ballot:
        return _ballots_merged(list(outputs), answer)

    def plurality_vote(state: Any) -> Ballot:
        ballot = _as_ballot(state)
        return ballot.choose(plurality_choice(ballot.candidates))

    def keep_answer(state: Any) -> Any:
        return state

    return [
        CombinatorEntry(
            COLLECT,
            collect_candidates,
            "Collects every branch's candidates into one ballot, in branch order.",
            ("merge",),
            NameEffect(combine="all"),
        ),
        CombinatorEntry(
            VOTE,
            plurality_vote,
            "Chooses the most common answer; ties go to the earliest candidate.",
            ("step",),
            NameEffect(needs_candidates=2),
        ),
        CombinatorEntry(
            KEEP,
            keep_answer,
            "Keeps the current answer (the accept route of a gate or cascade).",
            ("step",),
            NameEffect(identity=True),
        ),
    ]


# --- agreement verdicts --------------------------------------------------------------------------


def all_agree(state: Any) -> bool:
    """At least two candidates, every one with the same non-blank answer."""
    ballot = _as_ballot(state)
    answers = {c.answer for c in ballot.candidates}
    return len(ballot.candidates) >= 2 and len(answers) == 1 and "" not in answers


def majority_agrees(state: Any) -> bool:
    """More than half of at least three candidates share one non-blank answer."""
    ballot = _as_ballot(state)
    n = len(ballot.candidates)
    counts = Counter(c.answer for c in ballot.candidates if c.answer)
    return n >= 3 and bool(counts) and max(counts.values()) * 2 > n


def answer_present(state: Any) -> bool:
    """The current candidate has a non-blank answer."""
    current = _as_ballot(state).current()
    return current is not None and current.answer != ""


def agreement_entries() -> list[CombinatorEntry]:
    """`all_agree` (2 of 2, or n of n), `majority_agrees` (k of n, k > n/2, n >= 3) and
    `answer_present`: conditions whose true means the answer is accepted."""
    return [
        CombinatorEntry(
            "all_agree",
            all_agree,
            "True when two or more candidates all give the same non-blank answer.",
            ("condition",),
            NameEffect(needs_candidates=2, verdict="accept"),
        ),
        CombinatorEntry(
            "majority_agrees",
            majority_agrees,
            "True when more than half of three or more candidates give one answer.",
            ("condition",),
            NameEffect(needs_candidates=3, verdict="accept"),
        ),
        CombinatorEntry(
            "answer_present",
            answer_present,
            "True when the current answer is not blank.",
            ("condition",),
            NameEffect(needs_candidates=1, verdict="accept"),
        ),
    ]


# --- judges and critique-and-revise --------------------------------------------------------------


def judge_prompt(ballot: Ballot) -> str:
    """What a judge agent is asked about the ballot's current answer."""
    current = ballot.current()
    answer = "" if current is None else input_text(current.output)
    return (
        f"Input:\n{input_text(ballot.input)}\n\nProposed answer:\n{answer}\n\n"
        "Is this answer correct for this input? Reply yes or no, then say what is wrong."
    )


def said_yes(text: str) -> bool:
    """Whether a judge's reply starts with yes (after stripping spaces and punctuation)."""
    return text.strip().lstrip("*_\"'`([ ").casefold().startswith("yes")


class _Judge:
    """One registered agent used as a judge, its calls made as agent steps (so they are
    cached, traced and costed like any call)."""

    def __init__(self, agents: AgentRegistry, agent: str, answer: Answer) -> None:
        self._agents = agents
        self._agent = agent
        self._answer = answer
        self._step: AgentStep | None = None

    async def reply(self, ballot: Ballot) -> str:
        if self._step is None:
            self._step = AgentStep(self._agents.create(self._agent), name=self._agent)
        out = await self._step.execute(judge_prompt(ballot))
        value = self._answer.value(out)
        return input_text(value if value is not None else out)


def judge_entries(
    agents: AgentRegistry, names: Sequence[str], answer: Answer
) -> list[CombinatorEntry]:
    """For each agent in `names`: `judge_by_<agent>` (a condition: the agent says the current
    answer is correct) and `critique_by_<agent>` (a loop evaluator: the same question, its reply
    the feedback); and once, `revise_with_critique` (the loop's state updater)."""
    out: list[CombinatorEntry] = []
    for name in names:
        judge = _Judge(agents, name, answer)

        async def judged(state: Any, judge: _Judge = judge) -> bool:
            ballot = _as_ballot(state)
            if ballot.current() is None:
                return False
            return said_yes(await judge.reply(ballot))

        async def critique(state: Any, judge: _Judge = judge) -> EvalResult:
            ballot = _as_ballot(state)
            if ballot.current() is None:
                return EvalResult(passed=False, feedback="There is no answer yet.")
            reply = await judge.reply(ballot)
            return EvalResult(passed=said_yes(reply), feedback=reply)

        out.append(
            CombinatorEntry(
                f"judge_by_{name}",
                judged,
                f"Asks agent {name} whether the current answer is correct (one call).",
                ("condition",),
                NameEffect(needs_candidates=1, verdict="accept", calls_agent=name),
            )
        )
        out.append(
            CombinatorEntry(
                f"critique_by_{name}",
                critique,
                f"Agent {name} reviews the current answer (passes when it says yes).",
                ("evaluator",),
                NameEffect(needs_candidates=1, calls_agent=name),
            )
        )
    if names:

        def revise_with_critique(_input: Any, output: Any, result: Any) -> Ballot:
            feedback = getattr(result, "feedback", "") or ""
            return _as_ballot(output).model_copy(update={"critique": feedback})

        out.append(
            CombinatorEntry(
                "revise_with_critique",
                revise_with_critique,
                "Next loop input: the answer so far with the reviewer's feedback to revise.",
                ("state_updater",),
                NameEffect(),
            )
        )
    return out


# --- generic input features ----------------------------------------------------------------------

_CODE_BLOCK = re.compile(r"```|^(?: {4}|\t)\S", re.MULTILINE)


def _non_latin(text: str) -> bool:
    for ch in text:
        if ch.isalpha() and not unicodedata.name(ch, "").startswith("LATIN"):
            return True
    return False


def input_feature_entries(
    inputs: Sequence[Any], text_of: Callable[[Any], str] = input_text
) -> list[CombinatorEntry]:
    """Conditions on the input alone (needs no candidate), for routers: the input is longer
    than the median of `inputs` (the validation inputs), has a digit, a code block, a question
    mark, letters outside the Latin script. Only features that are not constant over `inputs`
    are returned (a router on a constant feature always takes one way)."""
    texts = [text_of(x) for x in inputs]
    median = int(statistics.median(len(t) for t in texts)) if texts else 0

    def longer(state: Any) -> bool:
        return len(text_of(state)) > median

    def digits(state: Any) -> bool:
        return any(ch.isdigit() for ch in text_of(state))

    def code(state: Any) -> bool:
        return _CODE_BLOCK.search(text_of(state)) is not None

    def question(state: Any) -> bool:
        return "?" in text_of(state)

    def script(state: Any) -> bool:
        return _non_latin(text_of(state))

    features: list[tuple[str, Callable[[Any], bool], str]] = [
        ("input_is_long", longer, f"True when the input is longer than {median} characters."),
        ("input_has_digits", digits, "True when the input holds a digit."),
        ("input_has_code", code, "True when the input holds a code block."),
        ("input_has_question_mark", question, "True when the input holds a question mark."),
        ("input_non_latin", script, "True when the input has letters outside the Latin script."),
    ]
    out: list[CombinatorEntry] = []
    for name, fn, description in features:
        if len({fn(x) for x in inputs}) == 2:
            out.append(CombinatorEntry(name, fn, description, ("condition",), NameEffect()))
    return out


def standard_library(
    answer: Answer,
    *,
    agents: AgentRegistry,
    inputs: Sequence[Any],
    ballots: bool = True,
    text_of: Callable[[Any], str] | None = None,
    extra: Sequence[CombinatorEntry] = (),
) -> Library:
    """The default library of a problem.

    Args:
        answer: how answers are read and normalised.
        agents: the problem's agents (each may act as a judge and a critic).
        inputs: the validation inputs (the input features keep those not constant on them).
        ballots: the problem's steps pass ballots (no state of its own): every entry; False:
            only the input features, and only with `text_of`.
        text_of: the problem's own input-text reader (for a problem with its own state).
        extra: further entries (e.g. learned conditions), added after the standard ones.

    Raises:
        ValueError: an `extra` entry has a standard entry's name.
    """
    if not ballots:
        features = input_feature_entries(inputs, text_of) if text_of is not None else []
        return Library([*features, *extra])
    entries = [*ballot_entries(answer), *agreement_entries()]
    entries += judge_entries(agents, agents.names(), answer)
    entries += input_feature_entries(inputs, text_of or input_text)
    return Library([*entries, *extra])
