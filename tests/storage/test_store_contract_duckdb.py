"""`DuckDBRunStore`, in memory and on disk, passes the shared run-store contract suite."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "contracts"))

from store_contract import StoreContract  # noqa: E402

from core.storage import DuckDBRunStore, RunStore  # noqa: E402


class TestDuckDBInMemory(StoreContract):
    def make_store(self, tmp_path: Path) -> RunStore:
        return DuckDBRunStore(":memory:")


class TestDuckDBOnDisk(StoreContract):
    def make_store(self, tmp_path: Path) -> RunStore:
        return DuckDBRunStore(tmp_path / "db" / "runs.duckdb")
