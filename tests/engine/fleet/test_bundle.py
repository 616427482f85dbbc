"""Index bundles (engine/fleet): build once, verify, install atomically, roll back; every refusal
leaves the running version untouched with an audit line. Fast tests use the tiny embedder, so
installs name it as the expected embedder; the slow test uses the real one and a real manual."""

from __future__ import annotations

import hashlib
import io
import json
import sqlite3
import stat
import tarfile
import threading
from pathlib import Path

import numpy as np
import pytest

from engine.errors import BundleError
from engine.fleet import bundle as fleet
from engine.fleet.kiosk import read_state
from engine.fleet.manifest import Manifest
from engine.fleet.records import read_records
from engine.paths import DB_NAME, AppPaths
from engine.store import health
from engine.store.index_store import IndexStore
from engine.store.vectors import APPROXIMATE, IndexPolicy
from engine.types import Chunk

NAME = "manuals"
MANUALS = {  # file name -> the text of each page
    "filter.md": ["Replace filter cartridge yearly. Use part F-77 only."],
    "oil.md": ["Oil level: check weekly with dipstick.", "Drain old oil into tray."],
    "pump.md": ["Prime pump with water before start.", "Error E-12 means motor overheated."],
}


def add_manual(store: IndexStore, embedder, path: Path, pages: list[str]) -> None:
    """Writes the manual's file and stores it as indexed from those bytes (its real SHA-256)."""
    path.write_text("\n\n".join(pages), encoding="utf-8")
    chunks = [Chunk(page=n, start=0, end=len(text), text=text) for n, text in enumerate(pages, 1)]
    store.add_document(str(path), hashlib.sha256(path.read_bytes()).hexdigest(), size=path.stat().st_size,
                       mtime=1.0, title=path.stem, page_count=len(pages), chunks=chunks,
                       embeddings=embedder.encode_documents(pages))


def open_writer(paths: AppPaths, embedder) -> IndexStore:
    return IndexStore.open(paths.collection(NAME), embedder_id=embedder.model_id, dimension=embedder.dimension)


@pytest.fixture
def admin(tmp_path, tiny_embedder) -> AppPaths:
    """An administrator's data dir with a collection of three manuals (real files)."""
    paths = AppPaths(tmp_path / "admin").ensure()
    folder = tmp_path / "files"
    folder.mkdir()
    with open_writer(paths, tiny_embedder) as store:
        for name, pages in MANUALS.items():
            add_manual(store, tiny_embedder, folder / name, pages)
    return paths


@pytest.fixture
def kiosk(tmp_path) -> AppPaths:
    return AppPaths(tmp_path / "kiosk").ensure()


@pytest.fixture
def key(tmp_path):
    return fleet.generate_keys(tmp_path / "signing.pem", tmp_path / "signing.pub")


@pytest.fixture
def trusted(key) -> list[str]:
    return [fleet.public_key_text(key)]


def build(admin, key, tmp_path, version: int) -> Path:
    out = tmp_path / "out" / f"{NAME}-{version}.tar"
    fleet.build_bundle(admin, NAME, key, out, version=version)
    return out


def install(kiosk, file, trusted, embedder) -> Path:
    return fleet.install_bundle(kiosk, file, trusted, expected_embedder=embedder.model_id)


# -- build, install, switch ---------------------------------------------------------------------
def test_an_installed_bundle_is_the_collection_with_its_documents_inside(admin, kiosk, key, trusted,
                                                                          tmp_path, tiny_embedder, monkeypatch):
    file = build(admin, key, tmp_path, 1)
    manifest = fleet.verify_bundle(file, trusted)
    assert {e.kind for e in manifest.files} == {"rows", "index", "document"}  # no database: its rows
    assert kiosk.collection(NAME) == kiosk.collections / NAME  # nothing installed yet

    monkeypatch.setattr(health, "STAMPED_FROM", 0)  # verified on install: a large one opens without its checks
    folder = install(kiosk, file, trusted, tiny_embedder)

    assert folder == kiosk.fleet_version(NAME, 1).absolute() and kiosk.collection(NAME) == folder
    assert health.is_stamped(folder / DB_NAME, with_fts=True)
    with IndexStore.open(kiosk.collection(NAME), embedder_id=tiny_embedder.model_id,
                         dimension=tiny_embedder.dimension, read_only=True) as store:
        assert store.open_report["faiss"] == "loaded" and store.open_report["added"] == 0
        documents = store.list_documents()
        hits = store.search_keyword("dipstick", 3)
        chunk = store.chunk(hits[0][0])
    assert sorted(Path(d.path).name for d in documents) == sorted(MANUALS)
    for document in documents:  # every stored path is a file of the version, with the indexed bytes
        assert Path(document.path).parent == folder / "documents"
        assert hashlib.sha256(Path(document.path).read_bytes()).hexdigest() == document.sha256
    assert Path(chunk["path"]).name == "oil.md"
    assert read_records(kiosk)[-1]["action"] == "installed"
    assert fleet.status(kiosk)["collections"][NAME]["current"] == 1


