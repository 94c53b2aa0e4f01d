"""What a problem's registries module receives (`ProblemContext`) and returns (`ProblemParts`).

A problem directory's Python module exposes one entry point:

```python
def build(ctx: ProblemContext) -> ProblemParts: ...
```

`ctx` gives the validated config, the problem directory, the time scale, verified dataset files
(`ctx.dataset_file("gsm8k", "test.jsonl")`) and the `[params]` table validated against the
module's own Pydantic model (`ctx.params_as(MyParams)`, whose errors name the TOML file and the
`params.<field>`). The module returns its registries (every agent and callable with a one-line
description), its score function(s), the gold-set loader and the roles of its callables.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, TypeVar

from pydantic import BaseModel, ValidationError

from core.errors import ProblemError
from core.evaluation.metrics import GoldExample, ScoreFn
from core.hydrate import AgentRegistry, CallableRegistry
from core.ir.dataflow import EffectTable
from core.problems._errors import problem_error_from_validation
from core.problems.config import ProblemConfig
from core.problems.datasets import fetch_dataset_file

__all__ = ["CALLABLE_ROLES", "CallableRole", "ProblemContext", "ProblemParts"]

CallableRole = Literal["step", "merge", "condition", "classifier", "evaluator", "state_updater"]
"""What a registered callable can be used as, so mutation operators and the meta agent only
combine compatible things:

- `"step"`: `state -> state`, usable as a `function_step` anywhere in a pipeline;
- `"merge"`: `list[output] -> value`, a `Parallel` merge;
- `"condition"`: `state -> bool`, a router route's `condition_name`;
- `"classifier"`: `state -> route name`, a router's `classifier`;
- `"evaluator"`: `state -> EvalResult`, a refinement loop's `evaluator`;
- `"state_updater"`: `(input, output, EvalResult) -> next input`, a loop's `state_updater_name`.
"""

CALLABLE_ROLES: tuple[CallableRole, ...] = (
    "step",
    "merge",
    "condition",
    "classifier",
    "evaluator",
    "state_updater",
)
"""Every callable role, in a fixed order."""

_M = TypeVar("_M", bound=BaseModel)


@dataclass(frozen=True, slots=True)
class ProblemParts:
    """What a problem module's `build(ctx)` returns.

    Attributes:
        callable_registry: every function a topology may name, each with a one-line description.
        agent_registry: every agent factory a topology may name, each with a one-line description.
        score_functions: name -> score function `(output, example) -> float in [0, 1]`; the TOML's
            `score_function` picks one (optional when there is exactly one).
        load_gold: returns every gold example (each with a unique `id`); required when the
            TOML's `[gold] source = "module"`.
        split_key: the text the split hash is computed over, per example (e.g. the question
            text); None hashes the example `id`.
        roles: role -> names of registered callables usable in that role (see `CallableRole`);
            a name may have several roles.
        is_blank: whether a topology output is blank (no real answer: the evaluator counts it
            apart from wrong answers, F5); None uses the evaluator's default (None, empty text
            or collections). Structured outputs need their own.
        effects: what each registered name reads and produces (`core.ir.dataflow`): the
            search's static rejections, its no-op normalisation and its structure operators
            use it. Default: nothing declared (no name is rejected or rewritten for its
            dataflow). A problem that declares effects has a state of its own: the standard
            library then offers it only the input features, and only with `input_text`.
        answer_of: reads the answer out of an output for the standard library's votes and
            agreement (replaces `[answer] field`); None: the field, else the output itself.
        normalize_answer: the problem's own `answer text -> comparable text` (replaces
            `[answer] normalization`).
        input_text: the text of a topology's input state, for the standard library's input
            features on a problem with its own state; None: no input features there.
        question_text: the question text of a topology's state, without what its steps added
            (e.g. a state's `question` field, not its candidates): what learned routers fit on
            and route on (`core.combinators.learned`); None: `input_text`, else, for a problem
            passing ballots, the ballot's input. A problem with a state of its own that gives
            neither gets no learned routers.
        judges: the agents the standard library may ask to judge or critique an answer
            (`judge_by_<agent>`, `critique_by_<agent>`); None: every agent. A replayed agent
            answers only its recorded inputs, never a judge's question, so a replay problem
            gives `()`.
    """

    callable_registry: CallableRegistry
    agent_registry: AgentRegistry
    score_functions: Mapping[str, ScoreFn]
    load_gold: Callable[[], Sequence[GoldExample]] | None = None
    split_key: Callable[[GoldExample], str] | None = None
    roles: Mapping[str, Sequence[str]] = field(default_factory=dict[str, Sequence[str]])
    is_blank: Callable[[Any], bool] | None = None
    effects: EffectTable = field(default_factory=EffectTable)
    answer_of: Callable[[Any], Any] | None = None
    normalize_answer: Callable[[str], str] | None = None
    input_text: Callable[[Any], str] | None = None
    question_text: Callable[[Any], str] | None = None
    judges: Sequence[str] | None = None


@dataclass(frozen=True, slots=True)
class ProblemContext:
    """What `build(ctx)` gets. A read-only view; nothing here runs the problem's code.

    Attributes:
        root: the problem directory.
        toml_path: the problem's TOML file (for error messages).
        config: the validated config, overrides applied.
        datasets_dir: the configured dataset directories (None: `$TOPOLOGY_STUDIO_DATASETS`).
        cache_root: the dataset cache root (None: the default, see `core.problems.datasets`).
    """

    root: Path
    toml_path: Path
    config: ProblemConfig
    datasets_dir: str | Path | Sequence[str | Path] | None = None
    cache_root: Path | None = None

    @property
    def time_scale(self) -> float:
        """`[models] time_scale`: multiplier on replayed latency before it is slept."""
        return self.config.models.time_scale

    @property
    def params(self) -> Mapping[str, Any]:
        """The raw `[params]` table."""
        return self.config.params

    def params_as(self, model: type[_M]) -> _M:
        """Validate `[params]` against `model`.

        Raises:
            ProblemError: naming the TOML file and the field as `params.<loc>`.
        """
        try:
            return model.model_validate(dict(self.config.params))
        except ValidationError as exc:
            raise problem_error_from_validation(exc, file=self.toml_path, prefix="params") from exc

    def dataset_file(self, dataset: str, file: str) -> Path:
        """A verified local copy of a file declared in `[datasets.<dataset>] files`.

        Raises:
            ProblemError: the file is not declared in the TOML.
            DatasetError: the file is missing and cannot be downloaded, or fails its checksum.
        """
        spec = self.config.datasets.get(dataset)
        if spec is None or file not in spec.files:
            raise ProblemError(
                f"the problem module asks for dataset file {dataset}/{file}, which is not "
                f"declared under [datasets.{dataset}] files",
                file=str(self.toml_path),
                field=f"datasets.{dataset}.files",
            )
        return fetch_dataset_file(
            dataset,
            file,
            sha256=spec.files[file],
            url=spec.url,
            datasets_dir=self.datasets_dir,
            cache_root=self.cache_root,
            timeout_s=spec.timeout_s,
        )
