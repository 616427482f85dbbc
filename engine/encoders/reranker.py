"""CrossEncoder: relevance scores for (query, passage) pairs from an ONNX cross-encoder export.

Works with any sentence-transformers / Hugging Face cross-encoder exported to ONNX (for
example cross-encoder/ms-marco-MiniLM-L-6-v2 through optimum): model.onnx (or onnx/model.onnx),
tokenizer.json and config.json, with a `logits` output of shape [batch, labels]. The session's
inputs are introspected (token_type_ids only when the model has it). Loading, tokenizer
set-up, padding and the model id are shared with the embedder (engine.encoders.onnx_session).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np

from engine.encoders.onnx_session import OnnxEncoder, compute_model_id, load_tokenizer, pad
from engine.errors import ModelError

LOGITS = "logits"
MODEL_FILES = ("model.onnx", "onnx/model.onnx")  # where optimum and the HF hub put it
TOKENIZER_FILE = "tokenizer.json"
ACTIVATIONS = (None, "sigmoid")
_EXPORT_HINT = "export the cross-encoder with optimum (model.onnx, tokenizer.json, config.json)"


class CrossEncoder(OnnxEncoder):
    """    with CrossEncoder.from_folder(resolve_reranker(paths)) as reranker:
            scores = reranker.predict([(question, passage), ...])   # float32 [n]
            best = reranker.rank(question, passages, top_k=5)       # [{corpus_id, score}]

    A score is the model's raw logit (higher is more relevant); for a model with several labels
    it is the last label's logit, which is the "relevant" class of two-label (no, yes)
    classifiers. `activation="sigmoid"` maps it into 0..1. The tokenizer is ready at once;
    the ONNX session is created by `load()`, or on first use."""

    what = "reranker model"
    export = "cross-encoder export"
    load_hint = f"import the cross-encoder again, or {_EXPORT_HINT}."
    # attention_mask too: without it a pair's score would depend on the padding, so on the batch.
    required_inputs = ("input_ids", "attention_mask")

    def __init__(self, model_path: str | Path, tokenizer_path: str | Path,
                 threads: int | None = None, max_tokens: int = 512, *,
                 providers: Sequence[str] | None = None):
        _require_file(Path(model_path), "model")
        _require_file(Path(tokenizer_path), "tokenizer")
        super().__init__(model_path, tokenizer_path, threads, providers, max_tokens)
        # The passage is cut, never the query: a cut question is a different question.
        self._pairs = load_tokenizer(self.tokenizer_path, None)
        self._pairs.enable_truncation(max_length=self.max_tokens, strategy="only_second")
        # A query too long for that leaves no room to cut; it is cut with its passage instead.
        self._long_pairs = load_tokenizer(self.tokenizer_path, self.max_tokens)
        self._query_room = self.max_tokens - self._pairs.num_special_tokens_to_add(True) - 1
        if self._query_room < 1:
            raise ValueError(f"max_tokens={self.max_tokens} leaves no room for a passage.")

    @classmethod
    def from_folder(cls, folder: str | Path, **options) -> "CrossEncoder":
        """From an export folder (model.onnx or onnx/model.onnx, and tokenizer.json), such as
        the one engine.models.registry.resolve_reranker returns."""
        folder = Path(folder)
        model = next((folder / name for name in MODEL_FILES if (folder / name).is_file()),
                     folder / MODEL_FILES[0])
        return cls(model, folder / TOKENIZER_FILE, **options)

    # -- lifetime (load, close: OnnxEncoder) -----------------------------------------------
    def _opened(self, session) -> None:
        _check_logits(session, self.model_path)

    def _warm_up(self) -> None:
        # The warm-up run also checks the logits' shape now.
        self._run(self._encode([("warm up", "warm up")]))

    # -- facts ----------------------------------------------------------------------------
    @property
    def model_id(self) -> str:
        """'<folder name>:<16 hex>', hashed as Embedder.model_id is; the folder is the export's
        own, also when the model sits in its onnx/ subfolder."""
        if not self._model_id:
            digest = compute_model_id(self.model_path, self.tokenizer_path).rsplit(":", 1)[1]
            self._model_id = f"{_export_folder(self.model_path).name}:{digest}"
        return self._model_id

    # -- scores ---------------------------------------------------------------------------
    def predict(self, pairs: Sequence[tuple[str, str]], batch_size: int = 16,
                activation: str | None = None) -> np.ndarray:
        """float32 [len(pairs)]: one score per (query, passage) pair, in the input order."""
        if activation not in ACTIVATIONS:
            raise ValueError(f"Unknown activation {activation!r}; use None or 'sigmoid'.")
        pairs = [(query, passage) for query, passage in pairs]
        scores = np.zeros(len(pairs), dtype=np.float32)
        if not pairs:
            return scores
        self.load()
        encodings = self._encode(pairs)
        # Similar lengths together: each batch is padded only to its own longest pair.
        order = sorted(range(len(encodings)), key=lambda i: len(encodings[i].ids))
        for first in range(0, len(order), max(1, batch_size)):
            rows = order[first:first + max(1, batch_size)]
            scores[rows] = self._run([encodings[i] for i in rows])
        return _sigmoid(scores) if activation == "sigmoid" else scores

    def rank(self, query: str, passages: Sequence[str], top_k: int | None = None,
             return_documents: bool = False, batch_size: int = 16,
             activation: str | None = None) -> list[dict]:
        """[{"corpus_id": index in passages, "score": float}], best first (ties keep the input
        order); with return_documents, each also has "text"."""
        passages = list(passages)
        scores = self.predict([(query, passage) for passage in passages], batch_size, activation)
        best = np.argsort(-scores, kind="stable")[:None if top_k is None else max(0, top_k)]
        ranked = [{"corpus_id": int(i), "score": float(scores[i])} for i in best]
        if return_documents:
            for entry in ranked:
                entry["text"] = passages[entry["corpus_id"]]
        return ranked

    def _encode(self, pairs: list[tuple[str, str]]) -> list:
        long_queries = {q for q in dict.fromkeys(q for q, _ in pairs) if self._too_long(q)}
        encodings = [None] * len(pairs)
        for tokenizer, long in ((self._pairs, False), (self._long_pairs, True)):
            rows = [i for i, (query, _) in enumerate(pairs) if (query in long_queries) == long]
            if not rows:
                continue
            for row, encoding in zip(rows, tokenizer.encode_batch([pairs[i] for i in rows])):
                encodings[row] = encoding
        return encodings

    def _too_long(self, query: str) -> bool:
        return len(self._long_pairs.encode(query, add_special_tokens=False).ids) > self._query_room

    def _run(self, encodings) -> np.ndarray:
        ids, mask = pad([e.ids for e in encodings])
        types, _ = pad([e.type_ids for e in encodings])
        feed = {"input_ids": ids, "attention_mask": mask, "token_type_ids": types}
        feed = {name: feed[name].astype(dtype, copy=False) for name, dtype in self._inputs.items()}
        (logits,) = self._session.run([LOGITS], feed)
        return _scores(logits, self.model_path)


# -- helpers --------------------------------------------------------------------------------
def _require_file(path: Path, what: str) -> None:
    if not path.is_file():
        raise ModelError(f"The reranker's {what} file '{path}' is missing; import the "
                         f"cross-encoder folder again, or {_EXPORT_HINT}.")


def _export_folder(model_path: Path) -> Path:
    folder = model_path.parent
    return folder.parent if folder.name == "onnx" else folder


def _check_logits(session, model_path: Path) -> None:
    outputs = {arg.name: arg.shape for arg in session.get_outputs()}
    if LOGITS not in outputs:
        raise ModelError(f"The reranker model '{model_path}' has no '{LOGITS}' output (it has "
                         f"{', '.join(outputs)}); it is not a cross-encoder: {_EXPORT_HINT}.")


def _scores(logits: np.ndarray, model_path: Path) -> np.ndarray:
    """One score per row: the only logit, or the last label's (the 'relevant' class)."""
    if logits.ndim != 2 or logits.shape[1] < 1:
        raise ModelError(f"The reranker model '{model_path}' gives logits of shape "
                         f"{list(logits.shape)}, not [batch, labels]; it is not a sequence "
                         f"classifier: {_EXPORT_HINT}.")
    return logits[:, -1].astype(np.float32)


def _sigmoid(scores: np.ndarray) -> np.ndarray:
    # The tanh form never overflows, unlike 1 / (1 + exp(-x)) for large negative logits.
    return (0.5 * (1.0 + np.tanh(0.5 * scores))).astype(np.float32)
