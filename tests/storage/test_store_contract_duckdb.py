"""`DuckDBRunStore`, in memory and on disk, passes the shared run-store contract suite."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "contracts"))

from store_contract import StoreContract  # noqa: E402

from core.storage import DuckDBRunStore, RunStore, journal_dir  # noqa: E402


class TestDuckDBInMemory(StoreContract):
    def make_store(self, tmp_path: Path) -> RunStore:
        return DuckDBRunStore(":memory:", journal_dir=self.journals(tmp_path))

    def journals(self, tmp_path: Path) -> Path | None:
        return tmp_path / "journals"


class TestDuckDBOnDisk(StoreContract):
    def make_store(self, tmp_path: Path) -> RunStore:
        return DuckDBRunStore(tmp_path / "db" / "runs.duckdb")

    def journals(self, tmp_path: Path) -> Path | None:
        return journal_dir(tmp_path / "db" / "runs.duckdb")  # the store's default folder
