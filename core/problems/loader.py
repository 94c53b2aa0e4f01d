"""`load_problem`: a problem directory (TOML + Python module + seed spec) -> a `Problem`.

The problem's Python module is the problem author's own trusted code, like a pytest
`conftest.py`: it is imported by file path (`importlib.util.spec_from_file_location`) from the
path the TOML's `registries` field gives, inside the problem directory. Nothing a topology spec
names is ever imported: a spec reaches only the names the module registered.
"""

from __future__ import annotations

import copy
import hashlib
import importlib.util
import json
import os
import re
import sys
import tomllib
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from types import ModuleType
from typing import Any, cast

from pydantic import ValidationError

from core.agents.replay import ReplayModel
from core.combinators.ballot import input_text
from core.combinators.wiring import wire_standard_library
from core.errors import DatasetError, ProblemError, SpecError, UnknownNamesError
from core.evaluation.metrics import GoldExample, ScoreFn
from core.hydrate import AgentRegistry, validate_names
from core.ir import TopologySpec, parse_topology
from core.ir.dataflow import EffectTable
from core.problems._errors import problem_error_from_validation
from core.problems._prices import check_agent_prices
from core.problems.config import ProblemConfig
from core.problems.parts import CALLABLE_ROLES, ProblemContext, ProblemParts
from core.problems.problem import Problem
from core.problems.splits import split_examples

__all__ = [
    "PROBLEMS_ENV",
    "PROBLEM_FILE",
    "import_problem_module",
    "load_problem",
    "problem_search_dirs",
    "resolve_problem",
]

PROBLEMS_ENV = "TOPOLOGY_STUDIO_PROBLEMS"
"""Environment variable: extra directories (`os.pathsep`-separated) holding problem directories."""

PROBLEM_FILE = "problem.toml"
"""The file name of a problem definition inside its directory."""

_MODULE_PREFIX = "_topology_studio_problem_"


def problem_search_dirs() -> list[Path]:
    """Where a problem *name* is looked up, in order: `$TOPOLOGY_STUDIO_PROBLEMS` directories,
    `./data/problems/` (the working directory's), then the checkout's `data/problems/` (located
    relative to the `core` package; present with an editable install)."""
    dirs = [
        Path(p).expanduser()
        for p in os.environ.get(PROBLEMS_ENV, "").split(os.pathsep)
        if p.strip()
    ]
    dirs.append(Path.cwd() / "data" / "problems")
    dirs.append(Path(__file__).resolve().parents[2] / "data" / "problems")
    out: list[Path] = []
    for d in dirs:
        if d not in out:
            out.append(d)
    return out


def _looks_like_path(text: str) -> bool:
    return "/" in text or os.sep in text or text.endswith(".toml") or text in (".", "..")


def resolve_problem(name_or_path: str | os.PathLike[str]) -> Path:
    """The TOML file of a problem given by name or by path.

    A `Path`, or a string with a path separator or ending in `.toml`, is a path: a directory
    (its `problem.toml` is used) or the TOML file itself. Any other string is a name: a
    directory of that name in the working directory holding a `problem.toml` is used as is (so
    `search myproblem` and `search ./myproblem` are the same), else it is looked up as
    `<dir>/<name>/problem.toml` in `problem_search_dirs()`.

    Raises:
        ProblemError: nothing found (the message lists where it looked).
    """
    if isinstance(name_or_path, os.PathLike) or _looks_like_path(str(name_or_path)):
        path = Path(name_or_path).expanduser()
        toml_path = path / PROBLEM_FILE if path.is_dir() else path
        if not toml_path.is_file():
            raise ProblemError(f"no problem definition at {toml_path}", file=str(toml_path))
        return toml_path.resolve()
    name = str(name_or_path)
    if not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9_.\-]*", name):
        raise ProblemError(f"{name!r} is neither a problem name nor a path")
    here = Path(name) / PROBLEM_FILE
    if here.is_file():
        return here.resolve()
    looked: list[str] = [str(Path.cwd() / here)]
    for d in problem_search_dirs():
        candidate = d / name / PROBLEM_FILE
        if candidate.is_file():
            return candidate.resolve()
        looked.append(str(candidate))
    raise ProblemError(
        f"unknown problem {name!r}: no {PROBLEM_FILE} found in "
        + ", ".join(looked)
        + f" (set {PROBLEMS_ENV} to add directories, or pass a path)"
    )


