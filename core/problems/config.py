"""The schema of a problem's TOML file (`problem.toml`), as frozen Pydantic models.

Every section is checked here, before any of the problem's code runs; a loading error names the
file and the dotted field (see `core.problems.load_problem`). The format, with every field, is
documented in `core.problems` and in `data/problems/gsm8k_replay/README.md`.
"""

from __future__ import annotations

import re
from typing import Annotated, Any, Final, Literal

from pydantic import AfterValidator, BaseModel, BeforeValidator, ConfigDict, Field, field_validator
from pydantic_core import PydanticCustomError

from core.agents.rate_budget import ANY_PROVIDER, ProviderLimit
from core.combinators.ballot import Normalization
from core.evaluation.metrics import MetricWeights
from core.evaluation.pricing import ModelPrice

__all__ = [
    "RANDOM_SEED_MAX",
    "AgentConfig",
    "DEFAULT_EXAMPLE_TIMEOUT_S",
    "AnswerConfig",
    "DatasetConfig",
    "EvaluationSettings",
    "GoldConfig",
    "ModelsConfig",
    "ProblemConfig",
    "RandomSeed",
    "ReplayConfig",
    "SearchDefaults",
]

_CONFIG = ConfigDict(
    frozen=True, extra="forbid", use_attribute_docstrings=True, allow_inf_nan=False
)

_NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.\-]*$")
_SHA256_RE = re.compile(r"^[0-9a-f]{64}$")

StepKind = Literal[
    "agent_step", "function_step", "pipeline", "parallel", "router", "refinement_loop"
]
"""The IR's node kinds (semantics section 6)."""


RANDOM_SEED_MAX: Final = 2**63 - 1
"""The largest random seed of a search: a run records its seed as a signed 64-bit integer (the
run store's `BIGINT` column, and `RunStarted.seed`)."""


def _check_random_seed(value: int) -> int:
    # 0 and up: random.Random(n) seeds with abs(n), so -n would draw what n draws while the
    # minibatch draws (seeded with the text of n) differ; numpy's seeds refuse negatives too
    if not 0 <= value <= RANDOM_SEED_MAX:
        raise PydanticCustomError(
            "random_seed_range",
            "must be a whole number from 0 to {max} (2**63 - 1, the largest seed a run can record)",
            {"max": RANDOM_SEED_MAX},
        )
    return value


RandomSeed = Annotated[int, AfterValidator(_check_random_seed)]
"""A search's random seed: a whole number from 0 to `RANDOM_SEED_MAX` (2**63 - 1). Out of that
range it is a validation error at the field, e.g. `seed: must be a whole number from 0 to
9223372036854775807 (...)`."""


def _relative_path(v: str) -> str:
    parts = v.replace("\\", "/").split("/")
    if not v or v.startswith(("/", "\\")) or ".." in parts or ":" in parts[0]:
        raise ValueError("must be a relative path inside the problem directory")
    return v


class GoldConfig(BaseModel):
    """`[gold]`: where the gold examples come from and how they are split.

    Split rule (deterministic, independent of file order): every example gets the key
    `sha256(split_salt + "\\0" + split_key(example))` (hex), examples are ranked by that key and
    the first `validation_size` form the `"validation"` split, the next `train_size` (when set)
    the `"train"` split, the rest the `"test"` split; each split keeps the source order. `split_key` is the problem module's `ProblemParts.split_key`
    (e.g. the question text) or, when it gives none, the example `id`.
    """

    model_config = _CONFIG

    source: Literal["module", "jsonl"] = "module"
    """`"module"`: the registries module's `ProblemParts.load_gold`; `"jsonl"`: the file `path`."""
    path: str | None = None
    """For `source = "jsonl"`: a JSON-lines file relative to the problem directory, one
    `{"id", "input", "expected", "rubric", "weight"}` object a line (`input` required)."""
    validation_size: int = Field(default=300, ge=1)
    """Number of examples in the validation split (the search's); the rest are the test split."""
    train_size: int | None = Field(default=None, ge=1)
    """Number of examples in the train split (what learned parts fit on; never scored by the
    search, never reported): the ranks just after validation's, carved from what would be test.
    None: no train split."""
    split_salt: str = ""
    """Salt mixed into the split hash; change it to draw a different (still fixed) split."""

    @field_validator("path")
    @classmethod
    def _check_path(cls, v: str | None) -> str | None:
        return None if v is None else _relative_path(v)


def _check_workers(value: Any) -> Any:
    """`[search] workers`: a whole number of at least 1 or "auto" (one message, not the two
    branches of the union)."""
    if value == "auto" or (type(value) is int and value >= 1):
        return value
    raise ValueError("must be a whole number of at least 1 or 'auto'")


