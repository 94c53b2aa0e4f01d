"""The archive of evaluated candidates, its Pareto front, its best entry and the designer's view.

`ArchiveEntry` is a frozen record of one candidate's evaluation; `Archive` is the live handle
that collects them (semantics section 8). Every query is a pure function over a sequence
of entries (`best_index`, `pareto_indices`, `pareto_ranks`, `view_indices`), so a run store or
the studio can ask the same questions of stored records; the `Archive` methods delegate to them.

Rules:

- The archive keeps every entry; the strategy only changes what the designer is shown.
- Identical specs (same canonical hash, `core.ir.spec_hash`) are one entry. When a spec comes
  back evaluated on *more* examples than its entry has (e.g. re-scored on the full validation
  set), the new evaluation replaces the old one at the same index (generation, thought,
  parent and spec text of the first proposal are kept); otherwise the first evaluation stays.
- Invalid entries (F7: NaN or infinite metrics, a non-finite aggregate score, a degenerate or
  rejected evaluation, a spec that does not parse) are never on the front, never ranked and never
  `best`. `ArchiveEntry.invalid_reason` says why.
"""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Iterator, Mapping, Sequence
from typing import Any, Literal, TypeAlias, cast

import numpy as np
import numpy.typing as npt
from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    field_validator,
    model_validator,
)

from core.errors import SpecError
from core.evaluation.metrics import MetricBundle, bundle_invalid_reason, copy_bundle
from core.ir.canonical import spec_hash
from core.ir.limits import MAX_DEPTH_CEILING, SpecLimits, parse_topology
from core.ir.metrics import spec_metrics
from core.ir.models import TopologySpec
from core.search.pareto import (
    DEFAULT_OBJECTIVES,
    Direction,
    Objective,
    hypervolume,
    non_dominated_sort,
    pareto_front_mask,
)

__all__ = [
    "OBJECTIVE_NAMES",
    "STRATEGIES",
    "Archive",
    "ArchiveEntry",
    "ArchiveStrategy",
    "ObjectiveLike",
    "best_index",
    "objective_matrix",
    "pareto_indices",
    "pareto_ranks",
    "resolve_objectives",
    "view_indices",
]

ArchiveStrategy: TypeAlias = Literal["top_k", "cumulative", "parallel"]
"""What the designer is shown; see `view_indices`."""
STRATEGIES: tuple[ArchiveStrategy, ...] = ("top_k", "cumulative", "parallel")
"""The archive strategies."""

ObjectiveLike: TypeAlias = Objective | str
"""An `Objective`, or a value name whose direction is the natural one (see `OBJECTIVE_NAMES`)."""

OBJECTIVE_NAMES: Mapping[str, Direction] = {
    "accuracy": "max",
    "cost_usd": "min",
    "latency_ms": "min",
    "confidence": "max",
    "robustness": "max",
    "input_tokens": "min",
    "output_tokens": "min",
    "total_tokens": "min",
    "n_agents": "min",
    "depth": "min",
    "n_nodes": "min",
    "aggregate_score": "max",
}
"""Every value `ArchiveEntry.objective` knows, with its natural direction (used when an objective
is given by name only)."""

_PARSE_LIMITS = SpecLimits(max_depth=MAX_DEPTH_CEILING, max_nodes=100_000)
"""Generous limits for deriving hashes and metrics: the archive records, the evaluator enforces."""

_HV_REFERENCE_DEFAULTS: Mapping[str, float] = {"accuracy": 0.0, "confidence": 0.0}
"""Default hypervolume reference values for bounded objectives; others use the worst value."""


def _mean(values: Sequence[float]) -> float:
    if not values:
        return math.nan
    if all(math.isfinite(v) for v in values):
        return math.fsum(values) / len(values)
    return float(sum(values)) / len(values)


