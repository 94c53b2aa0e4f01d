"""Problem definitions: a directory a researcher writes for their own task, loaded as a `Problem`.

```python
from core.problems import load_problem

problem = load_problem("gsm8k_replay", overrides={"models.time_scale": 0})
problem.splits["validation"][0]      # GoldExample(input=..., expected=..., id=...)
problem.seed_spec                    # TopologySpec
problem.agent_registry, problem.callable_registry, problem.score_fn, problem.roles
```

## The directory

```
my_problem/
  problem.toml      the definition (below)
  registries.py     build(ctx) -> ProblemParts: registries, score function(s), gold loader
  seed.json         the seed topology (JSON of a TopologySpec)
  gold.jsonl        optional: the gold set, when [gold] source = "jsonl"
  __init__.py       optional: makes the directory a package so registries.py can import siblings
```

A name is a directory of that name in the working directory when it holds a `problem.toml`
(so `search myproblem` and `search ./myproblem` are the same), else it is looked up as
`<dir>/<name>/problem.toml` in `$TOPOLOGY_STUDIO_PROBLEMS` (`os.pathsep`-separated),
`./data/problems/`, then the checkout's `data/problems/`; a path (a directory or the TOML file)
is used as is.

## problem.toml

```toml
name = "my_problem"                 # required; letters, digits, _ . -
description = "What it is."         # for people and the meta agent
registries = "registries.py"        # default; relative to the directory
seed = "seed.json"                  # default
score_function = "exact"            # a key of ProblemParts.score_functions (optional if only one)

[gold]
source = "module"                   # "module": ProblemParts.load_gold; "jsonl": the file `path`
path = "gold.jsonl"                 # jsonl only: {"id", "input", "expected", "rubric", "weight"}
validation_size = 300               # first N by sha256(split_salt + "\\0" + key) -> "validation";
train_size = 300                    # optional: the next N by that key -> "train" (fit only)
split_salt = ""                     # the rest -> "test". key = ProblemParts.split_key or the id

[search]                            # defaults of a search on this problem (all optional)
strategy = "evolutionary"           # "evolutionary" | "random" | "meta_agent"
max_evaluations = 40
max_usd = 10.0                      # omit: no cost limit
max_wall_time_s = 600.0             # omit: no time limit
patience = 10                       # evaluations without a new best; omit: never
minibatch_size = 20
seed = 42                           # 0 to 2**63 - 1
concurrency = 8
meta_model = "openai:gpt-4o-mini"   # meta_agent only
allowed_step_kinds = ["agent_step", "function_step"]
max_depth = 4
traces = false                      # per-example spans in the run journal (search --traces)
standard_library = true             # the library of combinators (core.combinators): votes,
                                    # gates, judges, input features beside the problem's own

[answer]                            # what the library's votes and agreement compare
field = "label"                     # a structured output's answer field (omit: the output)
normalization = "text"              # "text" (strip, casefold) | "numeric" | "exact"

[evaluation]                        # how each example is run (all optional)
example_timeout_s = 300.0           # one run's deadline, s (default 300; --example-timeout-s):
                                    # no output by then -> error "example_timeout: timed out..."

[models]
time_scale = 1.0                    # replayed latency is slept times this (0: no sleep)
latency_source = "auto"             # "auto" | "model" (0 ms with no model call) | "wall"
[models.prices."replay:my_model"]   # model name as recorded in usage -> USD per 1K tokens
input_usd_per_1k = 0.5              # every registered agent's model needs an entry (or a
output_usd_per_1k = 1.5             # genai-prices price), else the load fails naming the key
[models.prices."function:solve:"]   # FunctionModel(solve): "function:<fn>:" (see below)
free = true                         # declared free: $0, no prices

[rate_limits.openai]                # one budget of model calls per provider (all optional):
requests_per_minute = 500           # model calls a minute
tokens_per_minute = 200000          # input + output tokens a minute
max_concurrent = 16                 # calls in flight at once
[rate_limits."*"]                   # every provider without its own table; a key left out is
max_concurrent = 4                  # unlimited; --rate-limit PROVIDER=... replaces one table

[datasets.my_data]                  # pinned files: configured dir, cache, download; sha256 checked
url = "https://example.org/pinned/{file}"
timeout_s = 10.0
[datasets.my_data.files]
"train.jsonl" = "<64 hex digits of sha256>"

[params]                            # free-form, validated by the module: ctx.params_as(Model)
```

Unknown keys are errors. Every error is a `ProblemError` naming the file and the dotted field
(e.g. `problem.toml: field 'search.max_evaluations': Input should be greater than or equal to 1
(got 0)`); `load_problem(..., overrides={"search.max_evaluations": 10})` sets dotted fields
before validation.

## registries.py

```python
from core.evaluation.metrics import GoldExample
from core.hydrate import AgentRegistry, CallableRegistry
from core.problems import ProblemContext, ProblemParts

def build(ctx: ProblemContext) -> ProblemParts:
    agents = AgentRegistry()
    agents.register("solver", make_solver_agent, "Answers the question in one step.")
    callables = CallableRegistry()
    callables.register("normalize", normalize, "Strip and lower-case the text.")
    return ProblemParts(
        callable_registry=callables,
        agent_registry=agents,
        score_functions={"exact": lambda output, ex: float(output == ex.expected)},
        load_gold=lambda: [GoldExample(input="2+2?", expected="4", id="q1"), ...],
        roles={"step": ["normalize"]},
    )
```

The module is the problem author's own trusted code, imported by file path
(`import_problem_module`), like a pytest `conftest.py`. Nothing a topology spec names is ever
imported: a spec reaches only the names registered here. `roles` says what each callable can be
(`CallableRole`: step, merge, condition, classifier, evaluator, state_updater) so search
operators and the meta agent only combine compatible things. The seed spec is parsed with
`core.ir.parse_topology` and every name in it checked against the registries at load time.

Datasets (`ctx.dataset_file(dataset, file)`) are looked up in `$TOPOLOGY_STUDIO_DATASETS`
(or `load_problem(datasets_dir=...)`), then the cache, then downloaded from the pinned `url`;
see `core.problems.datasets`. `data/problems/gsm8k_replay/` is a complete example.

## A complete problem with no API key: an agent from a plain Python function

pydantic-ai's `FunctionModel` turns a Python function into a model: the function gets the
messages and returns the response, through the same code path as a hosted model (usage
counted, structured output, retries). Four files make a problem that `topology-studio search
adder` (or `search ./adder`, from the folder holding `adder/`) runs offline:

`adder/problem.toml`:

```toml
name = "adder"
description = "Add the two numbers in the question."
score_function = "exact"

[gold]
source = "jsonl"
path = "gold.jsonl"
validation_size = 4

[search]
max_evaluations = 4

[models]
time_scale = 0
# The price key is the model name recorded in usage: "function:<function name>:" for
# FunctionModel(fn) ("function:<fn>:<stream fn>" with a stream function, "function:<name>" for
# FunctionModel(fn, model_name="<name>")), "test:<name>" for TestModel, else "provider:model".
# An agent whose model has no entry (and that genai-prices does not know) stops the load with
# an error naming the key to add; give prices or declare the model free:
[models.prices."function:add:"]
free = true                         # or: input_usd_per_1k = 0.5 and output_usd_per_1k = 1.5
```

`adder/registries.py`:

```python
import re

from pydantic_ai import Agent
from pydantic_ai.messages import ModelMessage, ModelResponse, TextPart
from pydantic_ai.models.function import AgentInfo, FunctionModel

from core.hydrate import AgentRegistry, CallableRegistry
from core.problems import ProblemContext, ProblemParts


def add(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
    # the model: adds the first two numbers of the latest prompt
    prompt = str(getattr(messages[-1].parts[-1], "content", ""))
    a, b = (int(n) for n in re.findall(r"-?[0-9]+", prompt)[:2])
    return ModelResponse(parts=[TextPart(str(a + b))])


def build(ctx: ProblemContext) -> ProblemParts:
    agents = AgentRegistry()
    agents.register("adder", lambda: Agent(FunctionModel(add)), "Adds the two numbers.")
    return ProblemParts(
        callable_registry=CallableRegistry(),
        agent_registry=agents,
        score_functions={"exact": lambda output, ex: float(str(output).strip() == ex.expected)},
    )
```

`adder/seed.json`:

```json
{"kind": "pipeline", "steps": [{"operation": {"kind": "agent_step", "agent_name": "adder"}}]}
```

`adder/gold.jsonl` (one example a line):

```json
{"id": "q1", "input": "What is 2 + 3?", "expected": "5"}
{"id": "q2", "input": "What is 10 + 32?", "expected": "42"}
{"id": "q3", "input": "What is 7 + 8?", "expected": "15"}
{"id": "q4", "input": "What is 1 + 1?", "expected": "2"}
{"id": "q5", "input": "What is 20 + 22?", "expected": "42"}
```

Evaluate a candidate with `problem.evaluator()`: it carries every hook the problem defines (its
prices, its `is_blank` test, its `latency_source`), so no caller can forget one.
"""

