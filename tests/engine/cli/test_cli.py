"""offline-assistant-cli: models list/prepare/import and generate, against a temporary data dir."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from engine.cli.main import main
from engine.models.registry import BUILTIN_EMBEDDER, BUILTIN_LLM

REPO = Path(__file__).resolve().parents[3]
RUN_A_MODEL = [["models", "list"], ["generate"], ["ask"], ["chat"], ["eval"]]
RUN_NO_MODEL = [["models", "prepare"], ["models", "import"], ["index"], ["docs", "list"], ["docs", "remove"],
                ["admin", "set-pin"], ["admin", "clear-pin"], ["admin", "audit"]]


def run_cli(args: list[str], home: Path, **kwargs) -> subprocess.CompletedProcess:
    """`python -m engine ARGS` with a private home, so any write outside --data-dir shows."""
    return subprocess.run([sys.executable, "-m", "engine", *args], capture_output=True,
                          text=True, env=private_env(home), cwd=REPO, timeout=600, **kwargs)


def private_env(home: Path) -> dict:
    home.mkdir(parents=True, exist_ok=True)
    return {**os.environ, "HOME": str(home), "XDG_DATA_HOME": str(home / "data"),
            "XDG_CONFIG_HOME": str(home / "config"), "XDG_CACHE_HOME": str(home / "cache"),
            "PYTHONPATH": str(REPO)}


def files_under(folder: Path) -> list[Path]:
    return [p for p in folder.rglob("*") if p.is_file()]


def json_lines(text: str) -> list[dict]:
    return [json.loads(line) for line in text.splitlines() if line.startswith("{")]


def imported_name(out: str) -> str:
    return re.search(r"Imported '([^']+)'", out).group(1)


# -- arguments ----------------------------------------------------------------------------
def test_help(capsys):
    assert main(["--help"]) == 0
    out = capsys.readouterr().out
    assert "models" in out and "generate" in out


@pytest.mark.parametrize("command", RUN_A_MODEL + RUN_NO_MODEL, ids=" ".join)
def test_every_subcommand_takes_data_dir_and_only_those_that_run_a_model_offer_provider(command, capsys):
    assert main([*command, "--help"]) == 0
    out = capsys.readouterr().out
    assert "--data-dir DIR" in out
    assert ("--provider {auto," in out) == (command in RUN_A_MODEL)


def test_help_imports_no_heavy_module():
    probe = (
        "import json, sys\n"
        "from engine.cli.main import main\n"
        "main(['generate', '--help'])\n"
        "heavy = ('numpy', 'onnx', 'onnxruntime', 'onnxruntime_genai', 'gguf', 'PySide6')\n"
        "print(json.dumps([m for m in heavy if m in sys.modules]))\n"
    )
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True,
                          cwd=REPO, timeout=60)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout.splitlines()[-1]) == []


def test_python_dash_m_engine(tmp_path):
    done = run_cli(["--version"], tmp_path / "home")
    assert done.returncode == 0
    assert "offline-assistant-cli 0.1.0" in done.stdout


def test_a_bad_provider_is_a_usage_error(tmp_path, capsys):
    assert main(["models", "list", "--provider", "tpu", "--data-dir", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert "invalid choice: 'tpu'" in err and "Traceback" not in err


def test_no_command_shows_usage(capsys):
    assert main([]) == 2
    assert "usage:" in capsys.readouterr().err


def test_an_engine_error_is_one_line_and_exit_code_1(tmp_path, capsys):
    code = main(["generate", "hi", "--model", "nope", "--data-dir", str(tmp_path)])
    assert code == 1
    err = capsys.readouterr().err
    assert err.startswith("error: No model named 'nope'") and "Traceback" not in err


# -- models -------------------------------------------------------------------------------
def test_models_list_table_and_json(tmp_path, capsys):
    data = str(tmp_path / "data")
    assert main(["models", "list", "--data-dir", data, "--provider", "cpu"]) == 0
    table = capsys.readouterr().out.splitlines()
    assert table[0].split() == ["NAME", "KIND", "SOURCE", "SIZE", "QUANTIZATION", "LICENCE", "STATUS",
                               "PROVIDER"]
    assert table[1].startswith(BUILTIN_LLM.name) and "needs preparation" in table[1]
    assert table[2].startswith(BUILTIN_EMBEDDER.name) and "ready" in table[2]

    assert main(["models", "list", "--json", "--data-dir", data, "--provider", "cpu"]) == 0
    rows = {row["name"]: row for row in json_lines(capsys.readouterr().out)}
    assert rows[BUILTIN_LLM.name]["status"] == "needs preparation"
    assert rows[BUILTIN_EMBEDDER.name]["kind"] == "embedder"
    assert {row["provider"] for row in rows.values()} == {"cpu"}


def test_import_then_generate_json(tmp_path, tiny_llm_dir, capsys):
    data = str(tmp_path / "data")
    assert main(["models", "import", str(tiny_llm_dir), "--data-dir", data]) == 0
    name = imported_name(capsys.readouterr().out)
    assert (tmp_path / "data" / "models" / name / "manifest.json").is_file()

    code = main(["generate", "Hello there", "--model", name, "--data-dir", data,
                 "--provider", "cpu", "--json", "--max-new-tokens", "8", "--system", "Be brief."])
    assert code == 0
    stats = json.loads(capsys.readouterr().out.splitlines()[-1])
    assert stats["model"] == name and stats["provider"] == "cpu"
    assert stats["finish_reason"] in ("stop", "length")
    assert 0 < stats["new_tokens"] <= 8 and stats["prompt_tokens"] > 0
    assert {"time_to_first_token_s", "tokens_per_s"} <= stats.keys()


def test_generate_prints_stats_on_stderr(tmp_path, tiny_llm_dir, capsys):
    data = str(tmp_path / "data")
    assert main(["models", "import", str(tiny_llm_dir), "--data-dir", data]) == 0
    name = imported_name(capsys.readouterr().out)
    code = main(["generate", "Hi", "--model", name, "--data-dir", data,
                 "--provider", "cpu", "--max-new-tokens", "4", "--temperature", "0.7",
                 "--top-p", "0.9", "--top-k", "20", "--seed", "3"])
    assert code == 0
    err = capsys.readouterr().err
    assert "prompt tokens" in err and "tokens/s" in err and "provider: cpu" in err


def test_subcommands_write_only_in_the_data_dir(tmp_path, tiny_llm_dir):
    home, data = tmp_path / "home", tmp_path / "data"
    common = ["--data-dir", str(data), "--provider", "cpu"]
    assert run_cli(["models", "list", *common], home).returncode == 0
    done = run_cli(["models", "import", str(tiny_llm_dir), *common], home)
    assert done.returncode == 0, done.stderr
    name = imported_name(done.stdout)
    done = run_cli(["generate", "Hi", "--model", name, "--max-new-tokens", "4",
                    "--json", *common], home)
    assert done.returncode == 0, done.stderr
    assert json_lines(done.stdout)[-1]["finish_reason"] in ("stop", "length")
    assert files_under(home) == []
    assert (data / "models" / name / "manifest.json").is_file()


# -- the real built-in model: slow ---------------------------------------------------------
@pytest.mark.slow
def test_builtin_model_prepared_on_first_use_then_ctrl_c(tmp_path):
    home, data = tmp_path / "home", tmp_path / "data"
    common = ["--data-dir", str(data), "--provider", "cpu"]
    done = run_cli(["generate", "What is the capital of France?", "--json",
                    "--max-new-tokens", "8", *common], home)
    assert done.returncode == 0, done.stderr
    assert f"Preparing {BUILTIN_LLM.name}" in done.stderr
    stats = json_lines(done.stdout)[-1]
    assert (stats["model"], stats["provider"]) == (BUILTIN_LLM.name, "cpu")

    done = run_cli(["models", "prepare", *common], home)
    assert done.returncode == 0, done.stderr
    assert "Preparing" not in done.stderr  # already done: nothing to convert
    rows = json_lines(run_cli(["models", "list", "--json", *common], home).stdout)
    assert {row["status"] for row in rows} == {"ready"}

    _ctrl_c_cancels_cleanly(common, home)
    assert files_under(home) == []


def _ctrl_c_cancels_cleanly(common: list[str], home: Path) -> None:
    process = subprocess.Popen(
        [sys.executable, "-m", "engine", "generate", "Write a long story about a dragon.",
         "--max-new-tokens", "200", *common],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=private_env(home), cwd=REPO,
    )
    try:
        assert process.stdout.read(1)  # the answer has started
        process.send_signal(signal.SIGINT)
        out, err = process.communicate(timeout=120)
    finally:
        if process.poll() is None:
            process.kill()
            process.communicate()
    assert process.returncode == 130, err
    assert "Traceback" not in err
    assert "finish: cancelled" in err


# -- docs ---------------------------------------------------------------------------------
def test_docs_list_table_and_json(tmp_path, capsys):
    from engine.paths import AppPaths
    from engine.store.index_store import IndexStore
    from engine.types import Chunk

    data = tmp_path / "data"
    folder = AppPaths(data).ensure().collection("default")
    with IndexStore.open(folder, embedder_id="test-embedder", dimension=4) as store:
        store.add_document("/docs/pump.pdf", "abc", 100, 1.5, "Pump", 2,
                           [Chunk(page=1, start=0, end=4, text="pump")], [[1.0, 0.0, 0.0, 0.0]])
        store.record_failure("/docs/locked.pdf", "def", 10, 2.0, error="it is encrypted")
    assert main(["docs", "list", "--json", "--data-dir", str(data)]) == 0
    rows = json_lines(capsys.readouterr().out)
    assert [list(row) for row in rows] == [["id", "path", "sha256", "size", "mtime", "status", "error",
                                            "page_count", "title", "added_at", "chunk_count"]] * 2
    assert [(r["path"], r["status"], r["error"], r["page_count"], r["chunk_count"]) for r in rows] == [
        ("/docs/locked.pdf", "failed", "it is encrypted", 0, 0), ("/docs/pump.pdf", "ready", "", 2, 1)]
    assert main(["docs", "list", "--data-dir", str(data)]) == 0
    table = capsys.readouterr().out.splitlines()
    assert table[0].split() == ["ID", "STATUS", "PAGES", "CHUNKS", "DOCUMENT"]
    assert "failed" in table[1] and "/docs/locked.pdf  (it is encrypted)" in table[1]
    assert table[2].split()[1:] == ["ready", "2", "1", "/docs/pump.pdf"]
    assert len({line.index("DOCUMENT") if "DOCUMENT" in line else line.index("/docs") for line in table}) == 1
