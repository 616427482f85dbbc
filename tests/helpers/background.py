"""Slow builds that some tests need, run beside the rest of the suite (tests/conftest.py).

The development sets' index (tests/helpers/dev_index.py) and the installers
(tests/helpers/installers.py) take minutes of CPU, while much of the suite leaves a core idle
(waiting on model processes, X servers, sockets). So each is built by a process of its own at
the lowest CPU priority (SCHED_IDLE), started as soon as collection shows that a test needing it
will run; those tests run last, in the order conftest.py lists the builds, and wait for it.
Foreground tests keep the CPU whenever they want it, so their timings are not disturbed.
Measured on 2 slow cores: the whole suite took 56 min with the index built inside the first eval
test, 42.6 min beside it; 36.6 min with the installers beside it too and the container test run
(docs/benchmarks.md, "The suite beside its own index").
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


@dataclass(frozen=True)
class Build:
    fixture: str  # the tests that use this fixture need the build: they run last and wait
    what: str  # for messages: "the development sets' index"
    command: Callable[[Path], list[str]]  # given the build's own empty folder
    why_not: Callable[[], str | None]  # why it cannot run here, or None


OUT, LOG = "out", "log"  # in the build's folder: its standard output, its messages and progress


@dataclass
class Running:
    build: Build
    folder: Path
    process: subprocess.Popen

    @property
    def out(self) -> Path:
        return self.folder / OUT

    @property
    def log(self) -> Path:
        return self.folder / LOG

    def wait(self) -> None:
        """Until the command ends; fails with its last messages unless it succeeded."""
        code = self.process.wait()
        assert code == 0, (f"building {self.build.what} ended with {code}:\n"
                           f"{self.log.read_text(errors='replace')[-3000:]}")

    def stop(self) -> None:
        """Ends the build and every process it started (its own process group)."""
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.process.pid, signal.SIGKILL)
        self.process.wait()
        shutil.rmtree(self.folder, ignore_errors=True)


def _lowest_priority() -> None:  # runs in the child before exec
    if hasattr(os, "sched_setscheduler"):
        os.sched_setscheduler(0, os.SCHED_IDLE, os.sched_param(0))
    else:
        os.nice(19)


def start(build: Build) -> Running:
    """The build's process gets a group of its own, to be stopped whole, but stays in the
    suite's session: on Linux a new session is a new scheduler autogroup, which takes its fair
    half of the CPU whatever its policy (measured: a llama.cpp test beside the index took 226 s
    instead of 7.6 when the index had a session of its own)."""
    folder = Path(tempfile.mkdtemp(prefix="oa-background-"))
    with (folder / OUT).open("wb") as stdout, (folder / LOG).open("wb") as stderr:
        process = subprocess.Popen(build.command(folder), cwd=REPO, stdout=stdout, stderr=stderr,
                                   stdin=subprocess.DEVNULL, preexec_fn=_lowest_priority, process_group=0)
    return Running(build, folder, process)


_KEY = pytest.StashKey[dict[str, Running]]()


def _needs(item, build: Build) -> bool:
    return build.fixture in getattr(item, "fixturenames", ())


def order_last(items: list, builds: tuple[Build, ...]) -> None:
    """Tests that need a build go last, so it has the whole suite's time to finish."""
    def rank(item) -> int:
        return next((place for place, build in enumerate(builds, 1) if _needs(item, build)), 0)

    items.sort(key=rank)


def start_needed(session, builds: tuple[Build, ...]) -> None:
    config = session.config
    if config.option.collectonly:
        return
    running = config.stash.setdefault(_KEY, {})
    for build in builds:
        if any(_needs(item, build) for item in session.items) and build.why_not() is None:
            running[build.fixture] = start(build)


def result(config, build: Build) -> Running:
    """The build started at collection, finished (started now if it was not)."""
    running = config.stash.setdefault(_KEY, {})
    if build.fixture not in running:
        running[build.fixture] = start(build)
    running[build.fixture].wait()
    return running[build.fixture]


def stop_all(config) -> None:
    for running in config.stash.get(_KEY, {}).values():
        running.stop()
