"""A GGUF model too big for the free memory is refused before importing, with a message that
names the file, the memory needed and available, and what to do; --force imports it anyway."""

from __future__ import annotations

import pytest

from engine.cli.main import main
from engine.errors import ModelError
from engine.models import fit
from engine.models.fit import available_memory, check_model_fits
from engine.models.gguf_import import import_gguf
from engine.models.registry import import_model
from engine.paths import AppPaths
from tests.helpers.gguf_factory import write_tiny_gguf

GB = 1_000_000_000


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    return write_tiny_gguf(tmp_path_factory.mktemp("fit") / "tiny.gguf", weight_type="Q4_K", hidden=256,
                           ffn=512, layers=2, heads=4, kv_heads=2, context_length=4096)


def test_the_estimate_follows_the_header(tiny, tmp_path):
    result = check_model_fits(tiny, available_bytes=64 * GB)
    assert result.fits and result.context_length == 4096
    assert result.kv_cache_bytes == 2 * 2 * 2 * 64 * 4 * 4096  # keys+values, layers, kv heads, head dim, float32
    folder = import_gguf(tiny, tmp_path / "model")
    weights = (folder / "model.onnx.data").stat().st_size
    assert 0.8 * weights < result.weights_bytes < 1.2 * weights
    assert result.needed_bytes == max(result.weights_bytes + result.kv_cache_bytes + fit.RUNTIME_BYTES,
                                      result.import_bytes)


def test_too_big_says_what_it_needs_and_what_to_do(tiny):
    result = check_model_fits(tiny, available_bytes=100_000_000)
    assert not result.fits
    message = result.message()
    assert "'tiny.gguf' needs about" in message and "this machine has 100 MB available" in message
    assert "a context of 4,096 tokens" in message
    assert "smaller quantization" in message and "smaller model" in message and "--force" in message


def test_import_refuses_before_writing_anything_unless_forced(tiny, tmp_path, monkeypatch):
    monkeypatch.setattr(fit, "available_memory", lambda: 100_000_000)
    paths = AppPaths(tmp_path / "data")
    with pytest.raises(ModelError, match="tiny.gguf' needs about .* has 100 MB available"):
        import_model(tiny, paths)
    assert not paths.models.exists()
    assert import_model(tiny, paths, force=True) == paths.models / "tiny"


def test_cli_import_refuses_then_forces(tiny, tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(fit, "available_memory", lambda: 100_000_000)
    data = str(tmp_path / "data")
    assert main(["models", "import", str(tiny), "--data-dir", data]) == 1
    assert f"import it with 'offline-assistant-cli models import --force \"{tiny}\"'" in capsys.readouterr().err
    assert main(["models", "import", str(tiny), "--force", "--data-dir", data]) == 0


def test_available_memory_reads_meminfo(tmp_path):
    meminfo = tmp_path / "meminfo"
    meminfo.write_text("MemTotal:       16000000 kB\nMemFree:  100 kB\nMemAvailable:    8000000 kB\n")
    assert available_memory(meminfo) == 8_000_000 * 1024
    assert available_memory() is None or available_memory() > 0  # this machine's own
