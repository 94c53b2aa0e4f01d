"""Learned routers in a search: fitted on the train split, registered by digest, journaled with
the run, written beside an applied spec.

Rule (the whole life of one, `core.combinators.learned` has the artefact itself):

1. **Proposed by the front bridges** (`core.search.strategies.evolutionary`), only when the
   problem has a train split (`[gold] train_size`): for two front neighbours (cheap, dear),
   both are run on every train example through the run's own evaluator and evaluation cache
   (`TrainAccess.scores`; the results are journaled as `ExampleEvaluated` with split
   `"train"`, counted in the budget's examples and USD, not in its candidate evaluations), "the
   cheaper one is right" is fitted on the train examples' input features, read from the
   question text the conditions route on (`TrainAccess.text_of`: the problem's reader, never a
   candidate a step added; a problem with a state of its own and no reader gets no learned
   router) (`fit_between`: `fit_learned_condition`, logistic, text features), and one
   artefact per threshold of `thresholds_for_shares(P(train), LEARNED_SHARES)` gives one
   `router(when learned_<digest>: cheap, else dear)` each (a threshold that routes every train
   input one way, as tied probabilities can, gives none): one fit, a curve of points between
   the neighbours, proposed after the gap's input-feature mixes by default
   (`EvolutionaryConfig.bridge_order`). Learned parts never see the validation or test split.
   No train split: nothing here runs, the search is exactly what it was.
2. **The threshold is part of the artefact**, so each threshold is its own artefact, its own
   digest and its own registered name (`learned_<first 12 hex digits>`): a spec carries no
   code and no parameter, only `condition_name`.
3. **Registered where everything sees them**: `TrainAccess.learn` registers the artefact in the
   evaluator's callable registry (`register_learned`: a `LearnedRoute` object, no eval, no
   import), which the checker's copy of the evaluator shares; the evaluator's forked workers
   inherited the registry at their fork, so a new name closes them and the next evaluation
   forks fresh ones; a remote batch carries the artefacts its spec names (`RemoteBatch.learned`)
   and the worker registers them before hydrating.
4. **Journaled**: the first `CandidateProposed` whose spec names an artefact carries its JSON
   (`CandidateProposed.learned`); `search --resume` registers every recorded artefact by digest
   (`artefacts_from_events`) before anything is checked or evaluated, so a resumed run routes
   exactly as the interrupted one did.
5. **Applied**: `apply_result` / `apply_specs` (and the CLI `apply`, which reads the run's
   journal; the studio's approve, which reads the proposal's run journal, then the registry's
   `learned/` folders, then the other journals: `find_artefacts`) write every artefact the
   applied spec names into `learned/` beside the registry's spec files (`write_artefacts`,
   before the version is written), and `load_applied` reads a registry's spec with the files
   of that folder the spec names, registering them again (a name the folder lacks is an
   error before anything runs). The CLI `evaluate` of a spec file reads the `learned/`
   folder beside it the same way; the studio's evaluate looks where its approve does.
"""

from __future__ import annotations

import os
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from core.combinators.ballot import input_text
from core.combinators.learned import (
    LEARNED_PREFIX,
    LearnedCondition,
    featurize,
    fit_learned_condition,
    learned_condition_of,
    read_artefacts,
    register_learned,
    thresholds_for_shares,
    write_artefacts,
)
from core.errors import SpecError, StoreError
from core.evaluation._run import example_key
from core.evaluation.metrics import GoldExample
from core.hydrate import CallableRegistry
from core.ir import TopologySpec, parse_topology
from core.ir.models import AnyNode, RouterSpec, walk
from core.storage.journal import read_journal
from core.vocab.events import CandidateProposed, SearchEvent

__all__ = [
    "LEARNED_FOLDER",
    "LEARNED_SHARES",
    "TrainAccess",
    "artefacts_from_events",
    "artefacts_from_journals",
    "artefacts_named",
    "find_artefacts",
    "fit_between",
    "learned_names",
    "learned_names_in_json",
    "load_applied",
    "register_all",
    "write_beside",
]

LEARNED_SHARES: tuple[float, ...] = (0.25, 0.5, 0.75)
"""The shares of train inputs the learned routers of one fit send to the cheaper neighbour (one
threshold each, `thresholds_for_shares`): a quarter, half and three quarters, three points
spread between the two ends."""

