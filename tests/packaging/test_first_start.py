"""`make run`'s first step on a minimal Debian: the display-library check, in a real chroot (issue 15).

mmdebstrap builds a minbase Debian of the host's release with python3 alone (about 25 s). In it,
desktop_app/system_libs.py run with the chroot's python3 prints the `apt install` line. With the
libraries every desktop has (Qt's own: GL, fontconfig, glib...) but not the X11 plugin's
(libxcb-cursor0 and friends), the app started directly (this venv's `offline-assistant`,
bind-mounted read-only with the repository) says the same sentence and apt line instead of
Qt's abort (issue 29). Then system_libs.py as root installs the packages; after that PySide6's
X11 plugin and modules find every system library, `python3 -m venv` works, and a QApplication
opens a window on the xcb platform under Xvfb.

Needs Linux, root, mmdebstrap and Debian's package archive: elsewhere it skips, except under CI,
where it fails. About 1 minute.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = [pytest.mark.slow, pytest.mark.packaging]

REPO = Path(__file__).resolve().parents[2]
PYSIDE = Path(__import__("PySide6").__file__).parent
IN_VENV_ONLY = ("libshiboken6", "libpyside6")  # shipped by the wheels, not the system
START_QT = ("from PySide6.QtWidgets import QApplication, QLabel\n"
            "app = QApplication([]); label = QLabel('first start'); label.show()\n"
            "app.processEvents(); print('platform', app.platformName(), label.isVisible())\n")


def _why_not() -> str | None:
    if not sys.platform.startswith("linux"):
        return "the chroot is a Debian one: Linux only"
    if os.geteuid() != 0:
        return "building and entering a chroot needs root"
    if not shutil.which("mmdebstrap"):
        return "mmdebstrap is not installed (apt-get install mmdebstrap)"
    if not Path("/etc/debian_version").exists():
        return "not a Debian or Ubuntu host"
    return None


@pytest.fixture(scope="module")
def chroot(tmp_path_factory):
    reason = _why_not()
    if reason:
        if os.environ.get("CI"):
            pytest.fail(f"the first-start test cannot run: {reason}")
        pytest.skip(reason)
    root = tmp_path_factory.mktemp("minimal-debian") / "root"
    built = subprocess.run(["mmdebstrap", "--variant=minbase", "--include=python3", "--quiet",
                            _codename(), str(root)], capture_output=True, text=True, timeout=600)
    assert built.returncode == 0, built.stderr[-3000:]
    shutil.copy(REPO / "desktop_app" / "system_libs.py", root / "tmp" / "system_libs.py")
    mounts: list[Path] = []
    try:
        yield root, mounts
    finally:
        for target in reversed(mounts):
            subprocess.run(["umount", str(target)], check=True)
        if not _mounted_under(root):  # never delete through a bind mount
            shutil.rmtree(root, ignore_errors=True)


def test_a_minimal_debian_gets_the_libraries_and_the_window_opens(chroot):
    root, mounts = chroot
    check = ["python3", "/tmp/system_libs.py", "--venv", "/tmp/no-venv-yet"]

    told = _in(root, *check, "--no-install")
    assert told.returncode == 1
    line = [s for s in told.stderr.splitlines() if s.startswith("    apt install ")]
    assert len(line) == 1, told.stderr
    for package in ("libxcb-cursor0", "libxcb-icccm4", "libxcb-keysyms1", "libxkbcommon-x11-0",
                    "libegl1", "libfontconfig1", "python3-venv"):
        assert package in line[0].split()
    print(told.stderr)  # the report: what a user without root reads

    # a desktop without the X11 plugin's libraries: Qt's own, as the Wayland check installs them
    desktop = _in(root, "python3", "/tmp/system_libs.py", env={"QT_QPA_PLATFORM": "wayland"}, timeout=900)
    assert desktop.returncode == 0, desktop.stderr[-3000:]
    _bind_python(root, mounts)
    started = _in(root, *_app(), "--data-dir", "/tmp/oa-data")
    assert started.returncode == 1, started.stderr[-3000:]
    assert "Qt platform plugin" not in started.stderr and "Traceback" not in started.stderr, started.stderr
    said = started.stderr.splitlines()
    assert said[0].startswith("The window needs system libraries that are missing here: ")
    assert "libxcb-cursor.so.0" in said[0] and said[1] == "Install them, then start offline-assistant again:"
    make_says = _in(root, "python3", "/tmp/system_libs.py", "--no-install").stderr.splitlines()
    assert said[0] == make_says[0] and said[2] == make_says[2]  # `make system-libs`' sentence and apt line
    print(started.stderr)  # the report: what the direct start says

    installed = _in(root, *check, timeout=900)
    assert installed.returncode == 0, installed.stderr[-3000:]
    again = _in(root, *check)
    assert (again.returncode, again.stderr) == (0, "")
    assert _in(root, "python3", "-m", "venv", "/tmp/venv").returncode == 0

    assert _unresolved(root, PYSIDE) == []

    assert _in(root, "apt-get", "install", "-y", "-qq", "--no-install-recommends", "xvfb", "xauth",
               timeout=900).returncode == 0
    shown = _in(root, "xvfb-run", "-a", "-s", "-screen 0 1366x768x24", sys.executable, "-c",
                START_QT, env={"QT_QPA_PLATFORM": "xcb"})
    assert shown.returncode == 0, shown.stderr[-3000:]
    assert shown.stdout.split() == ["platform", "xcb", "True"]


def _in(root: Path, *command: str, env=None, timeout=120) -> subprocess.CompletedProcess:
    """command run in the chroot with a clean environment, as on a fresh desktop login."""
    env = {"PATH": "/usr/sbin:/usr/bin:/sbin:/bin", "HOME": "/root", "LANG": "C.UTF-8",
           "DISPLAY": ":0", **(env or {})}
    return subprocess.run(["chroot", str(root), "env", "-i",
                           *(f"{k}={v}" for k, v in env.items()), *command],
                          capture_output=True, text=True, timeout=timeout)


def _bind_python(root: Path, mounts: list[Path]) -> None:
    """This venv and the repository (its editable install) in the chroot at the same paths, and
    the interpreter, unless it is the system's (/usr: the chroot's python3 is the same
    release's)."""
    folders = {REPO, Path(sys.prefix)} | ({Path(sys.base_prefix)} - {Path("/usr")})
    for folder in sorted(folders):
        if not any(folder != other and folder.is_relative_to(other) for other in folders):
            _bind(root, folder, mounts)


