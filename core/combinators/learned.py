"""Learned routing conditions: "is the cheaper of two front neighbours right on this input?",
fitted on the train split's per-example results and stored as plain JSON parameters.

Rule: given two candidates scored on the same train examples, the label of an example is 1
when the cheaper candidate is right on it (accuracy >= `RIGHT_AT`) and 0 otherwise. A
classifier is fitted on the examples' input features (`FeatureSet`):

- `"text"`: cheap numbers from the input text alone (`TEXT_FEATURES`: the library's generic
  input features as numbers, length and question marks, plus what a word problem shows:
  numbers written in digits, a decimal, a percent, a `$`, a fraction `a/b`, sentences);
- `"hashed"`: the memory store's offline embedder (`core.memory.HashedNgramEmbedder`, hashed
  character trigrams, `dimension` numbers, L2-normalised).

Models (`LearnedKind`):

- `"logistic"`: L2-regularised logistic regression on standardised features, scikit-learn's
  `LogisticRegression(C=c)` objective (`c` times the summed log-loss plus half the squared
  coefficients, the intercept unpenalised) minimised exactly by Newton's method in numpy
  (`_fit_logistic`; the tests check it against scikit-learn's own optimum). Not scikit-learn
  itself: importing it adds ~145 MiB to the process, and a search fits these in its own process
  (the default `gsm8k_replay` search's peak memory target is 300 MiB); stored as the
  per-feature mean and scale, the coefficients and the intercept;
- `"knn"`: scikit-learn's `KNeighborsClassifier(n_neighbors=k)` (Euclidean, uniform weights) on standardised
  features; stored as the training vectors and labels (a k-NN's fit is exactly its data).

The condition is true (route to the cheaper neighbour) when the predicted probability that the
cheaper one is right is at least `threshold`. One fit gives a curve of routers between the two
neighbours as `threshold` moves (`with_threshold`, `thresholds_for_shares`), each its own
artefact.

An artefact (`LearnedCondition`) is content-addressed: `digest` is the sha256 of its canonical
JSON (sorted keys, no spaces) without the digest itself, and its registered name is
`learned_<first 12 hex digits>`. It holds the training example ids, the feature set, the
standardisation, the model's numbers and the threshold: everything needed to route, as data.
Nothing stored is unpickled, imported or evaluated: the logistic probability is
`1 / (1 + exp(-(w . z + b)))` on the stored numbers,
and the k-NN is rebuilt from the stored vectors and labels (`KNeighborsClassifier.fit`).
`write_artefacts` and `read_artefacts` keep them as `<digest>.json` files in a folder (what
`apply` writes beside a spec): written durably (fsynced, a unique temporary name), an existing
file kept only when it reads back as the same artefact; read by the names a spec routes on, so
a stray file beside them is never read. `register_learned` puts one into a callable registry.

What a condition reads: the question text of the state, never what a step added to it (a
candidate in the state would otherwise change the routing of a condition placed after a
step). The reader is the problem's (`ProblemParts.question_text`, else `input_text`, else a
ballot's original input), kept on its callable registry (`CallableRegistry.input_text`,
`question_reader`); the fit reads the train inputs with the same reader.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import math
import os
import re
import tempfile
from collections.abc import Callable, Iterable, Mapping, Sequence
from functools import cached_property
from pathlib import Path
from typing import Any, Literal

import numpy as np
from pydantic import BaseModel, ConfigDict, Field, model_validator

from core.combinators.ballot import input_text
from core.combinators.library import CombinatorEntry
from core.hydrate import CallableRegistry
from core.ir.dataflow import NameEffect
from core.memory.base import HashedNgramEmbedder

__all__ = [
    "LEARNED_PREFIX",
    "RIGHT_AT",
    "TEXT_FEATURES",
    "FeatureSet",
    "LearnedCondition",
    "LearnedKind",
    "LearnedRoute",
    "featurize",
    "fit_learned_condition",
    "learned_condition_of",
    "learned_entry",
    "question_reader",
    "read_artefacts",
    "register_learned",
    "text_features",
    "thresholds_for_shares",
    "write_artefacts",
]

RIGHT_AT = 0.5
"""A per-example accuracy at least this counts as right (scores are in [0, 1])."""

LEARNED_PREFIX = "learned_"
"""The registered name of a learned condition: this, then the first 12 hex digits of its
digest."""

FeatureSet = Literal["text", "hashed"]
"""What a learned condition reads of the input (module docstring)."""
LearnedKind = Literal["logistic", "knn"]
"""The fitted model (module docstring)."""

TEXT_FEATURES: tuple[str, ...] = (
    "chars_per_100",
    "numbers",
    "has_decimal",
    "has_percent",
    "has_dollar",
    "has_fraction",
    "question_marks",
    "sentences",
)
"""The names of `text_features`' numbers, in order."""

