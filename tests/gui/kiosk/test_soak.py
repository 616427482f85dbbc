"""The kiosk soak, short (issue 7): 150 questions in a row through a real kiosk window on the tiny
LLM and the real embedder, with "New question" every 5 and the idle reset every 50, as
bench/soak_kiosk.py runs 2,000 (its loop, imported from there). Every answer complete; open files
and threads flat after the warm-up; memory with a generous bound (a shared 2-core machine is
noisy; a leak of a bubble or a buffer per question is not).

The kiosk runs in a process of its own, as a kiosk does: in the test runner's process, after the
whole suite, its memory grew 54-124 MB per 1,000 questions with no leak of the app's (alone, or
after tests/gui, +0.4 to +2.5), so the figure was the runner's, not the app's."""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from pathlib import Path

import pytest

from engine.answer.assistant import AssistantSettings
from engine.paths import AppPaths
from tests.helpers.pdf_factory import write_pdf
from tests.helpers.pump_chat import PUMP_PAGES, index_into

ROOT = Path(__file__).resolve().parents[3]
SOAK_SCRIPT = ROOT / "bench" / "soak_kiosk.py"
QUESTIONS = 150
WARMUP = 30  # a fifth: the model's and the embedder's buffers reach their size in the first rounds
RSS_SLOPE_MB = 50.0  # per 1,000 questions
FD_TOLERANCE, THREAD_TOLERANCE = 2, 1


def load_soak():
    """bench/ is no package: the script is loaded as a module of its own (registered, as its
    dataclasses need)."""
    if "soak_kiosk" in sys.modules:
        return sys.modules["soak_kiosk"]
    spec = importlib.util.spec_from_file_location("soak_kiosk", SOAK_SCRIPT)
    module = importlib.util.module_from_spec(spec)
    sys.modules["soak_kiosk"] = module
    spec.loader.exec_module(module)
    return module


def soak_here(data: Path, llm: Path, out: Path) -> None:
    """The soak in this process (the child's): its run as JSON in `out`."""
    soak = load_soak()
    kiosk = soak.open_kiosk(AppPaths(data), llm, AssistantSettings(max_new_tokens=40), load_timeout_s=60)
    try:
        result = soak.run_soak(kiosk, QUESTIONS, soak.PUMP_QUESTIONS + soak.OFF_TOPIC, "tiny", timeout_s=60)
    finally:
        soak.close_kiosk(kiosk)
    out.write_text(json.dumps(soak.saved_run(result, "pump")), encoding="utf-8")


def soak_in_a_child(data: Path, llm: Path, out: Path):
    """The SoakResult of soak_here run in a new Python process."""
    code = ("import sys; from pathlib import Path; from tests.gui.kiosk.test_soak import soak_here; "
            "soak_here(*map(Path, sys.argv[1:4]))")
    done = subprocess.run([sys.executable, "-c", code, str(data), str(llm), str(out)], cwd=ROOT,
                          capture_output=True, text=True, timeout=900, check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    soak = load_soak()
    fields = dict(json.loads(out.read_text(encoding="utf-8"))["result"])
    fields["samples"] = [soak.Sample(**sample) for sample in fields["samples"]]
    return soak.SoakResult(**fields)


@pytest.mark.slow
def test_150_questions_in_a_row_leave_memory_files_and_threads_flat(qapp, tmp_path, tiny_llm_dir, capsys):
    soak = load_soak()
    paths = AppPaths(tmp_path / "data").ensure()
    index_into(paths, [write_pdf(tmp_path / "pump.pdf", PUMP_PAGES)])
    result = soak_in_a_child(paths.root, tiny_llm_dir, tmp_path / "soak.json")
    summary = result.summary(WARMUP)
    gui, child = summary["gui"], summary["child"]
    with capsys.disabled():
        print(f"\n[soak] {result.complete}/{result.questions} complete ({result.blank} blank) in "
              f"{result.seconds:.0f} s; RSS slope MB/1,000 q: GUI {gui['rss_slope_mb_per_1000']:+.1f}, "
              f"child {child['rss_slope_mb_per_1000']:+.1f}; fds {gui['fds_warm']}->{gui['fds_end']} / "
              f"{child['fds_warm']}->{child['fds_end']}; threads {gui['threads_warm']}->{gui['threads_end']} / "
              f"{child['threads_warm']}->{child['threads_end']}")
    assert result.failures == [] and result.complete == QUESTIONS
    assert 0 < result.refused < QUESTIONS  # the gate answered some and refused the off-topic ones
    assert result.new_questions >= QUESTIONS // 5 - QUESTIONS // 50 and result.idle_resets == QUESTIONS // 50
    assert result.restarts == 0
    assert soak.grew(summary, FD_TOLERANCE, THREAD_TOLERANCE) == []
    # a leak grows after the warm-up and over the second half; a one-time step (an allocator's
    # arena growing once) only in the first
    for who in (gui, child):
        assert min(who["rss_slope_mb_per_1000"], who["rss_slope_2nd_half_mb_per_1000"]) < RSS_SLOPE_MB, who
    # every sample follows a reset: no answer bubble, no dialog, no window left behind
    assert summary["widgets_end"] <= summary["widgets_warm"]
    assert summary["top_widgets_end"] <= summary["top_widgets_warm"]
