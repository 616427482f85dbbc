"""A bundle's manifest (manifest.json) and its Ed25519 signature (manifest.sig): parsing with
a clear error per wrong field, signing, and checking a signature against the trusted keys.

    manifest = Manifest.from_bytes(data, signature, origin="bundle.tar")   # BundleError if malformed
    check_signature(manifest, trusted_keys)                                # BundleError if not trusted

The signature covers manifest.json's exact bytes (`manifest.raw`), never a re-serialisation.
"""

from __future__ import annotations

import base64
import binascii
import json
import re
from dataclasses import dataclass, field
from datetime import UTC, datetime

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives.asymmetric.ed25519 import (
    Ed25519PrivateKey,
    Ed25519PublicKey,
)
from cryptography.hazmat.primitives.serialization import Encoding, PublicFormat

from engine.errors import BundleError

# 2: each document's rows as an object of its own, so an update moves the changed documents only
# (a kiosk applies them to the version it holds); 1 carried the whole database.
FORMAT = 2
MANIFEST_NAME = "manifest.json"
SIGNATURE_NAME = "manifest.sig"
KINDS = ("index", "document", "rows")
_FOLDERS = {"document": "documents/", "rows": "rows/"}
SHA256_PATTERN = re.compile(r"^[0-9a-f]{64}$")
_NAME_PATTERN = re.compile(r"^((documents|rows)/)?[^/\\\x00]+$")  # one level, no traversal


@dataclass(frozen=True)
class FileEntry:
    name: str  # the faiss file's name, "documents/<file name>" or "rows/<file name>"
    sha256: str
    size: int
    kind: str  # index | document | rows
    source_path: str = ""  # documents and rows: the document's path in the admin's collection

    def to_dict(self) -> dict:
        data = {"name": self.name, "sha256": self.sha256, "size": self.size, "kind": self.kind}
        if self.kind in _FOLDERS:
            data["source_path"] = self.source_path
        return data


@dataclass(frozen=True)
class Manifest:
    version: int
    collection: str
    embedder_id: str
    schema_version: int
    files: tuple[FileEntry, ...]
    created: str = ""
    signer: str = ""  # the signing public key (base64), so an untrusted key is told apart
    # The reranker the admin's app ranked passages with ('' for none): a record, not a check,
    # since the index does not depend on it (a kiosk reranks with its own).
    reranker_id: str = ""
    dimension: int = 0  # the embedder's, for the collection a kiosk assembles
    index_lists: int = 0  # the index's lists (0: exact); a kiosk whose index has others takes this one
    format: int = FORMAT
    raw: bytes = field(default=b"", repr=False, compare=False)  # the exact bytes signed
    signature: bytes = field(default=b"", repr=False, compare=False)
    origin: str = field(default="", compare=False)  # where it was read from, for messages

    def to_dict(self) -> dict:
        return {"format": self.format, "version": self.version, "created": self.created,
                "collection": self.collection, "embedder_id": self.embedder_id,
                "schema_version": self.schema_version, "signer": self.signer,
                "reranker_id": self.reranker_id, "dimension": self.dimension, "index_lists": self.index_lists,
                "files": [entry.to_dict() for entry in self.files]}

    def to_bytes(self) -> bytes:
        return json.dumps(self.to_dict(), indent=1, sort_keys=True, ensure_ascii=False).encode("utf-8")

    @property
    def total_bytes(self) -> int:
        return sum(entry.size for entry in self.objects().values())

    def objects(self) -> dict[str, FileEntry]:
        """{sha256: first entry with those bytes}: what a kiosk must hold to install this."""
        found: dict[str, FileEntry] = {}
        for entry in self.files:
            found.setdefault(entry.sha256, entry)
        return found

    def entry(self, kind: str) -> FileEntry | None:
        return next((entry for entry in self.files if entry.kind == kind), None)

    def by_source(self, kind: str) -> dict[str, FileEntry]:
        """{the document's path in the admin's collection: its entry} for documents or rows."""
        return {entry.source_path: entry for entry in self.files if entry.kind == kind}

    @classmethod
    def from_bytes(cls, data: bytes, signature: bytes = b"", origin: str = "") -> Manifest:
        where = origin or MANIFEST_NAME
        try:
            doc = json.loads(data.decode("utf-8"))
        except (UnicodeDecodeError, ValueError) as exc:
            raise BundleError(f"{where}: manifest.json is not valid JSON ({exc}).") from exc
        if not isinstance(doc, dict):
            raise BundleError(f"{where}: manifest.json must be a JSON object.")
        if doc.get("format") != FORMAT:
            raise BundleError(f"{where}: manifest format {doc.get('format')!r} is not supported (this app reads "
                              f"format {FORMAT}); build the bundle with a matching version of the app.")
        files = doc.get("files")
        if not isinstance(files, list):
            raise BundleError(f"{where}: manifest field 'files' must be a list.")
        entries = tuple(_entry(item, index, where) for index, item in enumerate(files))
        _check_entries(entries, where)
        return cls(version=_field(doc, "version", int, where), collection=_collection(doc, where),
                   embedder_id=_field(doc, "embedder_id", str, where),
                   schema_version=_field(doc, "schema_version", int, where), files=entries,
                   created=_field(doc, "created", str, where), signer=str(doc.get("signer", "")),
                   reranker_id=str(doc.get("reranker_id", "")), dimension=_field(doc, "dimension", int, where),
                   index_lists=_field(doc, "index_lists", int, where),
                   raw=bytes(data), signature=bytes(signature), origin=origin)