_NUMBER = re.compile(r"\d[\d,]*(?:\.\d+)?|\.\d+")
_DECIMAL = re.compile(r"\d\.\d|(?<![\d])\.\d")
_FRACTION = re.compile(r"\d\s*/\s*\d")
_SENTENCE = re.compile(r"[.!?](?:\s|$)")


def _knn(k: int) -> Any:
    """A scikit-learn k-nearest-neighbours classifier, imported when first needed
    (scikit-learn takes ~1 s to import and ships no type stubs, so it is typed `Any` here)."""
    from sklearn.neighbors import KNeighborsClassifier  # pyright: ignore[reportMissingTypeStubs]

    return KNeighborsClassifier(n_neighbors=k)


_NEWTON_STEPS = 100
"""At most this many Newton steps (a well-posed fit takes under 15)."""
_NEWTON_TOL = 1e-10
"""Newton stops when the largest parameter change is below this."""


def _logistic_loss(x1: np.ndarray, y: np.ndarray, theta: np.ndarray, c: float) -> float:
    margin = x1 @ theta
    loss = np.logaddexp(0.0, margin) - y * margin  # -log-likelihood per example
    return float(c * loss.sum() + 0.5 * theta[:-1] @ theta[:-1])


def _fit_logistic(z: np.ndarray, y: np.ndarray, c: float) -> tuple[np.ndarray, float]:
    """Coefficients and intercept minimising `c * sum(log-loss) + |w|^2 / 2` (scikit-learn's
    `LogisticRegression(C=c)` objective, intercept unpenalised): Newton's method from zero,
    each step halved until the objective does not rise (the objective is strictly convex in
    `w`, so this converges to its unique optimum)."""
    n, d = z.shape
    x1 = np.hstack([z, np.ones((n, 1))])
    penalty = np.eye(d + 1)
    penalty[d, d] = 0.0
    theta = np.zeros(d + 1)
    loss = _logistic_loss(x1, y, theta, c)
    for _ in range(_NEWTON_STEPS):
        p = 1.0 / (1.0 + np.exp(-(x1 @ theta)))
        grad = c * (x1.T @ (p - y)) + penalty @ theta
        hess = c * (x1.T * (p * (1.0 - p))) @ x1 + penalty
        hess[d, d] += 1e-12  # an intercept the data saturates stays finite
        step = np.linalg.solve(hess, grad)
        t = 1.0
        while t > 1e-8:
            new = theta - t * step
            new_loss = _logistic_loss(x1, y, new, c)
            if new_loss <= loss:
                break
            t /= 2.0
        else:
            break
        theta, loss = new, new_loss
        if float(np.max(np.abs(t * step))) < _NEWTON_TOL:
            break
    return theta[:-1], float(theta[-1])


