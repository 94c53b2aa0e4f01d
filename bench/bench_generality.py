"""Generality benchmark: structure search on random problems that register only agents and a
scorer.

**The problems.** `--problems` (default 20) synthetic problems drawn from `--seed` (default
2026), each an offline replay problem written with `core.problems.replay_file` (the files
`topology-studio init NAME --gold gold.jsonl --replay replay.jsonl` writes: `problem.toml`,
`gold.jsonl`, `replay.jsonl`, `seed.json`) into a temporary directory and loaded with
`load_problem`, so no `registries.py`, no function of the problem's own: only the agents
(`[agents.<a>] model = "replay:<a>"`) and the declared `exact` scorer. Per problem:

- 3 to 7 agents, each with a random base accuracy (0.35 to 0.92), a price (log-uniform,
  $0.0002 to $0.03 per 1K tokens, output twice input), a latency (100 to 3,000 ms, plus up to
  20% per example) and a token count;
- a hidden input feature (about half the examples end in a question mark and carry digits,
  the other half do not) that changes which agent is right: one or two "specialist" agents are
  0.25 more accurate on the marked examples and 0.25 less on the others (clamped to 0.02..0.98);
- error correlation: each problem draws a correlation rho in 0 to 0.7; an example is "hard"
  with probability 0.3, and on a hard example each agent's error comes, with probability rho,
  from the shared hardness (it is wrong together with the others), else independently; a wrong
  answer is, with probability rho, the example's common wrong label (agents agree on it);
- text answers (a label among 6) or, on about half the problems, structured answers
  (`{"label": ..., "confidence": ...}`, expected `{"label": ...}`: the `exact` scorer compares
  the expected fields).

100 gold examples: 50 validation (every candidate is scored on all 50) and 50 held out.

**The runs.** Per problem:

- the yardstick, over the library-expressible space: `exhaustive` over the space the
  registries allow (the problem's and, where a standard library of combinators is
  registered, its functions), with the grammar `GRAMMAR` (registered merges only, parallels
  of agents, agents first in a pipeline or as an escalation, router fallbacks always, no two
  function steps in a row, verdict accept routes) and the node bound `--max-nodes` (default
  4: every topology of at most 4 nodes, counted as `core.ir.spec_metrics` counts them:
  singles, and routers between agents on the library's input features or on a verdict), once
  (it is deterministic); plus `library_shapes`, the library's structures above that bound
  over every assignment of the problem's agents: every agreement gate (7 nodes), every
  `vote_k` vote (6 nodes) and every cascade and verifier cascade (5 nodes). A topology with
  a path on which no agent answers (e.g. a route that keeps an answer nobody gave) is
  rejected statically (`no_agent`), so blank answers on part of the inputs are no cheap
  points. With 3 agents that is 85 topologies, with 7 1,197 (a full 7-node bound would be
  1,125 for 3 agents and 49,385 for 7: more than 20 problems on 2 cores allow). A search can
  pass the yardstick (a ratio above 1) with what lies outside it: e.g. a router between a
  gate and an agent;
- the default evolutionary search (the problem's `[search]`: 40 evaluations) on seeds
  `--seeds` (default 1 2 3);
- random search, same budget, same seeds.

**The figures.** The hypervolume on (accuracy up, cost USD per problem down) of every candidate
each run scored on the validation split, with the reference point accuracy 0 and 1.1 x the cost
per problem of the dearest single agent (measured: every single agent is a 2-node topology in
the exhaustive run), as a ratio to the exhaustive run's. Per problem: the ratio of each seed,
evolutionary's and random's mean; then the mean and the worst over problems, and which
structure kinds reached each strategy's front (`_kinds`). Then the targets, PASS or FAIL:
evolutionary's mean ratio >= 0.97 and its worst problem's >= 0.90; evolutionary's mean above
random's by more than random's stdev (over problems' mean ratios).

**Measured** (2026-12-07, the default run, `bench/baselines/generality_after.txt`; 26.5 min
on 2 cores shared with other jobs): evolutionary mean 0.9858, worst 0.9424 (problem 2); random
mean 0.9432, worst 0.8441, stdev 0.0407; all three targets PASS (the third by 0.0426 against
0.0407). Per problem, evolutionary's mean ratio is 0.94 or more on all 20, 0.98 or more on 14,
above 1.0 on 4 (structures outside the yardstick's space). The same code
before the opening ranked its router pairs by hypervolume: mean 0.9794, worst 0.8946
(problem 11: the cheap agent's router with the specialist never tried), gap 0.0362, two
targets FAIL. The searches of the code without the library
(`bench/baselines/generality_before.json`) against this yardstick: mean 0.9256, worst 0.7813
(`bench/baselines/generality_compare.txt`).

`--quick` (CI): 2 problems, node bound 4, seed 1 only, 12 evaluations (about 12 s). The
default, 20 problems and 3 seeds each, takes about 25 minutes on 2 idle cores (about 75 s a
problem; 40 minutes to an hour with the cores shared by other work).

`--save FILE.json` writes every run's absolute hypervolume; `--compare BEFORE.json AFTER.json`
runs nothing and prints BEFORE's searches as a share of AFTER's exhaustive hypervolume (e.g. the
searches of a checkout without the standard library against the library-expressible front).

Usage: `python bench/bench_generality.py [--quick] [--problems 20] [--seed 2026]
[--max-nodes 4] [--seeds 1 2 3] [--save FILE.json]`, or `--compare BEFORE.json AFTER.json`.
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import json
import math
import random
import statistics
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).parent))

from bench_search import RunFigures, _one_run  # noqa: E402

from core.agents.call_cache import InMemoryCallCache  # noqa: E402
from core.evaluation.metrics import GoldExample  # noqa: E402
from core.evaluation.pricing import ModelPrice  # noqa: E402
from core.ir import TopologySpec  # noqa: E402
from core.ir.models import (  # noqa: E402
    AgentStepSpec,
    AnyNode,
    FunctionStepSpec,
    ParallelSpec,
    PipelineSpec,
    RefinementLoopSpec,
    RouterSpec,
    walk,
)
from core.problems import load_problem  # noqa: E402
from core.problems.problem import Problem  # noqa: E402
from core.problems.replay_file import ReplayLine, replay_table, write_replay_problem  # noqa: E402
from core.search.budget import Budget  # noqa: E402
from core.search.engine import build_search  # noqa: E402
from core.search.operators import (  # noqa: E402
    MutationContext,
    cascade_spec,
    gate_spec,
    is_valid_candidate,
    vote_spec,
)
from core.search.strategies.base import (  # noqa: E402
    AskContext,
    Proposal,
    SearchSpace,
    Strategy,
    StrategyConfig,
)

GRAMMAR: dict[str, Any] = {
    "branches": "agents",
    "pipeline_agents": "first",
    "router_fallback": "always",
    "consecutive_functions": False,
    "verdict_routes": True,
}
"""The exhaustive strategy's restriction (`ExhaustiveConfig` fields), with `merges` the
problem's registered merges (`Problem.roles["merge"]`: the engine's built-in `first_wins`,
`fastest` and `collect_all` are left out of the yardstick, as `BENCH_GRAMMAR` leaves them out on
gsm8k_replay) and every registered condition."""

LABELS = ("alpha", "bravo", "charlie", "delta", "echo", "foxtrot")
N_EXAMPLES = 100
VALIDATION = 50


@dataclass(frozen=True)
class Synthetic:
    """One drawn problem: what it is, for the printout."""

    index: int
    n_agents: int
    structured: bool
    rho: float
    specialists: tuple[str, ...]


def _draw(index: int, rng: random.Random, root: Path) -> tuple[Synthetic, Path]:
    """Draw problem `index` and write it under `root` (see the module docstring)."""
    n_agents = rng.randint(3, 7)
    structured = rng.random() < 0.5
    rho = rng.uniform(0.0, 0.7)
    agents = [f"a{k}" for k in range(n_agents)]
    acc = {a: rng.uniform(0.35, 0.92) for a in agents}
    price = {a: math.exp(rng.uniform(math.log(0.0002), math.log(0.03))) for a in agents}
    latency = {a: rng.uniform(100.0, 3000.0) for a in agents}
    out_tokens = {a: rng.randint(2, 40) for a in agents}
    specialists = tuple(rng.sample(agents, rng.choice((1, 2))))
    gold: list[GoldExample] = []
    lines: list[ReplayLine] = []
    for i in range(N_EXAMPLES):
        marked = rng.random() < 0.5
        right = rng.choice(LABELS)
        common_wrong = rng.choice([x for x in LABELS if x != right])
        words = " ".join(rng.choice(("order", "late", "item", "help", "box")) for _ in range(6))
        text = f"case {i}: {words} {rng.randint(10, 99)}?" if marked else f"case {i}: {words}."
        expected: Any = {"label": right} if structured else right
        gold.append(GoldExample(id=f"s{index}-{i:03d}", input=text, expected=expected))
        hard = rng.random() < 0.3
        shared_wrong = rng.random() < 0.7  # hard examples: most correlated agents fail together
        for a in agents:
            p = acc[a]
            if a in specialists:
                p = p + 0.25 if marked else p - 0.25
            p = min(0.98, max(0.02, p))
            wrong = (hard and shared_wrong) if rng.random() < rho else rng.random() > p
            if not hard and rng.random() < rho:
                wrong = rng.random() > min(0.98, p + 0.1)
            label = right
            if wrong:
                label = (
                    common_wrong
                    if rng.random() < rho
                    else rng.choice([x for x in LABELS if x != right])
                )
            output: Any = (
                {"label": label, "confidence": round(rng.uniform(0.5, 1.0), 2)}
                if structured
                else label
            )
            lines.append(
                ReplayLine(
                    id=f"s{index}-{i:03d}",
                    agent=a,
                    output=output,
                    input_tokens=len(text) // 4 + 20,
                    output_tokens=out_tokens[a],
                    latency_ms=round(latency[a] * rng.uniform(1.0, 1.2), 1),
                )
            )
    directory = write_replay_problem(
        root / f"synthetic_{index:02d}",
        name=f"synthetic_{index:02d}",
        gold=gold,
        replay=replay_table(lines),
        prices={
            a: ModelPrice(input_usd_per_1k=price[a], output_usd_per_1k=2 * price[a]) for a in agents
        },
    )
    return Synthetic(index, n_agents, structured, rho, specialists), directory


def library_shapes(ctx: MutationContext) -> list[TopologySpec]:
    """The library's structures above the exhaustive node bound, over EVERY assignment of the
    problem's agents (no cost order: the yardstick knows nothing the searches learn):

    - agreement gates `gate_spec(X, Z, Y)` (7 nodes): every agent Y, every pair X < Z of the
      others (name order), each registered merge that collects candidates, each verdict
      condition that reads exactly two candidates;
    - votes `vote_spec` (6 nodes): every set of `ctx.vote_k` agents, each collecting merge,
      each selection step (a step that needs two candidates, e.g. `plurality_vote`);
    - cascades and verifier cascades `cascade_spec(X, Y)` (5 nodes): every ordered pair of
      agents, each verdict condition that reads one candidate (judges included).

    Input-feature routers between two agents (4 nodes) are in the exhaustive space already."""
    effects = ctx.effects
    agents = list(ctx.agent_names)
    keep = next((n for n in ctx.names("step") if effects.callable(n).identity), None)
    merges = [m for m in ctx.names("merge") if effects.callable(m).combine == "all"]
    selects = [
        n
        for n in ctx.names("step")
        if effects.callable(n).needs_candidates >= 2 and not effects.callable(n).identity
    ]

    def verdicts(needs: int) -> list[str]:
        return [
            c
            for c in ctx.names("condition")
            if effects.callable(c).verdict is not None
            and effects.callable(c).needs_candidates == needs
        ]

    def a(name: str) -> AgentStepSpec:
        return AgentStepSpec(agent_name=name)

    out: list[AnyNode] = []
    if keep is not None:
        for y in agents:
            others = [x for x in agents if x != y]
            for i, x in enumerate(others):
                for z in others[i + 1 :]:
                    for merge in merges:
                        for cond in verdicts(2):
                            out.append(gate_spec(a(x), a(z), a(y), merge, cond, keep, ctx))
        for x in agents:
            for y in agents:
                if x != y:
                    for cond in verdicts(1):
                        out.append(cascade_spec(a(x), a(y), cond, keep, ctx))
    for combo in itertools.combinations(agents, ctx.vote_k):
        for merge in merges:
            for select in selects:
                out.append(vote_spec([a(x) for x in combo], merge, select))
    return [v for s in out if (v := is_valid_candidate(s, ctx)) is not None]


class _Listed(Strategy):
    """Proposes `library_shapes` of the space once (generation 0), then nothing."""

    name = "library_shapes"

    def __init__(self) -> None:
        super().__init__(StrategyConfig())
        self.count = 0

    def preflight(self, space: SearchSpace) -> None:
        self._specs = library_shapes(MutationContext.from_space(space))
        self.count = len(self._specs)

    async def ask(self, ctx: AskContext) -> list[Proposal]:
        if ctx.generation > 0:
            return []
        out: list[Proposal] = []
        for spec in self._specs:
            check = ctx.check(spec)
            if check.ok and not ({check.spec_hash, check.behaviour_hash} & ctx.known_hashes):
                out.append(Proposal(spec=spec, operator="listed"))
        return out


def _kinds(spec: AnyNode) -> set[str]:
    """The structure kinds of a topology: `single` (one agent step), `chain` (a pipeline of 2+
    agent steps), `parallel:<merge>`, `router` (with `:<condition>` names), `loop`, and
    `fn:<callable>` for every function step (votes, verdicts, keep-answer steps...)."""
    nodes = [n for _, n in walk(spec)]
    agents = [n for n in nodes if isinstance(n, AgentStepSpec)]
    out: set[str] = set()
    if len(nodes) == 2 and len(agents) == 1:
        return {"single"}
    for n in nodes:
        if isinstance(n, ParallelSpec):
            out.add(f"parallel:{n.merge}")
        elif isinstance(n, RouterSpec):
            conds = sorted({r.condition_name for r in n.routes if r.condition_name})
            out.add("router" + (":" + "+".join(conds) if conds else ""))
        elif isinstance(n, RefinementLoopSpec):
            out.add("loop")
        elif isinstance(n, FunctionStepSpec):
            out.add(f"fn:{n.callable_name}")
        elif isinstance(n, PipelineSpec):
            steps = [e.operation for e in n.steps]
            if sum(isinstance(s, AgentStepSpec) for s in steps) >= 2:
                out.add("chain")
    return out or {"other"}


def _front_kinds(fig: RunFigures) -> set[str]:
    if not fig.points:
        return set()
    front = set(fig.front())
    return set().union(
        *(_kinds(s) for p, s in zip(fig.points, fig.specs, strict=True) if p in front)
    )


@dataclass
class ProblemResult:
    """One problem's figures: `hv` strategy -> the absolute hypervolume of each run
    (exhaustive: one), `ratios` the searches' as a share of the exhaustive one."""

    synthetic: Synthetic
    enumerated: int
    ref_cost: float
    hv: dict[str, list[float]]
    kinds: dict[str, set[str]]
    wall_s: float
    yardstick: float | None = None
    """Another run's exhaustive hypervolume to compare with (`--compare`); None: this one's."""

    @property
    def ratios(self) -> dict[str, list[float]]:
        ex = self.yardstick if self.yardstick is not None else self.hv["exhaustive"][0]
        return {
            k: [x / ex if ex else 0.0 for x in v] for k, v in self.hv.items() if k != "exhaustive"
        }

    def to_json(self) -> dict[str, Any]:
        return {
            "synthetic": asdict(self.synthetic),
            "enumerated": self.enumerated,
            "ref_cost": self.ref_cost,
            "hv": self.hv,
            "kinds": {k: sorted(v) for k, v in self.kinds.items()},
            "wall_s": self.wall_s,
        }

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> ProblemResult:
        syn = data["synthetic"]
        return cls(
            Synthetic(**{**syn, "specialists": tuple(syn["specialists"])}),
            data["enumerated"],
            data["ref_cost"],
            data["hv"],
            {k: set(v) for k, v in data["kinds"].items()},
            data["wall_s"],
        )