class ArchiveEntry(BaseModel):
    """One evaluated candidate: its spec, per-example metrics and aggregate score (frozen).

    The first six fields are the contract's (semantics section 8). The entry never shares lists
    or dicts with the caller: `bundles` are deep-copied into a tuple on construction.

    Derived on construction when not given: `spec_hash` (canonical, `core.ir.spec_hash`; for a
    spec that does not parse, `"raw:"` + the SHA-256 of its text, so different broken proposals
    stay apart), the structural metrics `n_agents`, `depth`, `n_nodes` (`core.ir.spec_metrics`)
    and `invalid_reason`.

    `invalid_reason` is the caller's reason when given (e.g. the evaluator's
    `"max_depth_exceeded: depth 5 > 4"` or `"degenerate: 95% blank outputs"`), else the first
    that applies, each starting with a code:

    - `spec_unparseable: <error>` (and no structural metrics were given);
    - `not_evaluated: no examples`;
    - an invalid bundle's reason with its position, e.g.
      `non_finite_metric: accuracy is nan (example 2)` (see `bundle_invalid_reason`; F7);
    - `non_finite_score: aggregate_score is nan`;
    - `degenerate: all 5 examples failed (3 error, 2 blank)`: nothing was answered, so its zero
      cost must not put it on the front.
    """

    model_config = ConfigDict(
        frozen=True, extra="forbid", use_attribute_docstrings=True, ser_json_inf_nan="constants"
    )

    generation: int = Field(ge=-1)
    """The generation that proposed it: -1 for the seed, then 0, 1, ..."""
    spec_json: str
    """The spec as JSON (or the raw proposal text when it did not parse)."""
    bundles: Sequence[MetricBundle]
    """One metric bundle per example evaluated, in example order (a deep copy, stored as a
    tuple)."""
    aggregate_score: float
    """Mean of the scalarized bundles (`core.evaluation.aggregate_score`); higher is better."""
    thought: str = ""
    """The designer's reasoning, if any."""
    parent_idx: int | None = Field(default=None, ge=0)
    """Archive index of the entry it was derived from, if any."""
    split: str = "minibatch"
    """Which examples it was evaluated on: `"minibatch"`, `"validation"` (full), `"test"`, ...
    Compare like with like: see the `split` argument of the archive queries."""
    spec_hash: str = ""
    """Canonical content hash of the spec; derived from `spec_json` when empty."""
    n_agents: int | None = Field(default=None, ge=0)
    """Agent steps + agent classifiers + loop evaluators; derived when None (None when the spec
    does not parse)."""
    depth: int | None = Field(default=None, ge=0)
    """Nesting depth (0 atomic, 1 + deepest child); derived when None."""
    n_nodes: int | None = Field(default=None, ge=0)
    """Number of operation nodes; derived when None."""
    invalid_reason: str | None = None
    """Why the entry is invalid (code first), or None when valid; derived when not given."""

    @field_validator("bundles")
    @classmethod
    def _as_tuple(cls, value: Sequence[MetricBundle]) -> tuple[MetricBundle, ...]:
        # JSON input validates a Sequence to a list: store a tuple whatever the input mode
        return tuple(value)

    @model_validator(mode="before")
    @classmethod
    def _derive(cls, data: Any) -> Any:
        if not isinstance(data, Mapping):
            return data
        values = dict(cast(Mapping[str, Any], data))
        if "spec" in values:  # ArchiveEntry(spec=PipelineSpec(...)): stored as its JSON
            if "spec_json" in values:
                raise ValueError("give spec or spec_json, not both")
            given = values.pop("spec")
            values["spec_json"] = given.model_dump_json() if isinstance(given, BaseModel) else given
        raw_bundles = values.get("bundles", ())
        if isinstance(raw_bundles, list | tuple):
            try:
                values["bundles"] = tuple(
                    copy_bundle(b)
                    if isinstance(b, MetricBundle)
                    else MetricBundle.model_validate(b)
                    for b in cast(Sequence[Any], raw_bundles)
                )
            except ValidationError:
                return values  # field validation reports it, with its location
        text = values.get("spec_json")
        if not isinstance(text, str):
            return values  # field validation reports it
        parse_error: str | None = None
        need_hash = not values.get("spec_hash")
        need_metrics = any(values.get(k) is None for k in ("n_agents", "depth", "n_nodes"))
        if need_hash or need_metrics:
            try:
                spec = parse_topology(text, _PARSE_LIMITS)
            except SpecError as exc:
                parse_error = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
                if need_hash:
                    digest = hashlib.sha256(text.encode("utf-8")).hexdigest()
                    values["spec_hash"] = "raw:" + digest
            else:
                if need_hash:
                    values["spec_hash"] = spec_hash(spec)
                if need_metrics:
                    metrics = spec_metrics(spec)
                    for key in ("n_agents", "depth", "n_nodes"):
                        if values.get(key) is None:
                            values[key] = getattr(metrics, key)
        if not values.get("invalid_reason"):
            values["invalid_reason"] = _derived_reason(values, parse_error)
        return values

    @property
    def valid(self) -> bool:
        """True when the entry may be on the front and be `best` (no `invalid_reason`)."""
        return self.invalid_reason is None

    @property
    def n_examples(self) -> int:
        """Number of examples evaluated (one bundle each)."""
        return len(self.bundles)

    @property
    def spec(self) -> TopologySpec:
        """The spec, parsed from `spec_json` (a new object on each access).

        Construction also accepts `spec=` (a `TopologySpec`, stored as its JSON).

        Raises:
            SpecError: `spec_json` is not a valid spec (a rejected proposal's raw text).
        """
        return parse_topology(self.spec_json, _PARSE_LIMITS)

    def objective(self, name: str) -> float:
        """One objective value of this entry (NaN when it has none).

        Per-example values are means over the bundles: `accuracy`, `cost_usd` (USD per
        example), `latency_ms` (ms per example), `input_tokens`, `output_tokens`,
        `total_tokens`; `confidence` and `robustness` average the bundles that have one (NaN when
        none does). Structural: `n_agents`, `depth`, `n_nodes` (NaN when the spec did not parse).
        And `aggregate_score`. Means are unweighted (bundles do not carry example weights).

        Raises:
            KeyError: an unknown name (the known ones are `OBJECTIVE_NAMES`).
        """
        b = self.bundles
        match name:
            case "accuracy":
                return _mean([x.accuracy for x in b])
            case "cost_usd":
                return _mean([x.cost_usd for x in b])
            case "latency_ms":
                return _mean([x.latency_ms for x in b])
            case "confidence":
                return _mean([x.confidence for x in b if x.confidence is not None])
            case "robustness":
                return _mean([x.robustness for x in b if x.robustness is not None])
            case "input_tokens":
                return _mean([float(x.input_tokens) for x in b])
            case "output_tokens":
                return _mean([float(x.output_tokens) for x in b])
            case "total_tokens":
                return _mean([float(x.total_tokens) for x in b])
            case "n_agents" | "depth" | "n_nodes":
                value: int | None = getattr(self, name)
                return math.nan if value is None else float(value)
            case "aggregate_score":
                return float(self.aggregate_score)
            case _:
                raise KeyError(f"unknown objective {name!r}; known: {', '.join(OBJECTIVE_NAMES)}")

    def objective_values(
        self, objectives: Sequence[ObjectiveLike] = DEFAULT_OBJECTIVES
    ) -> tuple[float, ...]:
        """The entry's values for `objectives`, in order (see `objective`)."""
        return tuple(self.objective(o.name) for o in resolve_objectives(objectives))