def _field(doc: dict, name: str, kind: type, where: str):
    value = doc.get(name)
    if not isinstance(value, kind) or isinstance(value, bool) or (kind is int and value < 0):
        raise BundleError(f"{where}: manifest field '{name}' must be a "
                          f"{'non-negative integer' if kind is int else 'string'}, not {value!r}.")
    return value


def _collection(doc: dict, where: str) -> str:
    name = _field(doc, "collection", str, where)
    if not name or name in (".", "..") or any(ch in name for ch in '/\\:') or name != name.strip():
        raise BundleError(f"{where}: manifest field 'collection' is not a valid name: {name!r}.")
    return name


def _entry(item, index: int, where: str) -> FileEntry:
    at = f"{where}: manifest files[{index}]"
    if not isinstance(item, dict):
        raise BundleError(f"{at} must be an object.")
    name, sha, size, kind = item.get("name"), item.get("sha256"), item.get("size"), item.get("kind")
    if not isinstance(name, str) or not _NAME_PATTERN.match(name) or name.endswith((".", " ")) \
            or name.split("/")[-1] in (".", ".."):
        raise BundleError(f"{at}: 'name' {name!r} is not a plain file name.")
    if not isinstance(sha, str) or not SHA256_PATTERN.match(sha):
        raise BundleError(f"{at} ({name}): 'sha256' must be 64 lowercase hex digits.")
    if not isinstance(size, int) or isinstance(size, bool) or size < 0:
        raise BundleError(f"{at} ({name}): 'size' must be a non-negative integer.")
    folder = next((f for f in _FOLDERS.values() if name.startswith(f)), "")
    if kind not in KINDS or _FOLDERS.get(kind, "") != folder:
        raise BundleError(f"{at} ({name}): 'kind' must be one of {', '.join(KINDS)} "
                          "(document exactly for documents/..., rows for rows/...).")
    source = item.get("source_path", "")
    if kind in _FOLDERS and (not isinstance(source, str) or not source):
        raise BundleError(f"{at} ({name}): a {kind} entry needs its 'source_path'.")
    return FileEntry(name, sha, size, kind, source if kind in _FOLDERS else "")


def _check_entries(entries: tuple[FileEntry, ...], where: str) -> None:
    names = [entry.name for entry in entries]
    if len(set(names)) != len(names):
        raise BundleError(f"{where}: manifest lists a file name twice.")
    count = sum(entry.kind == "index" for entry in entries)
    if count > 1:
        raise BundleError(f"{where}: manifest must list at most one index file, not {count}.")
    for kind in ("rows", "document"):
        sources = [entry.source_path for entry in entries if entry.kind == kind]
        if len(set(sources)) != len(sources):
            raise BundleError(f"{where}: manifest lists the {kind} of a document twice.")
    rows = {entry.source_path for entry in entries if entry.kind == "rows"}
    orphan = next((e.source_path for e in entries if e.kind == "document" and e.source_path not in rows), None)
    if orphan is not None:
        raise BundleError(f"{where}: manifest lists the document {orphan} without its rows.")
    sizes: dict[str, int] = {}
    for entry in entries:
        if sizes.setdefault(entry.sha256, entry.size) != entry.size:
            raise BundleError(f"{where}: manifest gives two sizes for object {entry.sha256}.")


# -- keys and signatures ---------------------------------------------------------------------------
def public_key_text(key: Ed25519PrivateKey | Ed25519PublicKey) -> str:
    """The raw 32-byte public key in base64: what kiosks list in their settings."""
    public = key.public_key() if isinstance(key, Ed25519PrivateKey) else key
    return base64.b64encode(public.public_bytes(Encoding.Raw, PublicFormat.Raw)).decode("ascii")


def parse_public_key(text: str, origin: str = "a trusted key") -> Ed25519PublicKey:
    try:
        raw = base64.b64decode(text.strip(), validate=True)
        return Ed25519PublicKey.from_public_bytes(raw)
    except (binascii.Error, ValueError) as exc:
        raise BundleError(f"{origin} {text!r} is not an Ed25519 public key (base64 of 32 bytes).") from exc


def sign(manifest_bytes: bytes, private_key: Ed25519PrivateKey) -> bytes:
    return private_key.sign(manifest_bytes)


def check_signature(manifest: Manifest, trusted_keys) -> str:
    """Returns the trusted key (base64) that signed `manifest.raw`; BundleError when it is
    unsigned, signed by a key not in `trusted_keys`, or the signature does not match."""
    where = manifest.origin or MANIFEST_NAME
    keys = {public_key_text(parse_public_key(key)): key for key in trusted_keys}
    if not keys:
        raise BundleError(f"{where}: no trusted bundle keys are set, so no bundle can be accepted; "
                          "add the publisher's public key to bundle_keys in the settings (or --trust).")
    if not manifest.signature:
        raise BundleError(f"{where}: the bundle is unsigned (no manifest.sig); build it with a key "
                          "(admin bundle build --key).")
    if manifest.signer and manifest.signer not in keys:
        raise BundleError(f"{where}: the bundle is signed by a key this machine does not trust "
                          f"({manifest.signer}); add it to bundle_keys if it is the publisher's.")
    candidates = [manifest.signer] if manifest.signer else list(keys)
    for key in candidates:
        try:
            parse_public_key(key).verify(manifest.signature, manifest.raw)
            return key
        except InvalidSignature:
            continue
    raise BundleError(f"{where}: wrong signature: manifest.json was changed after signing, or "
                      "manifest.sig is damaged.")


def utc_now() -> str:
    return datetime.now(UTC).replace(microsecond=0).isoformat().replace("+00:00", "Z")
