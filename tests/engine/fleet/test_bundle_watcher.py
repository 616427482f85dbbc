"""The kiosk's BundleWatcher (engine/fleet/watcher.py) against real bundles: the pump manual
indexed with the built-in embedder, built and signed by engine.fleet, published to a folder and
to a Range-capable loopback server. A kiosk installs what is new, downloads only the objects it
lacks, refuses tampered bundles (audited) while the current version keeps serving, and never
raises. The slow test runs 4 kiosk processes through bench/fleet_kiosks.py."""

from __future__ import annotations

import shutil
import sys
import threading
from pathlib import Path

import pytest

from engine.fleet.bundle import (
    build_bundle,
    generate_keys,
    public_key_text,
    publish_bundle,
)
from engine.fleet.records import read_records
from engine.fleet.source import open_source
from engine.fleet.watcher import JITTER, BundleWatcher
from engine.paths import AppPaths
from tests.helpers.pump_chat import index_into
from tests.helpers.static_server import static_server

ROOT = Path(__file__).resolve().parents[3]


@pytest.fixture
def admin(tmp_path, indexed_copy):
    """The administrator's data dir (the pump manual indexed), a key, and a published version 1."""
    key = generate_keys(tmp_path / "key.pem")
    source = tmp_path / "source"
    publish(indexed_copy, key, source, 1)
    return indexed_copy, key, source


def publish(paths: AppPaths, key, source: Path, version: int):
    out = paths.root / f"bundle-{version}.tar"
    manifest = build_bundle(paths, "default", key, out, version=version)
    publish_bundle(out, source)
    return manifest


def add_manual(paths: AppPaths, name: str, text: str) -> None:
    manual = paths.root / name
    manual.write_text(text, encoding="utf-8")
    index_into(paths, [manual])


@pytest.fixture(params=["folder", "http"])
def where(request, admin):
    """The source as a kiosk names it: a folder path, or the URL of a server in front of it."""
    source = admin[2]
    if request.param == "folder":
        yield str(source)
        return
    with static_server(source, ranges=True) as server:
        yield server.url


def watcher_for(tmp_path, admin, where, **kwargs) -> BundleWatcher:
    kiosk = AppPaths(tmp_path / "kiosk").ensure()
    return BundleWatcher(kiosk, open_source(where), [public_key_text(admin[1])], poll_s=60, **kwargs)


def test_a_kiosk_installs_then_takes_only_the_new_document(tmp_path, admin, where):
    paths, key, source = admin
    watcher = watcher_for(tmp_path, admin, where)
    first = watcher.poll_once()
    assert first.outcome == "installed" and first.version == 1, first
    kiosk = watcher.paths
    assert kiosk.collection("default") == kiosk.fleet_version("default", 1)
    assert watcher.poll_once().outcome == "current"

    v1 = open_source(str(source)).manifest(1)
    add_manual(paths, "valve.txt", "Valve manual. Close the valve before removing the strainer basket.")
    v2 = publish(paths, key, source, 2)
    second = watcher.poll_once()
    assert second.outcome == "installed" and second.version == 2, second
    assert kiosk.collection("default") == kiosk.fleet_version("default", 2)
    from engine.fleet.manifest import Manifest

    held = set(Manifest.from_bytes(v1[0]).objects())
    new = {sha: e for sha, e in v2.objects().items() if sha not in held}
    moved = [e for e in new.values() if e.kind != "index"]  # the kiosk's index takes the new rows
    assert sorted(e.name for e in moved) == ["documents/valve.txt", "rows/valve.txt"]
    assert second.bytes_moved == sum(e.size for e in moved)
    watcher.stop()


def installed_then_v2_published(tmp_path, admin, where):
    """A kiosk's watcher with version 1 installed, and version 2 (a valve manual more) published:
    (the watcher, version 2's manifest)."""
    paths, key, source = admin
    watcher = watcher_for(tmp_path, admin, where)
    assert watcher.poll_once().outcome == "installed"
    add_manual(paths, "valve.txt", "Valve manual. Close the valve before removing the strainer basket.")
    return watcher, publish(paths, key, source, 2)


def test_a_version_here_that_the_update_does_not_follow_is_replaced_from_all_its_rows(tmp_path, admin, where):
    import sqlite3

    watcher, v2 = installed_then_v2_published(tmp_path, admin, where)
    kiosk = watcher.paths
    with sqlite3.connect(kiosk.collection("default") / "collection.sqlite3") as db:
        db.execute("DELETE FROM documents")  # not the version 1 the bundle was built on any more
    db.close()
    result = watcher.poll_once()
    assert result.outcome == "installed" and result.version == 2, result
    new = [e for e in v2.files if e.kind == "index" or "valve" in e.name]  # the rest came with version 1
    assert (result.objects_moved, result.bytes_moved) == (3, sum(e.size for e in new))
    actions = [r["action"] for r in read_records(kiosk)]
    assert actions[-2:] == ["not_applied", "installed"]
    from engine.store.index_store import IndexStore

    with IndexStore.open(kiosk.collection("default"), embedder_id=None, dimension=None, read_only=True) as store:
        assert sorted(Path(d.path).name for d in store.list_documents()) == ["pump.pdf", "valve.txt"]
    watcher.stop()


