"""A replay state directory in use: the one place where ``replay`` and ``savepoint`` meet
persisted state.

:class:`StateSession` holds the directory's lock and its manifest, checks that the manifest
describes the state the caller is about to run (keys, strategy, backend, equalizer, TTL,
arity) and that a byte backend's database belongs to it, loads the state into a materializer,
and finds the committed :class:`~.recovery.Position` to go on from.

A run talks to it through one input-side API, so no caller computes a position:

1. :meth:`~StateSession.open_input` (this input against this directory): a :class:`Rerun`
   (nothing to do), or a :class:`RunStart` — the input positioned at the next line to apply,
   that line's stream index, and the output lengths a resumed run truncates to;
2. :meth:`~StateSession.begin`: the run is recorded; the materializer's commits are held;
3. per line, ``run.input.applied(line)`` once the line is applied (a line that stops the run
   is not), and at each commit point :meth:`~StateSession.commit` with what the caller counts
   (:class:`Applied`: clock, misses, output lengths, arity);
4. :meth:`~StateSession.finish`: completed, or stopped so the same command resumes it.

The position is the applied lines' count, bytes and SHA-256 plus the caller's counts: a
stopped run's position covers exactly the lines it applied. Heap state is saved as a
snapshot named by the manifest; byte backends commit the position inside their own database
(atomically with the state) and the manifest is brought up to date when a run starts and
ends. The rules a restart follows are in docs/operations.md ("Crash recovery").

The front ends are thin shells over it: ``replay`` opens a session with its own keys and
settings; ``savepoint`` opens an existing one with :meth:`StateSession.existing` (keys and
settings come from the manifest) and exports the attached state; ``restore`` opens a new one,
loads a savepoint into the attached materializer and seals it with :meth:`restored`. Whether
the state lives in a heap snapshot or in a database is this module's business only.
"""

from __future__ import annotations

import os
import secrets
import shutil
from dataclasses import dataclass, replace
from pathlib import Path
from typing import IO

from ...spec import Keys, Materializer, equalizer_spec, parse_equalizer
from ...spec.conflict import ConflictBehavior
from ..config import BACKEND, CONFLICT_STRATEGY, STRATEGY, TTL
from ..documents import RunRecord
from ..lifecycle import Partition, export_state, import_state, supports_transfer
from ..settings import DEFAULT_CHECKPOINT_INTERVAL, Backend, Settings, Strategy
from ..state import backend_database
from .errors import StateDirError, UnsupportedStateDir
from .inputs import EMPTY_SHA256, AppliedInput, is_regular, match_runs
from .recovery import Position, PositionRecord
from .statedir import Manifest, StateDir, io_failure, ttl_from_record, ttl_record, ttl_text


@dataclass(frozen=True)
class RunStart:
    """Where a run over an input starts (:meth:`StateSession.open_input`).

    ``input`` yields the input's lines from the next one to apply; mark each applied line
    with ``input.applied(line)`` (a line that stops the run is not marked). ``index`` is the
    stream index (``in``) of that next line and ``number`` its line number in this input
    (from 1, blank lines included). A ``resumed`` run goes on with the unfinished run: its
    ``-o FILE`` (``output_bytes``; None: it was stdout), dead-letter file
    (``dead_letter_bytes``; None: there was none) and ``--misses`` file (``misses_bytes``;
    None: there was none) are to be truncated to the lengths committed with the position.
    ``note``: something to tell the user (all lines of a ``--stream-line`` input were applied
    before).
    """

    input: AppliedInput
    index: int
    number: int
    resumed: bool
    output_bytes: int | None
    dead_letter_bytes: int | None
    note: str | None = None
    misses_bytes: int | None = None


@dataclass(frozen=True)
class Rerun:
    """The input is the whole input of a finished run: nothing to do (``message`` says which run)."""

    message: str