@pytest.mark.parametrize("imported", [False, True])
def test_a_bundle_records_the_reranker_its_builder_ranks_with(admin, kiosk, key, trusted, tmp_path,
                                                              tiny_embedder, imported):
    from engine.encoders.reranker import CrossEncoder
    from engine.models.registry import import_model
    from tests.helpers.tiny_cross_encoder import write_tiny_cross_encoder

    expected = ""  # none imported: the app ranks without one
    if imported:
        folder = import_model(write_tiny_cross_encoder(tmp_path / "tiny-reranker"), admin)
        expected = CrossEncoder.from_folder(folder).model_id
    manifest = fleet.verify_bundle(build(admin, key, tmp_path, 1), trusted)
    assert manifest.reranker_id == expected
    install(kiosk, tmp_path / "out" / f"{NAME}-1.tar", trusted, tiny_embedder)
    assert fleet.status(kiosk)["collections"][NAME]["reranker_id"] == expected


def collection_view(folder: Path, embedder) -> tuple:
    """What a reader of the collection sees: its documents (name, sha256, chunk count), its chunks
    by id, and the dense and keyword hits of a few questions."""
    with IndexStore.open(folder, embedder_id=embedder.model_id, dimension=embedder.dimension,
                         read_only=True) as store:
        documents = sorted((Path(d.path).name, d.sha256, d.chunk_count) for d in store.list_documents())
        ids = sorted(store.vector_ids().tolist())
        chunks = [(c["id"], Path(c["path"]).name, c["page"], c["text"]) for c in store.chunks(ids)]
        queries = embedder.encode_queries(["prime the pump", "filter part", "dipstick"])
        dense = [store.search_dense(query, 4) for query in queries]
        keyword = [store.search_keyword(word, 4) for word in ("pump", "oil", "valve")]
    return documents, chunks, dense, keyword


def change_manuals(admin, tiny_embedder, tmp_path) -> None:
    """Version 2's changes: pump.md rewritten, filter.md removed, valve.md added."""
    with open_writer(admin, tiny_embedder) as store:
        add_manual(store, tiny_embedder, tmp_path / "files" / "pump.md", ["Prime pump with oil, not water."])
        store.remove_document(str(tmp_path / "files" / "filter.md"))
        add_manual(store, tiny_embedder, tmp_path / "files" / "valve.md", ["Close the valve first.", "Torque 9 Nm."])


def test_an_update_moves_only_the_changed_documents_and_their_rows(
        admin, kiosk, key, trusted, tmp_path, tiny_embedder, monkeypatch):
    monkeypatch.setattr(health, "STAMPED_FROM", 0)  # the copy of a checked version is not checked again
    first = fleet.verify_bundle(build(admin, key, tmp_path, 1), trusted)
    install(kiosk, tmp_path / "out" / f"{NAME}-1.tar", trusted, tiny_embedder)
    change_manuals(admin, tiny_embedder, tmp_path)
    second = fleet.verify_bundle(build(admin, key, tmp_path, 2), trusted)

    needed = fleet.needed_objects(second, fleet.delta_base(kiosk, second))
    assert sorted(e.name for sha, e in needed.items() if sha not in first.objects()) == [
        "documents/pump.md", "documents/valve.md", "rows/pump.md", "rows/valve.md"]  # not the index
    assert fleet.needed_objects(second, None) == second.objects()  # nothing to apply them to: all

    install(kiosk, tmp_path / "out" / f"{NAME}-2.tar", trusted, tiny_embedder)
    assert read_state(kiosk, NAME) == {"current": 2, "previous": 1, "rolled_back": None}
    assert read_records(kiosk)[-1]["applied_to"] == 1
    folder = kiosk.collection(NAME)
    assert (folder / "documents" / "pump.md").read_text().startswith("Prime pump with oil")
    assert health.is_stamped(folder / DB_NAME, with_fts=True)
    assert collection_view(folder, tiny_embedder) == collection_view(admin.collection(NAME), tiny_embedder)

    fresh = AppPaths(tmp_path / "fresh").ensure()  # the same version on a kiosk that held none
    install(fresh, tmp_path / "out" / f"{NAME}-2.tar", trusted, tiny_embedder)
    assert read_records(fresh)[-1]["applied_to"] is None
    assert collection_view(fresh.collection(NAME), tiny_embedder) == collection_view(folder, tiny_embedder)


