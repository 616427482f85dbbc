"""The kiosk session (packaging/linux/offline-assistant-kiosk-session): the app alone on an X
display, no window manager. Its script runs the real app (`python -m desktop_app.app --kiosk`) on
a display of its own, Xvfb's, and Xorg's with the dummy video driver and the shipped ServerFlags
(packaging/linux/50-offline-assistant-kiosk.conf); then the ways out a user would try: keys
(Super, Alt+Tab, Ctrl+Alt+Backspace, Ctrl+Alt+F1..F12...) and right and middle clicks on a grid
over the whole screen, each followed by a look at the display: our window alone, mapped, full
screen and focused. Then the X protocol's ways to close it (WM_DELETE_WINDOW, unmap, move,
destroy, XKillClient) and kill -9: each time our window is back, and the time it takes.

The app tells when its GUI thread has run by systemd's notify protocol (READY=1 when the window
is shown, WATCHDOG=1 at a short interval): two heartbeats after an attempt, the app has handled it.

Needs Xvfb and xdotool (apt-get install xvfb xdotool x11-utils), and for the Xorg case
xserver-xorg-core, xserver-xorg-video-dummy and x11-xkb-utils, run as root: skipped with the
reason without them, failed in CI (where .ci/run installs them).
"""

from __future__ import annotations

import ctypes
import ctypes.util
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from desktop_app.kiosk.x11_guard import WINDOW_LOST_EXIT_CODE
from tests.gui.kiosk.test_watchdog import fast_data_dir

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(not sys.platform.startswith("linux"), reason="an X session: Linux"),
]

REPO = Path(__file__).resolve().parents[3]
SESSION = REPO / "packaging" / "linux" / "offline-assistant-kiosk-session"
SERVER_FLAGS = REPO / "packaging" / "linux" / "50-offline-assistant-kiosk.conf"
SCREEN = (1280, 800)
HEARTBEAT_USEC = 200_000  # WATCHDOG_USEC: a heartbeat every 0.1 s
START_S = 90.0  # a start of the app on a loaded 2-core machine
BACK_WITHIN_S = 30.0  # a new window after a kill: the session's 1 s, the old app's close, the new one's start
KEYS = ["super", "Super_L+d", "Super_L+e", "Super_L+r", "alt+Tab", "alt+F2", "alt+F4", "alt+space",
        "ctrl+alt+BackSpace", "ctrl+alt+Delete", "ctrl+alt+t", "ctrl+Escape", "Escape", "ctrl+q",
        "Menu", "shift+F10", *[f"ctrl+alt+F{n}" for n in range(1, 13)]]
GRID = (6, 4)  # points across, down: every part of the screen
DUMMY_SCREEN = """
Section "Monitor"
    Identifier "monitor"
    HorizSync 5.0 - 1000.0
    VertRefresh 5.0 - 200.0
EndSection
Section "Device"
    Identifier "dummy"
    Driver "dummy"
    VideoRam 32768
EndSection
Section "Screen"
    Identifier "screen"
    Device "dummy"
    Monitor "monitor"
    DefaultDepth 24
    SubSection "Display"
        Depth 24
        Modes "{width}x{height}"
        Virtual {width} {height}
    EndSubSection
EndSection
"""


def need(*programs: str, why: str = "") -> None:
    missing = [p for p in programs if shutil.which(p) is None]
    if missing:
        message = f"needs {', '.join(missing)} (apt-get install xvfb xdotool x11-utils){why}"
        if os.environ.get("CI"):
            pytest.fail(message)
        pytest.skip(message)