LEARNED_FOLDER = "learned"
"""The folder beside an applied spec's files that holds its learned artefacts."""


@dataclass(frozen=True, slots=True)
class TrainAccess:
    """What a strategy may do with the train split (`AskContext.train`; None: no train split).

    Attributes:
        examples: the train examples.
        scores: `await scores(candidate_idx, spec)`: per-example accuracy (mean over trials)
            of `spec` on every train example, by example key, evaluated through the run's
            evaluator and cache (journaled under `candidate_idx`); None when the budget or a
            stop allows no more work.
        learn: registers an artefact where the checker, the evaluator and its workers find it
            and keeps it for the journal; returns its registered name.
        text_of: what a learned condition reads of an input, at the fit as when routing (the
            evaluator's registry's `question_reader`: the problem's question text).
    """

    examples: tuple[GoldExample, ...]
    scores: Callable[[int, TopologySpec], Awaitable[dict[str, float] | None]]
    learn: Callable[[LearnedCondition], str]
    text_of: Callable[[Any], str] = input_text


def learned_names(spec: AnyNode) -> tuple[str, ...]:
    """The learned condition names `spec` routes on (`learned_<digest>`), in document order,
    each once."""
    out: list[str] = []
    for _, node in walk(spec):
        if isinstance(node, RouterSpec):
            for route in node.routes:
                name = route.condition_name
                if name is not None and name.startswith(LEARNED_PREFIX) and name not in out:
                    out.append(name)
    return tuple(out)


def learned_names_in_json(spec_json: str) -> tuple[str, ...]:
    """`learned_names` of a spec's JSON; `()` at once when the text cannot name one (so a run
    without learned routers parses nothing more), or when it is not a valid spec."""
    if LEARNED_PREFIX not in spec_json:
        return ()
    try:
        return learned_names(parse_topology(spec_json))
    except SpecError:
        return ()


def artefacts_named(
    names: Iterable[str], known: Mapping[str, LearnedCondition] | CallableRegistry
) -> list[LearnedCondition]:
    """The artefacts of `names`, from a mapping (name -> artefact) or a callable registry.

    Raises:
        KeyError: a name with no artefact there (names the missing ones).
    """
    out: list[LearnedCondition] = []
    missing: list[str] = []
    for name in names:
        cond: LearnedCondition | None = None
        if isinstance(known, CallableRegistry):
            if name in known:
                cond = learned_condition_of(known.get(name))
        else:
            cond = known.get(name)
        if cond is None:
            missing.append(name)
        else:
            out.append(cond)
    if missing:
        raise KeyError(f"no learned artefact for {missing}")
    return out


def register_all(conds: Iterable[LearnedCondition], callables: CallableRegistry) -> list[str]:
    """Register each artefact (`register_learned`; one already there is left); the names."""
    return [register_learned(cond, callables) for cond in conds]


def artefacts_from_events(events: Iterable[SearchEvent]) -> dict[str, LearnedCondition]:
    """Every learned artefact a run's `CandidateProposed` events carry, by registered name, in
    journal order (each digest is checked as it is read).

    Raises:
        pydantic.ValidationError: an artefact whose digest does not match its numbers.
    """
    out: dict[str, LearnedCondition] = {}
    for ev in events:
        if isinstance(ev, CandidateProposed):
            for text in ev.learned:
                cond = LearnedCondition.from_json(text)
                out.setdefault(cond.name, cond)
    return out


def artefacts_from_journals(
    paths: Iterable[str | os.PathLike[str]],
) -> dict[str, LearnedCondition]:
    """`artefacts_from_events` over run journals (`core.storage.journal`); a path with no file
    gives none (e.g. a run recorded elsewhere).

    Raises:
        StoreError: a journal line other than the last is not a valid event.
        pydantic.ValidationError: an artefact whose digest does not match its numbers.
    """
    out: dict[str, LearnedCondition] = {}
    for path in paths:
        if Path(path).is_file():
            for name, cond in artefacts_from_events(read_journal(path)).items():
                out.setdefault(name, cond)
    return out


