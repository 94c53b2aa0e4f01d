"""`Problem`: the live handle a loaded problem definition gives the rest of the engine."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from types import ModuleType
from typing import Any

from core.agents.call_cache import CallCache
from core.agents.providers import ProviderPolicy
from core.agents.rate_budget import ProviderLimit, RateBudgetLike
from core.evaluation._fork import Workers
from core.evaluation.cache import EvaluationCache
from core.evaluation.evaluator import LatencySource, TopologyEvaluator
from core.evaluation.executor import Executor
from core.evaluation.metrics import GoldExample, MetricWeights, ScoreFn
from core.evaluation.pricing import ModelPrice, Pricer
from core.hydrate import AgentRegistry, CallableRegistry, HydrationHooks
from core.ir import TopologySpec
from core.ir.dataflow import EffectTable
from core.problems.config import ProblemConfig, SearchDefaults

_FAULT_SETTINGS = ("timeout_s", "max_wait_s", "backoff_s", "max_backoff_s")
"""`[models]` keys of `core.agents.providers.ProviderPolicy`, left out of `config_hash`."""

__all__ = ["Problem"]


class Problem:
    """A loaded problem: registries, score function, gold splits, seed topology and settings.

    A live handle (it holds the problem module's functions and agent factories), not a record:
    `to_dict()` is its JSON-serialisable record and `config_hash` its identity. Build one with
    `core.problems.load_problem`.

    Attributes:
        name: the problem's name (`name` in the TOML).
        description: what the problem is.
        root: the problem directory.
        toml_path: the problem's TOML file.
        config: the validated TOML (overrides applied).
        overrides: the dotted overrides that were applied, as given.
        module: the problem's registries module (its own helpers are reachable from here).
        callable_registry: the registered functions.
        agent_registry: the registered agent factories.
        score_fn: the score function `(output, example) -> float in [0, 1]`.
        score_function_name: its name among the module's score functions.
        splits: split name -> gold examples; always `"validation"` (what a search uses) and
            `"test"` (held out, for the final report), and `"train"` with `[gold] train_size`
            (what learned parts fit on; never scored), each with a unique `id` per example.
        seed_spec: the seed topology, validated and with every name registered.
        search: default search settings (`[search]`).
        prices: model name -> price per 1K tokens (`[models.prices]`).
        rate_limits: provider -> `ProviderLimit` (`[rate_limits.<provider>]`; requests and
            tokens per minute, calls in flight); `{}`: unlimited. A command's `--rate-limit`
            replaces a provider's entry (`studio.cli._executor.effective_rate_limits`).
        time_scale: multiplier on replayed latency before it is slept (`[models] time_scale`);
            the problem's models read it at load time, so change it with
            `load_problem(..., overrides={"models.time_scale": 0})`, not by assignment.
        roles: callable role -> registered names usable in it (see `core.problems.CallableRole`);
            every role is present, possibly empty.
        is_blank: the problem's blank-output test for the evaluator, or None for its default.
        effects: what each registered name reads and produces (`core.ir.dataflow.EffectTable`,
            from `ProblemParts.effects`).
        latency_source: `[models] latency_source`, where a run's latency comes from.
        hydration_hooks: what the problem changes in each built topology (the standard
            library's ballots, `core.combinators.BallotHooks`), or None; `evaluator()` passes
            them on.
        files_sha256: sha256 (hex) of the problem files the loader read, as bytes: its TOML,
            its registries module (and that package's `*.py`), its seed spec and a `jsonl` gold
            file; `""` for a problem built by hand. A run records it, and `search --resume`
            refuses a problem whose files hash differs from the recorded one.

    Build the evaluator of any run of this problem with `evaluator()`: it carries every hook the
    problem defines (prices, blank test, latency source), so no caller can miss one.
    """

    def __init__(
        self,
        *,
        config: ProblemConfig,
        root: Path,
        toml_path: Path,
        overrides: Mapping[str, Any],
        module: ModuleType,
        callable_registry: CallableRegistry,
        agent_registry: AgentRegistry,
        score_fn: ScoreFn,
        score_function_name: str,
        splits: Mapping[str, Sequence[GoldExample]],
        seed_spec: TopologySpec,
        roles: Mapping[str, Sequence[str]],
        code_sha256: str,
        files_sha256: str = "",
        is_blank: Callable[[Any], bool] | None = None,
        effects: EffectTable | None = None,
        hydration_hooks: HydrationHooks | None = None,
    ) -> None:
        self.hydration_hooks = hydration_hooks
        self.effects = effects if effects is not None else EffectTable()
        self.config = config
        self.name = config.name
        self.description = config.description
        self.root = root
        self.toml_path = toml_path
        self.overrides: dict[str, Any] = dict(overrides)
        self.module = module
        self.callable_registry = callable_registry
        self.agent_registry = agent_registry
        self.score_fn = score_fn
        self.score_function_name = score_function_name
        self.splits: dict[str, list[GoldExample]] = {k: list(v) for k, v in splits.items()}
        self.seed_spec = seed_spec
        self.search: SearchDefaults = config.search
        self.prices: dict[str, ModelPrice] = dict(config.models.prices)
        self.rate_limits: dict[str, ProviderLimit] = dict(config.rate_limits)
        self.time_scale: float = config.models.time_scale
        self.roles: dict[str, list[str]] = {k: list(v) for k, v in roles.items()}
        self.is_blank = is_blank
        self.latency_source: LatencySource = config.models.latency_source
        self._code_sha256 = code_sha256
        self.files_sha256 = files_sha256
        self._config_hash: str | None = None

    def __repr__(self) -> str:
        sizes = ", ".join(f"{k}={len(v)}" for k, v in self.splits.items())
        return f"Problem({self.name!r}, root={str(self.root)!r}, {sizes})"

    def evaluator(
        self,
        *,
        cache: EvaluationCache | None = None,
        weights: MetricWeights | None = None,
        concurrency: int | None = None,
        max_depth: int | None = None,
        allowed_step_kinds: Sequence[str] | None = None,
        pricer: Pricer | None = None,
        workers: Workers | None = None,
        call_cache: CallCache | None = None,
        executor: Executor | None = None,
        rate_budget: RateBudgetLike | None = None,
    ) -> TopologyEvaluator:
        """A `TopologyEvaluator` for this problem, with every hook the problem defines.

        It gets the registries, the score function, `Pricer(prices)`, the problem's `is_blank`
        (F5: a blank output is degenerate, not a wrong answer), `latency_source`,
        `example_timeout_s` from `[evaluation]`, and `capture_traces` from `[search] traces`;
        the arguments add what a caller decides.

        Args:
            cache: the evaluation cache (None: no caching).
            weights: metric weights of the aggregate score (None: the problem's
                `[search.weights]`).
            concurrency: runs in flight at once (None: `[search] concurrency`).
            max_depth: reject deeper specs (None: only the IR limits).
            allowed_step_kinds: reject other node kinds (None: every kind).
            pricer: the pricer (None: `Pricer(self.prices)`).
            workers: processes sharing one evaluation's runs (None: `[search] workers`).
            call_cache: the call-level model cache (None: off).
            executor: where runs execute (None: `LocalExecutor`); the caller starts and
                closes it.
            rate_budget: what in-process model calls draw from (None: unlimited; this does
                not read `[rate_limits]`: `core.search.build_search` does).
        """
        return TopologyEvaluator(
            callable_registry=self.callable_registry,
            agent_registry=self.agent_registry,
            score_fn=self.score_fn,
            pricer=pricer if pricer is not None else Pricer(self.prices),
            concurrency=self.search.concurrency if concurrency is None else concurrency,
            weights=weights if weights is not None else self.search.weights,
            cache=cache,
            max_depth=max_depth,
            allowed_step_kinds=allowed_step_kinds,
            is_blank=self.is_blank,
            latency_source=self.latency_source,
            example_timeout_s=self.config.evaluation.example_timeout_s,
            workers=self.search.workers if workers is None else workers,
            hydration_hooks=self.hydration_hooks,
            call_cache=call_cache,
            executor=executor,
            rate_budget=rate_budget,
        ).with_options(capture_traces=self.search.traces)

    def _identity(self) -> dict[str, Any]:
        config = self.config.model_dump(
            mode="json", exclude={"search": True, "evaluation": True, "rate_limits": True}
        )
        if "answer" not in self.config.model_fields_set:  # the default: hashes as before
            config.pop("answer", None)
        config["models"].pop("time_scale", None)
        for key in _FAULT_SETTINGS:  # how faults are waited out changes no answer
            config["models"].pop(key, None)
        if config["models"].get("base_url") is None:
            config["models"].pop("base_url", None)
        if config["gold"].get("train_size") is None:
            # no train split: the identity a problem had before `train_size` existed
            config["gold"].pop("train_size", None)
        return {
            "config": config,
            "seed_spec": self.seed_spec.model_dump(mode="json"),
            "splits": {k: [ex.id for ex in v] for k, v in sorted(self.splits.items())},
            "code_sha256": self._code_sha256,
        }

    @property
    def provider_policy(self) -> ProviderPolicy:
        """How this problem's model calls meet faults (`[models]` timeout_s, max_wait_s,
        backoff_s, max_backoff_s; `core.agents.providers`)."""
        models = self.config.models
        return ProviderPolicy(
            timeout_s=models.timeout_s,
            max_wait_s=models.max_wait_s,
            backoff_s=models.backoff_s,
            max_backoff_s=models.max_backoff_s,
        )

    @property
    def code_sha256(self) -> str:
        """sha256 (hex) of the problem module's source files (each file's name and bytes)."""
        return self._code_sha256

    @property
    def config_hash(self) -> str:
        """sha256 (hex) of what decides scores and costs: the config except `[search]`,
        `[evaluation]`, `[rate_limits]`, `models.time_scale` and the fault settings
        (`_FAULT_SETTINGS`; `models.base_url` only when unset) (which change only how a search
        runs and wall time; the example deadline decides which slow runs are cut, never what a
        finished call answers or costs, so the call cache keyed by this hash stays valid;
        `[search.weights]` ranks candidates but changes no measured metric), the seed spec, the
        split ids, and the problem module's source. Same hash = same problem."""
        if self._config_hash is None:
            text = json.dumps(self._identity(), sort_keys=True, separators=(",", ":"))
            self._config_hash = hashlib.sha256(text.encode()).hexdigest()
        return self._config_hash

    def to_dict(self) -> dict[str, Any]:
        """A JSON-serialisable record of the problem for the run store.

        Keys: `name`, `description`, `root`, `toml_path`, `config_hash`, `code_sha256`,
        `files_sha256`, `config` (the full validated config), `overrides`, `score_function`,
        `split_sizes` (split -> count), `seed_spec`, `agents` and `callables` (registered names,
        sorted), `roles`.
        """
        return {
            "name": self.name,
            "description": self.description,
            "root": str(self.root),
            "toml_path": str(self.toml_path),
            "config_hash": self.config_hash,
            "code_sha256": self._code_sha256,
            "files_sha256": self.files_sha256,
            "config": self.config.model_dump(mode="json"),
            "overrides": json.loads(json.dumps(self.overrides, default=str)),
            "score_function": self.score_function_name,
            "split_sizes": {k: len(v) for k, v in self.splits.items()},
            "seed_spec": self.seed_spec.model_dump(mode="json"),
            "agents": list(self.agent_registry.names()),
            "callables": list(self.callable_registry.names()),
            "roles": {k: list(v) for k, v in self.roles.items()},
        }
