"""The system libraries the window needs on Linux, checked before `make run` builds anything.

Qt's xcb (X11) and wayland platform plugins load libraries that PySide6's wheels do not ship and
a minimal Debian or Ubuntu does not have (libxcb-cursor0, libxcb-icccm4, ...). Without them Qt
aborts at start, after minutes of set-up. This script finds the missing ones and, as root with
apt-get, installs them; otherwise it prints the `sudo apt install ...` line and exits 1. It
also checks, while there is no venv yet, that this python3 is new enough and that
`python3 -m venv` can work (Debian's python3-venv).

It runs with the system python3 alone: standard library only, no Qt, nothing from the venv.
  python3 desktop_app/system_libs.py [--venv .venv] [--lib-dir DIR ...] [--no-install]

The app runs the same check before it starts Qt (`why_the_window_cannot_open`), and says the
same sentence and apt line instead of Qt's abort when it is started directly.
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import platform
import shutil
import subprocess
import sys
from pathlib import Path

# soname -> Debian/Ubuntu package, from `ldd` on PySide6's libqxcb.so, its xcbglintegrations,
# QtGui/QtWidgets/QtPdf and their dependencies (glibc, libstdc++ and zlib are always there).
COMMON = {
    "libEGL.so.1": "libegl1",
    "libGL.so.1": "libgl1",
    "libGLX.so.0": "libglx0",
    "libGLdispatch.so.0": "libglvnd0",
    "libfontconfig.so.1": "libfontconfig1",
    "libfreetype.so.6": "libfreetype6",
    "libpng16.so.16": "libpng16-16",
    "libbrotlidec.so.1": "libbrotli1",
    "libexpat.so.1": "libexpat1",
    "libglib-2.0.so.0": "libglib2.0-0",
    "libgthread-2.0.so.0": "libglib2.0-0",
    "libpcre2-8.so.0": "libpcre2-8-0",
    "libdbus-1.so.3": "libdbus-1-3",
    "libxkbcommon.so.0": "libxkbcommon0",
}
XCB = {
    "libX11.so.6": "libx11-6",
    "libX11-xcb.so.1": "libx11-xcb1",
    "libxcb.so.1": "libxcb1",
    "libxcb-cursor.so.0": "libxcb-cursor0",
    "libxcb-glx.so.0": "libxcb-glx0",
    "libxcb-icccm.so.4": "libxcb-icccm4",
    "libxcb-image.so.0": "libxcb-image0",
    "libxcb-keysyms.so.1": "libxcb-keysyms1",
    "libxcb-randr.so.0": "libxcb-randr0",
    "libxcb-render.so.0": "libxcb-render0",
    "libxcb-render-util.so.0": "libxcb-render-util0",
    "libxcb-shape.so.0": "libxcb-shape0",
    "libxcb-shm.so.0": "libxcb-shm0",
    "libxcb-sync.so.1": "libxcb-sync1",
    "libxcb-util.so.1": "libxcb-util1",
    "libxcb-xfixes.so.0": "libxcb-xfixes0",
    "libxcb-xkb.so.1": "libxcb-xkb1",
    "libxkbcommon-x11.so.0": "libxkbcommon-x11-0",
}
WAYLAND = {
    "libwayland-client.so.0": "libwayland-client0",
    "libwayland-cursor.so.0": "libwayland-cursor0",
    "libwayland-egl.so.1": "libwayland-egl1",
}
# Debian 13 and Ubuntu 24.04 renamed these (the 64-bit time_t transition)
RENAMED = {"libglib2.0-0": "libglib2.0-0t64", "libpng16-16": "libpng16-16t64"}
VENV_PACKAGE = "python3-venv"  # Debian's python3 has no ensurepip without it
ARCH_TAGS = {"x86_64": "x86-64", "aarch64": "AArch64"}  # as `ldconfig -p` writes them
MIN_PYTHON = (3, 11)  # pyproject.toml's requires-python
OTHER_PLATFORMS = "the window will use QT_QPA_PLATFORM={}: no X11/Wayland libraries checked"


def platform_to_check(env) -> tuple[str | None, str]:
    """Which Qt platform plugin will start ("xcb", "wayland") or None, and why."""
    chosen = env.get("QT_QPA_PLATFORM", "").split(";")[0].strip().lower()
    if chosen in ("xcb", "wayland", "wayland-egl"):
        return chosen.split("-")[0], ""
    if chosen:
        return None, OTHER_PLATFORMS.format(chosen)
    if env.get("DISPLAY"):  # Qt prefers X11 and falls back to it on Wayland desktops
        return "xcb", ""
    if env.get("WAYLAND_DISPLAY"):
        return "wayland", ""
    return None, ("no display here (DISPLAY and WAYLAND_DISPLAY are unset): the window cannot "
                  "open. Start it in a desktop session, use offline-assistant-cli, or set "
                  "QT_QPA_PLATFORM=offscreen to start it with no screen.")


def needed_libraries(plugin: str) -> dict[str, str]:
    return {**COMMON, **(XCB if plugin == "xcb" else WAYLAND)}


def sonames_from_ldconfig(output: str, machine: str | None = None) -> set[str]:
    """The sonames in `ldconfig -p` output, for this machine's architecture only."""
    tag = ARCH_TAGS.get(machine or platform.machine())
    found = set()
    for line in output.splitlines()[1:]:
        name, _, rest = line.strip().partition(" (")
        if name and (tag is None or tag in rest.split(")")[0]):
            found.add(name)
    return found


