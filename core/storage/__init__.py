"""The run store: every run, candidate and per-example result, in DuckDB, behind `RunStore`.

- `RunStore` (`base`): the interface and its contract (docstring; the reusable suite is
  `tests/contracts/store_contract.py`).
- `RunRecord`, `ProposalRecord`, `TopologyVersion`, `IngestReport`, `IngestError` (`records`):
  the frozen records it returns.
- `DuckDBRunStore` (`duckdb_store`): the implementation; `open_store` (`resolver`) resolves a
  path or URL, with a read-only view from the journals when another process holds the file.
- `RunJournal`, `read_journal`, `journal_path` (`journal`): the append-only JSON-lines journal a
  search writes and the store ingests (live across processes, resumable after a crash).
- `ResumeState` (`resume`): what a resumed search needs from its journal.
- `rebuild_store`, `RebuildReport` (`rebuild`): a damaged database restored from its journals
  (the damaged file kept aside).
- `queries`: the studio's queries as functions of a connection returning DataFrames.
"""

from core.storage.base import RunStore
from core.storage.duckdb_store import DuckDBRunStore
from core.storage.journal import (
    RunJournal,
    encode_event,
    journal_dir,
    journal_is_live,
    journal_path,
    new_run_id,
    read_journal,
)
from core.storage.rebuild import RebuildReport, rebuild_store
from core.storage.records import (
    IngestError,
    IngestReport,
    ProposalRecord,
    RunRecord,
    RunStatus,
    TopologyVersion,
)
from core.storage.resolver import open_store
from core.storage.resume import ResumeState, load_resume_state

__all__ = [
    "DuckDBRunStore",
    "IngestError",
    "IngestReport",
    "ProposalRecord",
    "RebuildReport",
    "ResumeState",
    "RunJournal",
    "RunRecord",
    "RunStatus",
    "RunStore",
    "TopologyVersion",
    "encode_event",
    "journal_dir",
    "journal_is_live",
    "journal_path",
    "load_resume_state",
    "new_run_id",
    "open_store",
    "read_journal",
    "rebuild_store",
]