async def _bench_problem(
    syn: Synthetic, problem: Problem, args: argparse.Namespace
) -> ProblemResult:
    start = time.perf_counter()
    cfg = {"max_nodes": args.max_nodes, **GRAMMAR, "merges": tuple(problem.roles["merge"])}
    probe = build_search(problem, "exhaustive", config=cfg)
    probe.strategy.preflight(probe.space)
    enum = getattr(probe.strategy, "enumeration", None)
    assert enum is not None
    # one call cache for the problem's runs: a call made by one run is a hit in the next
    # (charged the same, same model time), so the results are those of fresh caches, faster
    calls = InMemoryCallCache()
    ex, _ = await _one_run(
        problem,
        "exhaustive",
        0,
        config=cfg,
        budget=Budget(max_evaluations=enum.count + 1),
        call_cache=calls,
    )
    listed = _Listed()
    probe_listed = build_search(problem, listed)
    listed.preflight(probe_listed.space)
    shapes, _ = await _one_run(
        problem,
        listed,
        0,
        budget=Budget(max_evaluations=listed.count + 2),
        call_cache=calls,
    )
    ex = replace(ex, points=ex.points + shapes.points, specs=ex.specs + shapes.specs)
    enumerated = enum.count + listed.count
    ref_cost = 1.1 * max(ex.single_agent_costs)
    hv: dict[str, list[float]] = {"exhaustive": [ex.hv(ref_cost)]}
    kinds: dict[str, set[str]] = {"exhaustive": _front_kinds(ex)}
    budget = args.budget or problem.search.max_evaluations
    for strategy in ("evolutionary", "random"):
        for seed in args.seeds:
            fig, _ = await _one_run(problem, strategy, seed, budget=Budget(max_evaluations=budget))
            hv.setdefault(strategy, []).append(fig.hv(ref_cost))
            kinds.setdefault(strategy, set()).update(_front_kinds(fig))
    return ProblemResult(syn, enumerated, ref_cost, hv, kinds, time.perf_counter() - start)