def sonames_in_dirs(dirs) -> set[str]:
    return {p.name for d in dirs if Path(d).is_dir() for p in Path(d).iterdir()}


def app_sonames(env) -> set[str]:
    """The libraries the app finds: the system's, LD_LIBRARY_PATH's and, in an installed
    (frozen) app, those it carries itself."""
    dirs = [d for d in env.get("LD_LIBRARY_PATH", "").split(os.pathsep) if d]
    if getattr(sys, "frozen", False):
        dirs.append(getattr(sys, "_MEIPASS", str(Path(sys.executable).parent)))
    return system_sonames() | sonames_in_dirs(dirs)


def system_sonames() -> set[str]:
    ldconfig = shutil.which("ldconfig", path=os.pathsep.join(
        [os.environ.get("PATH", ""), "/usr/sbin", "/sbin"]))
    if ldconfig:
        done = subprocess.run([ldconfig, "-p"], capture_output=True, text=True)
        if done.returncode == 0:
            return sonames_from_ldconfig(done.stdout)
    return sonames_in_dirs(["/lib", "/usr/lib", "/lib64", "/usr/lib64",
                            f"/usr/lib/{platform.machine()}-linux-gnu"])


def missing(needed: dict[str, str], available: set[str]) -> dict[str, str]:
    return {so: pkg for so, pkg in needed.items() if so not in available}


def apt_names(packages, known=None) -> list[str]:
    """Package names as this release's apt knows them (the renamed one where apt has it)."""
    known = known or _apt_has
    return sorted({RENAMED[p] if p in RENAMED and known(RENAMED[p]) else p for p in packages})


def _apt_has(package: str) -> bool:
    if not shutil.which("apt-cache"):
        return False
    done = subprocess.run(["apt-cache", "show", "--no-all-versions", package],
                          capture_output=True, text=True)
    return done.returncode == 0 and bool(done.stdout.strip())


def venv_possible() -> bool:
    return importlib.util.find_spec("ensurepip") is not None


def install(packages, known=None, run=subprocess.run) -> bool:
    """apt-get update, then install non-interactively; True when both worked.

    The names are resolved after the update: a fresh container has no package lists before it.
    """
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    if run(["apt-get", "update", "-qq"], env=env).returncode != 0:
        return False
    names = apt_names(packages, known)
    print(f"installing the missing system packages: {' '.join(names)}", file=sys.stderr)
    command = ["apt-get", "install", "-y", "-qq", "--no-install-recommends", *names]
    return run(command, env=env).returncode == 0


def _parse(argv):
    parser = argparse.ArgumentParser(description="Check the system libraries the window needs.")
    parser.add_argument("--venv", help="the project's venv: python3-venv is checked while it is absent")
    parser.add_argument("--lib-dir", action="append", default=[],
                        help="look libraries up in DIR instead of ldconfig's cache (repeatable)")
    parser.add_argument("--no-install", action="store_true",
                        help="only print what is missing, even as root")
    return parser.parse_args(argv)


