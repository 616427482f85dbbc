"""The Linux installers (the .deb and the tarball) that tests/packaging/test_packaging.py
installs and runs, built beside the rest of the suite by tests/helpers/background.py:
PyInstaller's build takes ~3 min of CPU on 2 slow cores."""

from __future__ import annotations

import functools
import os
import shutil
import subprocess
import sys
from pathlib import Path

from tests.helpers import background


@functools.cache  # asked at collection and by the packaging tests; unshare costs a process
def why_not() -> str | None:
    """Why the installers cannot be built and installed here, or None."""
    if not sys.platform.startswith("linux"):
        return "the .deb is built and installed on Linux only"
    if not (shutil.which("dpkg-deb") and shutil.which("dpkg")):
        return "dpkg is not here (not Debian or Ubuntu)"
    if os.geteuid() != 0:
        return "installing a .deb needs root"
    if subprocess.run(["unshare", "--net", "true"], capture_output=True).returncode != 0:
        return "unshare --net (to run with no network) is not permitted here"
    return None


def _command(folder: Path) -> list[str]:
    # zstd: the same package as `make dist` builds, 20x faster to compress (see build.py)
    return [sys.executable, "packaging/build.py", "--out", str(folder), "--compression", "zstd"]


BUILD = background.Build("built", "the installers", _command, why_not)


def built(config) -> dict[str, Path]:
    folder = background.result(config, BUILD).folder
    return {"deb": next(folder.glob("*.deb")), "tar": next(folder.glob("*.tar.gz"))}
