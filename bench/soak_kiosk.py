#!/usr/bin/env python
"""Kiosk soak (issue 7): many questions in a row through a real kiosk window, offscreen, in one
process; resident memory, open files and threads of the window's process and of the LLM's child
process, sampled as it goes.

    python bench/soak_kiosk.py --model tiny --questions 2000      # the tiny random LLM, ~2 min
    python bench/soak_kiosk.py --model builtin --questions 200    # the built-in SmolLM2, ~15 min
    python bench/soak_kiosk.py --both       # tiny 2,000 then builtin 200 in one process, a window each
    python bench/soak_kiosk.py --model tiny --questions 300 --no-doc --json out.json
    python bench/soak_kiosk.py --doc-only                         # the section from the saved runs

Asks as an operator does: text in the question box, Send, wait for the answer; "New question"
every 5 questions, and now and then the idle reset. Every answer must be complete: the answer
event came, no error, and the bubble shows the final answer in full, non-empty (or "blank":
the model wrote tokens that decode to no text, which the tiny random model does now and then;
counted, not a failure). After the warm-up (the first 10 % of the questions) the RSS
trend is a least-squares slope per 1,000 questions; open files and threads must not grow.
Writes "## Kiosk soak (issue 7)" of docs/benchmarks.md (from every model's last run, kept in
bench/.cache/soak/result-MODEL.json; --no-doc leaves both alone). Exit code 1 when an answer
was incomplete or files or threads grew.

tests/gui/kiosk/test_soak.py runs a short version of the same loop (`run_soak`).
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import platform
import shutil
import sys
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")  # before Qt is imported

ROOT = Path(__file__).resolve().parents[1]
if __name__ == "__main__" and str(ROOT) not in sys.path:  # run as a script: bench/ is on the path, not the project
    sys.path.insert(1, str(ROOT))

from PySide6.QtCore import QCoreApplication, QEvent, QEventLoop, QObject, QTimer  # noqa: E402
from PySide6.QtWidgets import QApplication  # noqa: E402

from engine.answer.assistant import ErrorEvent  # noqa: E402

CACHE = ROOT / "bench" / ".cache" / "soak"
DOC = ROOT / "docs" / "benchmarks.md"
SECTION = "## Kiosk soak (issue 7)"
NEW_EVERY = 5  # "New question" after this many questions, as operators do
IDLE_EVERY = 50  # the idle reset instead, this often
FD_TOLERANCE = 2  # a file the audit log or a log rotation has open at the moment of a sample
THREAD_TOLERANCE = 1
BLANK = "blank"  # the model wrote tokens that decode to no text (the tiny random model, now and then)
MODEL_NAMES = {"tiny": "tiny random LLM", "builtin": "built-in SmolLM2-135M"}

OFF_TOPIC = [  # the gate refuses these: the manuals do not cover them
    "What is the capital of France?",
    "Who won the football world cup in 1998?",
    "Give me a recipe for banana bread.",
    "How far is the moon from the earth?",
    "Write a poem about the sea.",
    "What is the best way to learn to play the guitar?",
]
PUMP_QUESTIONS = [
    "How do I prime the pump before the first start?",
    "What does error E-12 mean?",
    "How long should the motor cool after it overheated?",
    "Should I wear gloves when handling the pump housing?",
    "What do I fill the pump casing with?",
    "When do I close the bleed valve?",
    "What should I do when the motor overheats?",
    "Who must be kept away from the pump?",
    "How do I get the air out of the pump?",
    "What is the first thing to do before starting the pump?",
    "Is it safe to touch the pump housing without gloves?",
    "What does the pump manual say about safety?",
    "How do I switch the pump off after error E-12?",
    "Why are there air bubbles in the water?",
]
R_QUESTIONS = [
    "How do I install R on Windows?",
    "What is CRAN?",
    "How can I cite R in a publication?",
    "Why does R use so much memory?",
    "How do I save my workspace?",
    "What are the differences between R and S?",
    "How do I create a PDF plot?",
    "Why do floating point comparisons give unexpected results?",
    "How do I contribute a package to CRAN?",
    "What does the error 'object not found' mean?",
    "How can I read an Excel file in R?",
    "Is R free software?",
    "How do I set the number of digits that are printed?",
    "Where are the R mailing lists?",
]


# -- measuring a process ----------------------------------------------------------------------
def rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def entries(pid: int, folder: str) -> int:
    """How many open files ("fd") or threads ("task") process `pid` has."""
    try:
        return len(os.listdir(f"/proc/{pid}/{folder}"))
    except OSError:  # the process is gone
        return -1


@dataclass
class Sample:
    question: int  # questions asked before this sample
    seconds: float
    gui_rss_mb: float
    child_rss_mb: float
    gui_fds: int
    child_fds: int
    gui_threads: int
    child_threads: int
    top_widgets: int
    all_widgets: int
    gc_objects: int
    child_pid: int


@dataclass
class SoakResult:
    model: str
    questions: int = 0
    complete: int = 0
    refused: int = 0
    blank: int = 0  # complete, but the model's tokens decoded to no text
    failures: list = field(default_factory=list)  # (question number, question, why)
    new_questions: int = 0
    idle_resets: int = 0
    restarts: int = 0  # engineRestarting: the LLM's process died
    seconds: float = 0.0
    answer_seconds: list = field(default_factory=list)
    samples: list = field(default_factory=list)  # Sample

    def summary(self, warmup: int | None = None) -> dict:
        return summarize(self, self.questions // 10 if warmup is None else warmup)


def slope_per_1000(points: list[tuple[float, float]]) -> float:
    """Least-squares slope of (question, value) points, per 1,000 questions."""
    if len(points) < 2:
        return 0.0
    n = len(points)
    mx = sum(x for x, _ in points) / n
    my = sum(y for _, y in points) / n
    sxx = sum((x - mx) ** 2 for x, _ in points)
    if sxx == 0:
        return 0.0
    return 1000 * sum((x - mx) * (y - my) for x, y in points) / sxx


def summarize(result: SoakResult, warmup: int) -> dict:
    """The figures: RSS at start, end of warm-up and end, its slope after the warm-up and over
    the second half (a one-time step, an allocator's arena growing to the largest prompt, shows
    in the first, a leak in both), and the growth of open files and threads from the end of the
    warm-up to the end."""
    samples = result.samples
    after = [s for s in samples if s.question >= warmup] or samples[-1:]
    second_half = [s for s in samples if s.question >= result.questions / 2]
    base, last = after[0], samples[-1]
    out = {"model": result.model, "questions": result.questions, "complete": result.complete,
           "incomplete": len(result.failures), "refused": result.refused, "blank": result.blank,
           "warmup": warmup,
           "new_questions": result.new_questions, "idle_resets": result.idle_resets,
           "restarts": result.restarts, "seconds": round(result.seconds, 1),
           "median_answer_s": round(median(result.answer_seconds), 3)}
    for who in ("gui", "child"):
        rss = [getattr(s, f"{who}_rss_mb") for s in samples]
        out[who] = {
            "rss_start_mb": round(rss[0], 1), "rss_warm_mb": round(getattr(base, f"{who}_rss_mb"), 1),
            "rss_end_mb": round(rss[-1], 1), "rss_max_mb": round(max(rss), 1),
            "rss_slope_mb_per_1000": round(slope_per_1000(
                [(s.question, getattr(s, f"{who}_rss_mb")) for s in after]), 2),
            "rss_slope_2nd_half_mb_per_1000": round(slope_per_1000(
                [(s.question, getattr(s, f"{who}_rss_mb")) for s in second_half]), 2),
            "fds_warm": getattr(base, f"{who}_fds"), "fds_end": getattr(last, f"{who}_fds"),
            "threads_warm": getattr(base, f"{who}_threads"), "threads_end": getattr(last, f"{who}_threads"),
        }
        out[who]["fds_growth"] = out[who]["fds_end"] - out[who]["fds_warm"]
        out[who]["threads_growth"] = out[who]["threads_end"] - out[who]["threads_warm"]
    out["widgets_warm"], out["widgets_end"] = base.all_widgets, last.all_widgets
    out["top_widgets_warm"], out["top_widgets_end"] = base.top_widgets, last.top_widgets
    out["gc_objects_warm"], out["gc_objects_end"] = base.gc_objects, last.gc_objects
    out["gc_slope_per_1000"] = round(slope_per_1000([(s.question, s.gc_objects) for s in after]))
    return out


def median(values: list[float]) -> float:
    if not values:
        return 0.0
    ordered = sorted(values)
    middle = len(ordered) // 2
    return ordered[middle] if len(ordered) % 2 else (ordered[middle - 1] + ordered[middle]) / 2


def grew(summary: dict, fd_tolerance: int = FD_TOLERANCE, thread_tolerance: int = THREAD_TOLERANCE) -> list[str]:
    """What grew beyond the tolerance after the warm-up (open files, threads), in words."""
    out = []
    for who in ("gui", "child"):
        figures = summary[who]
        if figures["fds_growth"] > fd_tolerance:
            out.append(f"{who} open files {figures['fds_warm']} -> {figures['fds_end']}")
        if figures["threads_growth"] > thread_tolerance:
            out.append(f"{who} threads {figures['threads_warm']} -> {figures['threads_end']}")
    return out


# -- the operator -------------------------------------------------------------------------------
class Operator(QObject):
    """Asks through the kiosk's chat and waits for each answer in a local event loop. Its slots
    stay connected for the whole soak, so the harness itself allocates little per question."""

    def __init__(self, kiosk, timeout_s: float):
        super().__init__(kiosk)
        self.kiosk = kiosk
        self.window = kiosk.window
        self.timeout_ms = int(timeout_s * 1000)
        self.loop = QEventLoop(self)
        self.timer = QTimer(self)
        self.timer.setSingleShot(True)
        self.timer.timeout.connect(self.loop.quit)
        self.done = None
        self.error = ""
        self.restarts = 0
        self.child_pid = self._child_pid()
        controller = self.window.assistant
        self.window.chat.answerFinished.connect(self._on_done)
        controller.answerEvent.connect(self._on_event)
        controller.modelReady.connect(self._on_model)
        controller.engineRestarting.connect(self._on_restarting)

    def _child_pid(self) -> int:
        llm = self.window.assistant.worker.llm  # set once modelReady came
        return llm.pid if llm is not None and llm.pid else 0

    def _on_done(self, event) -> None:
        self.done = event
        self.loop.quit()

    def _on_event(self, event) -> None:
        if isinstance(event, ErrorEvent):
            self.error = event.message or "(an empty error)"
            self.loop.quit()

    def _on_model(self, status) -> None:
        if status.pid:
            self.child_pid = status.pid

    def _on_restarting(self, _message: str) -> None:
        self.restarts += 1

    def ask(self, question: str) -> str:
        """Asks `question`; "" when its answer came complete (the bubble shows the final answer,
        in full), BLANK when complete but the model wrote nothing visible, else why not."""
        chat = self.window.chat
        self.done, self.error = None, ""
        chat.input.setPlainText(question)
        if not chat.send():
            return "not sent (the chat was busy or not ready)"
        if self.done is None and not self.error:
            self.timer.start(self.timeout_ms)
            self.loop.exec()
            self.timer.stop()
        if self.error:
            return f"error: {self.error}"
        if self.done is None:
            chat.stop()
            return f"no answer within {self.timeout_ms / 1000:.0f} s"
        bubble = chat.last_answer()
        if bubble is None or not bubble.state.finished or bubble.state.error or bubble.state.stopped:
            return "the answer's bubble is not finished"
        if bubble.state.text != self.done.answer:
            return "the bubble does not show the final answer"
        if not self.done.answer.strip():
            return BLANK if self.done.stats.new_tokens > 0 else "an empty answer"
        return ""

    def new_question(self) -> None:
        self.kiosk.new_button.click()  # as the operator's tap

    def idle_reset(self) -> bool:
        """Lets the kiosk's idle timer run out (shortened for the moment); True once it reset."""
        kiosk, chat = self.kiosk, self.window.chat
        interval = kiosk.idle_timer.interval()
        kiosk.idle_timer.setInterval(10)
        kiosk.idle_timer.start()
        ok = self.wait_until(lambda: chat.messages() == [] and not kiosk.idle_timer.isActive(), 10.0)
        kiosk.idle_timer.setInterval(interval)
        kiosk.idle_timer.start()  # as after any input
        return ok

    def wait_until(self, condition, timeout_s: float) -> bool:
        deadline = time.monotonic() + timeout_s
        while not condition():
            if time.monotonic() > deadline:
                return False
            QCoreApplication.processEvents(QEventLoop.ProcessEventsFlag.AllEvents, 20)
            time.sleep(0.005)
        return True

    def sample(self, question: int, started: float) -> Sample:
        """Settles first: deferred deletes run, the audit lines are written, garbage collected."""
        QCoreApplication.processEvents()
        QCoreApplication.sendPostedEvents(None, QEvent.Type.DeferredDelete)
        self.kiosk.audit.wait()
        gc.collect()
        gui, child = os.getpid(), self.child_pid
        return Sample(question, round(time.perf_counter() - started, 2), rss_mb(gui),
                      rss_mb(child) if child else float("nan"), entries(gui, "fd"),
                      entries(child, "fd") if child else -1, entries(gui, "task"),
                      entries(child, "task") if child else -1, len(QApplication.topLevelWidgets()),
                      len(QApplication.allWidgets()), len(gc.get_objects()), child)