def _rounded(value: float) -> float | None:
    return round(value, 6) if math.isfinite(value) else None


def _derived_reason(values: Mapping[str, Any], parse_error: str | None) -> str | None:
    if parse_error is not None and any(
        values.get(k) is None for k in ("n_agents", "depth", "n_nodes")
    ):
        return f"spec_unparseable: {parse_error}"
    bundles = values.get("bundles")
    if not isinstance(bundles, tuple) or not bundles:
        return "not_evaluated: no examples"
    bundle_list = cast(tuple[MetricBundle, ...], bundles)
    for i, bundle in enumerate(bundle_list):
        reason = bundle_invalid_reason(bundle)
        if reason is not None:
            return f"{reason} (example {i})"
    try:
        score = float(cast(Any, values.get("aggregate_score")))  # field validation reports it
    except (TypeError, ValueError):
        score = 0.0
    if not math.isfinite(score):
        return f"non_finite_score: aggregate_score is {score}"
    if all(b.failed for b in bundle_list):
        n_error = sum(1 for b in bundle_list if b.status == "error")
        n_blank = len(bundle_list) - n_error
        return (
            f"degenerate: all {len(bundle_list)} examples failed ({n_error} error, {n_blank} blank)"
        )
    return None


# --- pure queries over entries -----------------------------------------------------------------


def resolve_objectives(objectives: Sequence[ObjectiveLike]) -> tuple[Objective, ...]:
    """Objectives from `Objective`s or names (a name takes its direction from `OBJECTIVE_NAMES`).

    Raises:
        ValueError: empty, an unknown name, or a name given twice.
    """
    out: list[Objective] = []
    for o in objectives:
        obj = o if isinstance(o, Objective) else None
        if obj is None:
            name = str(o)
            if name not in OBJECTIVE_NAMES:
                raise ValueError(f"unknown objective {name!r}; known: {', '.join(OBJECTIVE_NAMES)}")
            obj = Objective(name, OBJECTIVE_NAMES[name])
        elif obj.name not in OBJECTIVE_NAMES:
            raise ValueError(f"unknown objective {obj.name!r}; known: {', '.join(OBJECTIVE_NAMES)}")
        out.append(obj)
    if not out:
        raise ValueError("at least one objective is needed")
    names = [o.name for o in out]
    if len(set(names)) != len(names):
        raise ValueError(f"objectives repeat a name: {names}")
    return tuple(out)


