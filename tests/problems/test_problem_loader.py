"""Loading a problem definition: the format, the Problem handle, and errors naming file + field."""

from __future__ import annotations

import hashlib
import json
import textwrap
from pathlib import Path
from typing import Any

import pytest

from core.errors import ProblemError
from core.evaluation.metrics import GoldExample
from core.problems import CALLABLE_ROLES, PROBLEMS_ENV, Problem, load_problem

TOML = """\
name = "toy"
description = "A toy problem: say four."
score_function = "exact"

[gold]
source = "jsonl"
path = "gold.jsonl"
validation_size = 2
split_salt = "toy"

[search]
max_evaluations = 7
minibatch_size = 2

[models]
time_scale = 0.5
[models.prices."test:echo"]
input_usd_per_1k = 0.5
output_usd_per_1k = 1.5

[params]
greeting = "hi"
"""

REGISTRIES = """\
from pydantic import BaseModel, ConfigDict
from pydantic_ai import Agent
from pydantic_ai.models.test import TestModel

from core.hydrate import AgentRegistry, CallableRegistry
from core.problems import ProblemContext, ProblemParts


class Params(BaseModel):
    model_config = ConfigDict(extra="forbid")
    greeting: str = "hi"
    level: int = 1


def upper(x):
    return str(x).upper()


def is_four(x):
    return str(x).strip() == "4"


def exact(output, example):
    return 1.0 if str(output).strip() == example.expected else 0.0


def build(ctx: ProblemContext) -> ProblemParts:
    ctx.params_as(Params)
    agents = AgentRegistry()
    agents.register("echo", lambda: Agent(TestModel(custom_output_text="4", model_name="echo")), "Always says 4.")
    callables = CallableRegistry()
    callables.register("upper", upper, "Upper-case the text.")
    callables.register("is_four", is_four, "The text is 4.")
    return ProblemParts(
        callable_registry=callables,
        agent_registry=agents,
        score_functions={"exact": exact},
        roles={"step": ["upper"], "condition": ["is_four"]},
    )
"""

SEED = {
    "kind": "pipeline",
    "id": "seed",
    "steps": [{"operation": {"kind": "agent_step", "id": "say", "agent_name": "echo"}}],
}

GOLD = [{"id": f"q{i}", "input": f"what is {i}?", "expected": "4"} for i in range(5)]


def make_toy(
    root: Path,
    *,
    toml: str = TOML,
    registries: str = REGISTRIES,
    seed: Any = SEED,
    gold: list[dict[str, Any]] | None = None,
    name: str = "toy",
) -> Path:
    d = root / name
    d.mkdir(parents=True)
    (d / "problem.toml").write_text(toml)
    (d / "registries.py").write_text(registries)
    (d / "seed.json").write_text(seed if isinstance(seed, str) else json.dumps(seed))
    (d / "gold.jsonl").write_text(
        "".join(json.dumps(g) + "\n" for g in (GOLD if gold is None else gold))
    )
    return d


def load_error(path: Path, **kwargs: Any) -> ProblemError:
    with pytest.raises(ProblemError) as info:
        load_problem(path, **kwargs)
    return info.value


# -- a good problem ---------------------------------------------------------------------------


def test_a_toy_problem_loads_into_a_live_handle(tmp_path: Path) -> None:
    d = make_toy(tmp_path)
    # its own parts only (the standard library's entries: tests/combinators)
    p = load_problem(d, overrides={"search.standard_library": False})
    assert isinstance(p, Problem)
    assert p.name == "toy"
    assert p.description == "A toy problem: say four."
    assert p.root == d.resolve()
    assert p.toml_path == d.resolve() / "problem.toml"
    assert p.agent_registry.names() == ["echo"]
    assert p.callable_registry.names() == ["is_four", "upper"]
    assert p.score_function_name == "exact"
    assert p.score_fn("4", GoldExample(input="x", expected="4")) == 1.0
    assert sorted(p.splits) == ["test", "validation"]
    assert len(p.splits["validation"]) == 2
    assert len(p.splits["test"]) == 3
    ids = [ex.id for ex in p.splits["validation"] + p.splits["test"]]
    assert sorted(ids) == ["q0", "q1", "q2", "q3", "q4"]
    assert p.seed_spec.kind == "pipeline"
    assert p.search.max_evaluations == 7
    assert p.search.minibatch_size == 2
    assert p.search.strategy == "evolutionary"
    assert p.time_scale == 0.5
    assert p.prices["test:echo"].input_usd_per_1k == 0.5
    assert p.prices["test:echo"].output_usd_per_1k == 1.5
    assert p.roles == {
        "step": ["upper"],
        "merge": [],
        "condition": ["is_four"],
        "classifier": [],
        "evaluator": [],
        "state_updater": [],
    }
    assert list(p.roles) == list(CALLABLE_ROLES)
    assert p.is_blank is None  # the evaluator's default