def run_soak(kiosk, count: int, questions: list[str], model: str = "", *, timeout_s: float = 120.0,
             sample_every: int | None = None, new_every: int = NEW_EVERY, idle_every: int = IDLE_EVERY,
             report=None) -> SoakResult:
    """Asks `count` questions in a row through `kiosk` (a started desktop_app.kiosk.lockdown.Kiosk),
    rotating through `questions`; samples both processes every `sample_every` questions."""
    step = new_every or 1  # samples at a multiple of it see the chat just after a reset
    every = sample_every or min(100, max(step, count // 20 // step * step))
    operator = Operator(kiosk, timeout_s)
    result = SoakResult(model)
    started = time.perf_counter()
    result.samples.append(operator.sample(0, started))
    for number in range(1, count + 1):
        question = questions[(number - 1) % len(questions)]
        asked = time.perf_counter()
        why = operator.ask(question)
        result.answer_seconds.append(round(time.perf_counter() - asked, 3))
        result.questions = number
        if why and why != BLANK:
            result.failures.append((number, question, why))
        else:
            result.complete += 1
            result.blank += why == BLANK
            result.refused += not operator.done.stats.answerable
        if idle_every and number % idle_every == 0:
            if operator.idle_reset():
                result.idle_resets += 1
            else:
                result.failures.append((number, question, "the idle reset did not clear the conversation"))
        elif new_every and number % new_every == 0:
            operator.new_question()
            result.new_questions += 1
        if number % every == 0 or number == count:
            result.samples.append(operator.sample(number, started))
            if report is not None:
                report(result.samples[-1], result)
    result.seconds = time.perf_counter() - started
    result.restarts = operator.restarts
    return result


# -- the window ---------------------------------------------------------------------------------
def open_kiosk(paths, llm_folder: Path | None, answer=None, settings=None, load_timeout_s: float = 120.0):
    """A MainWindow on `paths`, shown, its model loaded, in kiosk mode (a started Kiosk)."""
    from desktop_app.kiosk.lockdown import Kiosk
    from desktop_app.main_window import MainWindow
    from engine.config import Settings

    app = QApplication.instance() or QApplication([])
    window = MainWindow(paths, "cpu", settings or Settings(), llm_folder=llm_folder, assistant_settings=answer)
    loop = QEventLoop()
    failed = []
    window.assistant.modelReady.connect(loop.quit)
    window.assistant.modelFailed.connect(lambda message: (failed.append(message), loop.quit()))
    QTimer.singleShot(int(load_timeout_s * 1000), loop.quit)
    window.show()
    if window.assistant.worker.llm is None:
        loop.exec()
    if failed or window.assistant.worker.llm is None:
        window.close()
        raise RuntimeError(f"the model did not load: {failed or 'timed out'}")
    app.processEvents()
    kiosk = Kiosk(window)
    kiosk.start()
    return kiosk


def close_kiosk(kiosk) -> None:
    """Closes the window for good (its threads and the model's process end) and deletes it."""
    window = kiosk.window
    kiosk.close_app()
    window.deleteLater()
    QCoreApplication.sendPostedEvents(None, QEvent.Type.DeferredDelete)


# -- data dirs and models (the script only) ---------------------------------------------------
def fresh_data(name: str):
    """bench/.cache/soak/NAME with its models and collections kept, everything a run writes
    (conversations, audit, settings, logs) removed."""
    from engine.paths import AppPaths

    root = CACHE / name
    if root.exists():
        for entry in root.iterdir():
            if entry.name not in ("models", "collections"):
                shutil.rmtree(entry) if entry.is_dir() else entry.unlink()
    return AppPaths(root).ensure()


def tiny_llm() -> Path:
    from engine.models.gguf_import import import_gguf
    from tests.helpers.gguf_factory import write_tiny_gguf

    folder = CACHE / "tiny_llm"
    model = folder / "model"
    if not (model / "genai_config.json").is_file():
        shutil.rmtree(folder, ignore_errors=True)
        folder.mkdir(parents=True)
        source = write_tiny_gguf(folder / "tiny.gguf", context_length=2048, weight_type="Q4_1")
        model = import_gguf(source, model)
    return model


def manual_for(model: str) -> tuple[list[Path], list[str]]:
    """The manual to index and the questions to ask: the R FAQ for the real model when
    tests/fetch_manuals.sh has fetched it, else the three-page pump manual."""
    faq = ROOT / "tests" / ".manuals" / "R-FAQ.pdf"
    if model == "builtin" and faq.is_file():
        return [faq], R_QUESTIONS + OFF_TOPIC
    from tests.helpers.pdf_factory import write_pdf
    from tests.helpers.pump_chat import PUMP_PAGES

    pdf = CACHE / "pump.pdf"
    if not pdf.is_file():
        pdf.parent.mkdir(parents=True, exist_ok=True)
        QApplication.instance() or QApplication([])
        write_pdf(pdf, PUMP_PAGES)
    return [pdf], PUMP_QUESTIONS + OFF_TOPIC


def ensure_indexed(paths, files: list[Path]) -> None:
    from tests.helpers.pump_chat import index_into

    marker = paths.collections / "soak-indexed.json"
    wanted = sorted(str(f) for f in files)
    db = paths.collection_db("default")
    if db.is_file() and marker.is_file() and json.loads(marker.read_text()) == wanted:
        return
    shutil.rmtree(paths.collections, ignore_errors=True)
    paths.ensure()
    print(f"indexing {', '.join(f.name for f in files)} …", flush=True)
    index_into(paths, files)
    marker.write_text(json.dumps(wanted))


def soak_model(model: str, count: int, timeout_s: float) -> SoakResult:
    from engine.answer.assistant import AssistantSettings
    from engine.models.registry import prepare_builtin_llm

    paths = fresh_data(model)
    files, questions = manual_for(model)
    ensure_indexed(paths, files)
    if model == "tiny":
        llm, answer = tiny_llm(), AssistantSettings(max_new_tokens=40)  # the real gate, short answers
    else:
        prepare_builtin_llm(paths)  # once: the window then opens it as the app does (no llm_folder)
        llm, answer = None, None
    kiosk = open_kiosk(paths, llm, answer)
    print(f"{model}: {count} questions on {', '.join(f.name for f in files)}", flush=True)
    try:
        return run_soak(kiosk, count, questions, model, timeout_s=timeout_s, report=print_progress)
    finally:
        close_kiosk(kiosk)


def print_progress(sample: Sample, result: SoakResult) -> None:
    print(f"  {sample.question:5d} q {sample.seconds:7.0f} s | RSS GUI {sample.gui_rss_mb:6.1f} MB "
          f"child {sample.child_rss_mb:6.1f} MB | fds {sample.gui_fds}/{sample.child_fds} "
          f"threads {sample.gui_threads}/{sample.child_threads} | widgets {sample.all_widgets} "
          f"gc {sample.gc_objects} | incomplete {len(result.failures)}", flush=True)


# -- the report ---------------------------------------------------------------------------------
def machine_note() -> str:
    cpu = ""
    try:
        cpu = next(line.split(":", 1)[1].strip() for line in Path("/proc/cpuinfo").read_text().splitlines()
                   if line.startswith("model name"))
    except (OSError, StopIteration):
        pass
    return (f"{platform.system()} {platform.release()}, {cpu or platform.machine()}, "
            f"{os.cpu_count()} cores (shared), Python {platform.python_version()}")


def table(summaries: list[dict]) -> list[str]:
    lines = ["| model | questions | complete | refused | median s/answer | process | RSS start MB | "
             "RSS after warm-up MB | RSS end MB | slope MB/1,000 q (after warm-up; 2nd half) | "
             "open files (warm → end) | threads (warm → end) |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for s in summaries:
        for who, name in (("gui", "window"), ("child", "LLM child")):
            f = s[who]
            lines.append(f"| {MODEL_NAMES[s['model']]} | {s['questions']:,} | {s['complete']:,} | {s['refused']:,} | "
                         f"{s['median_answer_s']:.2f} | {name} | {f['rss_start_mb']:.0f} | "
                         f"{f['rss_warm_mb']:.0f} | {f['rss_end_mb']:.0f} | {f['rss_slope_mb_per_1000']:+.1f}; "
                         f"{f['rss_slope_2nd_half_mb_per_1000']:+.1f} | "
                         f"{f['fds_warm']} → {f['fds_end']} | {f['threads_warm']} → {f['threads_end']} |")
    return lines


def trend(run: dict) -> list[str]:
    """RSS at every tenth of the run, for the trend by eye."""
    samples = run["result"]["samples"]
    step = max(1, len(samples) // 10)
    picked = samples[::step] + ([samples[-1]] if (len(samples) - 1) % step else [])
    return [f"- {MODEL_NAMES[run['result']['model']]}: " + ", ".join(
        f"{s['question']:,} q: {s['gui_rss_mb']:.0f}/{s['child_rss_mb']:.0f}" for s in picked)]


def report(runs: list[dict]) -> str:
    summaries = [summary_of(run) for run in runs]
    lines = [SECTION, "", "Produced by `bench/soak_kiosk.py`: a real kiosk window (MainWindow + "
             "`desktop_app.kiosk.lockdown.Kiosk`), offscreen, in one process; questions asked through the chat "
             "as an operator does, \"New question\" every 5 and the idle reset every 50; a real indexed "
             "manual and the real embedder. RSS, open files (`/proc/PID/fd`) and threads "
             "(`/proc/PID/task`) of the window's process and of the LLM's child process, sampled "
             "after a settle (deferred deletes, audit written, `gc.collect()`); the slope is a least-"
             "squares fit after the warm-up (the first 10 % of the questions), and over the second half "
             "(which tells a one-time step, an allocator growing to the largest prompt, from a leak).",
             "", "```",
             "python bench/soak_kiosk.py --model tiny --questions 2000",
             "python bench/soak_kiosk.py --model builtin --questions 200", "```", ""]
    lines += table(summaries)
    lines += ["", "RSS (window/LLM child, MB) along the run:", ""]
    for run in runs:
        lines += trend(run)
    lines += [""]
    for run, s in zip(runs, summaries):
        lines.append(f"- {MODEL_NAMES[s['model']]} ({run['manual']}, {run['when']}, {run['machine']}): "
                     f"{s['complete']:,}/{s['questions']:,} answers complete ({s['blank']} of them blank: "
                     "the model's tokens decoded to no text), "
                     f"{s['incomplete']} incomplete, "
                     f"{s['restarts']} model restarts, {s['seconds'] / 60:.1f} min; widgets "
                     f"{s['widgets_warm']} → {s['widgets_end']} (top-level {s['top_widgets_warm']} → "
                     f"{s['top_widgets_end']}), Python objects {s['gc_objects_warm']:,} → "
                     f"{s['gc_objects_end']:,} ({s['gc_slope_per_1000']:+,} per 1,000 q).")
    lines += ["", "The short version runs in the test suite: `tests/gui/kiosk/test_soak.py` (150 questions on the "
              "tiny LLM, marked slow).", ""]
    return "\n".join(lines)


def saved_run(result: SoakResult, manual: str) -> dict:
    """A run as JSON: every count, answer time and sample, and its summary (for reading)."""
    return {"summary": result.summary(), "manual": manual, "machine": machine_note(),
            "when": time.strftime("%Y-%m-%d", time.gmtime()), "result": asdict(result)}


def summary_of(run: dict) -> dict:
    """The summary of a saved run, computed again (the figures may have changed since)."""
    fields = dict(run["result"])
    fields["samples"] = [Sample(**s) for s in fields["samples"]]
    return SoakResult(**fields).summary()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", choices=("tiny", "builtin"), default="tiny")
    parser.add_argument("--questions", type=int, help="default: 2000 for tiny, 200 for builtin")
    parser.add_argument("--both", action="store_true", help="tiny 2,000 then builtin 200, in one process")
    parser.add_argument("--timeout", type=float, default=180.0, help="seconds per answer (default 180)")
    parser.add_argument("--json", type=Path, help="write the runs (summary and every sample) here")
    parser.add_argument("--no-doc", action="store_true",
                        help="leave docs/benchmarks.md and the saved runs alone")
    parser.add_argument("--doc-only", action="store_true",
                        help="write the section from the last saved runs (bench/.cache/soak) and stop")
    args = parser.parse_args()
    if args.doc_only:
        write_section(report(saved_runs()))
        return 0
    plan = [("tiny", 2000), ("builtin", 200)] if args.both else \
        [(args.model, args.questions or (2000 if args.model == "tiny" else 200))]
    app = QApplication.instance() or QApplication([])  # referenced until the runs are over
    runs, bad = [], []
    for model, count in plan:
        result = soak_model(model, count, args.timeout)
        run = saved_run(result, manual_for(model)[0][0].name)
        runs.append(run)
        if not args.no_doc:
            (CACHE / f"result-{model}.json").write_text(json.dumps(run, indent=1))
        bad += [f"{model}: question {n} ({q!r}): {why}" for n, q, why in result.failures]
        bad += [f"{model}: {what}" for what in grew(run["summary"])]
    del app
    text = report(runs)
    print(text)
    if args.json:
        args.json.write_text(json.dumps(runs, indent=1))
    if not args.no_doc:  # every model's last run, so separate runs share the section
        write_section(report(saved_runs()))
    for line in bad[:20]:
        print("FAILED:", line)
    return 1 if bad else 0


def saved_runs() -> list[dict]:
    """Every model's last run, tiny first."""
    return [json.loads(p.read_text()) for p in sorted(CACHE.glob("result-*.json"), reverse=True)]


def write_section(text: str) -> None:
    from benchdoc import update_section

    update_section(DOC, SECTION, text)


if __name__ == "__main__":
    sys.exit(main())
