"""Where kiosks fetch bundles from: a folder (or a mounted network share) or an http(s) URL served
by any static web server, laid out as the administrator's `admin bundle publish` writes it:

    SOURCE/latest.json                  {"collection": NAME, "version": N}   what kiosks poll
    SOURCE/bundles/<N>/manifest.json    and manifest.sig (raw 64-byte Ed25519 signature)
    SOURCE/objects/<sha256>             every file's bytes, shared by all versions

    source = open_source("https://cdn.example/manuals")      # or "/mnt/share/manuals"
    latest = source.latest()                                  # Latest(collection, version)
    manifest_bytes, signature = source.manifest(latest.version)
    moved = source.fetch_object(sha, objects / f"{sha}.part", size=n)   # -> objects/<sha>

fetch_object resumes a .part left by a kill (HTTP Range, or a seek in a folder), checks the
SHA-256 of the whole file and only then renames it into place, so an object file is always
whole. A server that ignores Range (Python's http.server does) answers 200 with the whole
object: the .part is then rewritten from the start, so resume silently becomes a full download.
Nothing here trusts the source: the signature is checked by engine.fleet.bundle.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import threading
from dataclasses import dataclass
from pathlib import Path

import httpx

from engine.errors import EngineError

LATEST = "latest.json"
LATEST_MAX = 64 * 1024  # a latest.json bigger than this is not ours
MANIFEST_MAX = 32 * 1024 * 1024
SIGNATURE_SIZE = 64
CHUNK = 1024 * 1024
TIMEOUT_S = 30.0
_SHA = re.compile(r"[0-9a-f]{64}")
_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,127}")


class SourceError(EngineError):
    """The source could not be read, or gave something that is not a bundle source's: the
    watcher logs it and tries again at the next poll."""


class ObjectMismatch(SourceError):
    """An object's bytes do not have the hash they are named by: damaged or tampered with."""


class Cancelled(SourceError):
    """The download was stopped (the kiosk is closing); the .part stays for next time."""


@dataclass(frozen=True)
class Latest:
    collection: str
    version: int


def parse_latest(raw: bytes, where: str) -> Latest:
    """latest.json's content, or SourceError naming `where` and what is wrong."""
    try:
        data = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise SourceError(f"{where} is not JSON ({exc})") from exc
    if not isinstance(data, dict):
        raise SourceError(f"{where} must hold an object with 'collection' and 'version'")
    collection, version = data.get("collection"), data.get("version")
    if not isinstance(collection, str) or not _NAME.fullmatch(collection):
        raise SourceError(f"{where}: 'collection' must be a collection name, not {collection!r}")
    if not isinstance(version, int) or isinstance(version, bool) or version < 1:
        raise SourceError(f"{where}: 'version' must be a whole number above 0, not {version!r}")
    return Latest(collection, version)


def checked_sha(sha: str) -> str:
    """`sha` as an object name; anything else (a path, '..') is refused before it is used."""
    if not isinstance(sha, str) or not _SHA.fullmatch(sha):
        raise SourceError(f"{sha!r} is not an object name (64 lowercase hex digits)")
    return sha


def object_path(part: Path) -> Path:
    """Where a finished .part goes: the same name without '.part'."""
    part = Path(part)
    if part.suffix != ".part":
        raise ValueError(f"{part} must end with .part")
    return part.with_suffix("")


def open_source(where: str | Path) -> FolderSource | HttpSource:
    """A source for an http(s):// URL, a file:// URL or a folder path."""
    text = str(where).strip()
    if re.match(r"https?://", text, re.IGNORECASE):
        return HttpSource(text)
    if text.lower().startswith("file://"):
        text = text[len("file://"):]
    if not text:
        raise SourceError("The bundle source is empty; set a folder or an http(s):// URL")
    return FolderSource(Path(text))


class _Source:
    """What both kinds share: the resume, the hash check and the rename into place."""

    def fetch_object(self, sha: str, part: Path, size: int | None = None,
                     cancel: threading.Event | None = None) -> int:
        """Downloads object `sha` into `part` (resuming what a .part already holds), checks its
        hash (and size) and renames it to `part` without '.part'. Returns the bytes moved."""
        checked_sha(sha)
        part = Path(part)
        final = object_path(part)
        part.parent.mkdir(parents=True, exist_ok=True)
        have = part.stat().st_size if part.exists() else 0
        if size is not None and have > size:  # not a prefix of this object: start again
            part.unlink()
            have = 0
        moved = 0
        if size is None or have < size:
            moved = self._receive(sha, part, have, size, cancel)
        _place(part, final, sha, size, str(self))
        return moved

    def _receive(self, sha, part, have, size, cancel) -> int:
        raise NotImplementedError


def _append(part: Path, chunks, restart: bool, limit: int | None, cancel, where: str) -> int:
    """Writes `chunks` to the end of `part` (or over it when `restart`); stops past `limit`."""
    moved = 0
    with open(part, "wb" if restart else "ab") as out:
        for chunk in chunks:
            if cancel is not None and cancel.is_set():
                raise Cancelled(f"the download of {where} was stopped")
            out.write(chunk)
            moved += len(chunk)
            if limit is not None and out.tell() > limit:
                break  # more than the manifest says: the hash check refuses it
    return moved