def test_to_dict_is_json_and_config_hash_is_the_problem_identity(tmp_path: Path) -> None:
    d = make_toy(tmp_path)
    p = load_problem(d, overrides={"search.standard_library": False})
    record = json.loads(json.dumps(p.to_dict()))
    assert record["name"] == "toy"
    assert record["config_hash"] == p.config_hash
    assert record["split_sizes"] == {"validation": 2, "test": 3}
    assert record["agents"] == ["echo"]
    assert record["callables"] == ["is_four", "upper"]
    assert record["seed_spec"]["kind"] == "pipeline"
    assert record["config"]["search"]["max_evaluations"] == 7
    assert len(p.config_hash) == 64
    # stable across loads; search settings and the time scale do not change the identity
    assert load_problem(d).config_hash == p.config_hash
    same = load_problem(d, overrides={"search.max_evaluations": 3, "models.time_scale": 0})
    assert same.config_hash == p.config_hash
    # what changes scores or costs does
    priced = load_problem(d, overrides={"models.prices.test:echo.input_usd_per_1k": 9.0})
    assert priced.config_hash != p.config_hash
    resplit = load_problem(d, overrides={"gold.split_salt": "other"})
    assert resplit.config_hash != p.config_hash


def test_overrides_set_dotted_fields_before_validation(tmp_path: Path) -> None:
    d = make_toy(tmp_path)
    p = load_problem(
        d, overrides={"search.max_evaluations": 10, "gold.validation_size": 3, "search.seed": 1}
    )
    assert p.search.max_evaluations == 10
    assert p.search.seed == 1
    assert len(p.splits["validation"]) == 3
    assert p.overrides == {
        "search.max_evaluations": 10,
        "gold.validation_size": 3,
        "search.seed": 1,
    }


def test_a_bad_override_names_the_field_and_says_it_came_from_overrides(tmp_path: Path) -> None:
    d = make_toy(tmp_path)
    err = load_error(d, overrides={"search.max_evaluations": 0})
    assert err.file == str(d.resolve() / "problem.toml")
    assert err.field == "search.max_evaluations"
    assert "[value from overrides]" in str(err)
    err = load_error(d, overrides={"search.max_evals": 5})
    assert err.field == "search.max_evals"
    err = load_error(d, overrides={"name.x": 1})
    assert err.field == "name.x"