class AnswerConfig(BaseModel):
    """`[answer]`: how the standard library reads and compares answers (`core.combinators`)."""

    model_config = _CONFIG

    field: str | None = None
    """The answer field of a structured output (e.g. `"label"`); None: the output itself."""
    normalization: Normalization = "text"
    """How answers are compared: `"text"` strips and casefolds, `"numeric"` compares the first
    number, `"exact"` the text as is (a `ProblemParts.normalize_answer` replaces it)."""


class SearchDefaults(BaseModel):
    """`[search]`: default search settings for this problem (a CLI flag or the studio may
    override any of them)."""

    model_config = _CONFIG

    standard_library: bool = True
    """Register the standard library of combinators (`core.combinators`: votes, agreement
    gates, judges, input features) beside the problem's own functions."""
    strategy: str = "evolutionary"
    """Search strategy name: `"evolutionary"`, `"random"` or `"meta_agent"` (needs `meta_model`)."""
    max_evaluations: int = Field(default=40, ge=1)
    """Stop after this many candidate evaluations (the seed counts)."""
    max_usd: float | None = Field(default=None, ge=0)
    """Stop when the priced cost of all evaluations reaches this many USD (None: no limit)."""
    max_wall_time_s: float | None = Field(default=None, gt=0)
    """Stop after this many seconds of wall time (None: no limit)."""
    patience: int | None = Field(default=None, ge=1)
    """Stop after this many evaluations without a new best (None: never)."""
    minibatch_size: int = Field(default=20, ge=1)
    """Validation examples per candidate evaluation during the search."""
    minibatch_margin: float | None = Field(default=None, gt=0, le=1, allow_inf_nan=False)
    """One fixed minibatch per run, sized from the seed's measured variance so that an accuracy
    estimate is within this margin (95% half-width; `StrategyConfig.minibatch_margin`); None:
    a new `minibatch_size` draw each generation."""
    promotion_k_se: float | None = Field(default=None, ge=0, le=10, allow_inf_nan=False)
    """The paired test of promotion from the fixed minibatch to full validation, in standard
    errors (`StrategyConfig.promotion_k_se`); None: the strategy's default (0)."""
    seed: RandomSeed = 42
    """Random seed of the strategy and the minibatch draws (0 to 2**63 - 1)."""
    concurrency: int = Field(default=8, ge=1)
    """Examples evaluated concurrently (in each worker process)."""
    workers: Annotated[int | Literal["auto"], BeforeValidator(_check_workers)] = 1
    """Processes sharing the runs of one evaluation (`TopologyEvaluator(workers=...)`: forked
    children, Linux only; `"auto"`: one per usable CPU). Only for problems whose models run in
    this process (replayed or function models): a child must not share a hosted model's open
    connections. Results are identical for any value; `search --workers N` sets it for one
    run. Like the rest of `[search]`, outside `config_hash`."""
    meta_model: str | None = None
    """pydantic-ai model id of the meta agent (`"provider:model"`), for `meta_agent` only."""
    allowed_step_kinds: tuple[StepKind, ...] = ("agent_step", "function_step")
    """Step kinds a candidate may use (semantics section 8, `TopologyGene.allowed_step_kinds`)."""
    max_depth: int = Field(default=4, ge=1)
    """Maximum nesting depth of a candidate topology (`TopologyGene.max_depth`)."""
    traces: bool = False
    """Record every run's spans (the per-example trace the studio draws) in the run journal
    (`EvaluatorConfig.capture_traces`; `search --traces` sets it for one run, and a resumed run
    keeps what it recorded). Off: about a tenth of the journal's size."""
    weights: MetricWeights = Field(default_factory=MetricWeights)
    """`[search.weights]`: the metric weights of the aggregate score the search ranks
    candidates by (`MetricWeights`: `accuracy`, `cost_usd` per USD per example, `latency_ms` per
    ms, `confidence`, `robustness`; finite numbers, a field left out keeps the contract's
    default). The contract's defaults price a percentage point of accuracy (0.01) at a tenth
    of a cent per example (`cost_usd = -10`): set them for the problem's prices, or the cheapest
    topology wins."""


DEFAULT_EXAMPLE_TIMEOUT_S: Final = 300.0
"""The default deadline of one example run, in seconds: long enough for a refinement loop of
several hosted-model calls (a call rarely takes over a minute), short enough that an agent that
hangs costs minutes, not a search that never ends."""


class EvaluationSettings(BaseModel):
    """`[evaluation]`: how each example is run (`EvaluatorConfig`)."""

    model_config = _CONFIG

    example_timeout_s: float = Field(default=DEFAULT_EXAMPLE_TIMEOUT_S, gt=0)
    """Deadline of one example run (one trial), seconds: a run with no output by then is an
    `error` with the reason `example_timeout: timed out after <s> s`, counted like any failed
    run, never cached; `--example-timeout-s` overrides it. Default 300."""


