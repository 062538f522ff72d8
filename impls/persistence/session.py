"""A replay state directory in use: the one place where ``replay`` and ``savepoint`` meet
persisted state.

:class:`StateSession` holds the directory's lock and its manifest, checks that the manifest
describes the state the caller is about to run (keys, strategy, backend, equalizer, TTL,
arity) and that a byte backend's database belongs to it, loads the state into a materializer,
and finds the committed :class:`~.recovery.Position` to go on from. From then on the
caller hands it positions: :meth:`start_run`, :meth:`commit`, :meth:`finish`. Heap state is
saved as a snapshot named by the manifest; byte backends commit the position inside their own
database (atomically with the state) and the manifest is brought up to date when a run starts
and ends. The rules a restart follows are in docs/operations.md ("Crash recovery").

The front ends are thin shells over it: ``replay`` opens a session with its own keys and
settings; ``savepoint`` opens an existing one with :meth:`StateSession.existing` (keys and
settings come from the manifest) and exports the attached state; ``restore`` opens a new one,
loads a savepoint into the attached materializer and seals it with :meth:`restored`. Whether
the state lives in a heap snapshot or in a database is this module's business only.
"""

from __future__ import annotations

import secrets
from dataclasses import replace
from pathlib import Path

from ...spec import Keys, Materializer, equalizer_spec, parse_equalizer
from ...spec.conflict import ConflictBehavior
from ..config import BACKEND, CONFLICT_STRATEGY, STRATEGY, TTL
from ..lifecycle import export_state, import_state, supports_transfer
from ..settings import DEFAULT_CHECKPOINT_INTERVAL, Backend, Settings, Strategy
from ..state import backend_database
from .errors import StateDirError, UnsupportedStateDir
from .recovery import EMPTY_SHA256, Position, PositionRecord
from .statedir import Manifest, RunRecord, StateDir, ttl_from_record, ttl_record, ttl_text


def columns_text(columns: tuple[int, ...]) -> str:
    """``(0, 2)`` -> ``"0,2"``."""
    return ",".join(str(column) for column in columns)


