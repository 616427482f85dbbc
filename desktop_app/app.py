"""Entry point of the desktop app: `offline-assistant [--data-dir DIR] [--provider P] [--kiosk]
[--engine-url URL] [--engine-key KEY]`.

Logs go to DATA_DIR/logs/offline-assistant.log (rotating). An uncaught exception, on any
thread, is logged there with its traceback, kept as the last error (engine.kiosk.crash_loop) and
shown in a dialog on the GUI thread: never lost. A hard crash (a segfault, an abort, the
watchdog's SIGABRT on a frozen window) leaves the tracebacks of every thread in
DATA_DIR/logs/crash.log (faulthandler).

Staying up (kiosks): under systemd (packaging/linux/offline-assistant-kiosk.service) the app
says READY=1 once its window is shown and pings the watchdog from the GUI thread, so a frozen
window is killed and restarted. Every start is recorded; after 5 crashes within 10 minutes the
app starts in safe mode (desktop_app/kiosk/safe_mode.py) showing the last error instead.
"""

from __future__ import annotations

import argparse
import contextlib
import faulthandler
import logging
import logging.handlers
import os
import signal
import socket
import sys
import threading
import time
import traceback
from pathlib import Path

from PySide6.QtCore import QObject, QSocketNotifier, QTimer, QtMsgType, Signal, qInstallMessageHandler
from PySide6.QtGui import QIcon
from PySide6.QtWidgets import QApplication, QMessageBox

from desktop_app.gui_gc import GuiThreadGc
from engine.errors import EngineError, disk_full_as_error
from engine.kiosk import crash_loop, sd_notify
from engine.models.hardware import PROVIDER_CHOICES
from engine.paths import AppPaths, app_folder
from engine.safe_text import SafeFormatter

CRASH_LOG_MAX = 1_000_000  # bytes; a bigger one is moved to crash.log.1 at start
SAFE_MODE_LOG = "safe mode"  # in the log line of a safe-mode start (tests and admins grep it)
CRASH_LOG_OFF = "No crash log this time; a hard crash goes to the terminal instead:"
ICON = app_folder() / "resources" / "icons" / "offline-assistant.svg"
log = logging.getLogger("desktop_app")


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    return argument_parser().parse_args(argv)


