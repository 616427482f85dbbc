"""Staying up, as systemd keeps the kiosk up (packaging/linux/offline-assistant-kiosk.service):
a harness does what Type=notify, NotifyAccess=main, Restart=always and WatchdogSec do (there
is no systemd here) around the real app, `python -m desktop_app.app --kiosk`, in its own
process. Killed (-9) or frozen (SIGSTOP), the app is back, READY=1 again, within 10 s; after 5
crashes within 10 minutes it comes back in safe mode, showing the last error."""

from __future__ import annotations

import itertools
import json
import os
import signal
import socket
import struct
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from desktop_app.app import SAFE_MODE_LOG
from engine.config import Settings, save_settings
from engine.kiosk import crash_loop
from engine.models.registry import import_model
from engine.paths import AppPaths

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(not sys.platform.startswith("linux"), reason="systemd's notify protocol: Linux"),
]

REPO = Path(__file__).resolve().parents[3]
WATCHDOG_S = 5.0  # WatchdogSec, as in the unit (2 s gave false kills on a loaded 2-core machine)
RESTART_S = 0.5  # RestartSec
START_TIMEOUT_S = 60.0  # TimeoutStartSec: a start with no READY=1 is killed
STOP_TIMEOUT_S = 10.0  # TimeoutStopSec: after STOPPING=1 there is no watchdog, this instead
BACK_WITHIN_S = 10.0
_names = itertools.count()