class StateSession:
    """An open, locked state directory for one run. Use as a context manager."""

    def __init__(self, path: Path, keys: Keys, settings: Settings, arity: int | None) -> None:
        """A session for ``keys`` and ``settings`` (the manifest must agree, or is created).

        ``settings`` is taken as given except ``state_dir``, which this session sets to
        ``path`` for a backend that keeps its database there: create the materializer from
        :attr:`settings`.
        """
        self.directory = StateDir(path)
        self.keys = keys
        self.settings = _in_directory(settings, path)
        self.arity = arity
        self.manifest: Manifest | None = None
        self.fresh = False  # no manifest yet: a new state directory
        self.record: PositionRecord | None = None
        self.position: Position | None = None  # the committed position to go on from
        self._adopt_ttl: bool | None = None  # existing(): None; else whether a TTL was given

    @classmethod
    def existing(cls, path: Path, settings: Settings, *, ttl_given: bool) -> StateSession:
        """A session on the state directory ``path`` as it is: keys, strategy, backend,
        conflict strategy and TTL come from its manifest (the rest of ``settings`` is used).

        Entering it refuses a directory without replay state, and a TTL that was given
        (``ttl_given``) and differs from the recorded one.
        """
        session = cls(path, Keys(pk=(0,)), settings, None)
        session._adopt_ttl = ttl_given
        return session

    def checkpoint_interval(self, requested: int | None) -> int | None:
        """Lines between two commit points of a run: ``requested`` if given, else the default
        of where the state lives: :data:`DEFAULT_CHECKPOINT_INTERVAL` for a byte backend's
        database (a commit writes what changed), None for heap state (a commit writes a whole
        snapshot: only when the run stops)."""
        if requested is not None:
            return requested
        return DEFAULT_CHECKPOINT_INTERVAL if self.settings.state_dir is not None else None

    @property
    def in_database(self) -> bool:
        """True once :meth:`attach` found the state in a byte backend's database (its
        position committed with it); False for heap state kept as snapshots."""
        return self.record is not None

    @property
    def path(self) -> Path:
        """The state directory."""
        return self.directory.path

    def __enter__(self) -> StateSession:
        self.directory.open()
        try:
            self._load()
        except BaseException:
            self.directory.close()
            raise
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.directory.close()

    # -- opening -----------------------------------------------------------------------------

    def _identity(self) -> Manifest:
        equalizer = self.keys.equalizer
        return Manifest(
            pk=self.keys.pk,
            upsert_key=self.keys.upsert_key,
            strategy=self.settings.strategy.value,
            backend=self.settings.backend.value,
            equalizer=equalizer_spec(equalizer),
            equalizer_fingerprint=equalizer.fingerprint,
            arity=self.arity,
            ttl=ttl_record(self.settings.ttl),
            state_id=secrets.token_hex(8),
            conflict=self.settings.conflict.value,
        )

    def _load(self) -> None:
        """Load the manifest (or start a new one); refuse one that does not match this run."""
        found = self.directory.load_manifest()
        if self._adopt_ttl is not None:
            self._adopt(found, self._adopt_ttl)
        wanted = self._identity()
        if found is None:
            self.manifest, self.fresh = wanted, True
            return
        where = f"(state in {self.directory.manifest_path})"
        checks = (
            ("--pk", columns_text(wanted.pk), columns_text(found.pk)),
            (
                "--upsert-key",
                columns_text(wanted.upsert_key) or "(none)",
                columns_text(found.upsert_key) or "(none)",
            ),
            (f"strategy ({STRATEGY})", wanted.strategy, found.strategy),
            (f"conflict strategy ({CONFLICT_STRATEGY})", wanted.conflict, found.conflict or "DEDUPLICATE"),
            (f"backend ({BACKEND})", wanted.backend, found.backend),
            (
                "--equalizer",
                f"{wanted.equalizer} ({wanted.equalizer_fingerprint})",
                f"{found.equalizer} ({found.equalizer_fingerprint})",
            ),
        )
        for what, ours, theirs in checks:
            if ours != theirs:
                raise StateDirError(
                    f"this run's {what} is {ours} but the state directory's is {theirs} {where}; "
                    "run with the same settings, or use another --state-dir"
                )
        if found.ttl is not None and found.ttl != wanted.ttl:
            raise StateDirError(
                f"this run's TTL ({TTL} and the ttl settings) is {ttl_text(self.settings.ttl)} but the "
                f"state directory's is {ttl_text(ttl_from_record(found.ttl))} {where}; stamps would change "
                "meaning: run with the same TTL settings, or migrate through a savepoint"
            )
        if wanted.arity is not None and found.arity is not None and wanted.arity != found.arity:
            raise StateDirError(
                f"this run's --arity is {wanted.arity} but the stream's arity is {found.arity} {where}"
            )
        if found.arity is not None:
            self.arity = found.arity
        if self.settings.backend is not Backend.HEAP and (found.lines or found.run_id):
            database = backend_database(self.settings)
            if database is not None and not database.is_dir():
                raise StateDirError(
                    f"damaged state: {self.directory.manifest_path} says {found.lines} line(s) were "
                    f"applied, but the {found.backend} database {database} is missing; refusing to start "
                    "from empty state (restore the directory, or a savepoint into a new --state-dir)"
                )
        self.manifest = replace(
            found,
            ttl=found.ttl or wanted.ttl,
            state_id=found.state_id or wanted.state_id,
            conflict=found.conflict or wanted.conflict,
        )

    def _adopt(self, found: Manifest | None, ttl_given: bool) -> None:
        """Take keys and settings from ``found`` (:meth:`existing`)."""
        if found is None:
            raise StateDirError(f"{self.path} holds no replay state (no manifest.json)")
        where = self.directory.manifest_path
        keys = recorded_keys(found.pk, found.upsert_key, found.equalizer, found.equalizer_fingerprint, where)
        try:
            settings = replace(
                self.settings,
                strategy=Strategy(found.strategy),
                backend=Backend(found.backend),
                conflict=ConflictBehavior(found.conflict or "DEDUPLICATE"),
            )
        except ValueError as error:
            raise StateDirError(f"{where}: {error}") from None
        if found.ttl is not None:
            recorded = ttl_from_record(found.ttl)
            if ttl_given and settings.ttl != recorded:
                raise StateDirError(
                    f"the TTL given is {ttl_text(settings.ttl)} but {self.path} was written with "
                    f"{ttl_text(recorded)}; omit the TTL options (the state directory's are used)"
                )
            settings = replace(settings, ttl=recorded)
        self.keys, self.settings, self.arity = keys, _in_directory(settings, self.path), found.arity

    def attach(self, materializer: Materializer) -> Position:
        """Load the state into ``materializer`` and return the committed position to go on from.

        Heap: the manifest's snapshot and position. Byte backends: the position committed in
        the database, reconciled with the manifest (a run killed after its final commit but
        before its manifest was saved is completed here; a manifest older than the database,
        or a database of another state, is refused).
        """
        assert self.manifest is not None
        manifest = self.manifest
        if self.settings.backend is Backend.HEAP:
            if not supports_transfer(materializer):
                what = f"{self.settings.strategy.value}/heap"
                if self.settings.conflict.compacting:
                    what = f"ON CONFLICT DO {self.settings.conflict.value} on heap"
                raise UnsupportedStateDir(
                    f"{what} cannot export its state, so it cannot be used with --state-dir; use "
                    "--backend rocksdb or lmdb"
                )
            import_state(materializer, self.directory.load_snapshot(manifest, self.keys), manifest.now)
            self.position = position_of(manifest)
        else:
            self.record = PositionRecord.attach(materializer)
            if self.record is None:
                raise UnsupportedStateDir(
                    f"{self.settings.strategy.value}/{self.settings.backend.value} cannot commit the "
                    "replay position with its state, so it cannot be used with --state-dir"
                )
            self.position = self._reconcile(self.record)
            if self.position.now:
                materializer.advance_time(self.position.now)
        return self.position

    def _reconcile(self, record: PositionRecord) -> Position:
        assert self.manifest is not None
        manifest = self.manifest
        where = f"{self.directory.manifest_path} and the {manifest.backend} database in {self.path}"
        committed = record.read()
        if self.fresh and committed is not None:
            raise StateDirError(
                f"{self.path} has no manifest.json but its {manifest.backend} database holds committed "
                "state: the manifest was lost; refusing to start from it (restore a savepoint into a new "
                "--state-dir)"
            )
        if committed == "legacy":
            if manifest.in_progress:
                raise StateDirError(
                    f"the last run on {self.path} was killed while an older upsertmat ran it; "
                    "finish it with that version, or restore a savepoint into a new --state-dir"
                )
            return position_of(manifest)
        if committed is None:
            if manifest.lines and not manifest.in_progress:
                raise StateDirError(
                    f"damaged state: {where} disagree: the manifest says {manifest.lines} line(s) were "
                    "applied, the database holds no committed position; refusing to go on"
                )
            return position_of(manifest)
        if manifest.state_id is not None and committed.state_id not in (None, manifest.state_id):
            raise StateDirError(
                f"damaged state: {where} belong to different states (the database was replaced); "
                "refusing to mix them"
            )
        if committed.run_id > manifest.run_id or (
            committed.run_id == manifest.run_id and committed.lines < manifest.lines
        ):
            raise StateDirError(
                f"damaged state: {where} disagree: the manifest (run {manifest.run_id}, {manifest.lines} "
                f"line(s)) is not the one of the database (run {committed.run_id}, {committed.lines} "
                "line(s)): an older or newer manifest was put in place; refusing to go on"
            )
        if committed.run_id < manifest.run_id:
            if not manifest.in_progress:
                raise StateDirError(
                    f"damaged state: {where} disagree: the database is older (run {committed.run_id}) than "
                    f"the manifest (run {manifest.run_id}); refusing to go on"
                )
            return position_of(manifest)  # the run began; it committed nothing yet
        if committed.done and manifest.in_progress:
            # Killed after the run's final commit, before its manifest was saved: complete it.
            self.manifest = self.directory.save(self._finished(manifest, committed), None)
        elif not committed.done and not manifest.in_progress and committed.lines != manifest.lines:
            raise StateDirError(f"damaged state: {where} disagree on where the stream is; refusing to go on")
        return committed

    # -- a run -------------------------------------------------------------------------------

    def start_run(self, position: Position, run_start: int, input_name: str) -> Position:
        """Record a new run beginning at stream line ``run_start`` from ``position`` (its clock,
        misses and output lengths); returns the run's first position (with the new run id)."""
        assert self.manifest is not None
        run_id = self.manifest.run_id + 1
        started = replace(
            position, run_id=run_id, input_bytes=0, input_sha256=EMPTY_SHA256, done=False,
            state_id=self.manifest.state_id,
        )  # fmt: skip
        manifest = replace(
            with_position(self.manifest, started), run_id=run_id, run_start=run_start, input=input_name
        )
        self.manifest = self.directory.save(manifest, None, keep_snapshot=True)
        if self.record is not None:
            self.record.commit(started)
        return started

    def hold(self) -> None:
        """Byte backends: hold the materializer's commits until the next :meth:`commit`."""
        if self.record is not None:
            self.record.hold()

    def commit(self, position: Position, materializer: Materializer, arity: int | None) -> None:
        """Make the state after ``position`` durable together with it (a commit point)."""
        assert self.manifest is not None
        if self.record is not None:
            self.record.commit(position)
            if not position.done:
                self.record.hold()
            return
        manifest = replace(with_position(self.manifest, position), arity=arity)
        if position.done:
            manifest = self._finished(manifest, position)
        self.manifest = self.directory.save(manifest, export_state(materializer))

    def finish(self, position: Position, materializer: Materializer, arity: int | None) -> None:
        """The last commit of a run: completed (``position.done``) or stopped (resumable)."""
        assert self.manifest is not None
        self.commit(position, materializer, arity)
        if self.record is not None:
            manifest = replace(with_position(self.manifest, position), arity=arity)
            if position.done:
                manifest = self._finished(manifest, position)
            self.manifest = self.directory.save(manifest, None)

    def restored(self, materializer: Materializer, position: Position, runs: tuple[RunRecord, ...]) -> None:
        """Seal a new directory whose attached ``materializer`` was loaded from a savepoint:
        ``position`` (a finished one) and ``runs`` (the savepoint's completed runs, so reruns
        of them stay recognisable) become the committed state. Only on a fresh session."""
        assert self.manifest is not None and self.fresh and position.done
        position = replace(position, run_id=0, state_id=self.manifest.state_id)
        manifest = replace(with_position(self.manifest, position), arity=self.arity, runs=runs)
        if self.record is not None:
            self.record.commit(position)
            self.manifest = self.directory.save(manifest, None)
        else:
            self.manifest = self.directory.save(manifest, export_state(materializer))
        self.fresh = False

    def _finished(self, manifest: Manifest, position: Position) -> Manifest:
        """``manifest`` with run ``position.run_id`` completed at ``position``."""
        run = RunRecord(
            run=position.run_id,
            first_line=manifest.run_start,
            lines=position.lines - manifest.run_start,
            input=manifest.input or "-",
            input_bytes=position.input_bytes,
            input_sha256=position.input_sha256,
        )
        return replace(
            with_position(manifest, position),
            arity=self.arity if self.arity is not None else manifest.arity,
            in_progress=False,
            output_bytes=None,
            runs=(*manifest.runs, run),
        )


