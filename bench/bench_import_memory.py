"""Peak memory of importing a GGUF: each import runs in a child process of its own, which reports
its VmHWM (peak resident set) once done, with the folder's size.

    python bench/bench_import_memory.py [FILE.gguf ...]   (default: the built-in SmolLM2 GGUF)
"""

from __future__ import annotations

import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

CHILD = """
import sys, time
from pathlib import Path
from engine.models.gguf_import import import_gguf
started = time.perf_counter()
folder = import_gguf(Path(sys.argv[1]), Path(sys.argv[2]))
seconds = time.perf_counter() - started
peak = next(line.split()[1] for line in open("/proc/self/status") if line.startswith("VmHWM:"))
size = sum(p.stat().st_size for p in folder.iterdir())
print(f"{int(peak) / 1024:.0f} {size / 1e6:.1f} {seconds:.1f}")
"""

BASELINE = """
import gguf, onnx, onnxruntime, numpy
peak = next(line.split()[1] for line in open("/proc/self/status") if line.startswith("VmHWM:"))
print(f"{int(peak) / 1024:.0f}")
"""


def _builtin() -> Path:
    from engine.models.registry import BUILTIN_LLM, find_package_file

    return find_package_file(BUILTIN_LLM.files[0])


def main() -> None:
    sys.path.insert(0, str(ROOT))
    files = [Path(a) for a in sys.argv[1:]] or [_builtin()]
    base = subprocess.run([sys.executable, "-c", BASELINE], capture_output=True, text=True, check=True, cwd=ROOT)
    print(f"python with gguf, onnx, onnxruntime, numpy imported: {base.stdout.strip()} MiB")
    for gguf in files:
        with tempfile.TemporaryDirectory() as tmp:
            run = subprocess.run([sys.executable, "-c", CHILD, str(gguf), str(Path(tmp) / "model")],
                                 capture_output=True, text=True, cwd=ROOT)
            if run.returncode:
                sys.exit(run.stderr)
            peak, size, seconds = run.stdout.split()
            print(f"{gguf.name}: peak {peak} MiB, folder {size} MB, {seconds} s "
                  f"(GGUF {gguf.stat().st_size / 1e6:.1f} MB)")


if __name__ == "__main__":
    main()