def text_features(text: str) -> list[float]:
    """The cheap features of one input text (`TEXT_FEATURES`, in order)."""
    lower = text.lower()
    return [
        len(text) / 100.0,
        float(len(_NUMBER.findall(text))),
        1.0 if _DECIMAL.search(text) else 0.0,
        1.0 if "%" in text or "percent" in lower else 0.0,
        1.0 if "$" in text else 0.0,
        1.0 if _FRACTION.search(text) else 0.0,
        float(text.count("?")),
        float(len(_SENTENCE.findall(text))),
    ]


def featurize(text: str, features: FeatureSet, dimension: int) -> list[float]:
    """The feature vector of one input text: `text_features`, or the hashed embedding of
    `dimension` numbers."""
    if features == "text":
        return text_features(text)
    return HashedNgramEmbedder(dimension).embed_one(text)


_CONFIG = ConfigDict(frozen=True, strict=True, extra="forbid", use_attribute_docstrings=True)


class LearnedCondition(BaseModel):
    """A fitted "the cheaper neighbour is right" router, as plain numbers (see the module)."""

    model_config = _CONFIG

    kind: LearnedKind = "logistic"
    """The model: logistic regression or k nearest neighbours."""
    features: FeatureSet = "text"
    """What it reads of the input: `text_features` or the hashed embedding."""
    dimension: int = Field(default=len(TEXT_FEATURES), ge=1)
    """Numbers per input (8 for `"text"`; the embedder's dimension for `"hashed"`)."""
    mean: tuple[float, ...]
    """Per-feature mean on the training examples (subtracted first)."""
    scale: tuple[float, ...]
    """Per-feature standard deviation on the training examples (1.0 where it was 0)."""
    coef: tuple[float, ...] = ()
    """Logistic only: coefficients on the standardised features."""
    intercept: float = 0.0
    """Logistic only: the intercept."""
    k: int = Field(default=0, ge=0)
    """k-NN only: neighbours per vote."""
    vectors: tuple[tuple[float, ...], ...] = ()
    """k-NN only: the standardised training vectors, in `train_ids` order."""
    labels: tuple[int, ...] = ()
    """k-NN only: 1 where the cheaper neighbour was right, per training vector."""
    threshold: float = Field(ge=0.0, le=1.0)
    """Route to the cheaper neighbour when P(cheaper right) >= this."""
    cheaper: str
    """The cheaper neighbour (its spec hash)."""
    dearer: str
    """The dearer neighbour (its spec hash)."""
    train_ids: tuple[str, ...]
    """The training example ids (sorted)."""
    c: float = Field(default=1.0, gt=0.0)
    """Logistic only: inverse L2 regularisation strength of the fit."""
    digest: str = ""
    """sha256 of the canonical JSON of every other field; filled in when empty, checked when
    given."""

    @model_validator(mode="after")
    def _check(self) -> LearnedCondition:
        n = self.dimension
        if self.features == "text" and n != len(TEXT_FEATURES):
            raise ValueError(f"text features have dimension {len(TEXT_FEATURES)}, not {n}")
        if not (len(self.mean) == len(self.scale) == n):
            raise ValueError("mean and scale must have `dimension` numbers")
        numbers = (*self.mean, *self.scale, *self.coef, self.intercept)
        if not all(math.isfinite(x) for x in numbers) or any(s <= 0.0 for s in self.scale):
            raise ValueError("mean, scale and coef must be finite numbers, scale positive")
        if self.kind == "logistic" and len(self.coef) != n:
            raise ValueError("a logistic condition needs `dimension` coefficients")
        if self.kind == "knn":
            if not 1 <= self.k <= len(self.vectors) or len(self.labels) != len(self.vectors):
                raise ValueError("a k-NN condition needs 1 <= k <= vectors, one label each")
            if any(len(v) != n for v in self.vectors) or set(self.labels) - {0, 1}:
                raise ValueError("k-NN vectors need `dimension` numbers and labels 0 or 1")
        want = self.compute_digest()
        if not self.digest:
            object.__setattr__(self, "digest", want)
        elif self.digest != want:
            raise ValueError(f"digest {self.digest} does not match the parameters ({want})")
        return self

    def compute_digest(self) -> str:
        """sha256 of the canonical JSON of every field but `digest`."""
        body = self.model_dump(mode="json", exclude={"digest"})
        text = json.dumps(body, sort_keys=True, separators=(",", ":"), allow_nan=False)
        return hashlib.sha256(text.encode()).hexdigest()

    @property
    def name(self) -> str:
        """The registered condition name: `learned_<first 12 hex digits of the digest>`."""
        return f"{LEARNED_PREFIX}{self.digest[:12]}"

    def with_threshold(self, threshold: float) -> LearnedCondition:
        """The same fit at another threshold (a new artefact, with its own digest)."""
        data = self.model_dump(exclude={"digest"})
        data["threshold"] = float(threshold)
        return LearnedCondition.model_validate(data, strict=False)

    def vector(self, text: str) -> list[float]:
        """The feature vector of one input text (`featurize`)."""
        return featurize(text, self.features, self.dimension)

    @cached_property
    def _knn(self) -> Any:
        # the estimator rebuilt from the stored data (a k-NN's fit only stores it)
        model = _knn(self.k)
        model.fit(np.asarray(self.vectors, dtype=np.float64), np.asarray(self.labels))
        return model

    def predict_proba(self, rows: Sequence[Sequence[float]]) -> list[float]:
        """P(cheaper right) per row of features (shape (n, dimension))."""
        x = np.asarray(rows, dtype=np.float64).reshape(-1, self.dimension)
        z = (x - np.asarray(self.mean)) / np.asarray(self.scale)
        if self.kind == "logistic":
            logit = z @ np.asarray(self.coef) + self.intercept
            return [float(p) for p in 1.0 / (1.0 + np.exp(-logit))]
        if len(set(self.labels)) == 1:
            return [float(self.labels[0])] * len(z)
        proba = np.asarray(self._knn.predict_proba(z), dtype=np.float64)
        return [float(p) for p in proba[:, 1]]

    def routes_to_cheaper(self, features: Sequence[float]) -> bool:
        """Whether the condition sends an input with these features to the cheaper neighbour."""
        return self.predict_proba([features])[0] >= self.threshold

    def describe(self) -> str:
        """One line for people and the meta agent."""
        return (
            f"Learned: the cheaper neighbour {self.cheaper[:12]} is right with P >= "
            f"{self.threshold:.3f} ({self.kind} on {self.features} features, "
            f"{len(self.train_ids)} train examples)."
        )

    def to_json(self) -> str:
        """The artefact as JSON text (what a run stores and `apply` writes beside the spec)."""
        return self.model_dump_json()

    @classmethod
    def from_json(cls, text: str | bytes) -> LearnedCondition:
        """Read an artefact written by `to_json`, checking its digest.

        Raises:
            pydantic.ValidationError: malformed, or the digest does not match.
        """
        return cls.model_validate_json(text, strict=False)