def _verdict(ok: bool) -> str:
    return "PASS" if ok else "FAIL"


def _report(results: Sequence[ProblemResult]) -> None:
    print()
    print(
        f"{'problem':<9}{'agents':>7}{'answers':>11}{'rho':>6}{'space':>7}"
        f"{'evo mean':>10}{'evo seeds':>22}{'rnd mean':>10}{'wall s':>8}"
    )
    for r in results:
        evo, rnd = r.ratios["evolutionary"], r.ratios["random"]
        print(
            f"{r.synthetic.index:<9}{r.synthetic.n_agents:>7}"
            f"{'structured' if r.synthetic.structured else 'text':>11}{r.synthetic.rho:>6.2f}"
            f"{r.enumerated:>7}{statistics.mean(evo):>10.4f}"
            f"{' '.join(f'{x:.3f}' for x in evo):>22}{statistics.mean(rnd):>10.4f}"
            f"{r.wall_s:>8.1f}"
        )
    print()
    for r in results:
        for strategy in ("exhaustive", "evolutionary", "random"):
            print(
                f"problem {r.synthetic.index} {strategy} front kinds: "
                + ", ".join(sorted(r.kinds.get(strategy, set())))
            )
    evo_means = [statistics.mean(r.ratios["evolutionary"]) for r in results]
    rnd_means = [statistics.mean(r.ratios["random"]) for r in results]
    evo_mean, evo_worst = statistics.mean(evo_means), min(evo_means)
    rnd_mean = statistics.mean(rnd_means)
    rnd_sd = statistics.stdev(rnd_means) if len(rnd_means) > 1 else 0.0
    print()
    print(
        f"evolutionary: mean {evo_mean:.4f}, worst {evo_worst:.4f}; random: mean {rnd_mean:.4f}, "
        f"worst {min(rnd_means):.4f}, stdev {rnd_sd:.4f} (hv ratio to exhaustive, over "
        f"{len(results)} problems)"
    )
    print(f"{_verdict(evo_mean >= 0.97)}  evolutionary mean >= 0.97 of exhaustive ({evo_mean:.4f})")
    print(
        f"{_verdict(evo_worst >= 0.90)}  evolutionary worst >= 0.90 of exhaustive ({evo_worst:.4f})"
    )
    gap = evo_mean - rnd_mean
    print(
        f"{_verdict(gap > rnd_sd)}  evolutionary mean above random's by more than random's stdev "
        f"({evo_mean:.4f} - {rnd_mean:.4f} = {gap:.4f} vs {rnd_sd:.4f})"
    )


