"""offline-assistant-cli admin bundle: keygen, build, verify, publish, install, status, rollback,
with the exit codes and messages a person sees. Installs here expect the tiny embedder."""

from __future__ import annotations

import json
import stat

import pytest

from engine.cli.main import main
from engine.fleet import kiosk as fleet_kiosk
from engine.paths import AppPaths
from tests.engine.test_bundle import MANUALS, NAME, add_manual, open_writer


@pytest.fixture
def admin_dir(tmp_path, tiny_embedder):
    paths = AppPaths(tmp_path / "admin").ensure()
    with open_writer(paths, tiny_embedder) as store:
        for name, pages in MANUALS.items():
            add_manual(store, tiny_embedder, tmp_path / name, pages)
    return paths.root


@pytest.fixture
def tiny_is_builtin(monkeypatch, tiny_embedder):
    """The kiosk's own embedder is the tiny one here (a real kiosk's is the built-in one)."""
    monkeypatch.setattr(fleet_kiosk, "builtin_embedder_id", lambda paths: tiny_embedder.model_id)


def run(capsys, *argv) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_keygen_build_verify_publish_install_status_rollback(tmp_path, admin_dir, tiny_is_builtin, capsys):
    key = tmp_path / "k.pem"
    code, public, _ = run(capsys, "admin", "bundle", "keygen", "--out", str(key))
    public = public.strip()
    assert code == 0 and stat.S_IMODE(key.stat().st_mode) == 0o600 and len(public) == 44

    kiosk = str(tmp_path / "kiosk")
    for version in (1, 2):
        code, out, _ = run(capsys, "admin", "bundle", "build", "--data-dir", str(admin_dir), "--collection", NAME,
                           "--key", str(key), "--out", str(tmp_path / f"b{version}.tar"), "--version", str(version))
        assert code == 0 and f"version {version} of '{NAME}'" in out
    code, out, _ = run(capsys, "admin", "bundle", "verify", str(tmp_path / "b1.tar"), "--trust", public,
                       "--data-dir", kiosk)
    assert code == 0 and "is good" in out
    code, out, _ = run(capsys, "admin", "bundle", "publish", str(tmp_path / "b1.tar"), str(tmp_path / "source"),
                       "--trust", public, "--data-dir", kiosk)
    assert code == 0 and json.loads((tmp_path / "source" / "latest.json").read_text())["version"] == 1

    for version in (1, 2):
        code, out, _ = run(capsys, "admin", "bundle", "install", str(tmp_path / f"b{version}.tar"),
                           "--trust", public, "--data-dir", kiosk)
        assert code == 0 and f"versions/{version}" in out
    code, out, _ = run(capsys, "admin", "bundle", "status", "--json", "--data-dir", kiosk)
    assert json.loads(out)["collections"][NAME]["current"] == 2
    code, out, _ = run(capsys, "admin", "bundle", "rollback", "--data-dir", kiosk)
    assert code == 0 and "version 1 is current" in out
    code, out, _ = run(capsys, "admin", "bundle", "status", "--data-dir", kiosk)
    assert f"{NAME}: version 1" in out


def test_refusals_exit_1_naming_the_file(tmp_path, admin_dir, tiny_is_builtin, capsys):
    key = tmp_path / "k.pem"
    run(capsys, "admin", "bundle", "keygen", "--out", str(key))
    bundle = tmp_path / "b.tar"
    run(capsys, "admin", "bundle", "build", "--data-dir", str(admin_dir), "--collection", NAME,
        "--key", str(key), "--out", str(bundle), "--version", "1")
    kiosk = str(tmp_path / "kiosk")

    code, _, err = run(capsys, "admin", "bundle", "install", str(bundle), "--data-dir", kiosk)
    assert code == 1 and str(bundle) in err and "no trusted bundle keys" in err

    other = tmp_path / "other.pem"
    _, stranger, _ = run(capsys, "admin", "bundle", "keygen", "--out", str(other))
    code, _, err = run(capsys, "admin", "bundle", "verify", str(bundle), "--trust", stranger.strip(),
                       "--data-dir", kiosk)
    assert code == 1 and "does not trust" in err
    code, _, err = run(capsys, "admin", "bundle", "keygen", "--out", str(other))
    assert code == 1 and "already exists" in err
    code, _, err = run(capsys, "admin", "bundle", "rollback", "--data-dir", kiosk)
    assert code == 1 and "--collection" in err
    assert "refused" in (tmp_path / "kiosk" / "audit" / "bundles.jsonl").read_text()