# -- the X servers ----------------------------------------------------------------------------
def start_x(argv: list[str], log: Path) -> tuple[subprocess.Popen, str]:
    """Starts an X server that picks a free display itself (-displayfd) and says which when ready."""
    read, write = os.pipe()
    with log.open("wb") as out:
        server = subprocess.Popen([*argv, "-displayfd", str(write)], pass_fds=(write,),
                                  stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
    os.close(write)
    with os.fdopen(read) as pipe:
        number = pipe.readline().strip()
    if not number:
        server.kill()
        pytest.fail(f"{argv[0]} did not start: {log.read_text(errors='replace')[-2000:]}")
    return server, f":{number}"


@pytest.fixture
def display(request, tmp_path):
    """DISPLAY of a fresh X server: Xvfb, or Xorg (dummy video) with the shipped ServerFlags and
    the keymap's Ctrl+Alt+Backspace set to zap, which only DontZap stops."""
    need("Xvfb", "xdotool", "xwininfo")
    if request.param == "Xvfb":
        argv = ["Xvfb", "-screen", "0", f"{SCREEN[0]}x{SCREEN[1]}x24", "-nolisten", "tcp", "-noreset"]
    else:
        need("Xorg", "setxkbmap", why=" and xserver-xorg-core xserver-xorg-video-dummy x11-xkb-utils")
        if not Path("/usr/lib/xorg/modules/drivers/dummy_drv.so").exists():
            message = "needs Xorg's dummy video driver (apt-get install xserver-xorg-video-dummy)"
            pytest.fail(message) if os.environ.get("CI") else pytest.skip(message)
        if os.geteuid() != 0:
            pytest.skip("Xorg with a config file of our own runs as root only")
        config = tmp_path / "xorg.conf"
        config.write_text(SERVER_FLAGS.read_text() + DUMMY_SCREEN.format(width=SCREEN[0], height=SCREEN[1]))
        (tmp_path / "xorg.conf.d").mkdir()
        argv = ["Xorg", "-config", str(config), "-configdir", str(tmp_path / "xorg.conf.d"),
                "-logfile", str(tmp_path / "Xorg.log"), "-nolisten", "tcp", "-noreset", "-keeptty"]
    server, name = start_x(argv, tmp_path / f"{request.param}.out")
    try:
        if request.param == "Xorg":
            x(name, "setxkbmap", "-option", "terminate:ctrl_alt_bksp")
            log_text = (tmp_path / "Xorg.log").read_text(errors="replace")
            for option in ("DontVTSwitch", "DontZap", "DontZoom"):
                assert f'(**) Option "{option}" "true"' in log_text, f"Xorg did not apply {option}"
        yield name, server
    finally:
        server.terminate()
        server.wait(10)


def x(display_name: str, *argv: str, check: bool = True) -> str:
    done = subprocess.run(argv, env={**os.environ, "DISPLAY": display_name}, capture_output=True,
                          text=True, timeout=30, check=False)
    if check and done.returncode:
        raise AssertionError(f"{' '.join(argv)}: {done.returncode} {done.stderr}")
    return done.stdout


def mapped_windows(display_name: str) -> list[tuple[int, str, str]]:
    """The root's children that are mapped: (id, name, geometry)."""
    tree = x(display_name, "xwininfo", "-root", "-children")
    found = []
    for line in tree.splitlines():
        hit = re.match(r'\s+(0x[0-9a-f]+) (.*): \(.*\)\s+(\d+x\d+\+-?\d+\+-?\d+)', line)
        if not hit:
            continue
        info = x(display_name, "xwininfo", "-id", hit.group(1), check=False)
        if "IsViewable" in info:
            found.append((int(hit.group(1), 16), hit.group(2), hit.group(3)))
    return found


def keyboard_window(display_name: str) -> int:
    """The window that gets the keys: the focus window, or with the focus on PointerRoot (what
    the kiosk sets), the one under the pointer."""
    done = subprocess.run(["xdotool", "getwindowfocus"], env={**os.environ, "DISPLAY": display_name},
                          capture_output=True, text=True, timeout=30, check=False)
    if done.returncode == 0:
        return int(done.stdout.strip())
    assert "focused window of 1" in done.stderr, done.stderr  # 1: PointerRoot
    where = x(display_name, "xdotool", "getmouselocation", "--shell")
    return int(re.search(r"WINDOW=(\d+)", where).group(1))


# -- the app's heartbeat ----------------------------------------------------------------------
class Beacon:
    """The notify socket the app reports to (as systemd's): READY=1 and WATCHDOG=1, with the
    sender's pid."""

    def __init__(self):
        self.address = f"@offline-assistant-session-test-{os.getpid()}-{id(self)}"
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        self.sock.bind("\0" + self.address[1:])
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_PASSCRED, 1)
        self.sock.settimeout(0.1)
        self.changed = threading.Condition()
        self.events: list[tuple[float, str, int]] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="beacon", daemon=True)
        self._thread.start()

    def close(self) -> None:
        self._stop.set()
        self._thread.join(5)
        self.sock.close()

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                data, ancillary, _flags, _addr = self.sock.recvmsg(4096, socket.CMSG_SPACE(12))
            except (TimeoutError, OSError):
                continue
            pid = next((int.from_bytes(d[:4], sys.byteorder) for level, kind, d in ancillary
                        if level == socket.SOL_SOCKET and kind == socket.SCM_CREDENTIALS), 0)
            with self.changed:
                for line in data.decode("utf-8", "replace").splitlines():
                    self.events.append((time.monotonic(), line, pid))
                self.changed.notify_all()

    def wait(self, what: str, after: float, timeout: float, count: int = 1, pid: int | None = None):
        """The `count`-th `what` since `after` (from `pid`, if given): (time, pid)."""
        def seen():
            return [(t, p) for t, w, p in self.events if w == what and t >= after and pid in (None, p)]
        with self.changed:
            if not self.changed.wait_for(lambda: len(seen()) >= count, timeout):
                raise AssertionError(f"no {what} within {timeout} s; seen {self.events[-5:]}")
            return seen()[count - 1]

    def settle(self, pid: int) -> None:
        """Returns once the app's GUI thread has run twice since now: what was sent to it is handled."""
        self.wait("WATCHDOG=1", time.monotonic(), 10.0, count=2, pid=pid)