def _apply_overrides(
    raw: dict[str, Any], overrides: Mapping[str, Any], toml_path: Path
) -> dict[str, Any]:
    """A copy of the TOML data with each dotted field set (intermediate tables created)."""
    data = copy.deepcopy(raw)
    for dotted, value in overrides.items():
        parts = dotted.split(".")
        if not dotted or any(not p for p in parts):
            raise ProblemError(
                f"invalid override field {dotted!r}", file=str(toml_path), field=dotted
            )
        node: dict[str, Any] = data
        for i, part in enumerate(parts[:-1]):
            nxt = node.setdefault(part, {})
            if not isinstance(nxt, dict):
                raise ProblemError(
                    f"override {dotted!r}: {'.'.join(parts[: i + 1])} is not a table",
                    file=str(toml_path),
                    field=dotted,
                )
            node = cast(dict[str, Any], nxt)
        node[parts[-1]] = value
    return data


def _read_config(toml_path: Path, overrides: Mapping[str, Any]) -> ProblemConfig:
    try:
        raw = tomllib.loads(toml_path.read_text(encoding="utf-8"))
    except tomllib.TOMLDecodeError as exc:
        raise ProblemError(f"not valid TOML: {exc}", file=str(toml_path)) from exc
    except (OSError, UnicodeDecodeError) as exc:
        raise ProblemError(f"cannot read: {exc}", file=str(toml_path)) from exc
    data = _apply_overrides(raw, overrides, toml_path)
    try:
        return ProblemConfig.model_validate(data)
    except ValidationError as exc:
        raise problem_error_from_validation(
            exc, file=toml_path, overridden=frozenset(overrides)
        ) from exc


def _inside(root: Path, rel: str, toml_path: Path, field: str) -> Path:
    path = (root / rel).resolve()
    if not path.is_relative_to(root):
        raise ProblemError(
            f"{rel!r} is outside the problem directory", file=str(toml_path), field=field
        )
    if not path.is_file():
        raise ProblemError(f"file {rel!r} not found in {root}", file=str(toml_path), field=field)
    return path


def _question_reader(parts: ProblemParts, own_state: bool) -> Callable[[Any], str] | None:
    """What learned conditions read of a state (`CallableRegistry.input_text`): the problem's
    `question_text`, else its `input_text`, else (a problem passing ballots) the ballot's input
    text; None for a problem with a state of its own that gives neither (its whole state's
    JSON would include what the steps added, so the search fits no learned router there)."""
    reader = parts.question_text or parts.input_text
    if reader is None and not own_state:
        return input_text
    return reader


def _module_files(path: Path) -> list[Path]:
    """The problem's own source files: the module, plus its package's `*.py` when it has one."""
    if (path.parent / "__init__.py").is_file():
        return sorted(path.parent.glob("*.py"))
    return [path]


def import_problem_module(path: str | os.PathLike[str]) -> ModuleType:
    """Import a problem's Python module by file path, once per path and process.

    This is how `load_problem` runs the problem author's own trusted code (like a pytest
    `conftest.py`); it is never used on anything a topology spec names. When the module's
    directory has an `__init__.py`, that directory is imported first as a package under a private
    name (`_topology_studio_problem_<directory name>_<hash of its path>`), so the module may use relative
    imports of its siblings; tests and tools can use this to reach a problem's helpers.

    Raises:
        ProblemError: the module cannot be imported (names the file).
    """
    path = Path(path).resolve()
    pkg_init = path.parent / "__init__.py"
    # one package per directory, so every module of a problem shares the same sibling classes
    anchor = path.parent if pkg_init.is_file() else path
    safe = re.sub(r"\W", "_", anchor.stem)
    digest = hashlib.sha256(str(anchor).encode()).hexdigest()[:12]
    base = f"{_MODULE_PREFIX}{safe}_{digest}"
    if pkg_init.is_file():
        if base not in sys.modules:
            _exec_module(base, pkg_init, package_dir=path.parent)
        name = f"{base}.{path.stem}" if path != pkg_init else base
    else:
        name = base
    module = sys.modules.get(name)
    if module is None:
        module = _exec_module(name, path)
    return module


def _exec_module(name: str, path: Path, package_dir: Path | None = None) -> ModuleType:
    spec = importlib.util.spec_from_file_location(
        name,
        path,
        submodule_search_locations=None if package_dir is None else [str(package_dir)],
    )
    if spec is None or spec.loader is None:
        raise ProblemError("cannot be imported as a Python module", file=str(path))
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    try:
        spec.loader.exec_module(module)
    except Exception as exc:
        sys.modules.pop(name, None)
        raise ProblemError(
            f"importing the problem module failed: {type(exc).__name__}: {exc}", file=str(path)
        ) from exc
    return module


