"""The run report reads the store without pandas (the default search's peak RSS is held to 300 MiB):
pandas and pyarrow add about 70 MiB to a process, and the end-of-search report (`print_run`, which
`show` prints too) is where the default search's peak RSS fell. A fresh interpreter runs `show` and
says which of them it imported."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "contracts"))
from store_contract import RunBuilder  # noqa: E402

from core.ir import parse_topology, spec_hash  # noqa: E402
from core.storage import DuckDBRunStore  # noqa: E402

SPEC = (
    '{"kind": "pipeline", "name": "p", "steps": '
    '[{"operation": {"kind": "function_step", "callable_name": "upper"}}]}'
)
ROOT = Path(__file__).resolve().parents[2]


def test_show_prints_the_run_without_importing_pandas(tmp_path: Path) -> None:
    db = tmp_path / "runs.duckdb"
    h = spec_hash(parse_topology(SPEC))
    b = RunBuilder("r1")
    with DuckDBRunStore(db) as store:
        store.record_events([
            b.started(),
            b.proposed(0, spec_hash=h, spec_json=SPEC),
            b.result(0, 0.5, 0.010, 0.45, spec_hash=h),
            b.result(0, 0.25, 0.012, 0.2, spec_hash=h, split="test"),
            b.finished(budget_used={"evaluations": 1.0, "usd": 0.02, "wall_s": 1.5}),
        ])  # fmt: skip
        store.put_spec(h, SPEC)
    script = (
        "import io, json, sys\n"
        "from studio.cli import main\n"
        f"rc = main(['show', 'r1', '--db', {str(db)!r}])\n"
        "print(json.dumps({'rc': rc, 'loaded': [m for m in ('pandas', 'pyarrow') "
        "if m in sys.modules]}))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, cwd=ROOT, check=False
    )
    assert done.returncode == 0, done.stderr
    out = done.stdout.splitlines()
    assert json.loads(out[-1]) == {"rc": 0, "loaded": []}
    text = "\n".join(out)
    assert "Best topology (candidate 0)" in text
    assert "held-out test: accuracy 0.2500, score 0.2000 (candidate 0)" in text