class Supervisor:
    """systemd's part, in a thread: starts the app with NOTIFY_SOCKET and WATCHDOG_USEC, takes
    READY=1 / WATCHDOG=1 / STOPPING=1 from its main process only (the sender's pid, as
    NotifyAccess=main), SIGKILLs it when a start, a heartbeat or (after STOPPING=1) the exit is
    late, and starts it again whenever it exits."""

    def __init__(self, argv: list[str], log_path: Path):
        self.argv = argv
        self.log_path = log_path
        self.address = f"@offline-assistant-test-{os.getpid()}-{next(_names)}"  # abstract: no path limit
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        self.sock.bind("\0" + self.address[1:])
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_PASSCRED, 1)  # the sender's pid comes along
        self.sock.settimeout(0.05)
        self.lock = threading.Lock()
        self.changed = threading.Condition(self.lock)  # notified with each new event
        self.events: list[tuple[float, str, int]] = []  # (time, what, pid)
        self.process: subprocess.Popen | None = None
        self.groups: set[int] = set()  # every process group started: killed at the end
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="supervisor", daemon=True)

    # -- the test's side ----------------------------------------------------------------------
    def __enter__(self) -> "Supervisor":
        self._start()
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join(10)
        for group in self.groups:
            try:
                os.killpg(group, signal.SIGKILL)  # the app and whatever it started (its model's process)
            except (ProcessLookupError, PermissionError):
                pass
        if self.process is not None:
            self.process.wait(10)
        self.sock.close()

    @property
    def pid(self) -> int:
        with self.lock:
            return self.process.pid

    def wait_ready(self, after: float, timeout: float, other_than: int | None = None) -> tuple[float, int]:
        """The first READY=1 at or after `after` (from a process other than `other_than`)."""
        def ready():
            return next(((at, pid) for at, what, pid in self.events
                         if what == "READY" and at >= after and pid != other_than), None)

        with self.changed:
            found = self.changed.wait_for(ready, timeout)
        if found:
            return found
        raise AssertionError(f"no READY=1 within {timeout} s; events: {self.events[-12:]}\n{self.log_tail()}")

    def count(self, what: str) -> int:
        with self.lock:
            return sum(1 for _, name, _ in self.events if name == what)

    def log_tail(self) -> str:
        try:
            return self.log_path.read_text(encoding="utf-8", errors="replace")[-3000:]
        except OSError:
            return ""

    # -- systemd's side -----------------------------------------------------------------------
    def _start(self) -> None:
        env = {k: v for k, v in os.environ.items() if k not in ("WATCHDOG_PID", "NOTIFY_SOCKET")}
        env.update(QT_QPA_PLATFORM="offscreen", NOTIFY_SOCKET=self.address,
                   WATCHDOG_USEC=str(int(WATCHDOG_S * 1_000_000)))
        with open(self.log_path, "ab") as output:
            process = subprocess.Popen(self.argv, env=env, cwd=REPO, stdin=subprocess.DEVNULL,
                                       stdout=output, stderr=subprocess.STDOUT, start_new_session=True)
        with self.lock:
            self.process = process
            self.groups.add(process.pid)
            self.events.append((time.monotonic(), "start", process.pid))

    def _run(self) -> None:
        started = last_ping = time.monotonic()
        ready = False
        stopping_at = None
        while not self._stop.is_set():
            for pid, message in self._receive():
                if pid != self.process.pid:
                    continue  # NotifyAccess=main
                now = time.monotonic()
                if "READY=1" in message:
                    ready, last_ping = True, now
                    self._record("READY", pid)
                if "WATCHDOG=1" in message:
                    last_ping = now
                if "STOPPING=1" in message and stopping_at is None:
                    stopping_at = now
                    self._record("STOPPING", pid)
            now = time.monotonic()
            if self.process.poll() is not None:
                self._record(f"exit {self.process.returncode}", self.process.pid)
                if self._stop.wait(RESTART_S):  # systemd's RestartSec; a stop meanwhile starts nothing
                    break
                self._start()
                started = last_ping = time.monotonic()
                ready, stopping_at = False, None
            elif late := self._late(now, ready, started, last_ping, stopping_at):
                self._record(late, self.process.pid)
                self.process.kill()
                self.process.wait()

    @staticmethod
    def _late(now: float, ready: bool, started: float, last_ping: float, stopping_at: float | None) -> str:
        """What systemd would kill the process for now, or ""."""
        if stopping_at is not None:
            return "stop timeout" if now - stopping_at > STOP_TIMEOUT_S else ""
        if not ready:
            return "start timeout" if now - started > START_TIMEOUT_S else ""
        return "watchdog kill" if now - last_ping > WATCHDOG_S else ""

    def _receive(self) -> list[tuple[int, str]]:
        out = []
        try:
            while True:
                data, ancillary, _flags, _addr = self.sock.recvmsg(4096, socket.CMSG_SPACE(12))
                pid = 0
                for level, kind, payload in ancillary:
                    if level == socket.SOL_SOCKET and kind == socket.SCM_CREDENTIALS:
                        pid = struct.unpack("3i", payload[:12])[0]
                out.append((pid, data.decode("utf-8", "replace")))
                self.sock.settimeout(0)  # drain what is there, then go back to waiting
        except (BlockingIOError, TimeoutError, socket.timeout):
            pass
        finally:
            self.sock.settimeout(0.05)
        return out

    def _record(self, what: str, pid: int) -> None:
        with self.changed:
            self.events.append((time.monotonic(), what, pid))
            self.changed.notify_all()


def fast_data_dir(root: Path, llm_dir: Path) -> Path:
    """A data dir whose model needs no preparation: the tiny LLM, imported (so each start is
    quick even on a small CI machine). No collection: the app must start without one."""
    paths = AppPaths(root).ensure()
    folder = import_model(llm_dir, paths)
    save_settings(paths.settings_file, Settings(model=folder.name))
    return root


def app_argv(data_dir: Path) -> list[str]:
    return [sys.executable, "-m", "desktop_app.app", "--data-dir", str(data_dir), "--provider", "cpu", "--kiosk"]


def safe_mode_starts(data_dir: Path) -> int:
    text = AppPaths(data_dir).log_file.read_text(encoding="utf-8", errors="replace")
    return text.count(f"desktop_app: starting in {SAFE_MODE_LOG}")


