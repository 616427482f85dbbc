"""Index bundles: keys, reading and verifying a bundle, publishing it to a source, and the
public API of engine/fleet (built in snapshot.py, installed and switched in kiosk.py).

    generate_keys(private_path, public_path)          # Ed25519; the private file mode 0600
    build_bundle(paths, "R", load_private_key(p), Path("R-7.tar"))            -> Manifest
    verify_bundle("R-7.tar", trusted_keys(paths))     # BundleError naming what is wrong
    install_bundle(paths, "R-7.tar", trusted_keys(paths))                     -> version folder
    install_version(paths, manifest, paths.fleet_objects, keys)   # objects already downloaded
    needed_objects(manifest, delta_base(paths, manifest))     # what that needs: the changed documents
    publish_bundle("R-7.tar", "/srv/bundles")         # objects it lacks, then latest.json last
    switch(paths, "R", 7); rollback(paths, "R"); status(paths)

A bundle is a plain tar (or a folder) holding manifest.json, manifest.sig and objects/<sha256>
(each document's file and rows, and the dense index);
a bundle source is SOURCE/latest.json, SOURCE/bundles/<N>/manifest.{json,sig}, SOURCE/objects/.
Tar members are read one by one and checked; nothing is ever extracted by name from the tar.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import shutil
import tarfile
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import BinaryIO

from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from engine.atomic_file import write_atomic, write_json_atomic
from engine.errors import BundleError
from engine.fleet.kiosk import (  # noqa: F401
    DeltaError,
    builtin_embedder_id,
    delta_base,
    install_version,
    needed_objects,
    rollback,
    status,
    switch,
)
from engine.fleet.manifest import (
    MANIFEST_NAME,
    SHA256_PATTERN,
    SIGNATURE_NAME,
    Manifest,
    check_signature,
    parse_public_key,
    public_key_text,
)
from engine.fleet.snapshot import build_bundle  # noqa: F401

CHUNK = 1 << 20
LATEST_NAME = "latest.json"


# -- keys --------------------------------------------------------------------------------------
def generate_keys(private_path: str | Path, public_path: str | Path | None = None) -> Ed25519PrivateKey:
    """A new Ed25519 key: the private one as PEM (PKCS#8) readable by its owner alone, the
    public one's base64 text (what kiosks trust) in `public_path` when given. Refuses to
    overwrite an existing key file, checked before anything is written."""
    private_path = Path(private_path)
    for path in filter(None, (private_path, public_path)):
        if Path(path).exists():
            raise BundleError(f"{path} already exists; choose another file (a key is never overwritten).")
    if public_path is not None and Path(public_path).resolve() == private_path.resolve():
        raise BundleError(f"The private and the public key cannot both go in {private_path}.")
    key = Ed25519PrivateKey.generate()
    pem = key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                            serialization.NoEncryption())
    write_atomic(private_path, pem)  # mode 0600
    os.chmod(private_path, 0o600)
    if public_path is not None:
        write_atomic(public_path, public_key_text(key) + "\n")
        os.chmod(public_path, 0o644)  # meant to be copied to every kiosk
    return key


def load_private_key(path: str | Path) -> Ed25519PrivateKey:
    """A private key file: PEM (as generate_keys writes it) or the raw 32 bytes."""
    path = Path(path)
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise BundleError(f"Cannot read the key file {path}: {exc.strerror or exc}.") from exc
    if len(data) == 32:
        return Ed25519PrivateKey.from_private_bytes(data)
    try:
        key = serialization.load_pem_private_key(data, password=None)
    except (ValueError, TypeError) as exc:
        raise BundleError(f"{path} is not an Ed25519 private key (PEM without a password, or 32 raw bytes).") from exc
    if not isinstance(key, Ed25519PrivateKey):
        raise BundleError(f"{path} holds a {type(key).__name__}, not an Ed25519 private key.")
    return key


def trusted_keys(paths, extra: Iterable[str] = ()) -> list[str]:
    """The public keys (base64) this machine trusts: the settings' bundle_keys, the lines of
    DATA/fleet/trusted_keys, then `extra` (--trust); each checked, duplicates dropped."""
    from engine.config import load_settings

    keys = list(getattr(load_settings(paths.settings_file), "bundle_keys", ()) or ())
    with contextlib.suppress(FileNotFoundError):
        keys += [line.strip() for line in paths.trusted_keys_file.read_text(encoding="utf-8").splitlines()
                 if line.strip() and not line.lstrip().startswith("#")]
    keys += list(extra)
    unique: dict[str, None] = {}
    for key in keys:
        unique[public_key_text(parse_public_key(str(key)))] = None
    return list(unique)


# -- reading a bundle ----------------------------------------------------------------------------
class _Reader:
    """The manifest (unverified) and the objects of a tar bundle, a bundle folder or a source."""

    def __init__(self, where: Path):
        self.where = where
        self.manifest: Manifest

    def objects(self) -> Iterator[tuple[str, BinaryIO]]:
        raise NotImplementedError

    def close(self) -> None:
        pass


class _TarReader(_Reader):
    def __init__(self, where: Path):
        super().__init__(where)
        try:
            self._tar = tarfile.open(where, "r:")  # noqa: SIM115 (closed by close())
        except (tarfile.TarError, EOFError, OSError) as exc:
            raise BundleError(f"{where}: the bundle is truncated or not a bundle file ({exc}).") from exc
        try:
            self._open()
        except BaseException:
            self._tar.close()
            raise

    def _open(self) -> None:
        try:
            self._members = {m.name: m for m in self._tar.getmembers()}
        except (tarfile.TarError, EOFError, OSError) as exc:
            raise BundleError(f"{self.where}: the bundle is truncated or not a bundle file ({exc}).") from exc
        if MANIFEST_NAME not in self._members:
            raise BundleError(f"{self.where}: not a bundle (no manifest.json), or truncated.")
        signature = self._read(SIGNATURE_NAME) if SIGNATURE_NAME in self._members else b""
        self.manifest = Manifest.from_bytes(self._read(MANIFEST_NAME), signature, origin=str(self.where))

    def _read(self, name: str) -> bytes:
        try:
            return self._tar.extractfile(self._members[name]).read()
        except (tarfile.TarError, EOFError, OSError, AttributeError) as exc:
            raise BundleError(f"{self.where}: {name} cannot be read: truncated or damaged ({exc}).") from exc

    def objects(self):
        for name, member in self._members.items():
            if not name.startswith("objects/"):
                continue
            sha = name[len("objects/"):]
            if not member.isfile() or not SHA256_PATTERN.match(sha):
                raise BundleError(f"{self.where}: unexpected member {name!r} in the bundle.")
            yield sha, self._tar.extractfile(member)

    def close(self):
        self._tar.close()


class _FolderReader(_Reader):
    """A bundle folder (manifest.json at the top), or a source (latest.json: its newest)."""

    def __init__(self, where: Path, version: int | None = None):
        super().__init__(where)
        top, objects = where, where / "objects"
        if (where / LATEST_NAME).is_file() or version is not None:
            version = version if version is not None else read_latest(where)["version"]
            top = where / "bundles" / str(version)
        try:
            data = (top / MANIFEST_NAME).read_bytes()
        except OSError as exc:
            raise BundleError(f"{top}: no readable manifest.json ({exc.strerror or exc}).") from exc
        signature = (top / SIGNATURE_NAME).read_bytes() if (top / SIGNATURE_NAME).is_file() else b""
        self.manifest = Manifest.from_bytes(data, signature, origin=str(top))
        self.folder = objects

    def objects(self):
        for sha in self.manifest.objects():
            path = self.folder / sha
            if path.is_file():
                with open(path, "rb") as handle:
                    yield sha, handle


def open_bundle(file_or_folder: str | Path) -> _Reader:
    where = Path(file_or_folder)
    if where.is_dir():
        return _FolderReader(where)
    if not where.is_file():
        raise BundleError(f"{where}: no such bundle file or folder.")
    return _TarReader(where)


def read_latest(source: Path) -> dict:
    path = Path(source) / LATEST_NAME
    try:
        latest = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return {}
    except (OSError, ValueError) as exc:
        raise BundleError(f"{path} cannot be read as JSON ({exc}).") from exc
    if not isinstance(latest, dict) or not isinstance(latest.get("version"), int) \
            or not isinstance(latest.get("collection"), str):
        raise BundleError(f"{path} must hold {{\"collection\": NAME, \"version\": N}}.")
    return latest


def _copy_checked(source: BinaryIO, sha: str, size: int, dest: Path | None, where: str) -> None:
    """Streams an object, to `dest` (via dest.part, renamed only when right) or nowhere,
    and refuses it when its size or SHA-256 is not what the manifest says."""
    digest, count = hashlib.sha256(), 0
    part = dest.with_name(dest.name + ".part") if dest is not None else None
    try:
        with open(part, "wb") if part is not None else contextlib.nullcontext() as out:
            while block := source.read(CHUNK):
                digest.update(block)
                count += len(block)
                if out is not None:
                    out.write(block)
            if out is not None:
                out.flush()
                os.fsync(out.fileno())
    except (tarfile.TarError, EOFError, OSError) as exc:
        _unlink(part)
        raise BundleError(f"{where}: object {sha} cannot be read: truncated or damaged ({exc}).") from exc
    if count != size or digest.hexdigest() != sha:
        _unlink(part)
        what = f"size {count}, expected {size}" if count != size else "its SHA-256 does not match"
        raise BundleError(f"{where}: object {sha} was tampered with or damaged ({what}).")
    if part is not None:
        os.replace(part, dest)


def _unlink(path: Path | None) -> None:
    if path is not None:
        with contextlib.suppress(FileNotFoundError):
            path.unlink()


def _check_objects(reader: _Reader, dest_folder: Path | None, skip_present: bool = True) -> None:
    """Every object the manifest needs is in the bundle with the right size and hash; with a
    `dest_folder`, copied there (objects it already holds are still read, not rewritten)."""
    wanted = reader.manifest.objects()
    seen: set[str] = set()
    if dest_folder is not None:
        dest_folder.mkdir(parents=True, exist_ok=True)
    for sha, stream in reader.objects():
        entry = wanted.get(sha)
        if entry is None or sha in seen:
            continue  # not listed: ignored, never installed
        dest = None
        if dest_folder is not None and not (skip_present and (dest_folder / sha).is_file()):
            dest = dest_folder / sha
        _copy_checked(stream, sha, entry.size, dest, str(reader.where))
        seen.add(sha)
    missing = [entry.name for sha, entry in wanted.items() if sha not in seen]
    if missing:
        raise BundleError(f"{reader.where}: the bundle lacks {len(missing)} of its files "
                          f"({', '.join(missing[:3])}{'...' if len(missing) > 3 else ''}): truncated or incomplete.")


def verify_bundle(file_or_folder: str | Path, trusted: Iterable[str]) -> Manifest:
    """The bundle's manifest once its signature is trusted and every object is there with the
    right size and hash; BundleError naming the file and what is wrong otherwise."""
    reader = open_bundle(file_or_folder)
    try:
        check_signature(reader.manifest, list(trusted))
        _check_objects(reader, None)
        return reader.manifest
    finally:
        reader.close()


def install_bundle(paths, file_or_folder: str | Path, trusted: Iterable[str],
                   expected_embedder: str | None = None) -> Path:
    """Checks and installs a single-file bundle (or bundle folder) and switches to it: the
    signature and the kiosk's checks first, then the objects into DATA/fleet/objects, then
    install_version. Any refusal leaves the running version as it was, with an audit line."""
    from engine.fleet import records

    trusted = list(trusted)
    try:
        reader = open_bundle(file_or_folder)
    except BundleError as exc:
        records.record(paths, "refused", file=str(file_or_folder), reason=str(exc))
        raise
    try:
        manifest = reader.manifest
        try:
            check_signature(manifest, trusted)  # before a byte of it is written here
            _check_objects(reader, paths.fleet_objects)
        except BundleError as exc:
            records.record(paths, "refused", file=str(file_or_folder), collection=manifest.collection,
                           version=manifest.version, reason=str(exc))
            raise
    finally:
        reader.close()
    return install_version(paths, manifest, paths.fleet_objects, trusted, expected_embedder)


# -- publishing to a source ---------------------------------------------------------------------
def publish_bundle(file_or_folder: str | Path, source_dir: str | Path, trusted: Iterable[str] = ()) -> Manifest:
    """Unpacks a bundle into a source folder: the objects it lacks (each checked), then
    bundles/<N>/manifest.{json,sig}, then latest.json last and atomically, so a kiosk polling
    the source never sees a version whose files are not all there. Refuses an unsigned bundle,
    a wrong signature when keys are given, another collection's source, and a version not
    newer than the source's latest."""
    source = Path(source_dir)
    reader = open_bundle(file_or_folder)
    try:
        manifest = reader.manifest
        trusted = list(trusted)
        if trusted:
            check_signature(manifest, trusted)
        elif not manifest.signature:
            raise BundleError(f"{reader.where}: the bundle is unsigned; kiosks would refuse it.")
        latest = read_latest(source)
        if latest and latest["collection"] != manifest.collection:
            raise BundleError(f"{source} publishes collection '{latest['collection']}', not "
                              f"'{manifest.collection}'; use a source folder per collection.")
        if latest and latest["version"] >= manifest.version:
            raise BundleError(f"{source} already publishes version {latest['version']}; kiosks only take a newer "
                              f"version than they have, so build one above it (--version {latest['version'] + 1}).")
        _check_objects(reader, source / "objects")
    finally:
        reader.close()
    folder = source / "bundles" / str(manifest.version)
    write_atomic(folder / SIGNATURE_NAME, manifest.signature)
    write_atomic(folder / MANIFEST_NAME, manifest.raw)
    write_json_atomic(source / LATEST_NAME, {"collection": manifest.collection, "version": manifest.version})
    return manifest


def remove_tree(folder: Path) -> None:
    shutil.rmtree(folder, ignore_errors=True)