def _build_parts(module: ModuleType, ctx: ProblemContext, module_path: Path) -> ProblemParts:
    build = getattr(module, "build", None)
    if build is None or not callable(build):
        raise ProblemError(
            "the problem module must define build(ctx) -> ProblemParts",
            file=str(module_path),
            field="build",
        )
    try:
        parts = build(ctx)
    except (ProblemError, DatasetError):
        raise  # already clear: they name the file and field, or the dataset and what to set
    except Exception as exc:
        raise ProblemError(
            f"build(ctx) failed: {type(exc).__name__}: {exc}", file=str(module_path), field="build"
        ) from exc
    if not isinstance(parts, ProblemParts):
        raise ProblemError(
            f"build(ctx) must return a ProblemParts, not {type(parts).__name__}",
            file=str(module_path),
            field="build",
        )
    return parts


def _pick_score_fn(
    config: ProblemConfig, parts: ProblemParts, toml_path: Path
) -> tuple[str, ScoreFn]:
    known = sorted(parts.score_functions)
    if config.score_function is None:
        if len(known) != 1:
            raise ProblemError(
                f"choose one of the module's score functions: {', '.join(known) or '(none)'}",
                file=str(toml_path),
                field="score_function",
            )
        return known[0], parts.score_functions[known[0]]
    fn = parts.score_functions.get(config.score_function)
    if fn is None:
        raise ProblemError(
            f"unknown score function {config.score_function!r}; the module provides: "
            + (", ".join(known) or "(none)"),
            file=str(toml_path),
            field="score_function",
        )
    return config.score_function, fn


def _read_gold_jsonl(path: Path) -> list[GoldExample]:
    out: list[GoldExample] = []
    with path.open(encoding="utf-8") as f:
        for n, line in enumerate(f, start=1):
            if not line.strip():
                continue
            try:
                out.append(GoldExample.model_validate(json.loads(line)))
            except json.JSONDecodeError as exc:
                raise ProblemError(
                    f"line {n} is not JSON: {exc}", file=str(path), field=f"line {n}"
                ) from exc
            except ValidationError as exc:
                raise problem_error_from_validation(exc, file=path, prefix=f"line {n}") from exc
    return out


def _is_declared(config: ProblemConfig, root: Path, toml_path: Path) -> bool:
    """Whether the TOML declares the problem alone (`[agents]`, no registries file:
    `core.problems.declared`).

    Raises:
        ProblemError: `[agents]` declared beside a registries file (one place for the agents),
            or `[replay]` without `[agents]`.
    """
    has_module = (root / config.registries).is_file()
    if config.agents and has_module:
        raise ProblemError(
            f"declares [agents] and the directory has {config.registries}: declare the agents "
            f"in one place (drop the [agents] tables, or {config.registries})",
            file=str(toml_path),
            field="agents",
        )
    if config.replay is not None and not config.agents:
        raise ProblemError(
            '[replay] needs the agents that replay it: [agents.<name>] model = "replay:<name>"',
            file=str(toml_path),
            field="replay",
        )
    return bool(config.agents)


def _load_gold_file(
    config: ProblemConfig, root: Path, toml_path: Path
) -> tuple[list[GoldExample], Path]:
    if config.gold.source != "jsonl" or config.gold.path is None:
        raise ProblemError(
            "a problem declared with [agents] reads its gold set from a file: [gold] source = "
            '"jsonl" and path = "gold.jsonl"',
            file=str(toml_path),
            field="gold.path" if config.gold.source == "jsonl" else "gold.source",
        )
    path = _inside(root, config.gold.path, toml_path, "gold.path")
    return _read_gold_jsonl(path), path


def _load_gold(
    config: ProblemConfig, parts: ProblemParts, root: Path, toml_path: Path, module_path: Path
) -> tuple[list[GoldExample], Path]:
    if config.gold.source == "jsonl":
        if config.gold.path is None:
            raise ProblemError(
                'source = "jsonl" needs a path', file=str(toml_path), field="gold.path"
            )
        path = _inside(root, config.gold.path, toml_path, "gold.path")
        return _read_gold_jsonl(path), path
    if parts.load_gold is None:
        raise ProblemError(
            '[gold] source = "module" but ProblemParts.load_gold is None',
            file=str(module_path),
            field="load_gold",
        )
    try:
        examples = list(parts.load_gold())
    except (ProblemError, DatasetError):
        raise
    except Exception as exc:
        raise ProblemError(
            f"load_gold() failed: {type(exc).__name__}: {exc}",
            file=str(module_path),
            field="load_gold",
        ) from exc
    return examples, module_path