def _selected(entry: ArchiveEntry, split: str | None) -> bool:
    return entry.valid and (split is None or entry.split == split)


def objective_matrix(
    entries: Sequence[ArchiveEntry],
    objectives: Sequence[ObjectiveLike] = DEFAULT_OBJECTIVES,
    split: str | None = None,
) -> npt.NDArray[np.float64]:
    """`(n, k)` objective values of the entries; rows of invalid (or other-split) entries NaN.

    NaN rows are what the Pareto functions treat as invalid: never on a front.
    """
    objs = resolve_objectives(objectives)
    m = np.full((len(entries), len(objs)), np.nan, dtype=np.float64)
    for i, e in enumerate(entries):
        if _selected(e, split):
            m[i] = [e.objective(o.name) for o in objs]
    return m


def best_index(entries: Sequence[ArchiveEntry], split: str | None = None) -> int | None:
    """Index of the valid entry with the highest aggregate score; ties: the earliest.

    Args:
        entries: the entries, in archive order.
        split: only consider entries evaluated on this split; None = all.

    Returns:
        The index, or None when no entry qualifies.
    """
    best: int | None = None
    for i, e in enumerate(entries):
        if _selected(e, split) and (
            best is None or e.aggregate_score > entries[best].aggregate_score
        ):
            best = i
    return best


def pareto_indices(
    entries: Sequence[ArchiveEntry],
    objectives: Sequence[ObjectiveLike] = DEFAULT_OBJECTIVES,
    split: str | None = None,
) -> list[int]:
    """Indices (ascending) of the valid entries no other valid entry dominates.

    An entry is on the front if no other entry is at least as good on every objective and
    better on one; invalid entries, other splits and entries with a NaN objective value never
    are.
    """
    mask = pareto_front_mask(objective_matrix(entries, objectives, split), _dirs(objectives))
    return [int(i) for i in np.flatnonzero(mask)]


def pareto_ranks(
    entries: Sequence[ArchiveEntry],
    objectives: Sequence[ObjectiveLike] = DEFAULT_OBJECTIVES,
    split: str | None = None,
) -> list[int | None]:
    """Non-dominated rank per entry (0 = on the front); None for entries that are not ranked
    (invalid, another split, a NaN objective value)."""
    fronts = non_dominated_sort(objective_matrix(entries, objectives, split), _dirs(objectives))
    return _ranks_of(fronts, len(entries))


def _ranks_of(fronts: Sequence[npt.NDArray[np.intp]], n: int) -> list[int | None]:
    ranks: list[int | None] = [None] * n
    for r, front in enumerate(fronts):
        for i in front:
            ranks[int(i)] = r
    return ranks


def view_indices(
    entries: Sequence[ArchiveEntry], strategy: ArchiveStrategy, size: int
) -> list[int]:
    """Which entries the designer is shown, in the order shown.

    - `top_k`: the `size` valid entries with the highest aggregate scores, best first (ties:
      earliest first).
    - `cumulative`: every entry in insertion order, invalid ones included (their reasons teach
      the designer what to avoid).
    - `parallel`: the latest `size` entries in insertion order, invalid ones included. Our
      reading of ADAS's parallel variant: a generation proposes several designs at once and the
      designer sees that batch, i.e. the most recent `size` entries (a generation of `size`
      proposals is exactly the last generation).

    Raises:
        ValueError: an unknown strategy or `size` < 1.
    """
    if size < 1:
        raise ValueError(f"size must be >= 1, got {size}")
    if strategy == "top_k":
        valid = [i for i, e in enumerate(entries) if e.valid]
        valid.sort(key=lambda i: (-entries[i].aggregate_score, i))
        return valid[:size]
    if strategy == "cumulative":
        return list(range(len(entries)))
    if strategy == "parallel":
        return list(range(max(0, len(entries) - size), len(entries)))
    raise ValueError(f"unknown archive strategy {strategy!r}; known: {', '.join(STRATEGIES)}")


def _dirs(objectives: Sequence[ObjectiveLike]) -> list[Direction]:
    return [o.direction for o in resolve_objectives(objectives)]


# --- the live archive --------------------------------------------------------------------------


