"""Bundle sources (engine/fleet/source.py): a folder, Python's http.server (no Range) and a
Range-capable static server on loopback; downloads resume a .part, are hash-checked and only
then renamed into place; bad names and bad latest.json files are refused with the file named."""

from __future__ import annotations

import hashlib
import json
import os
import threading

import pytest

from engine.fleet.source import (
    Cancelled,
    FolderSource,
    HttpSource,
    Latest,
    ObjectMismatch,
    SourceError,
    open_source,
)
from tests.helpers.static_server import static_server

DATA = os.urandom(3 * 1024 * 1024 + 17)  # more than one chunk, not a whole number of them
SHA = hashlib.sha256(DATA).hexdigest()


@pytest.fixture
def source_dir(tmp_path):
    folder = tmp_path / "source"
    (folder / "objects").mkdir(parents=True)
    (folder / "objects" / SHA).write_bytes(DATA)
    (folder / "bundles" / "3").mkdir(parents=True)
    (folder / "bundles" / "3" / "manifest.json").write_bytes(b'{"format": 1}')
    (folder / "bundles" / "3" / "manifest.sig").write_bytes(b"s" * 64)
    (folder / "latest.json").write_text(json.dumps({"collection": "default", "version": 3}))
    return folder


@pytest.fixture(params=["folder", "http-range", "http-plain"])
def source(request, source_dir):
    if request.param == "folder":
        opened = open_source(str(source_dir))
        opened.resumes = True
        yield opened
        return
    with static_server(source_dir, ranges=request.param == "http-range") as server:
        opened = open_source(server.url)
        opened.resumes = request.param == "http-range"
        yield opened
        opened.close()


def test_open_source_picks_the_kind(tmp_path):
    assert isinstance(open_source(str(tmp_path)), FolderSource)
    assert isinstance(open_source(f"file://{tmp_path}"), FolderSource)
    http = open_source("https://cdn.example/manuals")
    assert isinstance(http, HttpSource) and http.url == "https://cdn.example/manuals/"
    http.close()
    with pytest.raises(SourceError, match="empty"):
        open_source("  ")


def test_latest_and_manifest(source):
    assert source.latest() == Latest("default", 3)
    assert source.manifest(3) == (b'{"format": 1}', b"s" * 64)
    with pytest.raises(SourceError, match="bundles/4"):
        source.manifest(4)


def test_a_whole_download_lands_under_its_name(source, tmp_path):
    part = tmp_path / "objects" / f"{SHA}.part"
    assert source.fetch_object(SHA, part, size=len(DATA)) == len(DATA)
    assert (tmp_path / "objects" / SHA).read_bytes() == DATA
    assert not part.exists()


def test_a_part_left_by_a_kill_is_resumed(source, tmp_path):
    """With Range only the rest moves; http.server ignores Range, so everything moves again."""
    part = tmp_path / "objects" / f"{SHA}.part"
    part.parent.mkdir()
    part.write_bytes(DATA[:1_000_000])
    moved = source.fetch_object(SHA, part, size=len(DATA))
    assert moved == (len(DATA) - 1_000_000 if source.resumes else len(DATA))
    assert (tmp_path / "objects" / SHA).read_bytes() == DATA


def test_a_part_that_is_not_a_prefix_is_deleted_and_the_next_try_succeeds(source, tmp_path):
    """(A server without Range sends the whole object, which replaces the .part at once.)"""
    part = tmp_path / "objects" / f"{SHA}.part"
    part.parent.mkdir()
    part.write_bytes(b"x" * 1000)
    if source.resumes:
        with pytest.raises(ObjectMismatch, match="damaged or was tampered with"):
            source.fetch_object(SHA, part, size=len(DATA))
        assert not part.exists() and not (tmp_path / "objects" / SHA).exists()
    source.fetch_object(SHA, part, size=len(DATA))
    assert (tmp_path / "objects" / SHA).read_bytes() == DATA