@pytest.fixture
def session(display, tmp_path, tiny_llm_dir):
    """The kiosk session script on `display`, running the app from this checkout."""
    name, _server = display
    data = fast_data_dir(tmp_path / "data", tiny_llm_dir)
    beacon = Beacon()
    env = {k: v for k, v in os.environ.items() if k not in ("WATCHDOG_PID", "QT_QPA_PLATFORM")}
    env.update(DISPLAY=name, NOTIFY_SOCKET=beacon.address, WATCHDOG_USEC=str(HEARTBEAT_USEC))
    argv = [str(SESSION), sys.executable, "-m", "desktop_app.app", "--data-dir", str(data),
            "--provider", "cpu", "--kiosk"]
    started = time.monotonic()
    with (tmp_path / "session.log").open("wb") as out:
        script = subprocess.Popen(argv, env=env, cwd=REPO, stdout=out, stderr=subprocess.STDOUT,
                                  start_new_session=True)
    try:
        _t, pid = beacon.wait("READY=1", started, START_S)
        session = Session(name, beacon, pid, tmp_path / "session.log")
        session.settle_focus()  # as after a restart: the first window, too, gets the keys after READY=1
        yield session
    finally:
        os.killpg(script.pid, signal.SIGTERM)  # the script's trap ends the app
        try:
            script.wait(15)
        except subprocess.TimeoutExpired:
            os.killpg(script.pid, signal.SIGKILL)
        beacon.close()


FOCUS_SETTLES = 5  # GUI-thread turns a restarted app may take before its window holds the keys (Xorg, loaded CI)


class Session:
    def __init__(self, display_name: str, beacon: Beacon, pid: int, log: Path):
        self.display = display_name
        self.beacon = beacon
        self.pid = pid
        self.log = log

    def ours(self) -> int:
        """Our one window: mapped, full screen, focused, and nothing else mapped."""
        windows = mapped_windows(self.display)
        assert len(windows) == 1, f"mapped: {windows}"
        window, name, geometry = windows[0]
        assert "Offline Assistant" in name, windows
        assert geometry == f"{SCREEN[0]}x{SCREEN[1]}+0+0", windows
        assert keyboard_window(self.display) == window, "the keyboard is not ours"
        return window

    def back_after(self, kill, what: str) -> float:
        """Runs `kill` (which ends the app), then the seconds to a new app's window, which must
        be ours() again."""
        old = self.pid
        started = time.monotonic()
        kill()
        ready, self.pid = self.beacon.wait("READY=1", started, BACK_WITHIN_S)
        assert self.pid != old, f"{what}: the same app said READY=1 again"
        self.settle_focus()
        self.ours()
        return ready - started

    def settle_focus(self) -> None:
        """Returns once the app's window holds the keys, or after FOCUS_SETTLES turns of its GUI
        thread: a new window gets them once its X11 guard has run."""
        self.beacon.settle(self.pid)
        for _ in range(FOCUS_SETTLES):
            windows = mapped_windows(self.display)
            if len(windows) == 1 and keyboard_window(self.display) == windows[0][0]:
                break
            self.beacon.settle(self.pid)


