"""A kiosk's bundle watcher: a background thread (no Qt) that polls a bundle source's latest.json,
downloads only the objects this kiosk lacks (holding the current version: the changed documents
and their rows), and installs the new version (engine.fleet.bundle,
which checks the signature and every hash, then switches state.json atomically).

    watcher = BundleWatcher(paths, open_source(settings.bundle_source), settings.bundle_keys,
                            poll_s=settings.bundle_poll_s)
    watcher.start()          # polls in the background from now on
    ...
    watcher.stop()           # at once: a download in progress stops between two chunks

A headless process uses start()/stop() and the watcher's own thread; the window owns the thread
instead (desktop_app/controllers/bundles.py) and calls poll_once(), next_wait(), cancel(), close().

The kiosk's assistant notices the switch itself: before each question it compares
`paths.collection(name)` with the folder its store has open, and reopens when they differ, so an
answer in flight finishes on the old version and the next one reads the new.

Polls are jittered: the first comes at a random moment within one interval, each next one after
between half and one whole interval. A thousand kiosks started together (a power cut, a rollout
of the app) would otherwise hit the server in the same second every interval, forever; spread
out, they ask at an even rate, and a published version is still seen within one interval.

Nothing here stops the kiosk: an unreachable source, a damaged download or a refused bundle is
logged and tried again at the next poll, while the current version keeps serving. A manifest
refused for its signature is not fetched again until latest.json names another one.
"""

from __future__ import annotations

import hashlib
import logging
import random
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

from engine.errors import EngineError
from engine.fleet.source import Cancelled, ObjectMismatch, SourceError
from engine.paths import AppPaths

log = logging.getLogger(__name__)

JITTER = (0.5, 1.0)  # each wait is this share of the interval, drawn at random


@dataclass
class PollResult:
    """What one poll did: 'current' (nothing newer), 'installed', 'refused' or 'failed'."""

    outcome: str
    version: int | None = None
    detail: str = ""
    bytes_moved: int = 0
    objects_moved: int = 0


@dataclass
class WatcherStats:
    polls: int = 0
    installs: int = 0
    refusals: int = 0
    failures: int = 0
    bytes_moved: int = 0
    last: PollResult | None = None
    history: list = field(default_factory=list)  # the PollResults other than 'current'