def main(argv=None, env=None, lookup=None, is_root=None, has_apt=None, has_venv=None,
         known=None, run=subprocess.run, version=sys.version_info[:2]) -> int:
    """Exit code 0 when nothing is missing (or all was installed), 1 otherwise.

    The keyword arguments replace what is looked up on this machine (for the tests): lookup()
    gives the sonames there are, known(package) says whether apt has that package.
    """
    args = _parse(argv)
    env = os.environ if env is None else env
    if not sys.platform.startswith("linux"):
        return 0
    plugin, why = platform_to_check(env)
    if why:
        print(why, file=sys.stderr)
        if plugin is None and not env.get("QT_QPA_PLATFORM"):
            return 1
    if lookup is None:
        lookup = (lambda: sonames_in_dirs(args.lib_dir)) if args.lib_dir else system_sonames
    packages = missing(needed_libraries(plugin), lookup()) if plugin else {}
    if args.venv and not Path(args.venv, "bin", "python").exists():
        if version < MIN_PYTHON:
            print(_too_old(version), file=sys.stderr)
            return 1
        if not (venv_possible() if has_venv is None else has_venv):
            packages["python3 -m venv (ensurepip)"] = VENV_PACKAGE
    if not packages:
        return 0
    is_root = os.geteuid() == 0 if is_root is None else is_root
    has_apt = bool(shutil.which("apt-get")) if has_apt is None else has_apt
    if not (is_root and has_apt and not args.no_install):
        print(explanation(packages, apt_names(packages.values(), known), is_root, has_apt), file=sys.stderr)
        return 1
    if not install(packages.values(), known, run):
        print("the system packages could not be installed (see apt-get's messages above)",
              file=sys.stderr)
        return 1
    still = missing(needed_libraries(plugin), lookup()) if plugin else {}
    if still:
        print(f"still missing after installing: {', '.join(sorted(still))}", file=sys.stderr)
        return 1
    return 0


def why_the_window_cannot_open(env=None, lookup=None, is_root=None, has_apt=None, known=None) -> str:
    """What the app says, before it starts Qt, when the window cannot open here (Qt would abort
    with "Could not load the Qt platform plugin"): the missing libraries and the apt line, as
    `make run` says them, or that there is no display. "" when nothing is missing, off Linux,
    or with another platform plugin chosen (offscreen). The keyword arguments are main()'s."""
    env = os.environ if env is None else env
    if not sys.platform.startswith("linux"):
        return ""
    plugin, why = platform_to_check(env)
    if plugin is None:
        return "" if env.get("QT_QPA_PLATFORM") else why
    packages = missing(needed_libraries(plugin), (lookup or (lambda: app_sonames(env)))())
    if not packages:
        return ""
    is_root = os.geteuid() == 0 if is_root is None else is_root
    has_apt = bool(shutil.which("apt-get")) if has_apt is None else has_apt
    return explanation(packages, apt_names(packages.values(), known), is_root, has_apt,
                       "start offline-assistant again")


def _too_old(version) -> str:
    have, need = ".".join(map(str, version)), ".".join(map(str, MIN_PYTHON))
    return (f"the app needs Python {need} or newer and this python3 is {have}: install a newer "
            f"one (e.g. `sudo apt install python{need} python{need}-venv`) and run "
            f"`make run PYTHON=python{need}`")


def explanation(packages: dict[str, str], names: list[str], is_root: bool, has_apt: bool,
                then: str = "run `make run` again") -> str:
    """The missing libraries, and the apt line that installs them."""
    lines = [f"The window needs system libraries that are missing here: {', '.join(sorted(packages))}."]
    command = ("" if is_root else "sudo ") + "apt install " + " ".join(names)
    if has_apt:
        lines += [f"Install them, then {then}:", f"    {command}"]
    else:
        lines.append(f"Install the packages that provide them (on Debian or Ubuntu: `{command}`), "
                     f"then {then}.")
    return "\n".join(lines)


if __name__ == "__main__":
    sys.exit(main())