class ModelsConfig(BaseModel):
    """`[models]`: model prices, the replay time scale and where latency comes from."""

    model_config = _CONFIG

    time_scale: float = Field(default=1.0, ge=0)
    """Multiplier on simulated (replay) model latency before it is slept for real: 0 sleeps
    nothing, 1 sleeps the modelled time. Reported latency is always the modelled time."""
    latency_source: Literal["auto", "model", "wall"] = "auto"
    """Where a run's latency comes from (`TopologyEvaluator`'s `latency_source`): `"auto"` model
    time when the run's models recorded any, else wall time; `"model"` always model time, 0 ms
    for a run that called no model (set it when every model of the problem reports model time,
    e.g. replay models, so identical runs give identical latency); `"wall"` always wall time."""
    prices: dict[str, ModelPrice] = Field(default_factory=dict[str, ModelPrice])
    """Model name as recorded in usage (e.g. `"replay:6b_finetuning"`) -> price per 1K tokens.
    These win over genai-prices (see `core.evaluation.pricing`)."""
    base_url: str | None = None
    """An OpenAI-compatible server for every `openai-chat:` / `openai:` model, e.g.
    `"http://127.0.0.1:11434/v1"` (Ollama); `OPENAI_BASE_URL` in the environment wins."""
    timeout_s: float = Field(default=60.0, gt=0)
    """One model request's timeout, in seconds (`core.agents.providers.ProviderPolicy`)."""
    max_wait_s: float = Field(default=120.0, ge=0)
    """The most one model call waits out transient faults (429, 5xx, timeouts), in seconds."""
    backoff_s: float = Field(default=1.0, ge=0)
    """The first wait after a fault that names no `Retry-After`, in seconds (then doubled)."""
    max_backoff_s: float = Field(default=30.0, ge=0)
    """The longest single wait without a `Retry-After`, in seconds."""


class AgentConfig(BaseModel):
    """`[agents.<name>]`: an agent declared in the TOML, so a problem needs no `registries.py`
    (`core.problems.declared` builds it; a `registries.py` that exists is used instead)."""

    model_config = _CONFIG

    model: str = Field(min_length=1)
    """What the agent runs: a pydantic-ai model id (`"openai:gpt-4o-mini"`,
    `"ollama:llama3.1"`: its provider's key or address must be set, and it needs a price from
    genai-prices or `[models.prices]`), `"replay:<agent>"` (that agent's recorded outputs in the
    `[replay]` file) or `"function:<name>"` (a pydantic-ai `FunctionModel` registered in this
    process under that id: `core.agents.local_models`)."""
    description: str = ""
    """One line for the designer: what the agent is (default: its model)."""
    instructions: str | None = None
    """The agent's instructions (pydantic-ai `instructions`, what prompt optimisation
    rewrites); None: none."""
    output: Literal["text", "object"] = "text"
    """The agent's output: text (`str`), or a JSON object (`dict`). A replay agent's is what its
    recordings hold."""


class ReplayConfig(BaseModel):
    """`[replay]`: a recorded-outputs file (`core.problems.replay_file` documents its lines)."""

    model_config = _CONFIG

    path: str = "replay.jsonl"
    """The JSON-lines file, relative to the problem directory."""
    race_clock: Literal["turns", "ticks"] = "turns"
    """How a replayed request in a `fastest` race passes its model time
    (`core.agents.replay.RaceClock`)."""

    @field_validator("path")
    @classmethod
    def _check_path(cls, v: str) -> str:
        return _relative_path(v)


class DatasetConfig(BaseModel):
    """`[datasets.<name>]`: files fetched by `core.problems.datasets.fetch_dataset_file`.

    The files are looked up as `<configured dir>/<name>/<file>`, then in the cache, then
    downloaded from `url` with `{file}` replaced by the file name; the sha256 is always checked.
    """

    model_config = _CONFIG

    url: str
    """Pinned download address pattern with a `{file}` placeholder (http or https)."""
    files: dict[str, str] = Field(min_length=1)
    """File name -> expected sha256 (64 lowercase hex digits)."""
    timeout_s: float = Field(default=10.0, gt=0)
    """Network timeout of one download, in seconds."""

    @field_validator("url")
    @classmethod
    def _check_url(cls, v: str) -> str:
        if "{file}" not in v:
            raise ValueError("url must contain the placeholder {file}")
        if not v.startswith(("http://", "https://")):
            raise ValueError("url must be an http:// or https:// address")
        return v

    @field_validator("files")
    @classmethod
    def _check_files(cls, v: dict[str, str]) -> dict[str, str]:
        for name, digest in v.items():
            if not name or "/" in name or "\\" in name or name in (".", ".."):
                raise ValueError(f"file name {name!r} must be a plain file name")
            if not _SHA256_RE.match(digest):
                raise ValueError(f"sha256 of {name!r} must be 64 lowercase hex digits")
        return v