def _check_ids(examples: Sequence[GoldExample], source: Path) -> None:
    seen: set[str] = set()
    for i, ex in enumerate(examples):
        if not isinstance(ex, GoldExample):  # pyright: ignore[reportUnnecessaryIsInstance]
            raise ProblemError(
                f"gold example {i} is a {type(ex).__name__}, not a GoldExample",
                file=str(source),
                field="load_gold",
            )
        if not ex.id:
            raise ProblemError(
                f"gold example {i} has no id (every example needs a stable id)", file=str(source)
            )
        if ex.id in seen:
            raise ProblemError(f"gold example id {ex.id!r} is used twice", file=str(source))
        seen.add(ex.id)


def _load_seed(path: Path, parts: ProblemParts) -> TopologySpec:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ProblemError(f"not a JSON topology spec: {exc}", file=str(path)) from exc
    try:
        spec = parse_topology(data)
    except SpecError as exc:
        first = exc.errors[0][0] if exc.errors else None
        raise ProblemError(f"invalid seed topology: {exc}", file=str(path), field=first) from exc
    unknown = validate_names(
        spec, callable_registry=parts.callable_registry, agent_registry=parts.agent_registry
    )
    if unknown:
        names = UnknownNamesError(
            unknown,
            known={
                "agent": parts.agent_registry.names(),
                "callable": parts.callable_registry.names(),
            },
        )
        raise ProblemError(
            f"the seed topology names unregistered things: {names}",
            file=str(path),
            field=unknown[0][0],
        )
    return spec


def _check_effects(parts: ProblemParts, module_path: Path) -> EffectTable:
    """`parts.effects`, every name in it registered (an agent or a callable)."""
    known = set(parts.callable_registry.names()) | set(parts.agent_registry.names())
    unknown = sorted(set(parts.effects.names) - known)
    if unknown:
        raise ProblemError(
            f"effects declared for unregistered name(s) {unknown}",
            file=str(module_path),
            field="effects",
        )
    return parts.effects


def _check_roles(parts: ProblemParts, module_path: Path) -> dict[str, list[str]]:
    known = set(parts.callable_registry.names())
    roles: dict[str, list[str]] = {r: [] for r in CALLABLE_ROLES}
    for role, names in parts.roles.items():
        if role not in roles:
            raise ProblemError(
                f"unknown role {role!r}; roles are: {', '.join(CALLABLE_ROLES)}",
                file=str(module_path),
                field=f"roles.{role}",
            )
        for name in names:
            if name not in known:
                raise ProblemError(
                    f"role {role!r} lists {name!r}, which is not a registered callable",
                    file=str(module_path),
                    field=f"roles.{role}",
                )
        roles[role] = sorted(set(names))
    return roles


def _code_sha256(files: Sequence[Path]) -> str:
    h = hashlib.sha256()
    for f in files:
        h.update(f.name.encode() + b"\0" + f.read_bytes() + b"\0")
    return h.hexdigest()


def _files_sha256(root: Path, files: Sequence[Path]) -> str:
    """sha256 (hex) of the problem's own files as read: each one's path relative to `root`
    (sorted, duplicates once) and its bytes."""
    h = hashlib.sha256()
    for f in sorted(set(files)):
        rel = f.relative_to(root).as_posix() if f.is_relative_to(root) else f.name
        data = f.read_bytes()
        h.update(f"{rel}\0{len(data)}\0".encode() + data)
    return h.hexdigest()


def _all_replayed(agents: AgentRegistry) -> bool:
    """Whether every registered agent answers from recordings (a `ReplayModel`, whether the
    problem's TOML declares `[replay]` or its own module builds the models): a replayed agent
    returns its recorded output on every call, so no repeat of it differs and a
    self-consistency vote of one would cost k calls for its single answer. False for a problem
    with no agents."""
    names = agents.names()
    return bool(names) and all(
        isinstance(getattr(agents.create(name), "model", None), ReplayModel) for name in names
    )