async def _main(args: argparse.Namespace) -> None:
    rng = random.Random(args.seed)
    print(
        f"bench_generality: {args.problems} problems (seed {args.seed}), exhaustive node bound "
        f"{args.max_nodes}, grammar GRAMMAR, seeds {' '.join(map(str, args.seeds))}, budget "
        f"{args.budget or 'the problem default'}; hv on (accuracy max, cost min), reference "
        "(0, 1.1 x the dearest single agent's cost)"
    )
    results: list[ProblemResult] = []
    with tempfile.TemporaryDirectory(prefix="bench_generality_") as tmp:
        for index in range(args.problems):
            syn, directory = _draw(index, rng, Path(tmp))
            problem = load_problem(directory)
            res = await _bench_problem(syn, problem, args)
            results.append(res)
            print(
                f"  problem {index}: {syn.n_agents} agents, "
                f"{'structured' if syn.structured else 'text'}, rho {syn.rho:.2f}, "
                f"specialists {', '.join(syn.specialists)}; space {res.enumerated}; evo "
                f"{' '.join(f'{x:.3f}' for x in res.ratios['evolutionary'])}, random "
                f"{' '.join(f'{x:.3f}' for x in res.ratios['random'])} ({res.wall_s:.1f} s)",
                flush=True,
            )
    _report(results)
    if args.save:
        Path(args.save).write_text(json.dumps([r.to_json() for r in results], indent=1) + "\n")
        print(f"saved: {args.save}")