def recorded_keys(
    pk: tuple[int, ...], upsert_key: tuple[int, ...], equalizer: str, fingerprint: str, where: Path
) -> Keys:
    """The keys a manifest at ``where`` records (a state directory's or a savepoint's);
    StateDirError if they are invalid or the equalizer's fingerprint differs from this
    upsertmat's (its meaning changed, so its state must not be mixed in)."""
    try:
        keys = Keys(pk=pk, upsert_key=upsert_key, equalizer=parse_equalizer(equalizer))
    except ValueError as error:
        raise StateDirError(f"{where}: {error}") from None
    if keys.equalizer.fingerprint != fingerprint:
        raise StateDirError(
            f"{where} records equalizer {equalizer} with fingerprint {fingerprint}, but this upsertmat's "
            f"{equalizer} has fingerprint {keys.equalizer.fingerprint}; refusing to mix them"
        )
    return keys


def _in_directory(settings: Settings, path: Path) -> Settings:
    """``settings`` with ``state_dir`` = ``path`` for a backend that keeps a database there."""
    if settings.backend in (Backend.ROCKSDB, Backend.LMDB):
        return replace(settings, state_dir=path)
    return settings


def position_of(manifest: Manifest) -> Position:
    """The position a manifest records (heap state, or a run that committed nothing yet)."""
    return Position(
        run_id=manifest.run_id,
        lines=manifest.lines,
        now=manifest.now,
        misses=manifest.retract_misses,
        output_bytes=manifest.output_bytes,
        input_bytes=manifest.input_bytes,
        input_sha256=manifest.input_sha256 or EMPTY_SHA256,
        dead_letter_bytes=manifest.dead_letter_bytes,
        done=not manifest.in_progress,
        state_id=manifest.state_id,
    )


def with_position(manifest: Manifest, position: Position) -> Manifest:
    """``manifest`` at ``position`` (in progress unless the position is ``done``)."""
    return replace(
        manifest,
        lines=position.lines,
        now=position.now,
        retract_misses=position.misses,
        output_bytes=position.output_bytes,
        input_bytes=position.input_bytes,
        input_sha256=position.input_sha256,
        dead_letter_bytes=position.dead_letter_bytes,
        in_progress=not position.done,
    )
