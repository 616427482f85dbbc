"""desktop_app/system_libs.py: what `make run` says or installs when Qt's display libraries are missing.

Fast: the library lookup, apt and root are replaced by fakes. The same check in a real minimal
Debian (a chroot) is in tests/packaging/test_first_start.py.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

from desktop_app import system_libs

SCRIPT = Path(system_libs.__file__)
XCB_NEEDED = set(system_libs.needed_libraries("xcb"))
# the three a minimal Debian lacked in issue 15
THREE_MISSING = XCB_NEEDED - {"libxcb-cursor.so.0", "libxcb-icccm.so.4", "libxcb-keysyms.so.1"}
THREE_LINE = "    sudo apt install libxcb-cursor0 libxcb-icccm4 libxcb-keysyms1"


def _main(*argv, env=None, available=THREE_MISSING, **kwargs):
    kwargs.setdefault("is_root", False)
    kwargs.setdefault("has_apt", True)
    kwargs.setdefault("known", lambda package: False)
    return system_libs.main(list(argv), env={"DISPLAY": ":0"} if env is None else env,
                            lookup=lambda: set(available), **kwargs)


def test_missing_xcb_libraries_print_the_exact_apt_line(capsys):
    assert _main() == 1
    err = capsys.readouterr().err
    assert THREE_LINE in err.splitlines()
    assert "libxcb-cursor.so.0, libxcb-icccm.so.4, libxcb-keysyms.so.1" in err


def test_nothing_missing_says_nothing(capsys):
    assert _main(available=XCB_NEEDED) == 0
    assert capsys.readouterr().err == ""


def test_renamed_packages_use_the_name_apt_has(capsys):
    available = XCB_NEEDED - {"libglib-2.0.so.0", "libgthread-2.0.so.0"}
    assert _main(available=available, known=lambda p: p == "libglib2.0-0t64") == 1
    assert "    sudo apt install libglib2.0-0t64" in capsys.readouterr().err.splitlines()


def test_root_with_apt_installs_non_interactively_then_checks_again():
    commands = []

    def run(command, env):
        commands.append((command, env["DEBIAN_FRONTEND"]))
        return SimpleNamespace(returncode=0)

    lookups = iter([THREE_MISSING, XCB_NEEDED])
    code = system_libs.main([], env={"DISPLAY": ":0"}, lookup=lambda: next(lookups),
                            is_root=True, has_apt=True, known=lambda p: False, run=run)
    assert code == 0
    assert commands == [
        (["apt-get", "update", "-qq"], "noninteractive"),
        (["apt-get", "install", "-y", "-qq", "--no-install-recommends",
          "libxcb-cursor0", "libxcb-icccm4", "libxcb-keysyms1"], "noninteractive")]


def test_a_failed_install_exits_non_zero(capsys):
    code = _main(is_root=True, run=lambda command, env: SimpleNamespace(returncode=100))
    assert code == 1
    assert "could not be installed" in capsys.readouterr().err


def test_root_without_apt_names_the_packages_and_does_not_install(capsys):
    assert _main(is_root=True, has_apt=False, run=None) == 1
    assert "`apt install libxcb-cursor0 libxcb-icccm4 libxcb-keysyms1`" in capsys.readouterr().err


def test_wayland_only_checks_the_wayland_libraries(capsys):
    available = set(system_libs.COMMON) | {"libwayland-client.so.0", "libwayland-egl.so.1"}
    assert _main(env={"WAYLAND_DISPLAY": "wayland-0"}, available=available) == 1
    assert "    sudo apt install libwayland-cursor0" in capsys.readouterr().err.splitlines()


@pytest.mark.parametrize("platform", ["offscreen", "minimal", "eglfs"])
def test_other_qt_platforms_skip_the_check(platform, capsys):
    assert _main(env={"QT_QPA_PLATFORM": platform}, available=set()) == 0
    assert f"QT_QPA_PLATFORM={platform}" in capsys.readouterr().err


def test_no_display_fails_early_and_says_what_to_do(capsys):
    assert _main(env={}, available=XCB_NEEDED) == 1
    assert "DISPLAY and WAYLAND_DISPLAY are unset" in capsys.readouterr().err


def test_no_venv_yet_and_no_ensurepip_asks_for_python3_venv(tmp_path, capsys):
    code = _main("--venv", str(tmp_path / "venv"), available=XCB_NEEDED, has_venv=False)
    assert code == 1
    assert "    sudo apt install python3-venv" in capsys.readouterr().err.splitlines()
    (tmp_path / "venv" / "bin").mkdir(parents=True)
    (tmp_path / "venv" / "bin" / "python").touch()
    assert _main("--venv", str(tmp_path / "venv"), available=XCB_NEEDED, has_venv=False) == 0


def test_ldconfig_output_counts_only_this_architecture():
    output = ("3 libs found in cache `/etc/ld.so.cache'\n"
              "\tlibxcb.so.1 (libc6,x86-64) => /lib/x86_64-linux-gnu/libxcb.so.1\n"
              "\tlibxcb-cursor.so.0 (libc6) => /lib/i386-linux-gnu/libxcb-cursor.so.0\n"
              "\tlibGL.so.1 (libc6,x86-64) => /lib/x86_64-linux-gnu/libGL.so.1\n")
    assert system_libs.sonames_from_ldconfig(output, "x86_64") == {"libxcb.so.1", "libGL.so.1"}


def test_the_script_runs_with_no_site_packages_against_a_library_folder(tmp_path):
    """As `make run` runs it: a bare python (-S: nothing installed), libraries from --lib-dir."""
    for name in THREE_MISSING:
        (tmp_path / name).touch()
    done = subprocess.run([sys.executable, "-S", str(SCRIPT), "--lib-dir", str(tmp_path),
                           "--no-install"], env={"DISPLAY": ":0", "PATH": "/usr/bin:/bin"},
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 1, done.stderr
    assert "apt install libxcb-cursor0 libxcb-icccm4 libxcb-keysyms1" in done.stderr


def test_a_python_too_old_for_the_venv_says_which_to_use(tmp_path, capsys):
    code = _main("--venv", str(tmp_path / "venv"), available=XCB_NEEDED, has_venv=True,
                 version=(3, 10))
    assert code == 1
    assert "`make run PYTHON=python3.11`" in capsys.readouterr().err


def test_installing_resolves_renamed_packages_after_apt_get_update():
    """A fresh container has no package lists: apt knows the t64 names only after the update."""
    commands = []
    known = lambda package: ["apt-get", "update", "-qq"] in commands  # noqa: E731
    run = lambda command, env: commands.append(command) or SimpleNamespace(returncode=0)  # noqa: E731
    available = XCB_NEEDED - {"libpng16.so.16"}
    lookups = iter([available, XCB_NEEDED])
    code = system_libs.main([], env={"DISPLAY": ":0"}, lookup=lambda: next(lookups), is_root=True,
                            has_apt=True, known=known, run=run)
    assert code == 0
    assert commands[-1][-1] == "libpng16-16t64"


# -- the app started directly (issue 29) -------------------------------------------------------
def test_the_app_says_what_make_run_says_where_qt_would_abort():
    """`offline-assistant` on a machine without the three libraries: the same sentence and apt
    line as `make system-libs`, telling to start the app again, before Qt is started."""
    why = system_libs.why_the_window_cannot_open(env={"DISPLAY": ":0"}, lookup=lambda: set(THREE_MISSING),
                                                 is_root=False, has_apt=True, known=lambda package: False)
    lines = why.splitlines()
    assert lines[0] == ("The window needs system libraries that are missing here: "
                        "libxcb-cursor.so.0, libxcb-icccm.so.4, libxcb-keysyms.so.1.")
    assert lines[1:] == ["Install them, then start offline-assistant again:", THREE_LINE]
    everything = dict(env={"DISPLAY": ":0"}, lookup=lambda: XCB_NEEDED)
    assert system_libs.why_the_window_cannot_open(**everything) == ""
    assert system_libs.why_the_window_cannot_open(env={"QT_QPA_PLATFORM": "offscreen"}, lookup=set) == ""


def test_libraries_in_ld_library_path_count(tmp_path):
    """A library the app would load from LD_LIBRARY_PATH is not reported missing."""
    (tmp_path / "libxcb-cursor.so.0").touch()
    found = system_libs.app_sonames({"LD_LIBRARY_PATH": f"/nowhere{os.pathsep}{tmp_path}"})
    assert "libxcb-cursor.so.0" in found


def test_the_app_started_with_no_display_says_so_instead_of_aborting(tmp_path):
    """The real entry point, with no DISPLAY: Qt's xcb plugin would abort (SIGABRT, exit 134)
    with "could not connect to display"; the app says what to do and exits 1."""
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": str(tmp_path)}
    done = subprocess.run([sys.executable, "-m", "desktop_app.app", "--data-dir", str(tmp_path / "data")],
                          env=env, cwd=Path(__file__).resolve().parents[2], capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 1, done.stderr
    assert "DISPLAY and WAYLAND_DISPLAY are unset" in done.stderr and "offline-assistant-cli" in done.stderr
    assert "Qt platform plugin" not in done.stderr