def test_rows_that_do_not_fit_the_version_held_are_refused_and_a_fresh_install_takes_them(
        admin, kiosk, key, trusted, tmp_path, tiny_embedder):
    install(kiosk, build(admin, key, tmp_path, 1), trusted, tiny_embedder)
    held = kiosk.collection(NAME) / DB_NAME
    with sqlite3.connect(held) as db:  # the version here lost a document the bundle keeps
        db.execute("DELETE FROM documents WHERE path LIKE '%oil.md'")
    db.close()
    change_manuals(admin, tiny_embedder, tmp_path)
    file = build(admin, key, tmp_path, 2)
    with pytest.raises(fleet.DeltaError, match="oil.md"):
        install(kiosk, file, trusted, tiny_embedder)
    assert kiosk.collection(NAME) == kiosk.fleet_version(NAME, 1)  # still serving the one it had
    folder = fleet.install_version(kiosk, fleet.verify_bundle(file, trusted), kiosk.fleet_objects, trusted,
                                   tiny_embedder.model_id, fresh=True)
    assert collection_view(folder, tiny_embedder) == collection_view(admin.collection(NAME), tiny_embedder)


def test_rollback_returns_to_the_previous_version_and_refuses_the_rolled_back_one(
        admin, kiosk, key, trusted, tmp_path, tiny_embedder):
    for version in (1, 2):
        install(kiosk, build(admin, key, tmp_path, version), trusted, tiny_embedder)
    assert fleet.rollback(kiosk) == 1
    assert kiosk.collection(NAME) == kiosk.fleet_version(NAME, 1)
    assert not kiosk.fleet_version(NAME, 2).exists()
    with pytest.raises(BundleError, match="rolled back"):
        install(kiosk, tmp_path / "out" / f"{NAME}-2.tar", trusted, tiny_embedder)
    with pytest.raises(BundleError, match="no previous version"):
        fleet.rollback(kiosk, NAME)
    install(kiosk, build(admin, key, tmp_path, 3), trusted, tiny_embedder)
    assert read_state(kiosk, NAME) == {"current": 3, "previous": 1, "rolled_back": 2}


def test_older_versions_than_current_and_previous_are_removed(admin, kiosk, key, trusted, tmp_path, tiny_embedder):
    for version in (1, 2, 3):
        install(kiosk, build(admin, key, tmp_path, version), trusted, tiny_embedder)
    assert fleet.status(kiosk)["collections"][NAME]["versions"] == [2, 3]


# -- refusals -----------------------------------------------------------------------------------
def rewrite(source: Path, dest: Path, change) -> Path:
    """A copy of a tar bundle with change(name, data) -> data | None (None drops the member)."""
    with tarfile.open(source) as old, tarfile.open(dest, "w") as new:
        for member in old.getmembers():
            data = change(member.name, old.extractfile(member).read())
            if data is not None:
                member.size = len(data)
                new.addfile(member, io.BytesIO(data))
    return dest


def edit_manifest(data: bytes, **fields) -> bytes:
    return json.dumps({**json.loads(data), **fields}).encode()


def _unsigned(file, tmp, other):
    return rewrite(file, tmp / "b.tar", lambda n, d: None if n == "manifest.sig" else d)


def _untrusted(file, tmp, other):
    def change(name, data):  # a whole bundle re-signed by another key
        if name == "manifest.json":
            return edit_manifest(data, signer=fleet.public_key_text(other))
        if name == "manifest.sig":
            manifest = (tmp / "signed.json").read_bytes()
            return other.sign(manifest)
        return data
    with tarfile.open(file) as tar:
        (tmp / "signed.json").write_bytes(edit_manifest(tar.extractfile("manifest.json").read(),
                                                        signer=fleet.public_key_text(other)))
    return rewrite(file, tmp / "b.tar", change)