def _place(part: Path, final: Path, sha: str, size: int | None, where: str) -> None:
    """Renames a whole, correct .part into place; deletes a wrong one (ObjectMismatch)."""
    digest = hashlib.sha256()
    with open(part, "rb") as data:
        while block := data.read(CHUNK):
            digest.update(block)
        length = data.tell()
        os.fsync(data.fileno())
    if digest.hexdigest() != sha or (size is not None and length != size):
        part.unlink()
        raise ObjectMismatch(f"The object {sha[:16]}… from {where} is damaged or was tampered with "
                             f"({length} bytes, sha256 {digest.hexdigest()[:16]}…); it was deleted")
    os.replace(part, final)


class FolderSource(_Source):
    """A source folder: local, or a network share mounted on the kiosk."""

    def __init__(self, folder: Path):
        self.folder = Path(folder)

    def __str__(self) -> str:
        return str(self.folder)

    def latest(self) -> Latest:
        path = self.folder / LATEST
        return parse_latest(self._read(path, LATEST_MAX), str(path))

    def manifest(self, version: int) -> tuple[bytes, bytes]:
        folder = self.folder / "bundles" / str(int(version))
        return (self._read(folder / "manifest.json", MANIFEST_MAX),
                self._read(folder / "manifest.sig", SIGNATURE_SIZE))

    def _receive(self, sha, part, have, size, cancel) -> int:
        path = self.folder / "objects" / sha
        try:
            with open(path, "rb") as data:
                data.seek(have)
                return _append(part, iter(lambda: data.read(CHUNK), b""), False, size, cancel, str(path))
        except FileNotFoundError as exc:
            raise SourceError(f"{path} is missing from the bundle source") from exc
        except OSError as exc:
            raise SourceError(f"Could not read {path} ({exc})") from exc

    def close(self) -> None:
        pass

    @staticmethod
    def _read(path: Path, limit: int) -> bytes:
        try:
            with open(path, "rb") as data:
                raw = data.read(limit + 1)
        except FileNotFoundError as exc:
            raise SourceError(f"{path} is missing from the bundle source") from exc
        except OSError as exc:
            raise SourceError(f"Could not read {path} ({exc})") from exc
        if len(raw) > limit:
            raise SourceError(f"{path} is larger than {limit} bytes: not a bundle source's file")
        return raw


class HttpSource(_Source):
    """A source URL served by any static web server (or a CDN) over http or https."""

    def __init__(self, url: str, timeout_s: float = TIMEOUT_S, transport=None):
        self.url = url.rstrip("/") + "/"
        # identity: a Range must count the bytes of the file, not of a compressed stream
        self._client = httpx.Client(timeout=timeout_s, follow_redirects=True, transport=transport,
                                    headers={"Accept-Encoding": "identity"})

    def __str__(self) -> str:
        return self.url

    def latest(self) -> Latest:
        # no-cache: a CDN in front must ask the origin whether latest.json changed
        return parse_latest(self._get(LATEST, LATEST_MAX, {"Cache-Control": "no-cache"}), self.url + LATEST)

    def manifest(self, version: int) -> tuple[bytes, bytes]:
        where = f"bundles/{int(version)}/"
        return self._get(where + "manifest.json", MANIFEST_MAX), self._get(where + "manifest.sig", SIGNATURE_SIZE)

    def _receive(self, sha, part, have, size, cancel) -> int:
        url = self.url + "objects/" + sha
        headers = {"Range": f"bytes={have}-"} if have else {}
        try:
            with self._client.stream("GET", url, headers=headers) as reply:
                if reply.status_code == 416:  # the .part is not a prefix: start again
                    part.unlink()
                    return self._receive(sha, part, 0, size, cancel)
                if reply.status_code not in (200, 206):
                    raise SourceError(f"{url}: HTTP {reply.status_code}")
                resumed = reply.status_code == 206 and _range_start(reply) == have
                if reply.status_code == 206 and not resumed:
                    raise SourceError(f"{url}: the server sent another range than the one asked for")
                return _append(part, reply.iter_bytes(CHUNK), not resumed, size, cancel, url)
        except httpx.HTTPError as exc:
            raise SourceError(f"Could not download {url} ({exc})") from exc

    def _get(self, name: str, limit: int, headers: dict | None = None) -> bytes:
        url = self.url + name
        try:
            with self._client.stream("GET", url, headers=headers) as reply:
                if reply.status_code != 200:
                    raise SourceError(f"{url}: HTTP {reply.status_code}")
                raw = bytearray()
                for chunk in reply.iter_bytes():
                    raw += chunk
                    if len(raw) > limit:
                        raise SourceError(f"{url} is larger than {limit} bytes: not a bundle source's file")
                return bytes(raw)
        except httpx.HTTPError as exc:
            raise SourceError(f"Could not read {url} ({exc})") from exc

    def close(self) -> None:
        self._client.close()


def _range_start(reply: httpx.Response) -> int | None:
    """The first byte of a 206 reply's Content-Range ('bytes 100-199/200' -> 100)."""
    match = re.match(r"bytes (\d+)-", reply.headers.get("content-range", ""))
    return int(match.group(1)) if match else None
