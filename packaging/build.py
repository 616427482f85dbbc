"""Builds the installer for this operating system: `python packaging/build.py` (`make dist`).

    Linux    dist/offline-assistant_VERSION_ARCH.deb and dist/offline-assistant-VERSION-linux-ARCH.tar.gz
    Windows  dist/OfflineAssistant-VERSION-setup.exe   (needs Inno Setup's iscc)
    macOS    dist/OfflineAssistant-VERSION.dmg

Steps: prepare the built-in models (the GGUF converted to ONNX, each folder with a manifest of
SHA-256s), render the icon, freeze the app with PyInstaller (packaging/offline-assistant.spec),
then package the frozen folder the way this OS expects.
"""

from __future__ import annotations

import argparse
import os
import platform
import shutil
import subprocess
import sys
import tarfile
import time
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
BUILD = ROOT / "build"
STAGE = BUILD / "stage"  # what the spec reads: prepared models and the rendered icon
FROZEN = BUILD / "dist"
PACKAGING = ROOT / "packaging"
ICON_SVG = ROOT / "resources" / "icons" / "offline-assistant.svg"
NAME = "offline-assistant"
MIN_GLIBC = "2.28"  # used when objdump is not there to tell


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=ROOT / "dist", help="where the installers go")
    parser.add_argument("--reuse-frozen", action="store_true",
                        help="package the last frozen build again instead of freezing anew")
    parser.add_argument("--compression", choices=("xz", "zstd"), default="xz",
                        help="the .deb's compression: xz is 10%% smaller, zstd 20x faster to build")
    args = parser.parse_args(argv)
    version = project_version()
    if not args.reuse_frozen:
        prepare_models()
        render_icon()
        freeze()
    args.out.mkdir(parents=True, exist_ok=True)
    for path in package(version, args.out.resolve(), args.compression):
        print(f"built {path} ({path.stat().st_size / 1e6:.1f} MB)")
    return 0


def project_version() -> str:
    with open(ROOT / "pyproject.toml", "rb") as handle:
        return tomllib.load(handle)["project"]["version"]


def step(message: str) -> float:
    print(f"== {message}", flush=True)
    return time.perf_counter()


def prepare_models() -> None:
    started = step("preparing the built-in models")
    sys.path.insert(0, str(ROOT))
    from engine.models.registry import write_bundled_models

    for folder in write_bundled_models(STAGE / "models"):
        print(f"   {folder.name}: {sum(p.stat().st_size for p in folder.iterdir()) / 1e6:.1f} MB")
    print(f"   {time.perf_counter() - started:.1f} s")


def render_icon(size: int = 256) -> Path:
    """The PNG that the Linux menu, the Windows .exe and the macOS bundle use, drawn from the SVG."""
    target = STAGE / "icons" / f"{NAME}.png"
    target.parent.mkdir(parents=True, exist_ok=True)
    code = ("import sys\n"
            "from PySide6.QtCore import Qt\n"
            "from PySide6.QtGui import QGuiApplication, QImage, QPainter\n"
            "from PySide6.QtSvg import QSvgRenderer\n"
            "app = QGuiApplication(['render', '-platform', 'offscreen'])\n"
            f"image = QImage({size}, {size}, QImage.Format.Format_ARGB32)\n"
            "image.fill(Qt.GlobalColor.transparent)\n"
            "painter = QPainter(image)\n"
            "QSvgRenderer(sys.argv[1]).render(painter)\n"
            "painter.end()\n"
            "sys.exit(0 if image.save(sys.argv[2]) else 1)\n")
    subprocess.run([sys.executable, "-c", code, str(ICON_SVG), str(target)], check=True)
    return target


def freeze() -> None:
    started = step("freezing the app with PyInstaller")
    subprocess.run([sys.executable, "-m", "PyInstaller", "--noconfirm", "--log-level", "WARN",
                    "--distpath", str(FROZEN), "--workpath", str(BUILD / "pyinstaller"),
                    str(PACKAGING / "offline-assistant.spec")], check=True, cwd=ROOT)
    print(f"   {time.perf_counter() - started:.1f} s, {folder_size(FROZEN / NAME) / 1e6:.0f} MB")


def package(version: str, out: Path, compression: str) -> list[Path]:
    if sys.platform.startswith("linux"):
        return [build_deb(version, out, compression), build_tarball(version, out)]
    if sys.platform == "win32":
        return [build_windows_setup(version, out)]
    if sys.platform == "darwin":
        return [build_dmg(version, out)]
    raise SystemExit(f"no installer recipe for {sys.platform}")