class ProblemConfig(BaseModel):
    """The whole `problem.toml`.

    Top-level keys: `name`, `description`, `registries`, `seed`, `score_function`; tables
    `[gold]`, `[search]`, `[evaluation]`, `[models]` (with `[models.prices."<model>"]`),
    `[datasets.<name>]`, `[rate_limits.<provider>]`, `[params]` (free-form, for the
    problem's own module to validate via `ProblemContext.params_as`), `[agents.<name>]` and
    `[replay]` (a problem declared in the TOML alone: `core.problems.declared`).
    """

    model_config = _CONFIG

    name: str
    """Problem name (letters, digits, `_ . -`), used in run records."""
    description: str = ""
    """What the problem is, for people and for the meta agent."""
    registries: str = "registries.py"
    """The Python file (relative to the problem directory) whose `build(ctx)` returns the
    problem's parts."""
    seed: str = "seed.json"
    """The seed topology spec (JSON of a `TopologySpec`), relative to the problem directory."""
    score_function: str | None = None
    """Name of one of `ProblemParts.score_functions`; may be omitted when there is exactly one."""
    gold: GoldConfig = Field(default_factory=GoldConfig)
    """`[gold]`: gold-set source and splits."""
    search: SearchDefaults = Field(default_factory=SearchDefaults)
    """`[search]`: default search settings."""
    answer: AnswerConfig = Field(default_factory=AnswerConfig)
    """`[answer]`: the answer field and normalisation the standard library compares."""
    evaluation: EvaluationSettings = Field(default_factory=EvaluationSettings)
    """`[evaluation]`: how each example is run (its deadline)."""
    models: ModelsConfig = Field(default_factory=ModelsConfig)
    """`[models]`: prices and the replay time scale."""
    datasets: dict[str, DatasetConfig] = Field(default_factory=dict[str, DatasetConfig])
    """`[datasets.<name>]`: pinned data files with checksums."""
    rate_limits: dict[str, ProviderLimit] = Field(default_factory=dict[str, ProviderLimit])
    """`[rate_limits.<provider>]`: one budget of model calls per provider
    (`core.agents.rate_budget.ProviderLimit`): `requests_per_minute` (model calls a minute),
    `tokens_per_minute` (input + output tokens a minute), `max_concurrent` (calls in flight) and
    `burst_s` (seconds of allowance a bucket holds, default 60); a key left out is unlimited.
    The provider is pydantic-ai's name for it (`openai`, `anthropic`, `function` for a
    `FunctionModel`, ...); `"*"` is every provider without its own table. A command's
    `--rate-limit PROVIDER=...` replaces one provider's table (`studio.cli._executor`). How fast a
    search runs, not what it measures: outside `config_hash`."""
    params: dict[str, Any] = Field(default_factory=dict[str, Any])
    """`[params]`: problem-specific settings, validated by the problem's own module."""
    agents: dict[str, AgentConfig] = Field(default_factory=dict[str, AgentConfig])
    """`[agents.<name>]`: agents declared in the TOML (`AgentConfig`); with them and no
    `registries.py` file, `core.problems.declared` builds the problem's parts."""
    replay: ReplayConfig | None = None
    """`[replay]`: the recorded outputs the `"replay:<agent>"` models answer from."""

    @field_validator("name")
    @classmethod
    def _check_name(cls, v: str) -> str:
        if not _NAME_RE.match(v):
            raise ValueError("name must start with a letter or digit and use only [A-Za-z0-9_.-]")
        return v

    @field_validator("registries", "seed")
    @classmethod
    def _check_relative(cls, v: str) -> str:
        return _relative_path(v)

    @field_validator("rate_limits")
    @classmethod
    def _check_providers(cls, v: dict[str, ProviderLimit]) -> dict[str, ProviderLimit]:
        for name in v:
            if name != ANY_PROVIDER and not _NAME_RE.match(name):
                raise ValueError(
                    f"provider name {name!r} must be '*' or use only [A-Za-z0-9_.-] "
                    "(pydantic-ai's provider name, e.g. openai)"
                )
        return v

    @field_validator("agents")
    @classmethod
    def _check_agent_names(cls, v: dict[str, AgentConfig]) -> dict[str, AgentConfig]:
        for name in v:
            if not _NAME_RE.match(name):
                raise ValueError(f"agent name {name!r} must use only [A-Za-z0-9_.-]")
        return v

    @field_validator("datasets")
    @classmethod
    def _check_dataset_names(cls, v: dict[str, DatasetConfig]) -> dict[str, DatasetConfig]:
        for name in v:
            if not _NAME_RE.match(name):
                raise ValueError(f"dataset name {name!r} must use only [A-Za-z0-9_.-]")
        return v
