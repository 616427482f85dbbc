"""What the embedder and the reranker share: OnnxEncoder (their paths, threads, providers and
session: opened on first use, its inputs checked, warmed up), an onnxruntime session on the
chosen providers, a tokenizer from tokenizer.json, padding a batch, and facts read from the
export folder.

    session = open_session(model, threads, ["CPUExecutionProvider"], what="embedding model",
                           hint="import a valid ONNX export of the model again.")
    tokenizer = load_tokenizer(folder / "tokenizer.json", max_tokens=256)   # None: no cut
    ids, mask = pad([e.ids for e in tokenizer.encode_batch(texts)])
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from engine.errors import ModelError

ID_SAMPLE_BYTES = 1 << 20  # model_id hashes this much from each end of model.onnx
INPUT_TYPES = {"tensor(int64)": np.int64, "tensor(int32)": np.int32}  # ONNX input -> numpy
FED_INPUTS = ("input_ids", "attention_mask", "token_type_ids")  # the inputs this app can give


class OnnxEncoder:
    """The embedder's and the reranker's common part. A subclass names itself for errors
    (`what`, `export`, `load_hint`), the inputs it cannot do without, and what to check once
    the session is open (`_opened`) and run once to warm it up (`_warm_up`): without that run
    the first real call pays for onnxruntime's lazy allocations."""

    what = "model"  # "The {what} '{path}' ..."
    export = "export"  # "use a BERT-style {export}"
    load_hint = "import a valid ONNX export of the model again."
    required_inputs: tuple[str, ...] = ("input_ids",)
    int8_activations = False

    def __init__(self, model_path: str | Path, tokenizer_path: str | Path, threads: int | None,
                 providers: Sequence[str] | None, max_tokens: int):
        self.model_path = Path(model_path)
        self.tokenizer_path = Path(tokenizer_path)
        self.threads = threads or physical_cores()
        self.providers = list(providers) if providers else ["CPUExecutionProvider"]
        self.max_tokens = min(max_tokens, declared_max_tokens(self.model_path, self.tokenizer_path))
        self._session = None
        self._inputs: dict[str, np.dtype] = {}
        self._model_id = ""

    def load(self):
        if self._session is not None:
            return self
        session = open_session(self.model_path, self.threads, self.providers, what=self.what,
                               hint=self.load_hint, int8_activations=self.int8_activations)
        self._inputs = self._input_types(session)
        self._opened(session)
        self._session = session
        self._warm_up()
        return self

    def _opened(self, session) -> None:
        """Checks the session's outputs before it is kept (a ModelError when unusable)."""

    def _warm_up(self) -> None:
        """One small run, right after loading."""

    def close(self) -> None:
        self._session = None

    def __enter__(self):
        return self.load()

    def __exit__(self, *exc) -> None:
        self.close()

    @property
    def input_names(self) -> tuple[str, ...]:
        """The inputs the model asked for (token_type_ids only if it has that input)."""
        self.load()
        return tuple(self._inputs)

    def _input_types(self, session) -> dict[str, np.dtype]:
        """The inputs to feed and their numpy types."""
        types = {}
        for arg in session.get_inputs():
            if arg.name not in FED_INPUTS or arg.type not in INPUT_TYPES:
                raise ModelError(f"The {self.what} '{self.model_path}' expects an input '{arg.name}' "
                                 f"({arg.type}) that this app cannot provide; use a BERT-style "
                                 f"{self.export}.")
            types[arg.name] = INPUT_TYPES[arg.type]
        missing = [f"'{name}'" for name in self.required_inputs if name not in types]
        if missing:
            raise ModelError(f"The {self.what} '{self.model_path}' has no {' or '.join(missing)} "
                             f"input; use a BERT-style {self.export}.")
        return types


def open_session(model_path: Path, threads: int, providers: list[str], *, what: str, hint: str,
                 int8_activations: bool = False):
    """An InferenceSession of `model_path` on `providers` (the first one is preferred), after
    the in-memory graph fixes of engine.encoders.embedder_graph; its `int8_activations` attribute
    says whether the int8 rewrite applied. Raises ModelError
    "The {what} '{model_path}' cannot be loaded (cause); {hint}"."""
    import onnxruntime as ort

    from engine.encoders.embedder_graph import EXACT_INT8_CONFIG, prepared_model

    options = _session_options(ort, threads)
    try:
        # The fused op is a CPU kernel: on a GPU provider it would pull the matmuls back to the CPU.
        on_cpu = providers[0] == "CPUExecutionProvider"
        rewritten, int8_applied = prepared_model(model_path, int8_activations and on_cpu)
        if int8_applied and not cpu_has_vnni():
            options.add_session_config_entry(*EXACT_INT8_CONFIG)
        session = ort.InferenceSession(rewritten or str(model_path), options, providers=providers)
    except Exception as exc:  # onnxruntime raises its own exception types, not exported
        raise ModelError(f"The {what} '{model_path}' cannot be loaded ({exc}); {hint}") from exc
    session.int8_activations = int8_applied  # read by the embedder: one text per call then
    return session


