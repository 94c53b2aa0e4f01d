"""Write the README's own-problem example: 120 support tickets and three agents' recorded labels.

`python tools/example_tickets.py [DIR]` writes `DIR/gold.jsonl` and `DIR/replay.jsonl` (default:
the current directory), the two files `topology-studio init tickets --gold gold.jsonl --replay
replay.jsonl` takes. The data is synthetic and seeded (`SEED`), so the README's front is what
anyone gets: six labels; agents `small`, `medium` and `large` right with probability 0.62, 0.74
and 0.86 on an ordinary ticket and 0.25 less on a hard one (30% of tickets, the same tickets for
every agent, so their errors are correlated); a wrong answer is a random other label; 120 input
and 3 output tokens a call; latency 300, 900 and 2,500 ms plus up to 200 ms.
"""

from __future__ import annotations

import json
import random
import sys
from pathlib import Path

SEED = 7
LABELS = ("billing", "bug", "login", "refund", "feature", "other")
AGENTS = {"small": (0.62, 300), "medium": (0.74, 900), "large": (0.86, 2500)}
"""Agent -> (accuracy on an ordinary ticket, base latency in ms)."""
N_TICKETS = 120
HARD_SHARE = 0.3
HARD_PENALTY = 0.25


def tickets() -> tuple[list[dict[str, object]], list[dict[str, object]]]:
    """The gold lines and the replay lines, in file order."""
    r = random.Random(SEED)
    gold: list[dict[str, object]] = []
    replay: list[dict[str, object]] = []
    for i in range(N_TICKETS):
        label = r.choice(LABELS)
        about = label if r.random() < 0.5 else "an issue"
        gold.append(
            {
                "id": f"t{i}",
                "input": f"Ticket {i}: customer writes about {about} ...",
                "expected": label,
            }
        )
        hard = r.random() < HARD_SHARE
        for agent, (accuracy, latency) in AGENTS.items():
            right = r.random() < (accuracy - HARD_PENALTY if hard else accuracy)
            output = label if right else r.choice([x for x in LABELS if x != label])
            replay.append(
                {
                    "id": f"t{i}",
                    "agent": agent,
                    "output": output,
                    "input_tokens": 120,
                    "output_tokens": 3,
                    "latency_ms": latency + r.randint(0, 200),
                }
            )
    return gold, replay


def write(directory: Path) -> tuple[Path, Path]:
    """Write `gold.jsonl` and `replay.jsonl` into `directory` (made if missing); their paths."""
    directory.mkdir(parents=True, exist_ok=True)
    gold, replay = tickets()
    paths = (directory / "gold.jsonl", directory / "replay.jsonl")
    for path, lines in zip(paths, (gold, replay), strict=True):
        path.write_text("".join(json.dumps(line) + "\n" for line in lines), encoding="utf-8")
    return paths


if __name__ == "__main__":
    for written in write(Path(sys.argv[1] if len(sys.argv) > 1 else ".")):
        print(f"wrote {written}")