def argument_parser() -> argparse.ArgumentParser:
    """The options of `offline-assistant`, and a --help written for the people who run it."""
    from engine import __version__

    parser = argparse.ArgumentParser(
        prog="offline-assistant",
        description=_wrapped("Offline Assistant answers questions from your own manuals (PDF, "
                             "Word, HTML, Markdown and text files) and shows the page each answer "
                             "comes from. It runs entirely on this computer: nothing is sent over "
                             "the network. Start it with no options to open the window; drop "
                             "manuals on it to add them."),
        epilog=_where_things_go(),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("-V", "--version", action="version", version=f"%(prog)s {__version__}")
    parser.add_argument("--data-dir", metavar="DIR",
                        help="keep the models, indexed manuals, settings and logs in DIR instead "
                             "of the usual folder (see below)")
    parser.add_argument("--provider", choices=PROVIDER_CHOICES, default="auto",
                        help="where the language model runs: auto (the default) picks the "
                             "fastest this computer has, cpu always uses the processor")
    parser.add_argument("--kiosk", action="store_true",
                        help="full screen and locked down, for unattended PCs (also `kiosk = true` "
                             "in settings.toml)")
    parser.add_argument("--engine-url", metavar="URL",
                        help="for this run, answer with the language model of an OpenAI-compatible "
                             "server at URL (offline-assistant-cli serve, llama.cpp's server, vLLM); "
                             "your manuals are still searched on this computer (default: "
                             "$OFFLINE_ASSISTANT_ENGINE_URL, else engine_url in settings.toml)")
    parser.add_argument("--engine-key", metavar="KEY",
                        help="that server's API key (better: $OFFLINE_ASSISTANT_ENGINE_KEY, which "
                             "other users' process lists do not show)")
    parser.add_argument("--smoke-test", action="store_true",
                        help="start, wait until the model is ready, log the timings and quit "
                             "(for installers and CI)")
    parser.add_argument("--self-check", nargs="?", const="", metavar="QUESTION",
                        help="start, ask QUESTION through the chat, print a JSON report of each "
                             "step and quit: exit code 0 when all passed")
    return parser


def _where_things_go() -> str:
    paths = AppPaths.default()
    places = [(f"{paths.collections.name}/", "the indexed manuals"),
              (paths.settings_file.name, "the settings"),
              (str(paths.log_file.relative_to(paths.root)), "the log"),
              (str(paths.crash_log.relative_to(paths.root)), "what a crash left, if one happened")]
    width = max(len(name) for name, _ in places)
    lines = [f"Your data is kept in {paths.root} (or in the --data-dir folder):"]
    lines += [f"  {name:<{width}}  {what}" for name, what in places]
    tail = _wrapped("To index manuals or ask questions from a terminal or a script, use "
                    "offline-assistant-cli (see offline-assistant-cli --help).")
    return "\n".join(lines) + "\n\n" + tail


def _wrapped(text: str) -> str:
    import textwrap

    return textwrap.fill(text, 78, break_on_hyphens=False)


def setup_logging(paths: AppPaths, level: int = logging.INFO) -> Path:
    """A rotating log file in the data dir (and warnings on stderr). Its lines go through
    SafeFormatter (a file name or passage logged cannot drive a terminal that shows the log),
    and a record that cannot be written (a full disk) is dropped quietly: by default logging
    prints "--- Logging error ---" and a traceback to stderr for every one."""
    log_file = paths.log_file
    paths.logs.mkdir(parents=True, exist_ok=True)
    logging.raiseExceptions = False
    handler = logging.handlers.RotatingFileHandler(log_file, maxBytes=2_000_000, backupCount=3,
                                                   encoding="utf-8")
    handler.setFormatter(SafeFormatter("%(asctime)s %(levelname)s %(threadName)s %(name)s: %(message)s"))
    root = logging.getLogger()
    root.setLevel(level)
    if not any(getattr(h, "baseFilename", None) == str(log_file) for h in root.handlers):
        root.addHandler(handler)
    else:
        handler.close()
    return log_file


def enable_crash_log(paths: AppPaths, notices: list[str] | None = None):
    """faulthandler writes every thread's traceback to DATA_DIR/logs/crash.log on a hard crash;
    returns the open file, which must stay open while the handler is on. When the log cannot
    be written (a full or read-only disk), the app starts anyway: hard crashes go to stderr,
    a warning says why, the reason is added to `notices` (the window shows them) and None is
    returned."""
    path = paths.crash_log
    crash_file = None
    try:
        with disk_full_as_error(path.parent, CRASH_LOG_MAX, at_least=True):
            if path.is_file() and path.stat().st_size > CRASH_LOG_MAX:
                path.replace(path.with_name(path.name + ".1"))
            crash_file = open(path, "a", encoding="utf-8")  # open for the process's life
            crash_file.write(f"--- start of process {os.getpid()} at {time.strftime('%Y-%m-%d %H:%M:%S')}\n")
            crash_file.flush()
    except OSError as exc:
        _close_quietly(crash_file)
        log.warning("%s %s", CRASH_LOG_OFF, exc)
        if notices is not None:
            notices.append(f"{exc} Meanwhile hard crashes are not recorded in '{path}'.")
        faulthandler.enable(all_threads=True)
        return None
    faulthandler.enable(crash_file, all_threads=True)
    return crash_file


def _close_quietly(file) -> None:
    """Close a file whose buffered write failed: closing flushes again, and fails again."""
    if file is None:
        return
    try:
        file.close()
    except OSError:
        pass  # the buffer is dropped with the file; the warning already says why


def disable_crash_log(crash_file) -> None:
    faulthandler.disable()
    if crash_file is not None:
        crash_file.close()
    if sys.__stderr__ is not None:  # back to where Python (or pytest) had it
        try:
            faulthandler.enable(sys.__stderr__, all_threads=True)
        except (AttributeError, ValueError, OSError):  # no real stderr (a windowed app)
            pass


class Heartbeat(QObject):
    """Pings systemd's watchdog from the GUI thread at half its interval (only when one is set):
    a frozen event loop stops the pings and systemd restarts the app."""

    def __init__(self, interval_s: float | None = None):
        super().__init__()
        self.interval_s = sd_notify.watchdog_interval() if interval_s is None else interval_s
        self.timer = QTimer(self)
        self.timer.timeout.connect(sd_notify.watchdog)

    def start(self) -> None:
        if self.interval_s:
            sd_notify.watchdog()
            self.timer.start(max(1, int(self.interval_s * 500)))

    def stop(self) -> None:
        self.timer.stop()


class QuitOnSigterm(QObject):
    """SIGTERM (systemctl stop, a shutdown, a logout) closes the app like its Quit: a clean exit,
    not a crash for the crash-loop count. Qt's event loop wakes up on the signal through
    signal.set_wakeup_fd (and a slow timer, in case a wake-up is missed, lets Python run its
    handlers); `close` (set per mode) then closes the window on the GUI thread, and every event
    loop is left, a modal dialog's too: an open error dialog kept the app up before."""

    WAKE_MS = 500  # how often Python gets to run a pending signal handler at the latest

    def __init__(self):
        super().__init__()
        self.close = lambda: QApplication.quit()
        self._installed = hasattr(signal, "SIGTERM") and sys.platform != "win32"
        if not self._installed:
            return
        self._read, self._write = socket.socketpair()
        for end in (self._read, self._write):
            end.setblocking(False)
        self._previous_fd = signal.set_wakeup_fd(self._write.fileno())
        self._previous = signal.signal(signal.SIGTERM, self._on_signal)
        self._notifier = QSocketNotifier(self._read.fileno(), QSocketNotifier.Type.Read, self)
        self._notifier.activated.connect(self._drain)
        self._wake = QTimer(self)
        self._wake.timeout.connect(lambda: None)  # returning to Python runs pending handlers
        self._wake.start(self.WAKE_MS)

    def _on_signal(self, signum, frame) -> None:  # runs on the GUI thread, in Python's handler
        log.info("SIGTERM: closing")
        QTimer.singleShot(0, self._close_and_quit)

    def _close_and_quit(self) -> None:
        """Close as Quit does, then leave every event loop: QApplication.quit() also ends a
        modal dialog's nested loop, which closing the window alone does not."""
        try:
            self.close()
        finally:
            QApplication.quit()

    def _drain(self) -> None:
        try:
            while self._read.recv(64):
                pass
        except OSError:  # empty
            pass

    def uninstall(self) -> None:
        if self._installed:
            self._installed = False
            self._notifier.setEnabled(False)
            self._wake.stop()
            signal.signal(signal.SIGTERM, self._previous)
            signal.set_wakeup_fd(self._previous_fd)
            self._read.close()
            self._write.close()


def _qt_message(mode, context, message: str) -> None:
    level = {QtMsgType.QtDebugMsg: logging.DEBUG, QtMsgType.QtInfoMsg: logging.INFO,
             QtMsgType.QtWarningMsg: logging.WARNING}.get(mode, logging.ERROR)
    logging.getLogger("qt").log(level, "%s", message)


class CrashReporter(QObject):
    """Lives on the GUI thread: logs an exception (from any thread) and shows it there."""

    _show_requested = Signal(str)

    def __init__(self, log_file: Path, starts_file: Path | None = None):
        super().__init__()
        self.log_file = log_file
        self.starts_file = starts_file
        self.shown = 0
        self._showing = False
        self._show_requested.connect(self._show)  # queued when it comes from another thread
        self.uninstall = lambda: None

    def handle(self, exc_type, exc, tb, where: str = "") -> None:
        if issubclass(exc_type, KeyboardInterrupt):
            sys.__excepthook__(exc_type, exc, tb)
            return
        log.critical("uncaught exception%s", f" in thread {where}" if where else "",
                     exc_info=(exc_type, exc, tb))
        if self.starts_file is not None:  # the safe-mode screen shows it after a crash loop
            crash_loop.record_error(self.starts_file, "".join(traceback.format_exception(exc_type, exc, tb)))
        summary = "".join(traceback.format_exception_only(exc_type, exc)).strip()
        self._show_requested.emit(summary)

    def _show(self, summary: str) -> None:
        self.shown += 1
        if self._showing:  # one dialog at a time; the others are in the log
            return
        self._showing = True
        try:
            QMessageBox.critical(
                QApplication.activeWindow(), "Offline Assistant: unexpected error",
                f"Something went wrong:\n\n{summary}\n\nThe window keeps running. The details "
                f"are in the log file:\n{self.log_file}")
        finally:
            self._showing = False


def install_crash_hook(log_file: Path, starts_file: Path | None = None):
    """Routes sys.excepthook and threading.excepthook to a crash reporter; returns it, with
    `uninstall()` to put the previous hooks back. With `starts_file`, each exception is also
    kept there as the last error (engine.kiosk.crash_loop)."""
    reporter = CrashReporter(log_file, starts_file)
    previous = sys.excepthook, threading.excepthook

    def excepthook(exc_type, exc, tb):
        reporter.handle(exc_type, exc, tb)

    def thread_excepthook(args):
        if args.exc_type is SystemExit:
            return
        name = args.thread.name if args.thread is not None else ""
        reporter.handle(args.exc_type, args.exc_value, args.exc_traceback, name)

    def uninstall():
        sys.excepthook, threading.excepthook = previous

    sys.excepthook = excepthook
    threading.excepthook = thread_excepthook
    reporter.uninstall = uninstall
    return reporter


def _process_age() -> str:
    """Seconds since this process started, where the system tells (Linux); else "?"."""
    try:
        fields = Path("/proc/self/stat").read_text().rsplit(")", 1)[1].split()
        uptime = float(Path("/proc/uptime").read_text().split()[0])
        return f"{uptime - int(fields[19]) / os.sysconf('SC_CLK_TCK'):.2f} s"
    except (OSError, ValueError, IndexError, AttributeError):
        return "?"


def _quit_when_ready(window, started: float, close) -> None:
    def ready(status) -> None:
        log.info("model %s ready on %s after %.2f s", status.name, status.provider,
                 time.perf_counter() - started)
        close()

    def failed(message: str) -> None:
        log.error("smoke test: the model failed to open: %s", message)
        QApplication.exit(1)

    window.assistant.modelReady.connect(ready)
    window.assistant.modelFailed.connect(failed)


def main(argv: list[str] | None = None) -> int:
    started = time.perf_counter()
    args = parse_args(argv)
    if QApplication.instance() is None:
        from desktop_app.system_libs import why_the_window_cannot_open

        why = why_the_window_cannot_open()  # else Qt aborts, naming a plugin, not the fix
        if why:
            print(why, file=sys.stderr)
            return 1
    with engine_for_this_run(args.engine_url, args.engine_key):
        return _main(args, started)


@contextlib.contextmanager
def engine_for_this_run(url: str | None, key: str | None, environ=os.environ):
    """--engine-url and --engine-key as the environment variables the assistant reads (they win
    over settings.toml, as the CLI's options do), so that nothing is written to the settings;
    put back at the end, for a main() run inside a test."""
    if not (url or key):
        yield
        return
    from engine.llm.remote import ENV_KEY, ENV_URL

    given = {name: value for name, value in ((ENV_URL, url), (ENV_KEY, key)) if value}
    before = {name: environ.get(name) for name in given}
    environ.update(given)
    try:
        yield
    finally:
        for name, value in before.items():
            if value is None:
                environ.pop(name, None)
            else:
                environ[name] = value


def _main(args: argparse.Namespace, started: float) -> int:
    paths = AppPaths.from_arg(args.data_dir).ensure()
    log_file = setup_logging(paths)
    notices: list[str] = []  # for the window
    crash_file = enable_crash_log(paths, notices)
    starts = paths.starts_file
    start = crash_loop.begin_start(starts)
    # a smoke test or self-check must test the real app, and end by itself
    safe_mode = start.safe_mode and not (args.smoke_test or args.self_check is not None)
    log.info("starting%s; data dir %s, provider %s", f" in {SAFE_MODE_LOG}" if safe_mode else "",
             paths.root, args.provider)

    app = QApplication.instance() or QApplication(sys.argv[:1])
    app.setApplicationName("Offline Assistant")
    app.setWindowIcon(QIcon(str(ICON)))
    app.setDesktopFileName("offline-assistant")  # Wayland matches the window to its menu entry
    app.setOrganizationName("OfflineAssistant")
    previous_handler = qInstallMessageHandler(_qt_message)
    reporter = install_crash_hook(log_file, starts)
    heartbeat = Heartbeat()
    heartbeat.start()
    collector = GuiThreadGc()  # garbage holding QObjects is freed on this thread only
    collector.start()
    sigterm = QuitOnSigterm()
    clean = False
    try:
        if safe_mode:
            code = _run_safe_mode(app, start, paths, sigterm)
        else:
            code = _run_app(app, args, paths, started, sigterm, notices)
        clean = True
        return code
    except Exception:
        crash_loop.record_error(starts, traceback.format_exc())
        raise
    finally:
        sd_notify.stopping()
        sigterm.uninstall()
        collector.stop()
        heartbeat.stop()
        reporter.uninstall()
        qInstallMessageHandler(previous_handler)
        if clean:
            crash_loop.mark_clean_exit(starts, start.start_id)
        log.info("closed")
        disable_crash_log(crash_file)


def _run_app(app: QApplication, args: argparse.Namespace, paths: AppPaths, started: float,
             sigterm: QuitOnSigterm, notices: list[str] = ()) -> int:
    from desktop_app.main_window import MainWindow

    window = MainWindow(paths, args.provider, notices=notices)  # prepares the built-in model if it must
    try:
        return _show_and_run(app, window, args, started, sigterm)
    except BaseException:
        window.close()  # ends its threads; else Qt aborts the process and hides the error
        raise


def _show_and_run(app: QApplication, window, args: argparse.Namespace, started: float,
                  sigterm: QuitOnSigterm) -> int:
    kiosk = args.kiosk or getattr(window.settings, "kiosk", False)
    window.show()
    mode = _start_kiosk(window, kiosk)
    watcher = _start_bundle_watcher(window, kiosk)
    # the kiosk refuses to close but by its close_app(); the window's closeEvent ends its threads
    close = getattr(mode, "close_app", window.close)
    sigterm.close = close
    QTimer.singleShot(0, lambda: _window_shown(started, "kiosk" if kiosk else "window"))
    if args.smoke_test:
        _quit_when_ready(window, started, close)
    check = None
    if args.self_check is not None:
        from desktop_app.self_check import SelfCheck

        check = SelfCheck(window, args.self_check, started, close=close)
    try:
        code = app.exec()
    finally:
        if watcher is not None:
            watcher.stop()
    del mode  # kept alive while the app ran
    return code if check is None else code or (0 if check.passed else 1)


def _window_shown(started: float, what: str) -> None:
    log.info("window usable after %.2f s (%s since the process started)",
             time.perf_counter() - started, _process_age())
    sd_notify.ready()
    sd_notify.status(f"{what} up")


# -- kiosk ---------------------------------------------------------------------------------------
def _start_bundle_watcher(window, kiosk: bool):
    """A kiosk with a bundle_source installs new index bundles in the background (engine.fleet,
    on a thread its controller owns); the assistant switches to them between questions. A bad
    source is logged, never fatal."""
    if not kiosk or not window.settings.bundle_source:
        return None
    from engine.fleet.watcher import watcher_from_settings

    try:
        watcher = watcher_from_settings(window.paths, window.settings)
    except EngineError as exc:
        log.error("bundle updates are off: %s", exc)
        return None
    from desktop_app.controllers.bundles import BundleController

    log.info("watching %s for index bundles every %.0f s", watcher.source, watcher.poll_s)
    return BundleController(watcher)


def _start_kiosk(window, kiosk: bool):
    """THE call site of desktop_app/kiosk/lockdown.py, once the window is shown: kiosk mode when asked
    for (--kiosk or `kiosk = true`), else the audit log alone if the settings turn it on.
    Imported lazily; a build without that module runs the normal window."""
    try:
        from desktop_app.kiosk import lockdown as kiosk_module
    except ModuleNotFoundError as exc:
        if exc.name != f"{__package__}.kiosk":
            raise
        if kiosk:
            log.warning("kiosk mode was asked for, but this build has no kiosk module")
        return None
    return kiosk_module.install(window, kiosk)


# -- safe mode -----------------------------------------------------------------------------------
def _run_safe_mode(app: QApplication, start, paths: AppPaths, sigterm: QuitOnSigterm) -> int:
    from desktop_app.kiosk.safe_mode import RESTART_EXIT_CODE, SafeModeWindow

    last = (start.last_error or "none recorded").strip().splitlines()[-1:]
    log.warning("%s: %d crashes in a row; showing the last error instead of the app (%s)",
                SAFE_MODE_LOG, start.crashes, last[0] if last else "")
    window = SafeModeWindow(start.crashes, start.last_error, str(paths.logs))
    window.tryAgain.connect(lambda: app.exit(RESTART_EXIT_CODE))  # a clean exit: the next start is normal
    window.showFullScreen()
    sigterm.close = window.close
    QTimer.singleShot(0, lambda: (sd_notify.ready(), sd_notify.status(SAFE_MODE_LOG)))
    code = app.exec()
    log.info("%s ended (exit code %d)", SAFE_MODE_LOG, code)
    return code


if __name__ == "__main__":
    sys.exit(main())