class Archive:
    """Every evaluated candidate of a search, with front, best and the designer's view.

    A live handle (not a record): `add` entries, then query. Queries delegate to the pure
    functions of this module over `entries`.

    Args:
        strategy: what `view()` shows: `"top_k"`, `"cumulative"` or `"parallel"`.
        size: how many entries `top_k` and `parallel` show (>= 1).
        objectives: the front's objectives (default `DEFAULT_OBJECTIVES`: accuracy up; cost,
            latency, n_agents, depth down); `Objective`s or names.

    Raises:
        ValueError: an unknown strategy, `size` < 1, or bad objectives.
    """

    def __init__(
        self,
        strategy: ArchiveStrategy = "top_k",
        size: int = 5,
        objectives: Sequence[ObjectiveLike] = DEFAULT_OBJECTIVES,
    ) -> None:
        if strategy not in STRATEGIES:
            raise ValueError(
                f"unknown archive strategy {strategy!r}; known: {', '.join(STRATEGIES)}"
            )
        if size < 1:
            raise ValueError(f"size must be >= 1, got {size}")
        self._strategy: ArchiveStrategy = strategy
        self._size = size
        self._objectives = resolve_objectives(objectives)
        self._entries: list[ArchiveEntry] = []
        self._by_hash: dict[str, int] = {}
        # the archive objectives' values per entry, computed once on add (entries are frozen)
        self._rows: list[tuple[float, ...]] = []

    @property
    def strategy(self) -> ArchiveStrategy:
        """What `view()` shows."""
        return self._strategy

    @property
    def size(self) -> int:
        """How many entries `top_k` and `parallel` views show."""
        return self._size

    @property
    def objectives(self) -> tuple[Objective, ...]:
        """The front's objectives."""
        return self._objectives

    @property
    def entries(self) -> tuple[ArchiveEntry, ...]:
        """Every entry, in insertion order (index = position)."""
        return tuple(self._entries)

    def __len__(self) -> int:
        return len(self._entries)

    def __iter__(self) -> Iterator[ArchiveEntry]:
        return iter(tuple(self._entries))

    def __getitem__(self, index: int) -> ArchiveEntry:
        return self._entries[index]

    def index_of(self, spec_hash: str) -> int | None:
        """The index of the entry with this canonical hash, or None."""
        return self._by_hash.get(spec_hash)

    def add(self, entry: ArchiveEntry) -> int:
        """Add an entry; returns its index (an existing index for an identical spec).

        Identical specs (same `spec_hash`) are one entry: a re-evaluation on more examples
        replaces the evaluation (bundles, score, split, invalid reason) and keeps the first
        proposal's generation, thought, parent and spec text; otherwise the first stays.
        """
        known = self._by_hash.get(entry.spec_hash)
        if known is None:
            self._entries.append(entry)
            self._rows.append(entry.objective_values(self._objectives))
            self._by_hash[entry.spec_hash] = len(self._entries) - 1
            return len(self._entries) - 1
        old = self._entries[known]
        if entry.n_examples > old.n_examples:
            data = old.model_dump()
            data.update(
                bundles=entry.bundles,
                aggregate_score=entry.aggregate_score,
                split=entry.split,
                invalid_reason=entry.invalid_reason,
            )
            self._entries[known] = ArchiveEntry.model_validate(data)
            self._rows[known] = self._entries[known].objective_values(self._objectives)
        return known

    def _matrix(
        self, objectives: Sequence[ObjectiveLike] | None, split: str | None
    ) -> tuple[npt.NDArray[np.float64], list[Direction]]:
        """Objective matrix (invalid / other-split rows NaN) and directions; cached rows for the
        archive's own objectives."""
        if objectives is not None:
            objs = resolve_objectives(objectives)
            return objective_matrix(self._entries, objs, split), [o.direction for o in objs]
        dirs: list[Direction] = [o.direction for o in self._objectives]
        m = np.array(self._rows, dtype=np.float64).reshape(len(self._rows), len(dirs))
        keep = np.array([_selected(e, split) for e in self._entries], dtype=np.bool_)
        m[~keep] = np.nan
        return m, dirs

    def best(self, split: str | None = None) -> ArchiveEntry | None:
        """The valid entry with the highest aggregate score (ties: earliest).

        Returns:
            The entry, or None when the archive has entries but none qualifies (all invalid,
            or none on `split`): invalid entries are never best.

        Raises:
            ValueError: the archive is empty.
        """
        if not self._entries:
            raise ValueError("the archive is empty: add() an entry first")
        i = best_index(self._entries, split)
        return None if i is None else self._entries[i]

    def best_index(self, split: str | None = None) -> int | None:
        """The index of `best(split)`, or None."""
        return best_index(self._entries, split)

    def pareto(
        self, split: str | None = None, objectives: Sequence[ObjectiveLike] | None = None
    ) -> list[ArchiveEntry]:
        """The valid entries on the Pareto front, in archive order (see `pareto_indices`)."""
        return [self._entries[i] for i in self.pareto_indices(split, objectives)]

    def pareto_indices(
        self, split: str | None = None, objectives: Sequence[ObjectiveLike] | None = None
    ) -> list[int]:
        """Indices of `pareto(...)`; objectives default to the archive's."""
        m, dirs = self._matrix(objectives, split)
        return [int(i) for i in np.flatnonzero(pareto_front_mask(m, dirs))]

    def ranks(
        self, split: str | None = None, objectives: Sequence[ObjectiveLike] | None = None
    ) -> list[int | None]:
        """Non-dominated rank per entry (0 = front), None for entries not ranked."""
        m, dirs = self._matrix(objectives, split)
        return _ranks_of(non_dominated_sort(m, dirs), len(self._entries))

    def view(self) -> list[ArchiveEntry]:
        """What the designer is shown under the archive's strategy (see `view_indices`)."""
        return [self._entries[i] for i in view_indices(self._entries, self._strategy, self._size)]

    def serialize_for_prompt(self, thought_chars: int = 500) -> str:
        """The entries of `view()` as text for a designer's prompt, in the order shown.

        One JSON object per entry (keys sorted), entries separated by `",\n"`: `generation`,
        `thought` (cut to `thought_chars` characters), `spec` (the spec as JSON, or the raw text
        of a proposal that did not parse), `score` (aggregate score rounded to 4 decimals, None
        when not finite), the mean `accuracy`, `cost_usd` (USD per example) and `latency_ms`
        (ms per example) rounded to 6 decimals, `n_agents`, `depth`, `split`, and
        `invalid_reason` (None when valid). `""` for an empty view. Which entries appear follows
        the strategy (`view_indices`: `parallel` shows the latest `size` entries).
        """
        parts: list[str] = []
        for entry in self.view():
            try:
                spec: Any = json.loads(entry.spec_json)
            except ValueError:
                spec = entry.spec_json
            score = entry.aggregate_score
            parts.append(
                json.dumps(
                    {
                        "generation": entry.generation,
                        "thought": entry.thought[:thought_chars],
                        "spec": spec,
                        "score": round(score, 4) if math.isfinite(score) else None,
                        "accuracy": _rounded(entry.objective("accuracy")),
                        "cost_usd": _rounded(entry.objective("cost_usd")),
                        "latency_ms": _rounded(entry.objective("latency_ms")),
                        "n_agents": entry.n_agents,
                        "depth": entry.depth,
                        "split": entry.split,
                        "invalid_reason": entry.invalid_reason,
                    },
                    sort_keys=True,
                )
            )
        return ",\n".join(parts)

    def hypervolume(
        self,
        objectives: Sequence[ObjectiveLike] = ("accuracy", "cost_usd"),
        reference: Sequence[float] | None = None,
        split: str | None = None,
    ) -> float:
        """Hypervolume of the valid entries over 1 to 3 objectives.

        Args:
            objectives: default accuracy (max) and cost_usd (min).
            reference: the reference point, one value per objective. None: 0 for accuracy and
                confidence, else the worst value among the valid entries (a point at the worst
                value adds nothing along that axis). Pass a fixed reference to compare archives.
            split: only entries evaluated on this split; None = all.

        Returns:
            The hypervolume (0.0 with no valid entries).

        Raises:
            ValueError: more than 3 objectives, or a reference of the wrong length.
        """
        objs = resolve_objectives(objectives)
        points = objective_matrix(self._entries, objs, split)
        finite = points[np.isfinite(points).all(axis=1)]
        if finite.shape[0] == 0:
            return 0.0
        if reference is None:
            ref: list[float] = []
            for j, o in enumerate(objs):
                if o.name in _HV_REFERENCE_DEFAULTS:
                    ref.append(_HV_REFERENCE_DEFAULTS[o.name])
                else:
                    col = finite[:, j]
                    ref.append(float(col.min() if o.direction == "max" else col.max()))
            reference = ref
        return hypervolume(points, reference, [o.direction for o in objs])