def load_problem(
    name_or_path: str | os.PathLike[str],
    *,
    datasets_dir: str | Path | Sequence[str | Path] | None = None,
    overrides: Mapping[str, Any] | None = None,
    cache_root: Path | None = None,
) -> Problem:
    """Load a problem definition (see `core.problems` for the format).

    Steps: find the TOML (`resolve_problem`), parse it, apply `overrides`, validate it; import
    the registries module by path and call its `build(ctx)`; check that every registered
    agent's model has a price (`[models.prices]`, `free = true`, or genai-prices:
    `core.problems._prices`); pick the score function; load the
    gold set and split it; parse the seed spec with `core.ir.parse_topology` and check every name
    it uses against the registries (`core.hydrate.validate_names`); check the callable roles.

    Args:
        name_or_path: a problem name (looked up in `problem_search_dirs()`), a problem directory,
            or its TOML file.
        datasets_dir: configured dataset directories (None: `$TOPOLOGY_STUDIO_DATASETS`).
        overrides: dotted TOML fields to set before validation, e.g.
            `{"search.max_evaluations": 10, "gold.validation_size": 20, "models.time_scale": 0}`.
        cache_root: the dataset cache root (None: see `core.problems.datasets.default_cache_root`).

    Returns:
        The live `Problem`.

    Raises:
        ProblemError: anything wrong with the definition; the message names the file and the
            dotted field (`.file` and `.field` hold them).
        DatasetError: a dataset file is missing and cannot be downloaded, or fails its checksum.
    """
    overrides = dict(overrides or {})
    toml_path = resolve_problem(name_or_path)
    root = toml_path.parent
    config = _read_config(toml_path, overrides)
    declared = _is_declared(config, root, toml_path)
    seed_path = _inside(root, config.seed, toml_path, "seed")
    ctx = ProblemContext(
        root=root,
        toml_path=toml_path,
        config=config,
        datasets_dir=datasets_dir,
        cache_root=cache_root,
    )
    gold: tuple[list[GoldExample], Path] | None = None
    if declared:
        from core.problems import declared as module

        gold = _load_gold_file(config, root, toml_path)
        parts = module.declared_parts(ctx, gold[0])
        module_path = toml_path
    else:
        module_path = _inside(root, config.registries, toml_path, "registries")
        module = import_problem_module(module_path)
        parts = _build_parts(module, ctx, module_path)
    check_agent_prices(
        parts.agent_registry, config.models.prices, toml_path=toml_path, module_path=module_path
    )
    score_name, score_fn = _pick_score_fn(config, parts, toml_path)

    examples, gold_source = (
        gold if gold is not None else _load_gold(config, parts, root, toml_path, module_path)
    )
    _check_ids(examples, gold_source)
    key = parts.split_key
    try:
        splits = split_examples(
            examples,
            validation_size=config.gold.validation_size,
            salt=config.gold.split_salt,
            key=key,
            train_size=config.gold.train_size,
        )
    except ValueError as exc:
        field = "gold.train_size" if str(exc).startswith("train_size") else "gold.validation_size"
        raise ProblemError(str(exc), file=str(toml_path), field=field) from exc

    seed_spec = _load_seed(seed_path, parts)
    roles = _check_roles(parts, module_path)
    effects = _check_effects(parts, module_path)
    own_state = bool(effects.names)  # before the standard library adds its names
    callables, hooks = parts.callable_registry, None
    if config.search.standard_library:
        wired = wire_standard_library(
            callables=parts.callable_registry,
            agents=parts.agent_registry,
            roles=roles,
            effects=effects,
            inputs=[ex.input for ex in splits["validation"]],
            answer_field=config.answer.field,
            normalization=config.answer.normalization,
            answer_of=parts.answer_of,
            normalize_answer=parts.normalize_answer,
            input_text=parts.input_text,
            judges=parts.judges,
            sampled=not _all_replayed(parts.agent_registry),
        )
        callables, roles, effects, hooks = (
            wired.callable_registry,
            wired.roles,
            wired.effects,
            wired.hooks,
        )
    callables.input_text = _question_reader(parts, own_state)
    module_files = [] if declared else _module_files(module_path)
    read = [toml_path, *module_files, seed_path]
    if config.gold.source == "jsonl":
        read.append(gold_source)
    if declared and config.replay is not None:
        read.append(root / config.replay.path)
    return Problem(
        config=config,
        root=root,
        toml_path=toml_path,
        overrides=overrides,
        module=module,
        callable_registry=callables,
        agent_registry=parts.agent_registry,
        score_fn=score_fn,
        score_function_name=score_name,
        splits=splits,
        seed_spec=seed_spec,
        roles=roles,
        code_sha256=_code_sha256(module_files),
        files_sha256=_files_sha256(root, read),
        is_blank=parts.is_blank,
        effects=effects,
        hydration_hooks=hooks,
    )