from core.problems.config import (
    RANDOM_SEED_MAX,
    DatasetConfig,
    GoldConfig,
    ModelsConfig,
    ProblemConfig,
    RandomSeed,
    SearchDefaults,
)
from core.problems.datasets import (
    CACHE_ENV,
    DATASETS_ENV,
    configured_dataset_dirs,
    default_cache_root,
    fetch_dataset_file,
    sha256_file,
)
from core.problems.loader import (
    PROBLEM_FILE,
    PROBLEMS_ENV,
    import_problem_module,
    load_problem,
    problem_search_dirs,
    resolve_problem,
)
from core.problems.parts import CALLABLE_ROLES, CallableRole, ProblemContext, ProblemParts
from core.problems.problem import Problem
from core.problems.splits import split_examples, split_rank_key

__all__ = [
    "CACHE_ENV",
    "CALLABLE_ROLES",
    "DATASETS_ENV",
    "PROBLEMS_ENV",
    "PROBLEM_FILE",
    "RANDOM_SEED_MAX",
    "CallableRole",
    "DatasetConfig",
    "GoldConfig",
    "ModelsConfig",
    "Problem",
    "ProblemConfig",
    "ProblemContext",
    "ProblemParts",
    "RandomSeed",
    "SearchDefaults",
    "configured_dataset_dirs",
    "default_cache_root",
    "fetch_dataset_file",
    "import_problem_module",
    "load_problem",
    "problem_search_dirs",
    "resolve_problem",
    "sha256_file",
    "split_examples",
    "split_rank_key",
]