# -- the tests --------------------------------------------------------------------------------
# Each test runs on one server (about 35 s each): the keys on Xorg, whose shipped ServerFlags
# (DontZap, DontVTSwitch) are what stops Ctrl+Alt+Backspace and Ctrl+Alt+Fn on a real kiosk; the
# X protocol's ways to close a window on Xvfb, where they are the same requests.
@pytest.mark.parametrize("display", ["Xorg"], indirect=True)
def test_no_key_and_no_click_reaches_anything_but_our_window(session, capsys):
    window = session.ours()
    tried = []
    for key in KEYS:
        x(session.display, "xdotool", "key", key)
        session.beacon.settle(session.pid)
        assert session.ours() == window, f"after {key}"
        tried.append(key)
    (width, height), (across, down) = SCREEN, GRID
    for row in range(down):
        for column in range(across):
            point = (str(width * (2 * column + 1) // (2 * across)), str(height * (2 * row + 1) // (2 * down)))
            for button in ("3", "2"):
                x(session.display, "xdotool", "mousemove", *point, "click", button)
                session.beacon.settle(session.pid)
                popups = [w for w in mapped_windows(session.display) if w[0] != window]
                # a right click may open the app's own menu (a text box's Copy/Paste): ours, and it goes
                assert all(w[0] >> 21 == window >> 21 for w in popups), f"click {button} at {point}: {popups}"
                x(session.display, "xdotool", "mousemove", "2", "2", "click", "1")  # closes such a menu
                session.beacon.settle(session.pid)
                assert session.ours() == window, f"click {button} at {point}"
                tried.append(f"click {button} at {point[0]},{point[1]}" + (" (our own menu)" if popups else ""))
    assert session.ours() == window  # the same window all along
    with capsys.disabled():
        print(f"\n{session.display}: {len(tried)} attempts, each left our window alone on the screen, "
              f"full screen and focused: {', '.join(tried)}")


@pytest.mark.parametrize("display", ["Xvfb"], indirect=True)
def test_closed_through_the_x_protocol_the_window_stays_or_comes_back(session, capsys):
    window = session.ours()
    display_name, lines = session.display, []

    send_delete_window(display_name, window)
    session.beacon.settle(session.pid)
    assert session.ours() == window
    lines.append("WM_DELETE_WINDOW: ignored, the same window")
    for command in (["windowunmap", str(window)], ["windowmove", str(window), "300", "200"],
                    ["windowsize", str(window), "400", "300"], ["windowminimize", str(window)]):
        x(display_name, "xdotool", *command, check=False)
        session.beacon.settle(session.pid)
        session.beacon.settle(session.pid)
        assert session.ours() == window, command
        lines.append(f"xdotool {command[0]}: undone, the same window")

    for what, kill in [
        ("xdotool windowclose (XDestroyWindow)", lambda: x(display_name, "xdotool", "windowclose", str(session.ours()))),
        ("xdotool windowkill (XKillClient)", lambda: x(display_name, "xdotool", "windowkill", str(session.ours()))),
        ("kill -9", lambda: os.kill(session.pid, signal.SIGKILL)),
    ]:
        seconds = [session.back_after(kill, what) for _ in range(2)]
        lines.append(f"{what}: a new app's window after {', '.join(f'{s:.1f}' for s in seconds)} s")
    assert f"status {WINDOW_LOST_EXIT_CODE}" in session.log.read_text(errors="replace")
    with capsys.disabled():
        print(f"\n{display_name}:\n  " + "\n  ".join(lines))


def send_delete_window(display_name: str, window: int) -> None:
    """What a window manager's close button sends: a WM_PROTOCOLS client message, WM_DELETE_WINDOW."""
    xlib = ctypes.cdll.LoadLibrary(ctypes.util.find_library("X11") or "libX11.so.6")
    xlib.XOpenDisplay.restype = ctypes.c_void_p
    xlib.XOpenDisplay.argtypes = [ctypes.c_char_p]
    xlib.XInternAtom.restype = ctypes.c_ulong
    xlib.XInternAtom.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_int]
    xlib.XSendEvent.argtypes = [ctypes.c_void_p, ctypes.c_ulong, ctypes.c_int, ctypes.c_long,
                                ctypes.POINTER(ClientMessage)]
    xlib.XSync.argtypes = [ctypes.c_void_p, ctypes.c_int]
    xlib.XCloseDisplay.argtypes = [ctypes.c_void_p]
    connection = xlib.XOpenDisplay(display_name.encode())
    assert connection, f"cannot open {display_name}"
    try:
        message = ClientMessage(type=CLIENT_MESSAGE, display=connection, window=window, format=32,
                                message_type=xlib.XInternAtom(connection, b"WM_PROTOCOLS", 0))
        message.data[0] = xlib.XInternAtom(connection, b"WM_DELETE_WINDOW", 0)
        assert xlib.XSendEvent(connection, window, 0, 0, ctypes.byref(message))
        xlib.XSync(connection, 0)
    finally:
        xlib.XCloseDisplay(connection)


CLIENT_MESSAGE = 33


class ClientMessage(ctypes.Structure):
    """Xlib's XClientMessageEvent, padded to the size of an XEvent (24 longs)."""

    _fields_ = [("type", ctypes.c_int), ("serial", ctypes.c_ulong), ("send_event", ctypes.c_int),
                ("display", ctypes.c_void_p), ("window", ctypes.c_ulong), ("message_type", ctypes.c_ulong),
                ("format", ctypes.c_int), ("data", ctypes.c_long * 5), ("pad", ctypes.c_long * 12)]
