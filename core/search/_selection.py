"""Selection that compares like with like: the run's fixed minibatch, behavioural fingerprints
(`same_as`), the non-dominated promotion rule, and the index of known specs.

`SearchRun` owns one `FixedMinibatch` and one `KnownSpecs`; both are plain bookkeeping with no
I/O, so the rules are tested apart from the loop.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from core.evaluation._records import CandidateEvaluation
from core.evaluation._run import example_key
from core.evaluation.checks import CheckResult
from core.evaluation.metrics import GoldExample
from core.search._space import minibatch_indices, minibatch_size_for
from core.search.noise import paired_standard_error

__all__ = ["FixedMinibatch", "KnownSpecs"]

Point = tuple[float, float, float]
"""A candidate's mean accuracy, cost (USD per example) and latency (ms per example) on the
fixed minibatch."""


class FixedMinibatch:
    """One minibatch for the whole run (`StrategyConfig.minibatch_margin`), and what every
    candidate did on it.

    Args:
        validation: the validation split.
        margin: the 95% half-width an accuracy estimate must meet; None: no fixed minibatch
            (every method is then a no-op and `examples` stays None).
        floor: the configured `minibatch_size` (the fixed size is at least this).
        seed: the run's seed (the draw is `minibatch_indices(n, size, seed, -1)`).
    """

    def __init__(
        self, validation: Sequence[GoldExample], margin: float | None, floor: int, seed: int
    ) -> None:
        self._validation = list(validation)
        self._margin = margin
        self._floor = floor
        self._seed = seed
        self.examples: list[GoldExample] | None = None
        """The fixed minibatch, once drawn (after the seed's evaluation)."""
        self._fingerprints: dict[tuple[object, ...], int] = {}
        self._points: dict[int, Point] = {}
        self._per_example: dict[int, dict[str, float]] = {}

    def fix(self, seed_ev: CandidateEvaluation) -> str | None:
        """Draw the minibatch, sized from the seed's measured accuracy (`minibatch_size_for`),
        and fingerprint the seed (candidate 0) on it.

        Returns:
            The log line saying what was drawn and why, or None without a margin.
        """
        if self._margin is None:
            return None
        n_val = len(self._validation)
        size = minibatch_size_for(seed_ev.accuracy, self._margin, self._floor, n_val)
        idx = minibatch_indices(n_val, size, self._seed, -1)
        self.examples = [self._validation[i] for i in idx]
        self.remember(0, seed_ev, {example_key(e) for e in self.examples})
        return (
            f"fixed minibatch: {size} of {n_val} validation examples for every candidate (seed "
            f"accuracy {seed_ev.accuracy:.3f}, 95% margin {self._margin:g}: "
            f"ceil(1.96^2 p(1-p) / margin^2), at least {self._floor})"
        )

    def remember(
        self, idx: int, ev: CandidateEvaluation, ids: set[str] | None = None
    ) -> int | None:
        """Fingerprint `ev` (status, score, cost and latency of every example and trial, on the
        examples `ids` or all of them) and return the earlier candidate with the same one, or
        None, in which case `idx` is remembered under it with its mean point."""
        results = [r for r in ev.results if ids is None or r.example_id in ids]
        key = tuple(
            sorted(
                (r.example_id, r.trial, r.status, r.accuracy, r.cost_usd, r.latency_ms)
                for r in results
            )
        )
        twin = self._fingerprints.get(key)
        if twin is None:
            self._fingerprints[key] = idx
            if results:
                n = len(results)
                self._points[idx] = (
                    math.fsum(r.accuracy for r in results) / n,
                    math.fsum(r.cost_usd for r in results) / n,
                    math.fsum(r.latency_ms for r in results) / n,
                )
                trials: dict[str, list[float]] = {}
                for r in results:
                    trials.setdefault(r.example_id, []).append(r.accuracy)
                self._per_example[idx] = {
                    k: math.fsum(v) / len(v) for k, v in sorted(trials.items())
                }
        return twin

    def non_dominated(self, idx: int, k_se: float = 0.0) -> bool:
        """No other distinct candidate is at least as good on the minibatch's accuracy, cost
        and latency and better on one (the promotion rule with a fixed minibatch).

        With `k_se > 0` the accuracy comparison is the paired test: another candidate at least
        as cheap and as fast blocks only when its accuracy exceeds this one's by more than
        `k_se` paired standard errors of the per-example differences (on the examples both
        have); a lead within that is noise, and the candidate is promoted."""
        mine = self._points.get(idx)
        if mine is None:
            return False
        for other, pt in self._points.items():
            if other == idx or pt == mine or pt[1] > mine[1] or pt[2] > mine[2]:
                continue
            if k_se <= 0.0:
                if pt[0] >= mine[0]:
                    return False
            elif pt[0] - mine[0] > k_se * self._paired_se(other, idx):
                return False
        return True

    def _paired_se(self, a: int, b: int) -> float:
        ea, eb = self._per_example.get(a, {}), self._per_example.get(b, {})
        common = [k for k in ea if k in eb]
        if not common:
            return math.inf  # nothing paired: no lead can be told from noise
        return paired_standard_error([ea[k] for k in common], [eb[k] for k in common])


class KnownSpecs:
    """Every candidate so far by canonical hash and by behavioural hash (the hash of its
    no-op-free normal form, `CheckResult.behaviour_hash`): the first candidate holding each."""

    def __init__(self) -> None:
        self._by_hash: dict[str, int] = {}

    def find(self, check: CheckResult) -> int | None:
        """The candidate with this spec's canonical hash, or else its behavioural hash."""
        found = self._by_hash.get(check.spec_hash)
        if found is None and check.behaviour_hash:
            found = self._by_hash.get(check.behaviour_hash)
        return found

    def same_spec(self, check: CheckResult) -> bool:
        """Whether the canonical hash itself (not only the behaviour) is known."""
        return check.spec_hash in self._by_hash

    def add(self, check: CheckResult, idx: int) -> None:
        """Remember `idx` under both hashes (the first holder of a hash keeps it)."""
        if check.spec_hash:
            self._by_hash.setdefault(check.spec_hash, idx)
        if check.behaviour_hash:
            self._by_hash.setdefault(check.behaviour_hash, idx)

    def hashes(self) -> frozenset[str]:
        """Every hash known (what strategies must avoid)."""
        return frozenset(self._by_hash)