def find_artefacts(
    names: Iterable[str],
    *,
    journals: Iterable[str | os.PathLike[str]] = (),
    folders: Iterable[str | Path] = (),
    skip_damaged: bool = False,
) -> dict[str, LearnedCondition]:
    """The artefacts of `names` (registered names), looked for in run journals
    (`artefacts_from_journals`), then in `learned/` folders (`read_artefacts` of those names
    only), in the order given, stopping once every name is found; by name, only those of
    `names`. Every artefact's digest is checked as it is read; a name found nowhere is left
    out (the caller's apply or hydration then names it).

    Args:
        skip_damaged: a journal or folder that cannot be read is passed over (for sources
            searched on the chance they hold one: another run's journal) instead of raising.

    Raises:
        StoreError: a journal line other than the last is not a valid event.
        ValueError, pydantic.ValidationError: a damaged artefact (unless `skip_damaged`).
    """
    want = list(dict.fromkeys(names))
    out: dict[str, LearnedCondition] = {}

    def missing() -> list[str]:
        return [n for n in want if n not in out]

    for path in journals:
        if not missing():
            return out
        try:
            found = artefacts_from_journals([path])
        except (StoreError, ValueError):
            if not skip_damaged:
                raise
            continue
        for name in missing():
            if name in found:
                out[name] = found[name]
    for folder in folders:
        if not missing():
            return out
        try:
            read = read_artefacts(folder, missing())
        except ValueError:  # pydantic's ValidationError is a ValueError
            if not skip_damaged:
                raise
            continue
        for cond in read.values():
            if cond.name in want:
                out.setdefault(cond.name, cond)
    return out


def fit_between(
    cheap_scores: Mapping[str, float],
    dear_scores: Mapping[str, float],
    examples: Sequence[GoldExample],
    *,
    cheaper: str,
    dearer: str,
    shares: Sequence[float] = LEARNED_SHARES,
    text_of: Callable[[Any], str] = input_text,
) -> list[LearnedCondition]:
    """The artefacts of one fit between two neighbours, one per threshold (module rule 1).

    Args:
        cheap_scores, dear_scores: train example key -> per-example accuracy of each neighbour.
        examples: the train examples (their inputs give the features: `text_of`, then the
            text features).
        cheaper, dearer: the neighbours' spec hashes (recorded in the artefact).
        shares: shares of the train inputs routed to the cheaper one, one threshold each.
        text_of: the text of an input: the reader the artefacts are registered with
            (`question_reader` of the registry), so they route on what they were fitted on.

    Returns:
        Distinct artefacts, in `shares` order; empty when there is nothing to learn (fewer
        than 2 shared examples, or the cheaper one right on all or none of them).
    """
    features = {example_key(e): featurize(text_of(e.input), "text", 0) for e in examples}
    try:
        fitted = fit_learned_condition(
            features, cheap_scores, dear_scores, cheaper=cheaper, dearer=dearer
        )
    except ValueError:
        return []
    probs = fitted.predict_proba([features[i] for i in fitted.train_ids])
    return [fitted.with_threshold(t) for t in thresholds_for_shares(probs, shares)]


def write_beside(folder: str | Path, conds: Sequence[LearnedCondition]) -> list[Path]:
    """Write `conds` into `<folder>/learned/` (`write_artefacts`); the paths."""
    return write_artefacts(Path(folder) / LEARNED_FOLDER, conds)


def load_applied(folder: str | Path, spec: TopologySpec, callables: CallableRegistry) -> list[str]:
    """Register the learned artefacts `spec` names from `<folder>/learned/` (where `apply`
    wrote them beside the spec's files); the names registered.

    Raises:
        SpecError: `spec` names a learned condition the folder has no artefact of.
        ValueError, pydantic.ValidationError: a damaged artefact file of a name `spec` routes
            on (`read_artefacts`; no other file in the folder is read).
    """
    names = learned_names(spec)
    if not names:
        return []
    found = read_artefacts(Path(folder) / LEARNED_FOLDER, names).values()
    stored = {c.name: c for c in found}
    try:
        conds = artefacts_named(names, stored)
    except KeyError as exc:
        raise SpecError(f"{folder}: {exc.args[0]} beside the spec") from None
    return register_all(conds, callables)