def _compare(before_path: str, after_path: str) -> None:
    """The searches of BEFORE (saved with `--save`) against AFTER's exhaustive hypervolume, the
    same problems (same `--seed`, `--problems`), the same reference point (checked)."""
    before = [ProblemResult.from_json(x) for x in json.loads(Path(before_path).read_text())]
    after = [ProblemResult.from_json(x) for x in json.loads(Path(after_path).read_text())]
    # the problems are drawn in order from one seed: a shorter run holds the first ones
    before = before[: len(after)]
    if [b.synthetic for b in before] != [a.synthetic for a in after]:
        raise SystemExit("--compare: the two files hold different problems")
    for b, a in zip(before, after, strict=True):
        if not math.isclose(b.ref_cost, a.ref_cost, rel_tol=1e-12):
            raise SystemExit(f"--compare: problem {b.synthetic.index}: reference points differ")
        b.yardstick = a.hv["exhaustive"][0]
        b.enumerated = a.enumerated
    print(
        f"bench_generality --compare: the searches of {before_path} as a share of the "
        f"exhaustive hypervolume of {after_path} (space: the latter's)"
    )
    _report(before)


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument(
        "--quick", action="store_true", help="2 problems, bound 4, seed 1, 12 evaluations"
    )
    parser.add_argument("--problems", type=int, default=20)
    parser.add_argument("--seed", type=int, default=2026)
    parser.add_argument("--max-nodes", type=int, default=4)
    parser.add_argument("--seeds", type=int, nargs="+", default=[1, 2, 3])
    parser.add_argument(
        "--budget", type=int, default=None, help="evaluations (default: the problem's)"
    )
    parser.add_argument("--save", metavar="FILE.json", help="write every run's hypervolume")
    parser.add_argument(
        "--compare",
        nargs=2,
        metavar=("BEFORE.json", "AFTER.json"),
        help="run nothing: BEFORE's searches against AFTER's exhaustive (both from --save)",
    )
    args = parser.parse_args(argv)
    if args.compare:
        _compare(*args.compare)
        return
    if args.quick:
        args.problems, args.max_nodes, args.seeds, args.budget = 2, 4, [1], 12
    asyncio.run(_main(args))


if __name__ == "__main__":
    main()
