"""Embedder: sentence embeddings from an ONNX export (model.onnx + tokenizer.json).

Works with any sentence-transformers ONNX export: the session's inputs are introspected
(token_type_ids only when the model asks for it), a `sentence_embedding` output is used as it
is, a token-level output (`last_hidden_state`, `token_embeddings`) is mean-pooled with the
attention mask. Vectors are L2-normalised float32, so a dot product is the cosine.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np

from engine.encoders.onnx_session import OnnxEncoder, compute_model_id, load_tokenizer, pad
from engine.errors import ModelError

POOLED_OUTPUTS = ("sentence_embedding",)
TOKEN_OUTPUTS = ("last_hidden_state", "token_embeddings")


class Embedder(OnnxEncoder):
    """    with Embedder.from_files(resolve_embedder(paths)) as embedder:
            vectors = embedder.encode_documents(chunk_texts)  # [n, dimension]
            query = embedder.encode_queries("how do I ...")   # [dimension]

    The tokenizer is ready at once (`count_tokens` needs no model); the ONNX session is
    created by `load()`, or on first use."""

    what = "embedding model"
    export = "sentence-transformers export"

    def __init__(self, model_path: str | Path, tokenizer_path: str | Path, *,
                 threads: int | None = None, max_tokens: int = 256,
                 providers: Sequence[str] | None = None, int8_activations: bool = True):
        super().__init__(model_path, tokenizer_path, threads, providers, max_tokens)
        # True (the fast path): int8 weights used as int8, activations quantized per call
        # (embedder_graph), and each text runs alone in its call, so its activation scales and
        # its vector depend on that text only, never on what it is batched with. About 1.5-1.8x
        # the exact path at its best batch on 2 cores, own-chunk top-5 within 1 point
        # (docs/benchmarks.md, "Faster text indexing").
        # False: the exact float path. No-op for float models (they stay batched).
        self.int8_activations = int8_activations
        self._encoder = load_tokenizer(self.tokenizer_path, self.max_tokens)
        self._counter = load_tokenizer(self.tokenizer_path, None)
        self._output = ""
        self._pooled = False
        self._dimension = 0
        self._one_per_call = False

    @classmethod
    def from_files(cls, files, **options) -> "Embedder":
        """From an `EmbedderFiles` (see engine.models.registry.resolve_embedder)."""
        return cls(files.model, files.tokenizer, **options)

    # -- lifetime (load, close: OnnxEncoder) -----------------------------------------------
    def _opened(self, session) -> None:
        self._output, self._pooled = _choose_output(session, self.model_path)
        self._one_per_call = bool(getattr(session, "int8_activations", False))

    def _warm_up(self) -> None:
        # The warm-up run also tells the dimension.
        self._dimension = int(self._run(self._encoder.encode_batch(["warm up"]))[0].shape[-1])

    # -- facts ----------------------------------------------------------------------------
    @property
    def dimension(self) -> int:
        self.load()
        return self._dimension

    @property
    def model_id(self) -> str:
        """'<name>:<16 hex>': the folder (or file) name, and a SHA-256 over model.onnx's size,
        its first and last MiB, and the whole tokenizer.json. Hashing both ends keeps opening
        a big model cheap while any re-export or re-quantisation still changes the id."""
        if not self._model_id:
            self._model_id = compute_model_id(self.model_path, self.tokenizer_path)
        return self._model_id

    # -- tokens ---------------------------------------------------------------------------
    def count_tokens(self, text: str) -> int:
        """Tokens in `text` without special tokens and without truncation."""
        return len(self._counter.encode(text, add_special_tokens=False).ids)

    def is_common_word(self, word: str) -> bool:
        """Whether `word` is one whole token of the tokenizer's vocabulary. A WordPiece
        vocabulary of 30k pieces holds the common English words whole and splits names and
        jargon ("Jupyter" -> "ju ##py ##ter"): the relevance gate's list of common words."""
        return self._counter.token_to_id(word.casefold()) is not None

    def count_tokens_batch(self, texts: Sequence[str]) -> list[int]:
        encodings = self._counter.encode_batch_fast(list(texts), add_special_tokens=False)
        return [len(e.ids) for e in encodings]

    # -- embeddings -----------------------------------------------------------------------
    def encode_documents(self, texts: str | Sequence[str], batch_size: int = 32) -> np.ndarray:
        """[n, dimension] float32 unit vectors; a single string gives [dimension]."""
        return self._encode(texts, batch_size)

    def encode_queries(self, texts: str | Sequence[str], batch_size: int = 32) -> np.ndarray:
        return self._encode(texts, batch_size)

    def _encode(self, texts: str | Sequence[str], batch_size: int) -> np.ndarray:
        self.load()
        if isinstance(texts, str):
            return self._encode([texts], batch_size)[0]
        encodings = self._encoder.encode_batch(list(texts))
        result = np.zeros((len(encodings), self._dimension), dtype=np.float32)
        if self._one_per_call:
            # Int8 activations: one scale per call, so one text per call keeps a vector
            # independent of its batch; it costs nothing here (no padding, and ~200-token
            # rows keep the matmuls busy).
            batch_size = 1
        # Similar lengths together: each batch is padded only to its own longest text.
        order = sorted(range(len(encodings)), key=lambda i: len(encodings[i].ids))
        for first in range(0, len(order), max(1, batch_size)):
            rows = order[first:first + batch_size]
            result[rows] = self._run([encodings[i] for i in rows])
        return result

    def _run(self, encodings) -> np.ndarray:
        ids, mask = pad([e.ids for e in encodings])
        feed = {"input_ids": ids, "attention_mask": mask, "token_type_ids": np.zeros_like(ids)}
        feed = {name: feed[name].astype(dtype, copy=False) for name, dtype in self._inputs.items()}
        (output,) = self._session.run([self._output], feed)
        vectors = output if self._pooled else _mean_pool(output, mask)
        return _normalise(vectors.astype(np.float32, copy=False))


# -- helpers --------------------------------------------------------------------------------
def _choose_output(session, model_path: Path) -> tuple[str, bool]:
    """(output name, already pooled?): a pooled sentence output wins over token outputs."""
    outputs = {arg.name: len(arg.shape or ()) for arg in session.get_outputs()}
    for name in POOLED_OUTPUTS:
        if name in outputs:
            return name, True
    for name in TOKEN_OUTPUTS:
        if name in outputs:
            return name, False
    # BERT's pooler_output (CLS through a dense layer) is not a sentence embedding: an
    # unknown export is only trusted for token vectors, which we pool ourselves.
    for name, rank in outputs.items():
        if rank == 3:
            return name, False
    raise ModelError(f"The embedding model '{model_path}' has no token or sentence embedding "
                     "output; use a sentence-transformers export.")


def _mean_pool(tokens: np.ndarray, mask: np.ndarray) -> np.ndarray:
    weights = mask[:, :, None].astype(np.float32)
    summed = (tokens * weights).sum(axis=1)
    return summed / np.maximum(weights.sum(axis=1), 1e-9)


def _normalise(vectors: np.ndarray) -> np.ndarray:
    norms = np.linalg.norm(vectors, axis=1, keepdims=True)
    return vectors / np.maximum(norms, 1e-12)