class LearnedRoute:
    """The registered callable of a learned condition: `route(state)` is True when `condition`
    sends the input's text (`text_of(state)`) to the cheaper neighbour. It keeps its artefact
    (`condition`), so whoever holds the registry can store, ship or apply what a spec names
    (`learned_condition_of`)."""

    def __init__(self, condition: LearnedCondition, text_of: Callable[[Any], str]) -> None:
        self.condition = condition
        self.text_of = text_of
        self.__name__ = condition.name

    def __call__(self, state: Any) -> bool:
        cond = self.condition
        return cond.routes_to_cheaper(cond.vector(self.text_of(state)))


def learned_condition_of(fn: object) -> LearnedCondition | None:
    """The artefact behind a registered callable, when it is a learned condition's."""
    return fn.condition if isinstance(fn, LearnedRoute) else None


def question_reader(callables: CallableRegistry) -> Callable[[Any], str]:
    """What a learned condition registered in `callables` reads of a state: the problem's
    question text (`CallableRegistry.input_text`, set by the problem loader), else
    `input_text` (a ballot's original input; a string as is). The fit reads the train inputs
    with the same reader, so a condition routes on exactly what it was fitted on."""
    return callables.input_text or input_text


def learned_entry(cond: LearnedCondition, text_of: Callable[[Any], str]) -> CombinatorEntry:
    """The library entry of a learned condition: named `cond.name`, a condition that reads only
    the input (`NameEffect()`), true when `cond` routes `text_of(state)` to the cheaper one.
    `text_of` has no default: it must read the question text alone, never what a step added,
    and only the problem knows how (`question_reader` of its registry; `register_learned`
    uses it)."""
    route = LearnedRoute(cond, text_of)
    return CombinatorEntry(cond.name, route, cond.describe(), ("condition",), NameEffect())


