"""offline-assistant-cli admin bundle: keygen, build, verify, publish, install, status, rollback,
with the exit codes and messages a person sees. Installs here expect the tiny embedder."""

from __future__ import annotations

import json
import os
import shlex
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from engine.cli.main import main
from engine.fleet import kiosk as fleet_kiosk
from engine.fleet.bundle import load_private_key, public_key_text, trusted_keys
from engine.paths import APP_NAME, AppPaths
from engine.store.index_store import IndexStore
from tests.engine.fleet.test_bundle import MANUALS, NAME, add_manual, open_writer

REPO = Path(__file__).resolve().parents[3]
CLI_FOLDER = Path(sys.executable).parent  # the venv's bin, where offline-assistant-cli is installed


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


def test_keygen_refuses_an_existing_public_key_file_and_writes_nothing(tmp_path, capsys):
    public = tmp_path / "fleet.pub"
    public.write_text("an older fleet's key\n")
    code, _, err = run(capsys, "admin", "bundle", "keygen", "--private", str(tmp_path / "new.key"),
                       "--public", str(public))
    assert code == 1 and f"{public} already exists" in err
    assert not (tmp_path / "new.key").exists() and public.read_text() == "an older fleet's key\n"


# -- the command lines README.md and docs/fleet.md print, run as a user pastes them ------------
def documented(page: str, action: str) -> str:
    """The first `offline-assistant-cli admin bundle ACTION` line of a page (its comment kept:
    the shell drops it, as it does for the user)."""
    prefix = f"offline-assistant-cli admin bundle {action} "
    lines = [line.strip() for line in (REPO / page).read_text(encoding="utf-8").splitlines()
             if line.strip().startswith(prefix)]
    assert lines, f"{page} prints no '{prefix}' line"
    return lines[0]


def option(line: str, name: str) -> str:
    words = shlex.split(line, comments=True)
    return words[words.index(name) + 1]


def shell(script: str, cwd: Path) -> subprocess.CompletedProcess:
    """Runs the lines in bash with the installed offline-assistant-cli; the default data dir is
    cwd/xdg/APP_NAME (platformdirs follows XDG_DATA_HOME)."""
    assert (CLI_FOLDER / "offline-assistant-cli").is_file(), f"offline-assistant-cli is not installed in {CLI_FOLDER}"
    env = {**os.environ, "PATH": f"{CLI_FOLDER}{os.pathsep}{os.environ['PATH']}", "XDG_DATA_HOME": str(cwd / "xdg")}
    return subprocess.run(["bash", "-e", "-c", script], cwd=cwd, env=env, capture_output=True, text=True,
                          timeout=120)


@pytest.mark.parametrize("page", ["README.md", "docs/fleet.md"])
def test_the_documented_keygen_line_writes_the_private_and_the_public_key(tmp_path, page):
    line = documented(page, "keygen")
    done = shell(line, tmp_path)
    assert done.returncode == 0, done.stderr
    private, public = tmp_path / option(line, "--private"), tmp_path / option(line, "--public")
    assert stat.S_IMODE(private.stat().st_mode) == 0o600
    assert public.read_text() == public_key_text(load_private_key(private)) + "\n"
    assert done.stdout.strip() == public.read_text().strip()

    kiosk = AppPaths(tmp_path / "kiosk").ensure()  # the kiosk's settings take the file's content as is
    kiosk.settings_file.write_text(f"bundle_keys = [{json.dumps(public.read_text().strip())}]\n")
    assert trusted_keys(kiosk) == [public.read_text().strip()]


def test_the_documented_keygen_line_run_twice_refuses_and_keeps_both_keys(tmp_path):
    line = documented("docs/fleet.md", "keygen")
    assert shell(line, tmp_path).returncode == 0
    private, public = tmp_path / option(line, "--private"), tmp_path / option(line, "--public")
    before = private.read_bytes(), public.read_bytes()

    again = shell(line, tmp_path)

    assert again.returncode == 1 and f"{option(line, '--private')} already exists" in again.stderr
    assert (private.read_bytes(), public.read_bytes()) == before


def test_the_documented_keygen_build_and_verify_lines_work_together(tmp_path, tiny_embedder):
    lines = [documented("docs/fleet.md", action) for action in ("keygen", "build", "verify")]
    admin = AppPaths(tmp_path / "xdg" / APP_NAME).ensure()  # the default data dir of shell()
    with IndexStore.open(admin.collection(option(lines[1], "--collection")), embedder_id=tiny_embedder.model_id,
                         dimension=tiny_embedder.dimension) as store:
        add_manual(store, tiny_embedder, tmp_path / "pump.md", MANUALS["pump.md"])

    done = shell("\n".join(lines), tmp_path)

    assert done.returncode == 0, done.stderr
    assert f"{option(lines[1], '--out')} is good" in done.stdout
