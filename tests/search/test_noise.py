"""Paired statistics of two candidates on the same examples (core.search.noise)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from core.search.noise import front_noise, paired_bootstrap, paired_standard_error

# a constructed pair on 100 examples: a is right on the first 30, b on 20..29 only,
# so their difference is known exactly: mean(a - b) = 0.2
A = [1.0] * 30 + [0.0] * 70
B = [0.0] * 20 + [1.0] * 10 + [0.0] * 70  # d = a - b: +1 on 20 examples, 0 on the other 80


def test_a_constant_difference_gives_a_point_interval_for_any_seed() -> None:
    a = [0.7] * 40
    b = [0.6] * 40
    for seed in (0, 1, 99):
        r = paired_bootstrap(a, b, seed=seed)
        assert r.low == pytest.approx(0.1, abs=1e-12) and r.high == pytest.approx(0.1, abs=1e-12)
        assert r.mean == pytest.approx(0.1, abs=1e-12)


def test_the_bounds_of_a_known_pair_for_a_fixed_seed() -> None:
    r = paired_bootstrap(A, B, seed=7)
    # d is +1 on 20 of 100 examples: mean exactly 0.2, and a resampled mean is k/100 for a
    # binomial k (n 100, p 0.2); the 2.5% and 97.5% quantiles of 1,000 draws, seed 7:
    assert r.mean == 0.2
    assert (r.n, r.resamples, r.seed, r.level) == (100, 1000, 7, 0.95)
    assert r.low == pytest.approx(0.12975, abs=1e-12)
    assert r.high == pytest.approx(0.28, abs=1e-12)
    # the same draws computed here, independently of the module
    rng = np.random.default_rng(7)
    d = np.asarray(A) - np.asarray(B)
    means = d[rng.integers(0, 100, size=(1000, 100))].mean(axis=1)
    low, high = np.quantile(means, [0.025, 0.975])
    assert r.low == pytest.approx(low, abs=1e-12) and r.high == pytest.approx(high, abs=1e-12)
    # and they straddle the normal approximation 0.2 +- 1.96 * 0.04
    assert r.low < 0.2 - 1.96 * 0.04 + 0.01 and r.high > 0.2 + 1.96 * 0.04 - 0.01
    assert not r.includes_zero
    assert paired_bootstrap(A, B, seed=7) == r  # seeded: the same bounds again


def test_the_paired_standard_error() -> None:
    # stdev of twenty 1s and eighty 0s (ddof 1) is sqrt(0.16 * 100 / 99); over sqrt(100)
    assert paired_standard_error(A, B) == pytest.approx(math.sqrt(0.16 * 100 / 99) / 10, abs=1e-15)
    assert paired_standard_error([1.0], [0.0]) == 0.0


def test_bad_samples_are_refused() -> None:
    with pytest.raises(ValueError, match="same length; got 2 and 1"):
        paired_bootstrap([1.0, 0.0], [1.0])
    with pytest.raises(ValueError, match="must not be empty"):
        paired_standard_error([], [])
    with pytest.raises(ValueError, match="finite"):
        paired_bootstrap([math.nan], [0.0])
    with pytest.raises(ValueError, match="resamples must be at least 1; got 0"):
        paired_bootstrap([1.0], [0.0], resamples=0)


def test_front_noise_marks_a_dearer_point_with_no_real_gain() -> None:
    ids = [f"e{i:03d}" for i in range(100)]
    cheap = dict(zip(ids, B, strict=True))
    dear = dict(zip(ids, A, strict=True))  # +20 points over cheap: beyond noise
    dearest = dict(zip(ids, [1.0] * 31 + [0.0] * 69, strict=True))  # +1 point over dear
    out = front_noise(
        {"0": 0.01, "1": 0.5, "2": 1.5}, {"0": cheap, "1": dear, "2": dearest}, seed=7
    )
    assert [out[k].within_noise for k in "012"] == [False, False, True]
    assert (out["0"].cheaper, out["0"].dearer, out["2"].cheaper, out["2"].dearer) == (
        None,
        "1",
        "1",
        None,
    )
    assert out["1"].vs_cheaper == paired_bootstrap(A, B, seed=7)
    vs = out["2"].vs_cheaper
    assert vs is not None and vs.mean == pytest.approx(0.01) and vs.low == 0.0
    with pytest.raises(ValueError, match="no per-example scores for front point"):
        front_noise({"9": 1.0}, {})