class BundleWatcher:
    """Polls `source` every `poll_s` seconds (jittered) on its own thread and installs what is new."""

    def __init__(self, paths: AppPaths, source, trusted_keys, poll_s: float = 60.0, *,
                 on_result=None, rng: random.Random | None = None):
        self.paths = paths
        self.source = source
        self.trusted_keys = list(trusted_keys)
        self.poll_s = float(poll_s)
        self.on_result = on_result  # called on the watcher's thread with each PollResult but 'current'
        self.stats = WatcherStats()
        self._rng = rng or random.Random()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._refused: set[str] = set()  # digests of manifests refused for their signature

    # -- the thread -----------------------------------------------------------------------------
    def start(self) -> BundleWatcher:
        if self._thread is None:
            self._thread = threading.Thread(target=self._loop, name="bundle-watcher", daemon=True)
            self._thread.start()
        return self

    def stop(self, timeout_s: float = 10.0) -> None:
        self.cancel()
        if self._thread is not None:
            self._thread.join(timeout_s)
            self._thread = None
        self.close()

    def cancel(self) -> None:
        """No more polls; a download in progress stops between two chunks (any thread)."""
        self._stop.set()

    @property
    def cancelled(self) -> bool:
        return self._stop.is_set()

    def close(self) -> None:
        """Closes the source, once nothing polls any more."""
        close = getattr(self.source, "close", None)
        if close is not None:
            close()

    def next_wait(self, first: bool = False) -> float:
        """Seconds until the next poll: within one interval, never in step with other kiosks."""
        low, high = (0.0, 1.0) if first else JITTER
        return self.poll_s * self._rng.uniform(low, high)

    def _loop(self) -> None:
        wait = self.next_wait(first=True)
        while not self._stop.wait(wait):
            self.poll_once()
            wait = self.next_wait()

    # -- one poll -------------------------------------------------------------------------------
    def poll_once(self) -> PollResult:
        """Looks at the source once and installs what is newer; never raises (a kiosk keeps going)."""
        try:
            result = self._poll()
        except Cancelled as exc:
            result = PollResult("failed", detail=str(exc))
        except (ObjectMismatch, _Refused) as exc:  # seen here, before install: audited here
            result = PollResult("refused", getattr(exc, "version", None), str(exc))
            self._audit_refusal(result)
        except EngineError as exc:  # BundleError (refused by install) or SourceError
            refused = _is_bundle_error(exc)
            result = PollResult("refused" if refused else "failed", detail=str(exc))
        except Exception as exc:  # a bug: logged with its traceback, tried again next time
            log.exception("bundle watcher: the poll failed unexpectedly")
            result = PollResult("failed", detail=f"unexpected: {exc}")
        self._record(result)
        return result

    def _poll(self) -> PollResult:
        from engine.errors import BundleError
        from engine.fleet.kiosk import DeltaError, delta_base, install_version, needed_objects, read_state

        latest = self.source.latest()
        state = read_state(self.paths, latest.collection)
        current = state["current"]
        newest_here = max(v for v in (current, state["rolled_back"], 0) if v is not None)
        if latest.version <= newest_here:  # rolled back here: only a newer version is taken
            return PollResult("current", current)
        raw, signature = self.source.manifest(latest.version)
        digest = hashlib.sha256(raw + signature).hexdigest()
        if digest in self._refused:
            return PollResult("current", current, "the newest version here was refused before")
        try:
            manifest = _verified(raw, signature, self.trusted_keys, f"{self.source} version {latest.version}")
        except EngineError as exc:
            self._refused.add(digest)
            raise _Refused(f"version {latest.version} from {self.source}: {exc}", latest.version) from exc
        if manifest.collection != latest.collection or manifest.version != latest.version:
            self._refused.add(digest)
            raise _Refused(f"{self.source}: latest.json names {latest.collection} {latest.version}, its "
                           f"manifest {manifest.collection} {manifest.version}", latest.version)
        moved, count = self._download(needed_objects(manifest, delta_base(self.paths, manifest)))
        started = time.monotonic()
        try:
            try:
                install_version(self.paths, manifest, self.paths.fleet_objects, self.trusted_keys)
            except DeltaError as exc:  # the version here is not the one the bundle follows: all its rows
                log.warning("%s; installing it from all of its rows", exc)
                more, extra = self._download(manifest.objects())
                moved, count = moved + more, count + extra
                install_version(self.paths, manifest, self.paths.fleet_objects, self.trusted_keys, fresh=True)
        except BundleError:  # audited by install_version; not tried again until latest.json changes
            self._refused.add(digest)
            raise
        log.info("bundle %s version %d installed from %s in %.1f s (%d objects, %d bytes downloaded)",
                 manifest.collection, manifest.version, self.source, time.monotonic() - started, count, moved)
        return PollResult("installed", manifest.version, bytes_moved=moved, objects_moved=count)

    def _download(self, needed: dict) -> tuple[int, int]:
        """Fetches the objects in `needed` ({sha256: entry}) this kiosk lacks: (bytes moved, objects
        fetched)."""
        objects = self.paths.fleet_objects
        objects.mkdir(parents=True, exist_ok=True)
        moved = count = 0
        for entry in needed.values():
            target = objects / entry.sha256
            if target.is_file() and target.stat().st_size == entry.size:
                continue  # held already (the install checks its hash again)
            moved += self.source.fetch_object(entry.sha256, Path(f"{target}.part"), entry.size, self._stop)
            count += 1
        return moved, count

    def _audit_refusal(self, result: PollResult) -> None:
        from engine.fleet.records import record

        record(self.paths, "refused", version=result.version, source=str(self.source), reason=result.detail)

    def _record(self, result: PollResult) -> None:
        stats = self.stats
        stats.polls += 1
        stats.last = result
        stats.bytes_moved += result.bytes_moved
        if result.outcome == "current":
            return
        stats.history.append(result)
        if result.outcome == "installed":
            stats.installs += 1
        elif result.outcome == "refused":
            stats.refusals += 1
            log.warning("bundle refused: %s (the current version keeps serving)", result.detail)
        else:
            stats.failures += 1
            log.warning("bundle update failed: %s; trying again at the next poll", result.detail)
        if self.on_result is not None:
            try:
                self.on_result(result)
            except Exception:  # a listener's bug must not stop the watcher
                log.exception("bundle watcher: on_result failed")


class _Refused(SourceError):
    def __init__(self, message: str, version: int | None):
        super().__init__(message)
        self.version = version


def _verified(raw: bytes, signature: bytes, trusted_keys, origin: str):
    """The manifest, once its signature is checked: before any object is downloaded, so a forged
    one costs a kiosk a few kilobytes, not a bundle."""
    from engine.fleet.manifest import Manifest, check_signature

    manifest = Manifest.from_bytes(raw, signature, origin=origin)
    check_signature(manifest, trusted_keys)
    return manifest


def _is_bundle_error(exc: Exception) -> bool:
    from engine.errors import BundleError

    return isinstance(exc, BundleError)


def watcher_from_settings(paths: AppPaths, settings, **kwargs) -> BundleWatcher | None:
    """A watcher for settings.bundle_source (None when unset), trusting settings.bundle_keys and
    DATA/fleet/trusted_keys."""
    from engine.fleet.bundle import trusted_keys
    from engine.fleet.source import open_source

    if not settings.bundle_source:
        return None
    return BundleWatcher(paths, open_source(settings.bundle_source), trusted_keys(paths, settings.bundle_keys),
                         poll_s=settings.bundle_poll_s, **kwargs)