def _wrong_signature(file, tmp, other):
    return rewrite(file, tmp / "b.tar", lambda n, d: edit_manifest(d, version=99) if n == "manifest.json" else d)


def _truncated(file, tmp, other):
    data = file.read_bytes()
    (tmp / "b.tar").write_bytes(data[:len(data) * 2 // 3])
    return tmp / "b.tar"


def _tampered_bytes(file, tmp, other):  # same size, other bytes: the hash tells
    return rewrite(file, tmp / "b.tar",
                   lambda n, d: d[:-1] + bytes([d[-1] ^ 1]) if n.startswith("objects/") and len(d) < 500 else d)


def _tampered_size(file, tmp, other):
    return rewrite(file, tmp / "b.tar", lambda n, d: d + b"x" if n.startswith("objects/") and len(d) < 500 else d)


REFUSALS = {
    _unsigned: "unsigned",
    _untrusted: "does not trust",
    _wrong_signature: "wrong signature",
    _truncated: "truncated",
    _tampered_bytes: "tampered with",
    _tampered_size: "tampered with",
}


@pytest.mark.parametrize("spoil", REFUSALS, ids=[f.__name__.strip("_") for f in REFUSALS])
def test_a_spoilt_bundle_is_refused_and_the_running_version_stays(spoil, admin, kiosk, key, trusted,
                                                                    tmp_path, tiny_embedder):
    install(kiosk, build(admin, key, tmp_path, 1), trusted, tiny_embedder)
    state_before = kiosk.fleet_state_file(NAME).read_bytes()
    objects_before = sorted(p.name for p in kiosk.fleet_objects.iterdir())
    spoilt = spoil(build(admin, key, tmp_path, 2), tmp_path, fleet.generate_keys(tmp_path / "other.pem"))

    with pytest.raises(BundleError, match=REFUSALS[spoil]) as refused:
        install(kiosk, spoilt, trusted, tiny_embedder)
    with pytest.raises(BundleError, match=REFUSALS[spoil]):
        fleet.verify_bundle(spoilt, trusted)

    assert str(spoilt) in str(refused.value)
    assert kiosk.fleet_state_file(NAME).read_bytes() == state_before
    assert kiosk.collection(NAME) == kiosk.fleet_version(NAME, 1)
    assert sorted(p.name for p in kiosk.fleet_objects.iterdir()) == objects_before  # no .part left
    assert sorted(p.name for p in (kiosk.fleet_collection(NAME) / "versions").iterdir()) == ["1"]
    last = read_records(kiosk)[-1]
    assert last["action"] == "refused" and REFUSALS[spoil] in last["reason"]


def test_a_version_not_newer_than_the_installed_one_is_refused(admin, kiosk, key, trusted, tmp_path, tiny_embedder):
    install(kiosk, build(admin, key, tmp_path, 5), trusted, tiny_embedder)
    for version in (5, 4):
        with pytest.raises(BundleError, match=f"version {version} is not newer than the installed version 5"):
            install(kiosk, build(admin, key, tmp_path, version), trusted, tiny_embedder)
    assert read_state(kiosk, NAME)["current"] == 5 and read_records(kiosk)[-1]["action"] == "refused"


def test_a_bundle_of_another_embedder_is_refused(admin, kiosk, key, trusted, tmp_path):
    file = build(admin, key, tmp_path, 1)
    with pytest.raises(BundleError, match="could not search it"):
        fleet.install_bundle(kiosk, file, trusted, expected_embedder="another-embedder:0123")
    with pytest.raises(BundleError, match="could not search it"):  # the default: the built-in one
        fleet.install_bundle(kiosk, file, trusted)
    assert kiosk.collection(NAME) == kiosk.collections / NAME and not kiosk.fleet_state_file(NAME).exists()


def test_no_trusted_key_refuses_every_bundle(admin, kiosk, key, tmp_path, tiny_embedder):
    with pytest.raises(BundleError, match="no trusted bundle keys"):
        install(kiosk, build(admin, key, tmp_path, 1), [], tiny_embedder)


@pytest.mark.parametrize("change, message", [
    ({"files": [{"name": "../evil", "sha256": "0" * 64, "size": 1, "kind": "index"}]}, "not a plain file name"),
    ({"files": [{"name": "rows/../../evil", "sha256": "0" * 64, "size": 1, "kind": "rows", "source_path": "/m"}]},
     "not a plain file name"),
    ({"files": [{"name": "documents/m.pdf", "sha256": "0" * 64, "size": 1, "kind": "document", "source_path": "/m"}]},
     "without its rows"),
    ({"format": 1}, "format 1 is not supported"),  # the whole database: built by an older app
])
def test_a_manifest_naming_a_path_outside_its_folder_or_of_another_format_is_refused(change, message):
    data = {"format": 2, "version": 1, "created": "", "collection": "c", "embedder_id": "e", "schema_version": 2,
            "dimension": 8, "index_lists": 0, "files": [], **change}
    with pytest.raises(BundleError, match=message):
        Manifest.from_bytes(json.dumps(data).encode(), origin="m.json")


# -- a consistent snapshot while the collection is being written ------------------------------------
def test_a_bundle_built_while_an_indexer_writes_opens_and_verifies(admin, kiosk, key, trusted, tmp_path,
                                                                    tiny_embedder):
    stop, written, failures = threading.Event(), threading.Event(), []
    folder = tmp_path / "more"
    folder.mkdir()

    def write() -> None:
        try:
            with open_writer(admin, tiny_embedder) as store:
                for n in range(10_000):
                    if stop.is_set():
                        return
                    add_manual(store, tiny_embedder, folder / f"extra-{n}.md", [f"Valve {n} torque {n} newton."])
                    if n % 3 == 2:
                        store.flush()  # replaces the faiss file under the builder
                    if n == 5:
                        written.set()
        except Exception as exc:  # noqa: BLE001 (reported by the assertion below)
            failures.append(exc)
            written.set()

    writer = threading.Thread(target=write)
    writer.start()
    try:
        assert written.wait(60)
        for version in range(1, 6):
            install(kiosk, build(admin, key, tmp_path, version), trusted, tiny_embedder)
            with sqlite3.connect(kiosk.collection(NAME) / "collection.sqlite3") as db:
                chunks = {row[0] for row in db.execute("SELECT id FROM chunks")}
            with IndexStore.open(kiosk.collection(NAME), embedder_id=None, dimension=None, read_only=True) as store:
                assert store.open_report["faiss"] == "loaded", store.open_report
                assert set(store.vector_ids().tolist()) == chunks
                assert len(store.list_documents()) >= len(MANUALS) + 5
    finally:
        stop.set()
        writer.join()
    assert not failures


def test_a_bundle_carries_the_approximate_index_and_the_kiosk_searches_it_exactly(admin, kiosk, key, trusted,
                                                                                 tmp_path, tiny_embedder):
    pages = [f"Valve {n} needs torque {n * 7} newton metres and seal kit K-{n}." for n in range(60)]
    policy = IndexPolicy(approximate_from=40)  # a large collection's index, on a small one
    with IndexStore.open(admin.collection(NAME), embedder_id=tiny_embedder.model_id,
                         dimension=tiny_embedder.dimension, policy=policy) as store:
        add_manual(store, tiny_embedder, tmp_path / "valves.md", pages)
        assert store.stats()["index"] == APPROXIMATE
    file = build(admin, key, tmp_path, 1)
    [index] = [e for e in fleet.verify_bundle(file, trusted).files if e.kind == "index"]
    install(kiosk, file, trusted, tiny_embedder)
    with IndexStore.open(kiosk.collection(NAME), embedder_id=None, dimension=None, read_only=True) as store:
        assert store.open_report["faiss"] == "loaded" and store.stats()["index"] == APPROXIMATE
        faiss_file = kiosk.collection(NAME) / store.stats()["faiss_file"]
        assert hashlib.sha256(faiss_file.read_bytes()).hexdigest() == index.sha256  # the admin's, not rebuilt
        stored = store.embeddings(store.vector_ids().tolist())
        ids, matrix = np.array(list(stored)), np.stack(list(stored.values()))
        for query in tiny_embedder.encode_queries(["torque for valve 12", "seal kit", "oil dipstick"]):
            expected = ids[np.lexsort((ids, -(matrix @ query)))][:5].tolist()
            assert [i for i, _ in store.search_dense(query, 5)] == expected


# -- publishing, keys, paths ------------------------------------------------------------------------
def test_publish_fills_a_source_and_refuses_a_version_not_above_its_latest(admin, key, trusted, tmp_path):
    source = tmp_path / "source"
    first = fleet.publish_bundle(build(admin, key, tmp_path, 1), source, trusted)
    second = fleet.publish_bundle(build(admin, key, tmp_path, 2), source, trusted)
    assert json.loads((source / "latest.json").read_text()) == {"collection": NAME, "version": 2}
    held = {p.name for p in (source / "objects").iterdir()}
    assert held == set(first.objects()) | set(second.objects())
    assert fleet.verify_bundle(source, trusted).version == 2
    with pytest.raises(BundleError, match="already publishes version 2"):
        fleet.publish_bundle(tmp_path / "out" / f"{NAME}-1.tar", source, trusted)


def test_keys_private_file_is_the_owners_and_public_text_is_trusted(tmp_path, key):
    private = tmp_path / "signing.pem"
    assert stat.S_IMODE(private.stat().st_mode) == 0o600
    assert fleet.public_key_text(fleet.load_private_key(private)) == fleet.public_key_text(key)
    raw = tmp_path / "raw.key"
    raw.write_bytes(key.private_bytes_raw())
    assert fleet.public_key_text(fleet.load_private_key(raw)) == fleet.public_key_text(key)
    with pytest.raises(BundleError, match="already exists"):
        fleet.generate_keys(private)
    paths = AppPaths(tmp_path / "data").ensure()
    paths.fleet.mkdir()
    paths.trusted_keys_file.write_text((tmp_path / "signing.pub").read_text())
    other = fleet.public_key_text(fleet.generate_keys(tmp_path / "other.pem"))
    assert fleet.trusted_keys(paths, [other]) == [fleet.public_key_text(key), other]
    with pytest.raises(BundleError, match="not an Ed25519 public key"):
        fleet.trusted_keys(paths, ["not-a-key"])


def test_collection_follows_state_json_and_falls_back_to_the_local_folder(tmp_path):
    paths = AppPaths(tmp_path)
    assert paths.collection("R") == tmp_path / "collections" / "R"
    paths.fleet_version("R", 3).mkdir(parents=True)
    paths.fleet_state_file("R").write_text(json.dumps({"current": 3, "previous": None}))
    assert paths.collection("R") == tmp_path / "fleet" / "R" / "versions" / "3"
    assert paths.collection_db("R") == tmp_path / "fleet" / "R" / "versions" / "3" / "collection.sqlite3"
    paths.fleet_state_file("R").write_text(json.dumps({"current": 4}))  # not installed
    assert paths.collection("R") == tmp_path / "collections" / "R"
    paths.fleet_state_file("R").write_text("{damaged")
    assert paths.collection("R") == tmp_path / "collections" / "R"


# -- the real embedder and a real manual ---------------------------------------------------------
@pytest.mark.slow
def test_a_real_manual_bundle_installs_and_the_assistant_finds_its_passage(tmp_path, builtin_data_dir):
    import shutil

    from engine.answer.retrieval import Retriever
    from engine.store.indexer import Indexer, default_embedder, open_collection

    manual = Path(__file__).parents[2] / ".manuals" / "R-data.pdf"
    shutil.copy(manual, tmp_path / manual.name)
    admin = AppPaths(tmp_path / "admin").ensure()
    embedder = default_embedder(AppPaths(builtin_data_dir))
    with open_collection(admin, NAME, embedder) as store:
        for _ in Indexer(store, embedder).run([tmp_path / manual.name]):
            pass
    key = fleet.generate_keys(tmp_path / "k.pem")
    file = tmp_path / "R.tar"
    fleet.build_bundle(admin, NAME, key, file, version=1)

    kiosk = AppPaths(tmp_path / "kiosk", AppPaths(builtin_data_dir).bundled_models).ensure()
    folder = fleet.install_bundle(kiosk, file, [fleet.public_key_text(key)])  # the built-in embedder

    with open_collection(kiosk, NAME, embedder, read_only=True) as store:
        passages = Retriever(store, embedder).search("importing data from a spreadsheet", k=5)
    assert passages
    assert all(Path(p.path).parent == folder / "documents" for p in passages), [p.path for p in passages]
    assert Path(passages[0].path).read_bytes() == manual.read_bytes()