def register_learned(
    cond: LearnedCondition,
    callables: CallableRegistry,
    text_of: Callable[[Any], str] | None = None,
) -> str:
    """Register `cond` in `callables` under `cond.name`, reading `text_of` of each state
    (default: `question_reader(callables)`, the problem's question text); the same digest is
    the same routing, so registering it again changes nothing. Returns the name."""
    entry = learned_entry(cond, text_of or question_reader(callables))
    if entry.name not in callables:
        callables.register(entry.name, entry.fn, entry.description)
    return entry.name


def _stored_digest(path: Path) -> str | None:
    """The digest of the artefact a file holds, or None when it holds none (unreadable,
    malformed, or its numbers do not match its digest)."""
    try:
        return LearnedCondition.from_json(path.read_bytes()).digest
    except (OSError, ValueError):  # pydantic's ValidationError is a ValueError
        return None


def _durable_write(path: Path, text: str) -> None:
    """Write `text` to `path` atomically and durably: a temporary file of a unique name in the
    same folder, fsynced, `os.replace`d into place, then the folder fsynced (as the topology
    registry writes its version files, `core.search.registry`)."""
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(text)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
    with contextlib.suppress(OSError):  # not every platform can open a directory
        dir_fd = os.open(path.parent, os.O_RDONLY)
        try:
            os.fsync(dir_fd)
        finally:
            os.close(dir_fd)


def write_artefacts(folder: str | Path, conds: Sequence[LearnedCondition]) -> list[Path]:
    """Write each artefact to `<folder>/<digest>.json` (created), durably (`_durable_write`).
    An existing file of that digest is kept only when it reads back as that very artefact (its
    digest checked against its numbers); a damaged one is written again. Returns the paths, in
    `conds` order."""
    root = Path(folder)
    root.mkdir(parents=True, exist_ok=True)
    out: list[Path] = []
    for cond in conds:
        path = root / f"{cond.digest}.json"
        if not path.is_file() or _stored_digest(path) != cond.digest:
            _durable_write(path, cond.to_json() + "\n")
        out.append(path)
    return out


_DIGEST_FILE = re.compile(r"[0-9a-f]{64}\.json")


def read_artefacts(
    folder: str | Path, names: Iterable[str] | None = None
) -> dict[str, LearnedCondition]:
    """The `<digest>.json` artefacts in `folder`, by digest (empty when there is no folder):
    with `names` (registered names, `learned_<first 12 hex digits>`), only the files of those
    names, so a stray or damaged file of another name is never read; else every file.

    Raises:
        ValueError: a file read holds another digest than its name.
        pydantic.ValidationError: a file read is malformed, or its digest does not match its
            numbers.
    """
    root = Path(folder)
    out: dict[str, LearnedCondition] = {}
    if not root.is_dir():
        return out
    if names is None:
        paths = sorted(root.glob("*.json"))
    else:
        prefixes = [n.removeprefix(LEARNED_PREFIX) for n in names if n.startswith(LEARNED_PREFIX)]
        paths = sorted(
            p
            for x in dict.fromkeys(prefixes)
            if re.fullmatch(r"[0-9a-f]{12}", x)
            for p in root.glob(f"{x}*.json")
            if _DIGEST_FILE.fullmatch(p.name)
        )
    for path in paths:
        cond = LearnedCondition.from_json(path.read_bytes())
        if cond.digest != path.stem:
            raise ValueError(f"{path}: holds artefact {cond.digest}, not {path.stem}")
        out[cond.digest] = cond
    return out