def test_a_tampered_manifest_is_refused_and_audited_once(tmp_path, admin, where):
    source = admin[2]
    watcher, _ = installed_then_v2_published(tmp_path, admin, where)
    manifest = source / "bundles" / "2" / "manifest.json"
    manifest.write_bytes(manifest.read_bytes().replace(b'"version": 2', b'"version": 3'))
    refused = watcher.poll_once()
    assert refused.outcome == "refused" and "signature" in refused.detail, refused
    assert refused.bytes_moved == 0  # refused before a single object moved
    assert watcher.paths.collection("default") == watcher.paths.fleet_version("default", 1)
    assert watcher.poll_once().outcome == "current"  # not fetched and refused again every poll
    lines = [r for r in read_records(watcher.paths) if r["action"] == "refused"]
    assert len(lines) == 1 and "signature" in lines[0]["reason"]
    watcher.stop()


def test_a_tampered_object_is_refused_and_the_current_version_keeps_serving(tmp_path, admin, where):
    source = admin[2]
    watcher, v2 = installed_then_v2_published(tmp_path, admin, where)
    document = next(e for e in v2.files if e.kind == "document" and "valve" in e.name)
    target = source / "objects" / document.sha256
    target.write_bytes(target.read_bytes().replace(b"valve", b"VALVE"))
    result = watcher.poll_once()
    assert result.outcome == "refused" and "tampered" in result.detail, result
    kiosk = watcher.paths
    assert kiosk.collection("default") == kiosk.fleet_version("default", 1)
    assert not (kiosk.fleet_objects / document.sha256).exists()
    assert any(r["action"] == "refused" for r in read_records(kiosk))
    watcher.stop()


def test_an_unreachable_source_is_tried_again_and_never_raises(tmp_path, admin):
    with static_server(admin[2]) as server:
        url = server.url
    watcher = watcher_for(tmp_path, admin, url)
    result = watcher.poll_once()
    assert result.outcome == "failed" and "Could not read" in result.detail
    assert watcher.stats.failures == 1 and watcher.paths.fleet_current("default") is None
    watcher.stop()


def test_an_untrusted_key_is_refused(tmp_path, admin):
    other = generate_keys(tmp_path / "other.pem")
    kiosk = AppPaths(tmp_path / "kiosk").ensure()
    watcher = BundleWatcher(kiosk, open_source(str(admin[2])), [public_key_text(other)], poll_s=60)
    result = watcher.poll_once()
    assert result.outcome == "refused" and "does not trust" in result.detail
    assert kiosk.fleet_current("default") is None
    watcher.stop()


def test_the_thread_installs_in_the_background(tmp_path, admin):
    installed = threading.Event()
    watcher = watcher_for(tmp_path, admin, str(admin[2]),
                          on_result=lambda r: r.outcome == "installed" and installed.set())
    watcher.poll_s = 0.2
    watcher.start()
    assert installed.wait(60)
    watcher.stop()
    assert watcher.paths.fleet_current("default") == 1


def test_polls_are_jittered_within_one_interval(tmp_path, admin):
    watcher = watcher_for(tmp_path, admin, str(admin[2]))
    firsts = [watcher.next_wait(first=True) for _ in range(500)]
    nexts = [watcher.next_wait() for _ in range(500)]
    assert 0 <= min(firsts) and max(firsts) <= 60 and max(firsts) - min(firsts) > 30
    assert JITTER[0] * 60 <= min(nexts) and max(nexts) <= JITTER[1] * 60
    watcher.stop()


@pytest.mark.slow
def test_four_kiosk_processes_switch_while_answering(tmp_path, tiny_llm_dir):
    """bench/fleet_kiosks.py with 4 kiosks: all switch, no question fails, a tampered copy is
    refused by all, and kills during download and install leave every kiosk on a working version."""
    import json
    import subprocess

    out = tmp_path / "fleet.json"
    run = subprocess.run([sys.executable, str(ROOT / "bench" / "fleet_kiosks.py"), "--kiosks", "4",
                          "--poll-s", "3", "--kills", "2", "--llm", str(tiny_llm_dir),
                          "--work", str(tmp_path / "work"), "--admin-data", "", "--json", str(out)],
                         cwd=ROOT, capture_output=True, text=True, timeout=900)
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    figures = json.loads(out.read_text())
    assert figures["switched"] == 4 and figures["errors_during_switch"] == 0
    assert figures["switch_s_max"] <= 3 + figures["install_s_max"] + 5
    assert figures["tampered_refused_by"] == 4
    assert figures["kills"]["download"]["working_after"] == figures["kills"]["download"]["runs"] == 2
    assert figures["kills"]["install"]["working_after"] == figures["kills"]["install"]["runs"] == 2
    shutil.rmtree(tmp_path / "work", ignore_errors=True)