def test_a_name_resolves_through_the_problems_env_var(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    make_toy(tmp_path / "a", name="toy_a")
    monkeypatch.setenv(PROBLEMS_ENV, str(tmp_path / "missing") + ":" + str(tmp_path / "a"))
    p = load_problem("toy_a")
    assert p.root == (tmp_path / "a" / "toy_a").resolve()
    # the TOML file itself is a path too
    assert load_problem(tmp_path / "a" / "toy_a" / "problem.toml").name == "toy"


def test_an_unknown_name_lists_where_it_looked(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(PROBLEMS_ENV, str(tmp_path))
    with pytest.raises(ProblemError) as info:
        load_problem("no_such_problem")
    msg = str(info.value)
    assert "unknown problem 'no_such_problem'" in msg
    assert str(tmp_path / "no_such_problem" / "problem.toml") in msg
    assert PROBLEMS_ENV in msg


def test_the_gsm8k_problem_is_found_by_name() -> None:
    from core.problems import resolve_problem

    path = resolve_problem("gsm8k_replay")
    assert path.name == "problem.toml"
    assert path.parent.name == "gsm8k_replay"


# -- errors name the file and the field -------------------------------------------------------


def test_malformed_toml_names_the_file_and_the_line(tmp_path: Path) -> None:
    d = make_toy(tmp_path, toml=TOML.replace('name = "toy"', 'name = "toy'))
    err = load_error(d)
    assert err.file == str(d.resolve() / "problem.toml")
    assert err.field is None
    assert "not valid TOML" in str(err)
    assert "line 1" in str(err)


def test_a_wrong_type_names_the_field(tmp_path: Path) -> None:
    d = make_toy(tmp_path, toml=TOML.replace("max_evaluations = 7", 'max_evaluations = "seven"'))
    err = load_error(d)
    assert err.file == str(d.resolve() / "problem.toml")
    assert err.field == "search.max_evaluations"
    assert str(err).startswith(f"{d.resolve() / 'problem.toml'}: field 'search.max_evaluations': ")
    assert "'seven'" in str(err)


def test_a_missing_field_names_it(tmp_path: Path) -> None:
    d = make_toy(tmp_path, toml=TOML.replace('name = "toy"\n', ""))
    err = load_error(d)
    assert err.field == "name"
    assert "Field required" in str(err)


def test_a_missing_nested_field_names_its_dotted_path(tmp_path: Path) -> None:
    toml = TOML.replace("input_usd_per_1k = 0.5\n", "")
    err = load_error(make_toy(tmp_path, toml=toml))
    # a price entry is both prices or `free = true`: the entry is named, and what it lacks
    assert err.field == "models.prices.test:echo"
    assert str(err).endswith(
        "field 'models.prices.test:echo': Value error, give both input_usd_per_1k and "
        "output_usd_per_1k (USD per 1,000 tokens), or free = true to declare the model free "
        "(got {'output_usd_per_1k': 1.5})"
    )


def test_an_unknown_field_is_an_error_not_ignored(tmp_path: Path) -> None:
    d = make_toy(
        tmp_path, toml=TOML.replace("minibatch_size = 2", "minibatch_size = 2\nmax_evals = 3")
    )
    err = load_error(d)
    assert err.field == "search.max_evals"
    assert "unknown field" in str(err)


def test_a_bad_list_item_names_its_position(tmp_path: Path) -> None:
    toml = TOML.replace(
        "minibatch_size = 2", 'minibatch_size = 2\nallowed_step_kinds = ["agent_step", "agnet"]'
    )
    err = load_error(make_toy(tmp_path, toml=toml))
    assert err.field == "search.allowed_step_kinds[1]"


def test_params_are_validated_by_the_module_and_name_the_toml_field(tmp_path: Path) -> None:
    d = make_toy(tmp_path, toml=TOML.replace('greeting = "hi"', 'greeting = "hi"\nlevel = "high"'))
    err = load_error(d)
    assert err.file == str(d.resolve() / "problem.toml")
    assert err.field == "params.level"


def test_a_seed_naming_an_unknown_agent_fails_at_load_time(tmp_path: Path) -> None:
    seed = {
        "kind": "pipeline",
        "steps": [
            {"operation": {"kind": "agent_step", "agent_name": "echo"}},
            {"operation": {"kind": "agent_step", "agent_name": "ghost"}},
        ],
    }
    d = make_toy(tmp_path, seed=seed)
    err = load_error(d)
    assert err.file == str(d.resolve() / "seed.json")
    assert err.field == "$.steps[1].operation.agent_name"
    assert "'ghost'" in str(err)


def test_an_invalid_seed_spec_names_the_seed_file_and_path(tmp_path: Path) -> None:
    seed = {
        "kind": "pipeline",
        "steps": [{"operation": {"kind": "agnet_step", "agent_name": "echo"}}],
    }
    d = make_toy(tmp_path, seed=seed)
    err = load_error(d)
    assert err.file == str(d.resolve() / "seed.json")
    assert err.field is not None and err.field.startswith("$.steps[0]")
    err = load_error(make_toy(tmp_path / "b", seed="{not json"))
    assert err.file == str((tmp_path / "b" / "toy").resolve() / "seed.json")


def test_missing_files_name_the_toml_field(tmp_path: Path) -> None:
    d = make_toy(tmp_path)
    (d / "seed.json").unlink()
    err = load_error(d)
    assert err.field == "seed"
    d2 = make_toy(
        tmp_path / "b",
        toml=TOML.replace(
            'score_function = "exact"', 'score_function = "exact"\nregistries = "nope.py"'
        ),
    )
    assert load_error(d2).field == "registries"
    d3 = make_toy(
        tmp_path / "c",
        toml=TOML.replace(
            'score_function = "exact"', 'score_function = "exact"\nseed = "../seed.json"'
        ),
    )
    assert load_error(d3).field == "seed"


def test_module_problems_name_the_module_file(tmp_path: Path) -> None:
    d = make_toy(tmp_path, registries="def not_build(ctx):\n    return None\n")
    err = load_error(d)
    assert err.file == str(d.resolve() / "registries.py")
    assert err.field == "build"

    d = make_toy(tmp_path / "b", registries="def build(ctx):\n    raise RuntimeError('boom')\n")
    err = load_error(d)
    assert err.file == str(d.resolve() / "registries.py")
    assert "RuntimeError: boom" in str(err)

    d = make_toy(tmp_path / "c", registries="def build(ctx):\n    return 42\n")
    assert "must return a ProblemParts, not int" in str(load_error(d))

    d = make_toy(tmp_path / "d", registries="def build(:\n")
    err = load_error(d)
    assert err.file == str(d.resolve() / "registries.py")
    assert "SyntaxError" in str(err)


def test_an_unknown_score_function_lists_the_known_ones(tmp_path: Path) -> None:
    d = make_toy(
        tmp_path, toml=TOML.replace('score_function = "exact"', 'score_function = "fuzzy"')
    )
    err = load_error(d)
    assert err.field == "score_function"
    assert "the module provides: exact" in str(err)


def test_roles_must_name_registered_callables(tmp_path: Path) -> None:
    d = make_toy(
        tmp_path, registries=REGISTRIES.replace('"step": ["upper"]', '"step": ["upper", "lower"]')
    )
    err = load_error(d)
    assert err.file == str(d.resolve() / "registries.py")
    assert err.field == "roles.step"
    assert "'lower'" in str(err)
    d = make_toy(
        tmp_path / "b", registries=REGISTRIES.replace('"step": ["upper"]', '"stepp": ["upper"]')
    )
    assert load_error(d).field == "roles.stepp"


def test_gold_problems_are_named(tmp_path: Path) -> None:
    dup = [*GOLD, {"id": "q0", "input": "again", "expected": "4"}]
    err = load_error(make_toy(tmp_path, gold=dup))
    assert "'q0' is used twice" in str(err)

    d = make_toy(tmp_path / "b")
    (d / "gold.jsonl").write_text(
        '{"id": "a", "input": "x"}\n{"id": "b", "weight": -1, "input": "y"}\n'
    )
    err = load_error(d)
    assert err.file == str(d.resolve() / "gold.jsonl")
    assert err.field == "line 2.weight"

    err = load_error(make_toy(tmp_path / "c"), overrides={"gold.validation_size": 5})
    assert err.field == "gold.validation_size"
    assert "test split must not be empty" in str(err)


def test_an_error_message_starts_with_the_file_and_field(tmp_path: Path) -> None:
    d = make_toy(tmp_path, toml=TOML.replace("time_scale = 0.5", "time_scale = -1"))
    err = load_error(d)
    toml_path = d.resolve() / "problem.toml"
    assert str(err) == textwrap.dedent(
        f"{toml_path}: field 'models.time_scale': Input should be greater than or equal to 0 (got -1)"
    )


DATA_REGISTRIES = REGISTRIES.replace(
    "    ctx.params_as(Params)\n",
    '    ctx.params_as(Params)\n    ctx.dataset_file("toydata", FILE)\n',
).replace("class Params", "FILE = 'a.txt'\n\n\nclass Params")

HELLO_SHA = hashlib.sha256(b"hello\n").hexdigest()
DATA_TOML = (
    TOML
    + """
[datasets.toydata]
url = "http://127.0.0.1:9/{file}"
timeout_s = 2.0
[datasets.toydata.files]
"a.txt" = "HELLO_SHA"
""".replace("HELLO_SHA", HELLO_SHA)
)


def test_the_module_gets_verified_dataset_files_through_ctx(tmp_path: Path) -> None:
    data = tmp_path / "datasets" / "toydata"
    data.mkdir(parents=True)
    (data / "a.txt").write_bytes(b"hello\n")
    d = make_toy(tmp_path, toml=DATA_TOML, registries=DATA_REGISTRIES)
    p = load_problem(d, datasets_dir=tmp_path / "datasets", cache_root=tmp_path / "cache")
    assert p.config.datasets["toydata"].files == {"a.txt": hashlib.sha256(b"hello\n").hexdigest()}
    # a file the TOML does not declare is refused, naming the TOML field
    undeclared = make_toy(
        tmp_path / "b", toml=DATA_TOML, registries=DATA_REGISTRIES.replace("'a.txt'", "'b.txt'")
    )
    err = load_error(undeclared, datasets_dir=tmp_path / "datasets", cache_root=tmp_path / "cache")
    assert err.file == str(undeclared.resolve() / "problem.toml")
    assert err.field == "datasets.toydata.files"
    # a dataset error passes through unchanged (not wrapped as a ProblemError)
    from core.errors import DatasetError

    with pytest.raises(DatasetError, match="is not available"):
        load_problem(d, datasets_dir=tmp_path / "none", cache_root=tmp_path / "other_cache")
    # the first load copied the file into its cache: a later load needs no datasets_dir
    assert (tmp_path / "cache" / "datasets" / "toydata" / "a.txt").read_bytes() == b"hello\n"
    assert load_problem(d, datasets_dir=[], cache_root=tmp_path / "cache").name == "toy"


def test_a_bad_dataset_declaration_names_the_field(tmp_path: Path) -> None:
    toml = DATA_TOML.replace('"a.txt" = "', '"a.txt" = "XYZ')
    err = load_error(make_toy(tmp_path, toml=toml))
    assert err.field == "datasets.toydata.files"
    assert "64 lowercase hex digits" in str(err)
    toml = DATA_TOML.replace("http://127.0.0.1:9/{file}", "ftp://example.org/x")
    err = load_error(make_toy(tmp_path / "b", toml=toml))
    assert err.field == "datasets.toydata.url"


# -- the evaluator a problem asks for -----------------------------------------------------------


def test_latency_source_defaults_to_auto_and_is_read_from_models(tmp_path: Path) -> None:
    d = make_toy(tmp_path)
    assert load_problem(d).latency_source == "auto"
    p = load_problem(d, overrides={"models.latency_source": "model"})
    assert p.latency_source == "model"
    assert p.to_dict()["config"]["models"]["latency_source"] == "model"
    err = load_error(d, overrides={"models.latency_source": "cpu"})
    assert err.field == "models.latency_source"


def test_the_problem_builds_its_evaluator_with_every_hook(tmp_path: Path) -> None:
    import asyncio

    from core.evaluation.cache import InMemoryEvaluationCache

    blank_registries = REGISTRIES.replace(
        "        roles={",
        "        is_blank=lambda output: str(output).strip() in ('', 'BLANK'),\n        roles={",
    )
    d = make_toy(tmp_path, registries=blank_registries)
    p = load_problem(d, overrides={"models.latency_source": "model", "search.concurrency": 3})
    cache = InMemoryEvaluationCache()
    ev = p.evaluator(cache=cache, max_depth=2, allowed_step_kinds=["function_step"])
    assert ev.config.latency_source == "model"
    assert ev.config.concurrency == 3
    assert ev.config.max_depth == 2
    assert ev.config.allowed_step_kinds == ("function_step",)
    assert ev.cache is cache
    assert ev.pricer.table["test:echo"].output_usd_per_1k == 1.5
    # the problem's own blank test reaches the evaluator: "blank" upper-cased is BLANK
    spec = {"kind": "pipeline", "steps": [{"operation": {"kind": "function_step",
                                                         "callable_name": "upper"}}]}  # fmt: skip
    gold = [GoldExample(input="blank", expected="4", id="b1")]
    result = asyncio.run(ev.evaluate(spec, gold))
    assert result.status == "degenerate"
    assert result.blank_rate == 1.0
    assert [r.latency_ms for r in result.results] == [0.0]
    # the defaults: the problem's concurrency, no depth or kind limits
    plain = p.evaluator()
    assert plain.config.concurrency == 3
    assert plain.config.max_depth is None
    assert plain.config.allowed_step_kinds is None
    assert plain.cache is None


# -- rate limits (per-provider budgets from the problem) -------------------------------------

RATE_TOML = (
    TOML
    + """
[rate_limits.openai]
requests_per_minute = 500
tokens_per_minute = 200000
max_concurrent = 16

[rate_limits."*"]
max_concurrent = 4
burst_s = 1.5
"""
)


def test_rate_limit_tables_are_read_into_provider_limits(tmp_path: Path) -> None:
    from core.agents.rate_budget import ProviderLimit

    p = load_problem(make_toy(tmp_path, toml=RATE_TOML))
    assert p.rate_limits == {
        "openai": ProviderLimit(
            requests_per_minute=500, tokens_per_minute=200000, max_concurrent=16
        ),
        "*": ProviderLimit(max_concurrent=4, burst_s=1.5),
    }
    # how fast, not what is measured: the same problem identity with or without them
    assert p.config_hash == load_problem(make_toy(tmp_path / "b")).config_hash
    assert load_problem(make_toy(tmp_path / "c")).rate_limits == {}


def test_an_unknown_rate_limit_key_names_the_file_the_key_and_the_known_keys(
    tmp_path: Path,
) -> None:
    d = make_toy(tmp_path, toml=RATE_TOML.replace("max_concurrent = 16", "concurrent = 16"))
    err = load_error(d)
    toml_path = d.resolve() / "problem.toml"
    assert (err.file, err.field) == (str(toml_path), "rate_limits.openai.concurrent")
    assert str(err) == (
        f"{toml_path}: field 'rate_limits.openai.concurrent': unknown field (not part of the "
        "format; check the spelling); a rate limit's fields are requests_per_minute, "
        "tokens_per_minute, max_concurrent, burst_s"
    )


def test_a_negative_or_zero_rate_limit_names_the_file_and_the_key(tmp_path: Path) -> None:
    d = make_toy(tmp_path, toml=RATE_TOML.replace("= 500", "= -5"))
    toml_path = d.resolve() / "problem.toml"
    assert str(load_error(d)) == (
        f"{toml_path}: field 'rate_limits.openai.requests_per_minute': Input should be greater "
        "than 0 (got -5)"
    )
    d = make_toy(tmp_path / "b", toml=RATE_TOML.replace("max_concurrent = 4", "max_concurrent = 0"))
    assert load_error(d).field == "rate_limits.*.max_concurrent"
    d = make_toy(tmp_path / "c", toml=RATE_TOML.replace('[rate_limits."*"]', '[rate_limits."a b"]'))
    err = load_error(d)
    assert err.field == "rate_limits"
    assert "provider name 'a b' must be '*' or use only [A-Za-z0-9_.-]" in str(err)


def test_the_callable_registry_keeps_the_problems_question_reader(tmp_path: Path) -> None:
    """What learned conditions read of a state (`CallableRegistry.input_text`): the problem's
    `question_text`, else its `input_text`, else for a problem passing ballots the ballot's
    input; a problem with a state of its own (declared effects) and neither: none."""
    from core.combinators.ballot import input_text

    assert load_problem(make_toy(tmp_path / "a")).callable_registry.input_text is input_text
    own = REGISTRIES.replace(
        "from core.problems import ProblemContext, ProblemParts",
        "from core.ir.dataflow import EffectTable, NameEffect\n"
        "from core.problems import ProblemContext, ProblemParts",
    ).replace(
        '        roles={"step": ["upper"], "condition": ["is_four"]},\n',
        '        roles={"step": ["upper"], "condition": ["is_four"]},\n'
        '        effects=EffectTable(names={"upper": NameEffect(adds_candidates=1)}),\n'
        "        READER\n",
    )
    none = load_problem(make_toy(tmp_path / "b", registries=own.replace("READER\n", "")))
    assert none.callable_registry.input_text is None
    texts = own.replace("READER", 'input_text=lambda s: "input:" + str(s),')
    by_input = load_problem(make_toy(tmp_path / "c", registries=texts))
    reader = by_input.callable_registry.input_text
    assert reader is not None and reader("q") == "input:q"
    asked = texts.replace("READER", "").replace(
        "input_text=", 'question_text=lambda s: "question:" + str(s), input_text='
    )
    by_question = load_problem(make_toy(tmp_path / "d", registries=asked))
    reader = by_question.callable_registry.input_text
    assert reader is not None and reader("q") == "question:q"