def thresholds_for_shares(probabilities: Sequence[float], shares: Sequence[float]) -> list[float]:
    """Thresholds that send about each share of the given (train) inputs to the cheaper one:
    for share s, the smallest predicted probability among the top `ceil(s * n)` (distinct, in
    `shares` order). A threshold that routes nothing or every input is skipped, counted on the
    inputs themselves (`p >= t`): with tied probabilities the top `ceil(s * n)` can take every
    input along, and such a "router" would be the cheaper neighbour itself."""
    ranked = sorted(probabilities, reverse=True)
    n = len(ranked)
    out: list[float] = []
    for share in shares:
        m = math.ceil(share * n)
        if not 0 < m < n:
            continue
        t = ranked[m - 1]
        if sum(p >= t for p in ranked) >= n:
            continue
        if t not in out:
            out.append(t)
    return out


def fit_learned_condition(
    features: Mapping[str, Sequence[float]],
    cheaper_scores: Mapping[str, float],
    dearer_scores: Mapping[str, float],
    *,
    cheaper: str,
    dearer: str,
    kind: LearnedKind = "logistic",
    feature_set: FeatureSet = "text",
    threshold: float = 0.5,
    c: float = 1.0,
    k: int = 15,
) -> LearnedCondition:
    """Fit "the cheaper one is right" on the train examples both neighbours were scored on.

    Args:
        features: train example id -> its features (`featurize` with `feature_set`).
        cheaper_scores, dearer_scores: example id -> per-example accuracy of each neighbour
            (the dearer one's only decides which examples are shared).
        cheaper, dearer: the neighbours' spec hashes (recorded).
        kind: the model.
        feature_set: what `features` holds (recorded).
        threshold: the first artefact's threshold (`with_threshold` gives the others).
        c: logistic: inverse L2 regularisation strength.
        k: k-NN: neighbours per vote (at most the number of examples).

    Returns:
        The fitted artefact.

    Raises:
        ValueError: fewer than 2 shared examples, or only one label among them (nothing to
            learn: route always one way instead).
    """
    ids = sorted(set(features) & set(cheaper_scores) & set(dearer_scores))
    if len(ids) < 2:
        raise ValueError(f"need at least 2 shared train examples; got {len(ids)}")
    x = np.asarray([list(features[i]) for i in ids], dtype=np.float64)
    y = np.asarray([1 if cheaper_scores[i] >= RIGHT_AT else 0 for i in ids])
    if len(set(y.tolist())) < 2:
        raise ValueError("the cheaper neighbour is right on all or none of the train examples")
    mean = x.mean(axis=0)
    scale = x.std(axis=0)
    scale[scale == 0.0] = 1.0
    z = (x - mean) / scale
    common: dict[str, Any] = {
        "kind": kind,
        "features": feature_set,
        "dimension": int(x.shape[1]),
        "mean": tuple(float(v) for v in mean),
        "scale": tuple(float(v) for v in scale),
        "threshold": float(threshold),
        "cheaper": cheaper,
        "dearer": dearer,
        "train_ids": tuple(ids),
    }
    if kind == "knn":
        return LearnedCondition(
            **common,
            k=min(k, len(ids)),
            vectors=tuple(tuple(float(v) for v in row) for row in z),
            labels=tuple(int(v) for v in y),
        )
    coef, bias = _fit_logistic(z, y.astype(np.float64), float(c))
    weights = tuple(float(v) for v in coef)
    return LearnedCondition(**common, coef=weights, intercept=bias, c=float(c))