def _app() -> list[str]:
    """The app as a user starts it directly: the venv's `offline-assistant` (its shebang names
    the venv's python), or the module where the venv has no such script."""
    script = Path(sys.prefix) / "bin" / "offline-assistant"
    return [str(script)] if script.exists() else [sys.executable, "-m", "desktop_app.app"]


def _bind(root: Path, folder: Path, mounts: list[Path]) -> None:
    target = root / str(folder).lstrip("/")
    target.mkdir(parents=True, exist_ok=True)
    subprocess.run(["mount", "--bind", "-o", "ro", str(folder), str(target)], check=True)
    mounts.append(target)


def _unresolved(root: Path, pyside: Path) -> list[str]:
    """System libraries that ldd cannot find for the X11 plugin and the Qt modules we import."""
    files = [pyside / "Qt/plugins/platforms/libqxcb.so",
             *(pyside / "Qt/plugins/xcbglintegrations").glob("*.so"),
             *(pyside / f"{m}.abi3.so" for m in ("QtCore", "QtGui", "QtWidgets", "QtPdf",
                                                 "QtPdfWidgets"))]
    missing = set()
    for file in files:
        listed = _in(root, "ldd", str(file)).stdout
        missing |= {line.split()[0] for line in listed.splitlines() if "not found" in line}
    return sorted(name for name in missing if not name.startswith(IN_VENV_ONLY))


def _mounted_under(root: Path) -> bool:
    return any(line.split()[1].startswith(str(root)) for line in
               Path("/proc/mounts").read_text().splitlines())


def _codename() -> str:
    for line in Path("/etc/os-release").read_text().splitlines():
        if line.startswith("VERSION_CODENAME="):
            return line.split("=", 1)[1].strip('"') or "stable"
    return "stable"