def cpu_has_vnni() -> bool:
    """Whether this x86 CPU has VNNI (AVX512-VNNI or AVX-VNNI): its u8 x s8 int8 kernel then adds
    products in 32-bit registers and does not saturate, so the exact (about 2x slower) u8 x u8
    kernel is not needed. False where /proc/cpuinfo cannot tell."""
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as cpuinfo:
            for line in cpuinfo:
                if line.startswith("flags"):
                    flags = set(line.partition(":")[2].split())
                    return bool(flags & {"avx512_vnni", "avx_vnni"})
    except OSError:
        pass
    return False


def _session_options(ort, threads: int):
    options = ort.SessionOptions()
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    options.intra_op_num_threads = threads
    options.inter_op_num_threads = 1  # one graph at a time: parallelism is inside the matmuls
    options.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    # Idle worker threads sleep instead of spinning: document parsing runs on the same cores.
    options.add_session_config_entry("session.intra_op.allow_spinning", "0")
    return options


def load_tokenizer(path: Path, max_tokens: int | None):
    """The tokenizer in `path`, without padding, cutting at `max_tokens` (None: never)."""
    from tokenizers import Tokenizer

    try:
        tokenizer = Tokenizer.from_file(str(path))
    except Exception as exc:  # tokenizers raises a bare Exception for bad files
        raise ModelError(f"The tokenizer '{path}' cannot be read ({exc}); import the model "
                         "folder again, with its tokenizer.json.") from exc
    # Exports often ship fixed padding (all-MiniLM: 128); we pad per batch ourselves.
    tokenizer.no_padding()
    if max_tokens is None:
        tokenizer.no_truncation()
    else:
        tokenizer.enable_truncation(max_length=max_tokens)
    return tokenizer


def pad(sequences: list[list[int]]) -> tuple[np.ndarray, np.ndarray]:
    """(ids, attention mask), int64 [batch, longest sequence], zeros after each sequence."""
    width = max(1, max(len(s) for s in sequences))
    ids = np.zeros((len(sequences), width), dtype=np.int64)
    mask = np.zeros((len(sequences), width), dtype=np.int64)
    for row, sequence in enumerate(sequences):
        ids[row, :len(sequence)] = sequence
        mask[row, :len(sequence)] = 1
    return ids, mask


def physical_cores() -> int:
    """Physical cores this process may use: hyper-threads slow down onnxruntime's matmuls."""
    usable = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    cores = set()
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as cpuinfo:
            package = ""
            for line in cpuinfo:
                key, _, value = line.partition(":")
                if key.strip() == "physical id":
                    package = value.strip()
                elif key.strip() == "core id":
                    cores.add((package, value.strip()))
    except OSError:
        pass
    return max(1, min(usable or 1, len(cores) or usable or 1))


def declared_max_tokens(model_path: Path, tokenizer_path: Path) -> int:
    """The sequence limit the export folder declares (sentence-transformers' max_seq_length,
    else the model's position embeddings); a large number when it declares none."""
    for folder in dict.fromkeys((tokenizer_path.parent, model_path.parent)):
        for name, key in (("sentence_bert_config.json", "max_seq_length"),
                          ("config.json", "max_position_embeddings")):
            value = _json_value(folder / name, key)
            if isinstance(value, int) and value > 0:
                return value
    return 1 << 30


def _json_value(path: Path, key: str):
    try:
        return json.loads(path.read_text(encoding="utf-8")).get(key)
    except (OSError, ValueError, AttributeError):
        return None


def compute_model_id(model_path: Path, tokenizer_path: Path) -> str:
    """'<name>:<16 hex>': SHA-256 over model.onnx's size, its first and last MiB, and the
    whole tokenizer.json; the name is the folder's when the file is model.onnx."""
    size = model_path.stat().st_size
    digest = hashlib.sha256(f"size:{size}\n".encode())
    with open(model_path, "rb") as model:
        digest.update(model.read(ID_SAMPLE_BYTES))
        model.seek(max(0, size - ID_SAMPLE_BYTES))
        digest.update(model.read(ID_SAMPLE_BYTES))
    digest.update(hashlib.sha256(tokenizer_path.read_bytes()).digest())
    name = model_path.parent.name if model_path.stem == "model" else model_path.stem
    return f"{name}:{digest.hexdigest()[:16]}"