def test_frozen_once_and_killed_ten_times_it_is_back_within_10_s_each_time(tmp_path, tiny_llm_dir, capsys):
    data = fast_data_dir(tmp_path / "data", tiny_llm_dir)
    with Supervisor(app_argv(data), tmp_path / "app-output.log") as supervisor:
        _, pid = supervisor.wait_ready(0, START_TIMEOUT_S)
        time.sleep(2 * WATCHDOG_S)  # the model loads meanwhile: the heartbeat goes on all the same
        assert supervisor.count("watchdog kill") == 0 and supervisor.pid == pid
        stopped_at = time.monotonic()
        os.kill(pid, signal.SIGSTOP)  # frozen: no more heartbeats
        back_at, pid = supervisor.wait_ready(stopped_at, BACK_WITHIN_S, other_than=pid)
        frozen_took = back_at - stopped_at
        assert supervisor.count("watchdog kill") == 1 and supervisor.count("start timeout") == 0
        took = []
        for _ in range(10):
            killed_at = time.monotonic()
            os.kill(pid, signal.SIGKILL)
            back_at, pid = supervisor.wait_ready(killed_at, BACK_WITHIN_S, other_than=pid)
            took.append(back_at - killed_at)
        assert supervisor.count("watchdog kill") == 1 and supervisor.count("start timeout") == 0
    # 11 crashes within a minute are a crash loop: the 6th to the 12th start are in safe mode (which
    # is up, READY=1 and pinging, all the same)
    assert safe_mode_starts(data) == 7
    with capsys.disabled():
        print(f"\n[watchdog] back after SIGSTOP in {frozen_took:.1f} s; after a kill in "
              f"{min(took):.1f}-{max(took):.1f} s")


def test_five_crashes_in_a_row_start_safe_mode_with_the_last_error(tmp_path, tiny_llm_dir):
    data = fast_data_dir(tmp_path / "data", tiny_llm_dir)
    crash_loop.record_error(AppPaths(data).starts_file, "RuntimeError: the pump exploded")
    with Supervisor(app_argv(data), tmp_path / "app-output.log") as supervisor:
        _, pid = supervisor.wait_ready(0, START_TIMEOUT_S)
        for _ in range(5):
            assert safe_mode_starts(data) == 0
            killed_at = time.monotonic()
            os.kill(pid, signal.SIGKILL)  # right after READY=1
            _, pid = supervisor.wait_ready(killed_at, BACK_WITHIN_S, other_than=pid)
        assert safe_mode_starts(data) == 1  # the 6th start
    text = AppPaths(data).log_file.read_text(encoding="utf-8")
    assert f"{SAFE_MODE_LOG}: 5 crashes in a row" in text and "RuntimeError: the pump exploded" in text


def test_sigterm_is_a_clean_exit_not_a_crash(tmp_path, tiny_llm_dir):
    """`systemctl stop`, a shutdown or a logout send SIGTERM: the app closes as by its Quit, and
    that start does not count towards safe mode."""
    data = fast_data_dir(tmp_path / "data", tiny_llm_dir)
    starts = AppPaths(data).starts_file
    with Supervisor(app_argv(data), tmp_path / "app-output.log") as supervisor:
        _, pid = supervisor.wait_ready(0, START_TIMEOUT_S)
        for _ in range(crash_loop.CRASHES):  # as many crashes would make the next start safe mode
            stopped_at = time.monotonic()
            os.kill(pid, signal.SIGTERM)
            _, pid = supervisor.wait_ready(stopped_at, BACK_WITHIN_S, other_than=pid)
        assert supervisor.count("exit 0") == crash_loop.CRASHES, [what for _, what, _ in supervisor.events]
        assert supervisor.count("STOPPING") == crash_loop.CRASHES
        history = json.loads(starts.read_text(encoding="utf-8"))["starts"]
    assert [start["clean"] for start in history] == [True] * crash_loop.CRASHES + [False]  # the last runs
    assert safe_mode_starts(data) == 0