def test_a_tampered_object_is_refused_and_nothing_is_placed(source, source_dir, tmp_path):
    tampered = bytearray(DATA)
    tampered[123] ^= 1
    (source_dir / "objects" / SHA).write_bytes(bytes(tampered))
    part = tmp_path / "objects" / f"{SHA}.part"
    with pytest.raises(ObjectMismatch):
        source.fetch_object(SHA, part, size=len(DATA))
    assert list((tmp_path / "objects").iterdir()) == []


def test_an_object_longer_than_the_manifest_says_is_refused(source, tmp_path):
    part = tmp_path / "objects" / f"{SHA}.part"
    with pytest.raises(ObjectMismatch):
        source.fetch_object(SHA, part, size=1000)
    assert not (tmp_path / "objects" / SHA).exists()


def test_a_missing_object_names_it(source, tmp_path):
    other = "0" * 64
    with pytest.raises(SourceError, match=other):
        source.fetch_object(other, tmp_path / f"{other}.part")


@pytest.mark.parametrize("name", ["../../etc/passwd", "ABC" * 20, "a" * 63, ""])
def test_object_names_that_are_not_hashes_are_refused(source_dir, tmp_path, name):
    with pytest.raises(SourceError, match="not an object name"):
        FolderSource(source_dir).fetch_object(name, tmp_path / "x.part")


@pytest.mark.parametrize("content, complaint", [
    (b"not json", "not JSON"),
    (b"[1]", "must hold an object"),
    (b'{"collection": "../x", "version": 2}', "'collection'"),
    (b'{"collection": "default", "version": 0}', "'version'"),
    (b'{"collection": "default", "version": true}', "'version'"),
    (b'{"collection": "default"}', "'version'"),
])
def test_a_bad_latest_json_is_refused_naming_the_file(source_dir, content, complaint):
    (source_dir / "latest.json").write_bytes(content)
    with pytest.raises(SourceError, match=complaint) as raised:
        FolderSource(source_dir).latest()
    assert "latest.json" in str(raised.value)


def test_an_unreachable_server_is_a_source_error(tmp_path):
    with static_server(tmp_path) as server:
        url = server.url
    source = HttpSource(url, timeout_s=2)
    with pytest.raises(SourceError, match="Could not read"):
        source.latest()
    source.close()


def test_a_stopped_download_keeps_its_part_for_next_time(source_dir, tmp_path):
    stop = threading.Event()
    stop.set()
    part = tmp_path / "objects" / f"{SHA}.part"
    with pytest.raises(Cancelled):
        FolderSource(source_dir).fetch_object(SHA, part, size=len(DATA), cancel=stop)
    assert part.exists() and not (tmp_path / "objects" / SHA).exists()


# -- the settings that name a source and whom to trust (engine/config.py) ---------------------
KEY = "Rx/6QZThQmceSFH8rRdMRR2xVtey5h8bcBJCnkdfUVc="


@pytest.mark.parametrize("value, kept", [
    (" https://cdn.example/manuals ", "https://cdn.example/manuals"), ("/mnt/share/manuals", "/mnt/share/manuals"),
    ("file:///srv/b", "file:///srv/b"), ("", None), ("ftp://host/x", None), (42, None), ("a\x00b", None),
])
def test_bundle_source_is_a_folder_or_an_http_url(value, kept):
    from engine.config import Settings

    assert Settings(bundle_source=value).bundle_source == kept


def test_bad_bundle_keys_are_left_out_and_good_ones_kept_once(tmp_path, caplog):
    from engine.config import load_settings

    path = tmp_path / "settings.toml"
    path.write_text(f'bundle_keys = ["{KEY}", "not a key", "{KEY}", 7]\nbundle_poll_s = 0.5\n')
    settings = load_settings(path)
    assert settings.bundle_keys == (KEY,)
    assert settings.bundle_poll_s == 2.0  # clamped
    assert "bundle_keys" in caplog.text and "not a key" in caplog.text


def test_bundle_settings_survive_a_save(tmp_path):
    from engine.config import Settings, load_settings, save_settings

    settings = Settings(bundle_source="http://10.0.0.5/manuals", bundle_keys=(KEY,), bundle_poll_s=300)
    save_settings(tmp_path / "s.toml", settings)
    assert load_settings(tmp_path / "s.toml") == settings