# -- Linux -------------------------------------------------------------------------------------
def build_deb(version: str, out: Path, compression: str = "xz") -> Path:
    started = step("building the .deb")
    arch = subprocess.run(["dpkg", "--print-architecture"], capture_output=True, text=True,
                          check=True).stdout.strip()
    root = BUILD / "deb" / f"{NAME}_{version}_{arch}"
    shutil.rmtree(root, ignore_errors=True)
    opt = root / "opt" / NAME
    shutil.copytree(FROZEN / NAME, opt, symlinks=True)
    make_models_read_only(opt / "_internal" / "models")
    for program in (NAME, f"{NAME}-cli"):
        link = root / "usr" / "bin" / program
        link.parent.mkdir(parents=True, exist_ok=True)
        link.symlink_to(f"/opt/{NAME}/{program}")  # the bootloader finds its folder through the link
    install_file(PACKAGING / "linux" / f"{NAME}.desktop", root / "usr/share/applications")
    install_file(ICON_SVG, root / "usr/share/icons/hicolor/scalable/apps")
    install_file(STAGE / "icons" / f"{NAME}.png", root / "usr/share/icons/hicolor/256x256/apps")
    install_file(PACKAGING / "linux" / "copyright", root / f"usr/share/doc/{NAME}")
    # for kiosks: `systemctl --user enable --now offline-assistant-kiosk` (README, "Running as a kiosk")
    install_file(PACKAGING / "linux" / f"{NAME}-kiosk.service", root / "usr/lib/systemd/user")
    # the kiosk's X session: the app alone, no window manager (README, "Running as a kiosk")
    install_file(PACKAGING / "linux" / f"{NAME}-kiosk.desktop", root / "usr/share/xsessions")
    install_file(PACKAGING / "linux" / f"{NAME}-kiosk-session", root / f"usr/libexec/{NAME}")
    (root / f"usr/libexec/{NAME}" / f"{NAME}-kiosk-session").chmod(0o755)
    for example in ("50-offline-assistant-kiosk.conf", "lightdm-offline-assistant-kiosk.conf"):
        install_file(PACKAGING / "linux" / example, root / f"usr/share/doc/{NAME}/examples/kiosk")
    control = (PACKAGING / "linux" / "control").read_text(encoding="utf-8").format(
        version=version, arch=arch, installed_kib=folder_size(root) // 1024,
        libc=f"libc6 (>= {glibc_needed(opt)})")
    (root / "DEBIAN").mkdir()
    (root / "DEBIAN" / "control").write_text(control, encoding="utf-8")
    target = out / f"{NAME}_{version}_{arch}.deb"
    # Every system new enough for the bundled glibc (Debian 12, Ubuntu 22.04) reads zstd too.
    level = {"xz": "-z6", "zstd": "-z9"}[compression]
    subprocess.run(["dpkg-deb", "--root-owner-group", f"-Z{compression}", level, "--build",
                    str(root), str(target)], check=True, stdout=subprocess.DEVNULL)
    print(f"   {time.perf_counter() - started:.1f} s")
    return target


def build_tarball(version: str, out: Path) -> Path:
    """The frozen folder as it is: unpack anywhere and run ./offline-assistant/offline-assistant."""
    started = step("building the tarball")
    machine = platform.machine().lower()
    target = out / f"{NAME}-{version}-linux-{machine}.tar.gz"
    with tarfile.open(target, "w:gz", compresslevel=6) as tar:
        tar.add(FROZEN / NAME, arcname=NAME, filter=_tar_entry)
    print(f"   {time.perf_counter() - started:.1f} s")
    return target


def _tar_entry(info: tarfile.TarInfo) -> tarfile.TarInfo:
    info.uid = info.gid = 0
    info.uname = info.gname = "root"
    if "/_internal/models/" in info.name and info.isfile():
        info.mode = 0o444
    return info


def make_models_read_only(folder: Path) -> None:
    for path in folder.rglob("*"):
        path.chmod(0o755 if path.is_dir() else 0o444)


def install_file(source: Path, folder: Path) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(source, folder / source.name)
    (folder / source.name).chmod(0o644)


def glibc_needed(folder: Path) -> str:
    """The newest GLIBC_x.y symbol version any program or library in `folder` asks for."""
    if shutil.which("objdump") is None:
        return MIN_GLIBC
    files = [str(p) for p in folder.rglob("*") if p.is_file() and not p.is_symlink()
             and (".so" in p.name or os.access(p, os.X_OK)) and _is_elf(p)]
    versions = {MIN_GLIBC}
    for start in range(0, len(files), 200):
        dump = subprocess.run(["objdump", "-T", *files[start:start + 200]], capture_output=True,
                              text=True).stdout
        versions.update(word[6:].rstrip(")") for word in dump.split() if word.startswith("GLIBC_2"))
    return max(versions, key=lambda v: tuple(int(n) for n in v.split(".")))


def _is_elf(path: Path) -> bool:
    with open(path, "rb") as handle:
        return handle.read(4) == b"\x7fELF"


def folder_size(folder: Path) -> int:
    return sum(p.stat().st_size for p in folder.rglob("*") if p.is_file() and not p.is_symlink())


# -- Windows and macOS (run by .github/workflows/release.yml) --------------------------------
def build_windows_setup(version: str, out: Path) -> Path:
    step("building the setup program with Inno Setup")
    iscc = shutil.which("iscc") or r"C:\Program Files (x86)\Inno Setup 6\ISCC.exe"
    subprocess.run([iscc, f"/DAppVersion={version}", f"/DSourceDir={FROZEN / NAME}",
                    f"/DOutputDir={out}", str(PACKAGING / "windows" / "offline-assistant.iss")],
                   check=True)
    return out / f"OfflineAssistant-{version}-setup.exe"


def build_dmg(version: str, out: Path) -> Path:
    step("building the disk image")
    folder = BUILD / "dmg"
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir(parents=True)
    shutil.copytree(FROZEN / "Offline Assistant.app", folder / "Offline Assistant.app", symlinks=True)
    (folder / "Applications").symlink_to("/Applications")  # drag the app onto it to install
    target = out / f"OfflineAssistant-{version}.dmg"
    subprocess.run(["hdiutil", "create", "-volname", "Offline Assistant", "-srcfolder", str(folder),
                    "-ov", "-format", "UDZO", str(target)], check=True)
    return target


if __name__ == "__main__":
    sys.exit(main())
