"""Learned routing conditions (core.combinators.learned): fit, route, store as JSON, reload."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from pydantic import ValidationError

from core.combinators.ballot import input_text
from core.combinators.learned import (
    TEXT_FEATURES,
    LearnedCondition,
    fit_learned_condition,
    learned_entry,
    read_artefacts,
    register_learned,
    text_features,
    thresholds_for_shares,
    write_artefacts,
)
from core.hydrate import CallableRegistry


def _train() -> tuple[dict[str, list[float]], dict[str, float], dict[str, float]]:
    # the cheaper one is right exactly on the short questions (under 100 characters)
    feats: dict[str, list[float]] = {}
    cheap: dict[str, float] = {}
    dear: dict[str, float] = {}
    for i in range(40):
        text = "How many? " + "x" * (20 + 10 * i)
        eid = f"t{i:02d}"
        feats[eid] = text_features(text)
        cheap[eid] = 1.0 if len(text) < 100 else 0.0
        dear[eid] = 1.0
    return feats, cheap, dear


def test_text_features() -> None:
    assert len(TEXT_FEATURES) == 8
    assert text_features("Tom has $1.50 and 3/4 of 20% left. How much?") == [
        0.44, 4.0, 1.0, 1.0, 1.0, 1.0, 1.0, 2.0,
    ]  # fmt: skip


def test_a_fit_routes_short_questions_to_the_cheaper_neighbour() -> None:
    feats, cheap, dear = _train()
    cond = fit_learned_condition(feats, cheap, dear, cheaper="hA", dearer="hB", c=10.0)
    assert cond.train_ids == tuple(sorted(feats))
    assert cond.routes_to_cheaper(text_features("How many? " + "x" * 20)) is True
    assert cond.routes_to_cheaper(text_features("How many? " + "x" * 380)) is False
    # the stored numbers give scikit-learn's own probabilities at its optimum (its default
    # tolerance, 1e-4, stops lbfgs 0.006 short of it on these numbers; the fit is exact)
    from sklearn.linear_model import LogisticRegression

    ids = sorted(feats)
    x = np.asarray([feats[i] for i in ids])
    y = [1 if cheap[i] >= 0.5 else 0 for i in ids]
    sd = x.std(axis=0)
    sd[sd == 0] = 1.0
    z = (x - x.mean(axis=0)) / sd
    ref = LogisticRegression(C=10.0, solver="lbfgs", max_iter=1000, tol=1e-10).fit(z, y)
    assert cond.predict_proba(x.tolist()) == pytest.approx(ref.predict_proba(z)[:, 1].tolist())


def test_the_artefact_is_content_addressed_and_survives_json() -> None:
    feats, cheap, dear = _train()
    cond = fit_learned_condition(feats, cheap, dear, cheaper="hA", dearer="hB")
    assert cond.digest == cond.compute_digest() and len(cond.digest) == 64
    assert cond.name == f"learned_{cond.digest[:12]}"
    back = LearnedCondition.from_json(cond.to_json())
    assert back == cond and back.digest == cond.digest
    rows = [feats[i] for i in sorted(feats)]
    assert [back.routes_to_cheaper(r) for r in rows] == [cond.routes_to_cheaper(r) for r in rows]
    # thresholds: one fit, several conditions, each with its own digest
    names = {cond.with_threshold(t).name for t in (0.3, 0.5, 0.7)}
    assert len(names) == 3 and cond.with_threshold(0.5) == cond
    # a changed number no longer matches its digest
    data = json.loads(cond.to_json())
    data["intercept"] += 1.0
    with pytest.raises(ValidationError, match="does not match the parameters"):
        LearnedCondition.from_json(json.dumps(data))


def test_nothing_to_learn_is_refused() -> None:
    feats, _, dear = _train()
    with pytest.raises(ValueError, match="right on all or none"):
        fit_learned_condition(feats, dict.fromkeys(feats, 1.0), dear, cheaper="a", dearer="b")
    with pytest.raises(ValueError, match="at least 2 shared"):
        fit_learned_condition({}, {}, {}, cheaper="a", dearer="b")


def test_the_condition_entry_is_named_by_digest_and_reads_the_input() -> None:
    feats, cheap, dear = _train()
    cond = fit_learned_condition(feats, cheap, dear, cheaper="hA", dearer="hB", c=10.0)
    entry = learned_entry(cond, input_text)
    assert entry.name == cond.name and entry.roles == ("condition",)
    assert entry.effect.needs_candidates == 0
    assert entry.fn("How many? " + "x" * 20) is True
    assert entry.fn("How many? " + "x" * 380) is False
    calls = CallableRegistry()
    assert register_learned(cond, calls) == cond.name
    assert calls.get(cond.name)("How many? " + "x" * 20) is True
    # registered where the problem keeps its question reader, it routes on what that reads
    state = {"question": "How many? " + "x" * 20, "candidates": ["x" * 400]}
    keyed = CallableRegistry()
    keyed.input_text = lambda s: s["question"]
    register_learned(cond, keyed)
    assert keyed.get(cond.name)(state) is True
    assert calls.get(cond.name)(state) is False  # str(state) includes the long candidate


def test_a_knn_fit_is_its_data_and_routes_by_its_neighbours() -> None:
    feats, cheap, dear = _train()
    cond = fit_learned_condition(feats, cheap, dear, cheaper="hA", dearer="hB", kind="knn", k=3)
    ids = sorted(feats)
    assert cond.kind == "knn" and cond.k == 3 and len(cond.vectors) == 40
    # the short questions (20 .. 70 'x', under 100 characters) are the positives
    assert cond.labels == tuple(1 if i < 7 else 0 for i in range(40))
    probs = cond.predict_proba([feats[i] for i in ids])
    assert probs[:6] == [1.0] * 6 and probs[8:] == [0.0] * 32
    back = LearnedCondition.from_json(cond.to_json())
    assert back.digest == cond.digest
    assert back.predict_proba([feats[i] for i in ids]) == probs


def test_hashed_features_use_the_memory_embedder() -> None:
    from core.memory import HashedNgramEmbedder

    feats = {
        f"t{i}": HashedNgramEmbedder(16).embed_one(w) for i, w in enumerate("ab cd ab cd".split())
    }
    cheap = {"t0": 1.0, "t1": 0.0, "t2": 1.0, "t3": 0.0}
    cond = fit_learned_condition(
        feats, cheap, dict.fromkeys(feats, 1.0), cheaper="a", dearer="b",
        kind="knn", feature_set="hashed", k=1,
    )  # fmt: skip
    assert cond.dimension == 16 and cond.features == "hashed"
    assert [cond.routes_to_cheaper(cond.vector(t)) for t in ("ab", "cd")] == [True, False]


def test_thresholds_for_shares() -> None:
    probs = [0.9, 0.8, 0.7, 0.6, 0.5, 0.4, 0.3, 0.2]
    assert thresholds_for_shares(probs, (0.25, 0.5, 0.75)) == [0.8, 0.6, 0.4]
    assert thresholds_for_shares(probs, (0.0, 1.0, 0.5, 0.5)) == [0.6]
    # ties: a threshold that would take every input along is skipped
    assert thresholds_for_shares([0.5] * 8, (0.25, 0.5, 0.75)) == []
    tied_low = [0.9, 0.9, 0.3, 0.3, 0.3, 0.3, 0.3, 0.3]
    assert thresholds_for_shares(tied_low, (0.25, 0.5, 0.75)) == [0.9]


def test_a_fit_whose_train_probabilities_all_tie_proposes_no_router() -> None:
    from core.evaluation.metrics import GoldExample
    from core.search.learned import fit_between

    # every train input has the same text, so the same features and the same probability
    examples = [GoldExample(input="same text", expected="r", id=f"t{i}") for i in range(8)]
    cheap = {f"t{i}": float(i % 2) for i in range(8)}
    dear = {f"t{i}": 1.0 for i in range(8)}
    assert fit_between(cheap, dear, examples, cheaper="c" * 64, dearer="d" * 64) == []


def test_artefacts_round_trip_through_a_folder(tmp_path: Path) -> None:
    feats, cheap, dear = _train()
    cond = fit_learned_condition(feats, cheap, dear, cheaper="hA", dearer="hB")
    other = cond.with_threshold(0.9)
    paths = write_artefacts(tmp_path / "learned", [cond, other])
    assert [p.name for p in paths] == [f"{cond.digest}.json", f"{other.digest}.json"]
    assert read_artefacts(tmp_path / "learned") == {cond.digest: cond, other.digest: other}
    assert read_artefacts(tmp_path / "none") == {}
    paths[0].rename(tmp_path / "learned" / f"{'0' * 64}.json")
    with pytest.raises(ValueError, match="holds artefact"):
        read_artefacts(tmp_path / "learned")


@pytest.mark.parametrize("damage", ["threshold", "empty", "not json"])
def test_writing_over_a_damaged_artefact_file_writes_it_again(tmp_path: Path, damage: str) -> None:
    feats, cheap, dear = _train()
    cond = fit_learned_condition(feats, cheap, dear, cheaper="hA", dearer="hB")
    folder = tmp_path / "learned"
    folder.mkdir()
    path = folder / f"{cond.digest}.json"
    if damage == "threshold":  # the numbers edited: they no longer match the digest
        data = json.loads(cond.to_json())
        data["threshold"] = 0.0
        path.write_text(json.dumps(data))
    else:
        path.write_text("" if damage == "empty" else "{no")
    assert write_artefacts(folder, [cond]) == [path]
    assert path.read_text() == cond.to_json() + "\n"
    assert read_artefacts(folder) == {cond.digest: cond}
    # no temporary file is left behind
    assert sorted(p.name for p in folder.iterdir()) == [path.name]


def test_an_intact_artefact_file_is_kept_as_it_is(tmp_path: Path) -> None:
    feats, cheap, dear = _train()
    cond = fit_learned_condition(feats, cheap, dear, cheaper="hA", dearer="hB")
    folder = tmp_path / "learned"
    folder.mkdir()
    path = folder / f"{cond.digest}.json"
    path.write_text(cond.model_dump_json(indent=2))  # the same artefact, spelt otherwise
    assert write_artefacts(folder, [cond]) == [path]
    assert path.read_text() == cond.model_dump_json(indent=2)


def test_reading_by_name_reads_only_the_files_of_those_names(tmp_path: Path) -> None:
    feats, cheap, dear = _train()
    cond = fit_learned_condition(feats, cheap, dear, cheaper="hA", dearer="hB")
    other = cond.with_threshold(0.9)
    folder = tmp_path / "learned"
    write_artefacts(folder, [cond, other])
    (folder / "notes.json").write_text("{}")
    (folder / f"{'0' * 64}.json").write_text("damaged")
    assert read_artefacts(folder, [cond.name]) == {cond.digest: cond}
    assert read_artefacts(folder, [cond.name, other.name, "learned_ffffffffffff"]) == {
        cond.digest: cond,
        other.digest: other,
    }
    assert read_artefacts(folder, []) == {}
    assert read_artefacts(folder, ["not_learned"]) == {}
    with pytest.raises(ValidationError, match="Invalid JSON"):  # a damaged file it names
        read_artefacts(folder, ["learned_000000000000"])
