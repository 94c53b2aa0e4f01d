"""The studio manager's proposals, approvals and topology registry (`StudioManager` inherits
`RegistryMixin`; see `studio.manager`'s docstring, section "The registry")."""

from __future__ import annotations

import getpass
import os
from pathlib import Path
from typing import TYPE_CHECKING

from core.combinators.learned import LearnedCondition
from core.errors import (
    StoreError,
)
from core.hydrate import CallableRegistry
from core.ir import TopologySpec, spec_hash
from core.search.apply import GeneDiff, apply_specs
from core.search.learned import LEARNED_FOLDER, find_artefacts, learned_names, register_all
from core.search.registry import Approval, TopologyRegistry
from core.storage import (
    RunStore,
)
from core.storage.journal import journal_dir, journal_path


def current_user() -> str:
    """Who approves in this studio: `$TOPOLOGY_STUDIO_USER`, else the login name."""
    env = os.environ.get("TOPOLOGY_STUDIO_USER", "").strip()
    if env:
        return env
    try:
        return getpass.getuser()
    except (KeyError, OSError):
        return os.environ.get("USER", "studio")


class RegistryMixin:
    """`StudioManager`'s proposals, approvals and registry (see `studio.manager`)."""

    registry: TopologyRegistry
    db_path: Path

    if TYPE_CHECKING:

        @property
        def store(self) -> RunStore: ...

        def refresh(self) -> int: ...

    def learned_artefacts(
        self, spec: TopologySpec, run_id: str | None = None
    ) -> dict[str, LearnedCondition]:
        """The artefacts of the learned conditions `spec` routes on, by registered name (each
        digest checked as it is read): from the journal of `run_id` (the run the candidate
        came from), then the registry's `learned/` folders (an applied version's), then every
        other run journal of the store (an edited copy of a run's candidate; a journal that
        cannot be read is passed over). A name found nowhere is left out: applying or
        evaluating the spec then names it."""
        names = learned_names(spec)
        if not names:
            return {}
        own = [journal_path(self.db_path, run_id)] if run_id else []
        found = find_artefacts(names, journals=own)
        if len(found) < len(names):
            root = self.registry.root
            folders = sorted(root.glob(f"*/{LEARNED_FOLDER}")) if root.is_dir() else []
            found |= find_artefacts(
                [n for n in names if n not in found], folders=folders, skip_damaged=True
            )
        if len(found) < len(names):
            d = journal_dir(self.db_path)
            others = sorted(p for p in d.glob("*.jsonl") if p not in own) if d.is_dir() else []
            found |= find_artefacts(
                [n for n in names if n not in found], journals=others, skip_damaged=True
            )
        return found

    def register_learned_of(
        self, spec: TopologySpec, callables: CallableRegistry, run_id: str | None = None
    ) -> list[str]:
        """Register in `callables` the artefacts `spec` routes on that `learned_artefacts`
        finds (`core.search.learned.register_all`; nothing is looked for when every name is
        registered already); the names registered."""
        if all(name in callables for name in learned_names(spec)):
            return []
        return register_all(self.learned_artefacts(spec, run_id).values(), callables)

    def registry_target(self, name: str) -> str:
        """The store's name for a registry topology: `<registry root>/<name>` (as the CLI's
        `apply` records it)."""
        return f"{self.registry.root}/{name}"

    def propose(
        self,
        name: str,
        spec: TopologySpec,
        *,
        run_id: str | None = None,
        candidate_idx: int | None = None,
        note: str = "",
        who: str | None = None,
    ) -> int:
        """Record a proposal to write `spec` as topology `name` of the registry.

        The spec is also stored by its canonical hash (so the diff page can read it back) and,
        from the editor, saved as the next draft version of `name` in the store.

        Returns:
            The proposal id.

        Raises:
            StoreError: the store is read-only.
        """
        store = self.store
        text = spec.model_dump_json()
        h = spec_hash(spec)
        store.put_spec(h, text)
        base = self.registry.current_version(name)
        before = None if base is None else self.registry.get(name, base)
        from core.ir.diff import unified_json_diff

        diff = unified_json_diff(before, spec)
        if run_id is None:
            store.save_topology_version(name, text, spec_hash=h, note=note or "saved in the editor")
        return store.record_proposal(
            self.registry_target(name),
            text,
            spec_hash=h,
            run_id=run_id,
            candidate_idx=candidate_idx,
            base_version=base,
            diff=diff,
            proposed_by=who or current_user(),
        )

    def approve(
        self,
        proposal_id: int,
        name: str,
        spec: TopologySpec,
        shown: GeneDiff,
        *,
        comment: str = "",
        who: str | None = None,
    ) -> GeneDiff:
        """Apply an approved proposal to the registry, atomically, and record the approval.

        Args:
            proposal_id: the proposal.
            name: the registry topology.
            spec: the proposed spec.
            shown: the dry-run diff the person approved (the write is refused if the target
                changed since, `StaleTargetError`).
            comment: the approver's comment.
            who: the approver (default `current_user()`).

        Returns:
            The written diff (`new_version` set).

        Raises:
            StaleTargetError: the registry topology changed since `shown` was made.
            ApplyError: the spec routes on a learned condition whose artefact is nowhere
                `learned_artefacts` looks (the proposal's run journal first), or the registry
                cannot be written (`"cannot write registry <root>:
                <why>"`: a read-only folder, a path below a file, a full disk).
            StoreError: the store is read-only.

        When any of these is raised nothing was written and no decision recorded: the proposal
        stays pending, to approve again once the cause is fixed, or to reject.
        """
        store = self.store
        if store.read_only:
            raise StoreError("the database is held by another process: nothing was written")
        by = who or current_user()
        artefacts: dict[str, LearnedCondition] = {}
        if learned_names(spec):  # from the run the proposal came from (its journal), first
            artefacts = self.learned_artefacts(spec, store.get_proposal(None, proposal_id).run_id)
        (done,) = apply_specs(
            {name: spec},
            self.registry,
            dry_run=False,
            expected=[shown],
            approval=Approval(by=by, comment=comment),
            note=f"proposal {proposal_id}",
            artefacts=artefacts,
        )
        store.record_approval(
            proposal_id,
            who=by,
            comment=comment,
            base_version=shown.base_version,
            applied_version=done.new_version,
        )
        return done

    def reject(self, proposal_id: int, *, comment: str = "", who: str | None = None) -> int:
        """Record a rejection of a proposal (nothing is written to the registry)."""
        return self.store.record_approval(
            proposal_id, who=who or current_user(), comment=comment, decision="rejected"
        )

    def dry_run(self, name: str, spec: TopologySpec) -> GeneDiff:
        """The diff writing `spec` as `name` would make (nothing is written)."""
        (shown,) = apply_specs({name: spec}, self.registry, dry_run=True)
        return shown

    def rollback(
        self, name: str, version: int, *, comment: str = "", who: str | None = None
    ) -> int:
        """Make an earlier version of a registry topology current again (as a new version),
        recorded as an approved proposal in the store when it is writable.

        Returns:
            The new version number.

        Raises:
            ApplyError: no such version, or the registry cannot be written (then nothing is
                recorded in the store).
        """
        by = who or current_user()
        spec = self.registry.get(name, version)
        base = self.registry.current_version(name)
        # the registry first: a refused write (ApplyError) leaves no proposal behind in the store
        rec = self.registry.rollback(
            name, version, base_version=base, approval=Approval(by=by, comment=comment)
        )
        store = self.store
        if not store.read_only:
            h = spec_hash(spec)
            store.put_spec(h, spec.model_dump_json())
            proposal_id = store.record_proposal(
                self.registry_target(name),
                spec.model_dump_json(),
                spec_hash=h,
                base_version=base,
                diff=f"rollback to v{version}",
                proposed_by=by,
            )
            store.record_approval(
                proposal_id,
                who=by,
                # the store's record says it was a rollback (the diff page labels it so)
                comment=f"rollback to v{version}" + (f": {comment}" if comment else ""),
                base_version=base,
                applied_version=rec.version,
            )
        return rec.version