@dataclass(frozen=True)
class Applied:
    """What the lines a run applied so far produced, as its caller counts them (this run only):
    the greatest clock line (``now``; 0 if none), the rule-7 misses, the lengths of ``-o FILE``
    (None for stdout), of the dead-letter file (None if absent) and of the ``--misses`` file
    (None if none), and the stream's arity."""

    now: int = 0
    misses: int = 0
    output_bytes: int | None = None
    dead_letter_bytes: int | None = None
    arity: int | None = None
    misses_bytes: int | None = None


@dataclass
class _Run:
    """The run a session is in: its input, the position it starts from, its first stream line."""

    input: AppliedInput
    base: Position
    first_line: int
    new: bool


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
        self._run: _Run | None = None
        self._input_name = "-"
        self._adopt_ttl: bool | None = None  # existing(): None; else whether a TTL was given
        self._new_only = False  # new(): a directory with state is refused as such

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

    @classmethod
    def new(cls, path: Path, keys: Keys, settings: Settings, arity: int | None) -> StateSession:
        """A session that creates the state directory ``path`` (for ``restore``): entering it
        refuses a directory that holds replay state already, naming that state, whatever its
        settings (not as a mismatch with these)."""
        session = cls(path, keys, settings, arity)
        session._new_only = True
        return session

    @property
    def partition(self) -> Partition | None:
        """The key groups the state owns when it was restored as one instance of several
        (None: all). Changes of other keys must not be applied to it."""
        return None if self.manifest is None else self.manifest.partition

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
        if self._new_only and found is not None:
            held = f"{found.strategy}/{found.backend} at stream line {found.lines}"
            if found.partition is not None:
                held += f", {found.partition}"
            raise StateDirError(
                f"{self.path} already holds replay state ({held}, {self.directory.manifest_path}); restore "
                f"creates a new state directory: give a new or empty --state-dir, or remove {self.path} first"
            )
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

    # -- a run: the input side ----------------------------------------------------------------

    def open_input(self, source: IO[bytes], name: str, *, stream_line: int | None = None) -> RunStart | Rerun:
        """Open the input ``source`` (named ``name`` as the user gave it; ``-`` for stdin)
        against this directory: where the run over it starts, or :class:`Rerun` when it was
        applied completely already. Call after :meth:`attach`.

        The rules (docs/cli.md, "Rerunning is always safe"): an unfinished last run is resumed
        when ``source`` begins with exactly the bytes it applied (skipped here); a regular
        file that is a finished run's whole input is a rerun; anything else is a new run from
        the stream's position. ``stream_line`` (``--stream-line``) is the stream index of the
        input's first line: lines before the position are skipped as applied. StateDirError
        for an input that cannot be either (another input for an unfinished run, a file that
        grew, stdin without ``stream_line`` after the first run, a ``stream_line`` beyond the
        position). Reads the skipped part of ``source``, and a regular file once more to tell
        a rerun; O(size of what it reads).
        """
        assert self.manifest is not None and self.position is not None, "attach() first"
        manifest, position = self.manifest, self.position
        applied = AppliedInput(source)
        self._input_name = "-" if name == "-" else os.path.abspath(name)
        if stream_line is not None:
            if stream_line > position.lines:
                raise StateDirError(
                    f"--stream-line {stream_line} is beyond the state directory's position: it has applied "
                    f"stream lines 0 to {position.lines - 1} (the next is {position.lines}); lines would be "
                    "missing"
                )
            if (
                manifest.in_progress
                and stream_line == manifest.run_start
                and manifest.input_sha256 is not None
            ):
                return self._resume(applied, by_digest=False)
            return self._new_run(applied, stream_line)
        if manifest.in_progress:
            # A killed run of an upsertmat that recorded no digest is resumed by its line count.
            return self._resume(applied, by_digest=manifest.input_sha256 is not None)
        if not is_regular(source):
            if position.lines:
                raise StateDirError(
                    "cannot tell a rerun from a continuation: the input is not a regular file (stdin or a "
                    f"pipe) and {self.path} has applied {position.lines} stream line(s) already; "
                    "pass --stream-line N, the stream index of this input's first line "
                    f"(N={position.lines} to continue the stream; a smaller N skips lines already applied)"
                )
            return self._new_run(applied, position.lines)
        match = match_runs(source, manifest.runs)
        if match is not None:
            kind, run = match
            last = run.first_line + run.lines - 1
            if kind == "rerun":
                return Rerun(
                    f"{name} was already applied completely by run {run.run} (stream lines "
                    f"{run.first_line} to {last}); nothing to do: {self.path} and the output are unchanged"
                )
            raise StateDirError(
                f"{name} begins with the whole input of run {run.run} (stream lines {run.first_line} to "
                f"{last}) and has more: to apply only its new lines, pass --stream-line {run.first_line}; "
                f"to apply all of it again as new stream lines, pass --stream-line {position.lines}"
            )
        return self._new_run(applied, position.lines)

    def _resume(self, applied: AppliedInput, *, by_digest: bool) -> RunStart:
        """Go on with the unfinished run: skip what it applied (checked by digest, or by line
        count for a run with a ``--stream-line`` or of an older upsertmat)."""
        assert self.manifest is not None and self.position is not None
        manifest, position = self.manifest, self.position
        if by_digest:
            if not (applied.skip(position.input_bytes) and applied.digest() == position.input_sha256):
                raise StateDirError(
                    f"{self.path} holds an unfinished run (run {manifest.run_id}, stopped after "
                    f"{position.input_bytes} bytes = stream line {position.lines} of its input "
                    f"{manifest.input}), and this input does not begin with those bytes: rerun it with the "
                    f"same input to finish it, or pass --stream-line {position.lines} to go on with this "
                    "input as new stream lines"
                )
        else:
            wanted = position.lines - manifest.run_start
            if applied.skip_lines(wanted) < wanted:
                raise StateDirError(
                    f"cannot resume the killed run on {self.path}: its checkpoint is {wanted} line(s) into "
                    "its input, but this input is shorter; resume with the same input"
                )
        self._run = _Run(applied, position, manifest.run_start, new=False)
        return RunStart(
            applied,
            index=position.lines,
            number=position.lines - manifest.run_start + 1,
            resumed=True,
            output_bytes=position.output_bytes,
            dead_letter_bytes=position.dead_letter_bytes,
            misses_bytes=position.misses_bytes,
        )

    def _new_run(self, applied: AppliedInput, first_line: int) -> RunStart:
        """A new run whose input's first line is stream line ``first_line`` (at most the
        position: the lines before the position are skipped, they were applied before)."""
        assert self.position is not None
        wanted = self.position.lines - first_line
        skipped = applied.skip_lines(wanted)
        note = None
        if skipped < wanted:
            note = f"all {skipped} line(s) of the input were applied before (--stream-line); nothing to do"
        self._run = _Run(applied, self.position, first_line, new=True)
        return RunStart(
            applied,
            index=self.position.lines,
            number=skipped + 1,
            resumed=False,
            output_bytes=None,
            dead_letter_bytes=None,
            note=note,
        )

    # -- a run: commits ------------------------------------------------------------------------

    def begin(
        self, *, output_bytes: int | None, dead_letter_bytes: int | None, misses_bytes: int | None = None
    ) -> None:
        """Start the run :meth:`open_input` found: a new run is recorded (its number, first
        stream line and input, and the lengths of ``-o FILE`` — None for stdout —, of the
        dead-letter file — None if absent — and of the ``--misses`` file — None if none —
        that a resume truncates back to). From here on the materializer's commits are held
        until the next commit point."""
        run = self._run
        assert run is not None and self.manifest is not None, "open_input() first"
        if run.new:
            run_id = self.manifest.run_id + 1
            started = replace(
                run.base, run_id=run_id, output_bytes=output_bytes, dead_letter_bytes=dead_letter_bytes,
                misses_bytes=misses_bytes, input_bytes=0, input_sha256=EMPTY_SHA256, done=False,
                state_id=self.manifest.state_id,
            )  # fmt: skip
            manifest = replace(
                with_position(self.manifest, started),
                run_id=run_id,
                run_start=run.first_line,
                input=self._input_name,
            )
            self.manifest = self.directory.save(manifest, None, keep_snapshot=True)
            if self.record is not None:
                self.record.commit(started)
            run.base = self.position = started
        if self.record is not None:
            self.record.hold()

    def commit(self, materializer: Materializer, applied: Applied) -> None:
        """A commit point: the state after the lines applied so far becomes durable together
        with the position (``applied``: what they produced, as the caller counts it). Flush the
        output files first: the position records their lengths."""
        self._commit(self._position_of(applied, done=False), materializer, applied.arity)

    def finish(self, materializer: Materializer, applied: Applied, *, completed: bool) -> None:
        """The last commit point of a run: ``completed`` (the whole input applied: the run is
        recorded as finished, so the same input again is a rerun) or stopped (the same
        command again resumes it after its last applied line)."""
        assert self.manifest is not None
        position = self._position_of(applied, done=completed)
        self._commit(position, materializer, applied.arity)
        if self.record is not None:
            manifest = replace(with_position(self.manifest, position), arity=applied.arity)
            if position.done:
                manifest = self._finished(manifest, position)
            self.manifest = self.directory.save(manifest, None)

    def _position_of(self, applied: Applied, *, done: bool) -> Position:
        """The run's position after the lines its input marked applied."""
        run = self._run
        assert run is not None and self.manifest is not None, "begin() first"
        base, consumed = run.base, run.input
        return Position(
            run_id=base.run_id,
            lines=base.lines + consumed.lines,
            now=max(base.now, applied.now),
            misses=base.misses + applied.misses,
            output_bytes=applied.output_bytes,
            input_bytes=consumed.bytes,
            input_sha256=consumed.digest(),
            dead_letter_bytes=applied.dead_letter_bytes,
            done=done,
            state_id=self.manifest.state_id,
            misses_bytes=applied.misses_bytes,
        )

    def _commit(self, position: Position, materializer: Materializer, arity: int | None) -> None:
        """Make the state after ``position`` durable together with it."""
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

    def restored(
        self,
        materializer: Materializer,
        *,
        lines: int,
        now: int,
        misses: int,
        runs: tuple[RunRecord, ...],
        partition: Partition | None = None,
    ) -> None:
        """Seal a new directory whose attached ``materializer`` was loaded from a savepoint:
        the stream at line ``lines`` with clock ``now`` and ``misses`` rule-7 misses, ``runs``
        (the savepoint's completed runs, so reruns of them stay recognisable) and the key
        groups it owns (``partition``; None: all) become the committed state. Only on a fresh
        session."""
        assert self.manifest is not None and self.fresh
        position = Position(
            run_id=0, lines=lines, now=now, misses=misses, output_bytes=None, input_bytes=0,
            input_sha256=EMPTY_SHA256, dead_letter_bytes=None, done=True, state_id=self.manifest.state_id,
        )  # fmt: skip
        manifest = replace(
            with_position(self.manifest, position), arity=self.arity, runs=runs, partition=partition
        )
        if self.record is not None:
            self.record.commit(position)
            self.manifest = self.directory.save(manifest, None)
        else:
            self.manifest = self.directory.save(manifest, export_state(materializer))
        self.fresh = False

    def abandon(self) -> None:
        """Undo a fresh session that failed before it was sealed (a restore that met a full
        disk): remove the manifest, the database and the snapshots it wrote, manifest first,
        so the directory is fresh again and the same command can run again. Only on a fresh
        session, with its materializer closed. StateDirIOError if removing fails."""
        assert self.fresh, "only a fresh session is abandoned"
        database = backend_database(self.settings)
        try:
            self.directory.remove_state()
            if database is not None and database.parent.parent.is_dir():
                shutil.rmtree(database.parent.parent)  # STATE_DIR/<backend>: nothing else is there
        except OSError as error:
            raise io_failure(error, f"cannot remove what was written to {self.path}") from None

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
            misses_bytes=None,
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
        misses_bytes=manifest.misses_bytes,
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
        misses_bytes=position.misses_bytes,
        in_progress=not position.done,
    )
