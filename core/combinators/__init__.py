"""The standard library of combinators: what a problem with only agents and a scorer is searched
with (votes, agreement gates, cascades, judges, self-consistency, critique-and-revise, routers
on input features).

Every problem gets it unless its TOML says `[search] standard_library = false`
(`core.problems.load_problem` calls `wire_standard_library`). Each entry is a registered
callable with a one-line description, its roles and its declared effect
(`core.ir.dataflow.NameEffect`), so the static rejections, the no-op normalisation and the
structure operators (`core.search.operators`) use it as they use a problem's own functions.

## The value between steps: a `Ballot`

A plain problem's agents take the example's input and return text or a structured output. A
gate needs the candidates so far AND the original input (its escalation agent is prompted
with the input, not with a list), so a library-using problem passes a `Ballot` between steps:
the original input, the candidates so far (agent, raw output, normalised answer), the chosen
one, the latest judge verdict and critique. The choice, and why:

- agent steps are wrapped at hydration (`BallotHooks`, passed to
  `core.hydrate.topology_from_spec(hooks=...)` by the problem's evaluator; no runtime primitive
  changes): given a ballot, an agent is prompted with the ORIGINAL input, so its call, and its
  call-cache key, is the call the agent alone makes (a gate reuses the singles' calls and is
  costed like any call); given a raw value it is prompted with that value, as today;
- the topology's output is unwrapped: the evaluator scores the answer the final ballot
  stands for (the chosen candidate's raw output, else the last candidate's), so score
  functions, blank tests and stored outputs see what a plain agent returns, and a single agent
  scores and costs exactly what it did without the library;
- a problem's own callables get `plain_value` of their arguments (the current output, or the
  input before any candidate), so they keep the values they were written for.
- a problem with no `step` callable of its own answers only through agents: a topology with
  no agent step is rejected statically (`no_agent`, `EffectTable.answer_needs_agent`), since
  the library's steps only choose among candidates.

A problem that declares effects of its own (`ProblemParts.effects`, e.g. `gsm8k_replay` with
its `MathState`) has a state of its own: the ballot entries cannot read it and are not offered
there (no name that would fail at run time); only the input features are, and only when the
problem gives `ProblemParts.input_text`. Its own functions are all it is searched with, so its
fronts are unchanged.

## Answers

Votes and agreement compare normalised answers (`Answer`): the output itself, or the
`[answer] field = "label"` of a structured output (or `ProblemParts.answer_of`), normalised by
`[answer] normalization`: `"text"` (strip, collapse spaces, casefold; the default), `"numeric"`
(the first number: `"$1,200.0"` equals `"1200"`), `"exact"`, or `ProblemParts.normalize_answer`.
A missing or blank answer is `""`: it never votes and never agrees.

## Entries

| name                      | roles          | effect                                    | what it does |
|---------------------------|----------------|-------------------------------------------|--------------|
| `collect_candidates`      | merge          | `combine="all"`                           | every branch's candidates in one ballot, branch order |
| `plurality_vote`          | step           | `needs_candidates=2`                      | chooses the most common answer; ties to the earliest candidate (the operators list vote branches dearest first, so a tie sides with the dearest agent); no answer at all: no choice |
| `keep_answer`             | step           | `identity=True`                           | the accept route of a gate or cascade |
| `all_agree`               | condition      | `needs_candidates=2, verdict="accept"`    | n of n: two or more candidates, one non-blank answer |
| `majority_agrees`         | condition      | `needs_candidates=3, verdict="accept"`    | k of n, k > n/2, n >= 3 |
| `answer_present`          | condition      | `needs_candidates=1, verdict="accept"`    | the current answer is not blank |
| `judge_by_<agent>`        | condition      | `needs_candidates=1, verdict="accept", calls_agent=<agent>` | a verifier: asks the agent "is this answer correct for this input? yes/no" (one call, cached and costed like any) |
| `critique_by_<agent>`     | evaluator      | `needs_candidates=1, calls_agent=<agent>` | the same question as a refinement loop's evaluator; the reply is the feedback |
| `revise_with_critique`    | state_updater  | none                                      | the loop's next input: the ballot with the critique, so the next agent step revises its answer |
| `input_is_long`           | condition      | none (reads the input)                    | longer than the median validation input |
| `input_has_digits`        | condition      | none                                      | a digit |
| `input_has_code`          | condition      | none                                      | a fenced or indented code block |
| `input_has_question_mark` | condition      | none                                      | a `?` |
| `input_non_latin`         | condition      | none                                      | letters outside the Latin script |

Input features constant over the validation inputs are not registered (a router on them always
takes one way). Self-consistency is no entry but a structure: one agent `vote_k` times in a
parallel (`collect_candidates`, then `plurality_vote`); the call cache numbers identical calls
within a run (`core.agents.call_cache.CallContext.occurrence`), so the repeats are distinct
calls. The opening proposes it where `EffectTable.sampled_agents` (set for ballot problems).

A problem's own names win: an entry whose name the problem registered is not added, and the
problem's names come first in every role. Further entries (learned conditions) join a
`Library` with `Library.add` before it is registered.
"""

from core.combinators.ballot import (
    Answer,
    Ballot,
    BallotCandidate,
    Normalization,
    ballot_output,
    normalize_numeric,
    normalize_text,
)
from core.combinators.hooks import BallotAgentStep, BallotHooks
from core.combinators.library import (
    CombinatorEntry,
    Library,
    judge_prompt,
    plurality_choice,
    standard_library,
)
from core.combinators.wiring import LibraryWiring, wire_standard_library

__all__ = [
    "Answer",
    "Ballot",
    "BallotAgentStep",
    "BallotCandidate",
    "BallotHooks",
    "Library",
    "CombinatorEntry",
    "LibraryWiring",
    "Normalization",
    "ballot_output",
    "judge_prompt",
    "normalize_numeric",
    "normalize_text",
    "plurality_choice",
    "standard_library",
    "wire_standard_library",
]
