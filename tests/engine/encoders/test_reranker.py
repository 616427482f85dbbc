"""CrossEncoder on a tiny generated cross-encoder whose score is the number of passage tokens
that also occur in the query (tests/tiny_cross_encoder.py), and importing one as a reranker."""

from __future__ import annotations

import json

import numpy as np
import pytest
from tokenizers import Tokenizer

from engine.encoders.reranker import CrossEncoder
from engine.errors import ModelError
from engine.models.registry import import_model, list_models, resolve_llm, resolve_reranker
from engine.paths import AppPaths
from tests.helpers.tiny_cross_encoder import SECOND_LABEL_BASE, overlap_score, write_tiny_cross_encoder

PAIRS = [
    ("pump valve", "check the pump valve pump"),
    ("how do I replace the oil filter", "replace the filter: open the cover, remove it"),
    ("red car", "the blue dog is fast"),
    ("safety warning", "warning! read the safety manual, chapter 2, before the first start"),
    ("stop the motor", "stop"),
    ("water pressure", ""),
    ("the the", "the the the the"),
]


@pytest.fixture(scope="module")
def tiny_folder(tmp_path_factory):
    return write_tiny_cross_encoder(tmp_path_factory.mktemp("cross") / "tiny-reranker")


@pytest.fixture
def tiny(tiny_folder):
    with CrossEncoder.from_folder(tiny_folder) as reranker:
        yield reranker


def reference_scores(folder, pairs) -> np.ndarray:
    """The same score computed in numpy from an independent tokenization of each pair."""
    tokenizer = Tokenizer.from_file(str(folder / "tokenizer.json"))
    tokenizer.no_padding()
    tokenizer.no_truncation()
    encodings = [tokenizer.encode(query, passage) for query, passage in pairs]
    return np.array([overlap_score(e.ids, e.type_ids) for e in encodings], np.float32)


# -- scores -------------------------------------------------------------------------------
def test_scores_match_a_numpy_computation(tiny, tiny_folder):
    scores = tiny.predict(PAIRS)
    assert scores.dtype == np.float32 and scores.shape == (len(PAIRS),)
    np.testing.assert_array_equal(scores, reference_scores(tiny_folder, PAIRS))
    assert scores[0] == 3  # pump, valve, pump
    assert scores[2] == 0 and scores[5] == 0


def test_batch_size_does_not_change_scores_and_order_is_kept(tiny):
    # Lengths vary a lot, so sorting by length reorders them inside the batches.
    one_by_one = tiny.predict(PAIRS, batch_size=1)
    np.testing.assert_array_equal(one_by_one, tiny.predict(PAIRS, batch_size=16))
    np.testing.assert_array_equal(one_by_one, tiny.predict(PAIRS, batch_size=3))
    reversed_scores = tiny.predict(PAIRS[::-1], batch_size=16)
    np.testing.assert_array_equal(reversed_scores, one_by_one[::-1])
    np.testing.assert_array_equal(one_by_one, [tiny.predict([pair])[0] for pair in PAIRS])


def test_empty_input(tiny):
    scores = tiny.predict([])
    assert scores.shape == (0,) and scores.dtype == np.float32
    assert tiny.rank("pump", []) == []


def test_sigmoid_activation(tiny):
    raw = tiny.predict(PAIRS)
    probabilities = tiny.predict(PAIRS, activation="sigmoid")
    assert probabilities.dtype == np.float32
    np.testing.assert_allclose(probabilities, 1 / (1 + np.exp(-raw.astype(np.float64))), rtol=1e-6)
    with pytest.raises(ValueError, match="sigmoid"):
        tiny.predict(PAIRS, activation="softmax")


# -- rank ---------------------------------------------------------------------------------
PASSAGES = ["the cat", "pump valve pump valve", "pump", "valve and pump", "hello world"]


def test_rank_best_first_with_corpus_ids(tiny):
    ranked = tiny.rank("pump valve", PASSAGES)
    assert [r["corpus_id"] for r in ranked] == [1, 3, 2, 0, 4]  # equal scores keep input order
    assert [r["score"] for r in ranked] == [4.0, 2.0, 1.0, 0.0, 0.0]
    assert all(set(r) == {"corpus_id", "score"} and isinstance(r["score"], float) for r in ranked)


def test_rank_top_k_and_documents(tiny):
    ranked = tiny.rank("pump valve", PASSAGES, top_k=2, return_documents=True)
    assert ranked == [{"corpus_id": 1, "score": 4.0, "text": PASSAGES[1]},
                      {"corpus_id": 3, "score": 2.0, "text": PASSAGES[3]}]
    assert len(tiny.rank("pump valve", PASSAGES, top_k=10)) == len(PASSAGES)
    assert tiny.rank("pump valve", PASSAGES, top_k=0) == []
    sigmoid = tiny.rank("pump valve", PASSAGES, top_k=1, activation="sigmoid")
    assert sigmoid[0]["score"] == pytest.approx(1 / (1 + np.exp(-4.0)))


# -- truncation ---------------------------------------------------------------------------
def test_a_long_passage_is_cut_not_the_query(tiny_folder):
    query = "check the oil pressure and the water pressure then replace the filter and the valve"
    query_tokens = len(Tokenizer.from_file(str(tiny_folder / "tokenizer.json")).encode(
        query, add_special_tokens=False).ids)
    with CrossEncoder.from_folder(tiny_folder, max_tokens=32) as reranker:
        # "valve" matches only while the query keeps its last word.
        assert reranker.predict([(query, "valve " + "cat " * 2000)])[0] == 1
        # Every kept "the" counts: the passage is cut to exactly what the query leaves.
        assert reranker.predict([(query, "the " * 2000)])[0] == 32 - 3 - query_tokens
        assert reranker.predict([("pump", "pump " * 5000)])[0] == 32 - 3 - 1


def test_a_query_longer_than_the_limit_is_cut_with_its_passage(tiny_folder):
    long_query = "pump " * 100
    with CrossEncoder.from_folder(tiny_folder, max_tokens=16) as reranker:
        scores = reranker.predict([(long_query, "pump valve"), ("pump", "pump valve")])
    assert scores[0] == 1 and scores[1] == 1


def test_max_tokens_is_capped_by_the_model_config(tmp_path):
    folder = write_tiny_cross_encoder(tmp_path / "short", max_positions=64)
    assert CrossEncoder.from_folder(folder).max_tokens == 64
    assert CrossEncoder.from_folder(folder, max_tokens=20).max_tokens == 20


# -- model variants -----------------------------------------------------------------------
def test_inputs_are_introspected(tiny, tiny_folder, tmp_path):
    assert tiny.input_names == ("input_ids", "attention_mask", "token_type_ids")
    folder = write_tiny_cross_encoder(tmp_path / "no-types", token_type_ids=False)
    with CrossEncoder.from_folder(folder) as without_types:
        assert without_types.input_names == ("input_ids", "attention_mask")
        np.testing.assert_array_equal(without_types.predict(PAIRS), tiny.predict(PAIRS))


def test_two_label_models_score_with_the_last_label(tiny, tmp_path):
    folder = write_tiny_cross_encoder(tmp_path / "two-labels", labels=2)
    with CrossEncoder.from_folder(folder) as two_labels:
        np.testing.assert_array_equal(two_labels.predict(PAIRS), tiny.predict(PAIRS))
        assert two_labels.predict([PAIRS[0]])[0] != SECOND_LABEL_BASE - 3


def test_model_in_an_onnx_subfolder(tmp_path, tiny):
    folder = write_tiny_cross_encoder(tmp_path / "optimum-export", in_onnx_folder=True)
    reranker = CrossEncoder.from_folder(folder)
    assert reranker.model_path == folder / "onnx" / "model.onnx"
    assert reranker.model_id.startswith("optimum-export:")
    np.testing.assert_array_equal(reranker.predict(PAIRS), tiny.predict(PAIRS))
    reranker.close()


def test_model_id_is_stable_and_follows_the_file(tiny, tiny_folder, tmp_path):
    name, digest = tiny.model_id.split(":")
    assert name == "tiny-reranker" and len(digest) == 16
    assert CrossEncoder.from_folder(tiny_folder).model_id == tiny.model_id
    other = write_tiny_cross_encoder(tmp_path / "tiny-reranker", labels=2)
    assert CrossEncoder.from_folder(other).model_id != tiny.model_id


def test_close_then_use_reloads(tiny_folder):
    reranker = CrossEncoder.from_folder(tiny_folder).load()
    reranker.close()
    assert reranker.predict([PAIRS[0]])[0] == 3


# -- errors -------------------------------------------------------------------------------
@pytest.mark.parametrize("missing", ["model.onnx", "tokenizer.json"])
def test_missing_files_are_named(tmp_path, missing):
    folder = write_tiny_cross_encoder(tmp_path / "incomplete")
    (folder / missing).unlink()
    with pytest.raises(ModelError, match=missing):
        CrossEncoder.from_folder(folder)


def test_a_model_without_logits_is_refused(tmp_path):
    folder = write_tiny_cross_encoder(tmp_path / "embedder-like", output="last_hidden_state")
    with pytest.raises(ModelError, match="no 'logits' output"):
        CrossEncoder.from_folder(folder).load()


def test_a_model_with_inputs_we_cannot_fill_is_refused(tmp_path):
    folder = write_tiny_cross_encoder(tmp_path / "vision", extra_input="pixel_values")
    with pytest.raises(ModelError, match="pixel_values"):
        CrossEncoder.from_folder(folder).load()


def test_a_broken_model_file_is_refused(tmp_path):
    folder = write_tiny_cross_encoder(tmp_path / "broken")
    (folder / "model.onnx").write_bytes(b"not an onnx file")
    with pytest.raises(ModelError, match="reranker model .* cannot be loaded"):
        CrossEncoder.from_folder(folder).load()


# -- importing into the registry ----------------------------------------------------------
@pytest.fixture
def paths(tmp_path):
    return AppPaths(tmp_path / "data")


def test_no_reranker_until_one_is_imported(paths):
    assert resolve_reranker(paths) is None


def test_imported_cross_encoder_is_listed_and_resolved(paths, tiny_folder, tmp_path):
    source = write_tiny_cross_encoder(tmp_path / "ms-marco-tiny", in_onnx_folder=True)
    (source / "model.safetensors").write_bytes(b"weights we do not run")
    (source / "onnx" / "model_quantized.onnx").write_bytes(b"another export")
    folder = import_model(source, paths)
    assert folder == paths.models / "ms-marco-tiny" and resolve_reranker(paths) == folder
    copied = {p.relative_to(folder).as_posix() for p in folder.rglob("*") if p.is_file()}
    assert copied == {"config.json", "tokenizer.json", "onnx/model.onnx", "manifest.json"}
    manifest = json.loads((folder / "manifest.json").read_text(encoding="utf-8"))
    assert manifest["source"]["architecture"] == "BertForSequenceClassification"

    info = {i.name: i for i in list_models(paths, "cpu")}["ms-marco-tiny"]
    assert (info.kind, info.status, info.path) == ("reranker", "ready", folder)
    with pytest.raises(ModelError, match="kind 'reranker'"):
        resolve_llm(paths, "ms-marco-tiny")
    with CrossEncoder.from_folder(folder) as reranker:
        assert reranker.predict([PAIRS[0]])[0] == 3


def test_the_latest_imported_reranker_is_resolved(paths, tmp_path):
    first = import_model(write_tiny_cross_encoder(tmp_path / "first"), paths)
    second = import_model(write_tiny_cross_encoder(tmp_path / "second"), paths)
    assert resolve_reranker(paths) == second
    assert import_model(tmp_path / "first", paths) == first  # imported again: now the latest
    assert resolve_reranker(paths) == first


def test_a_damaged_reranker_is_reported(paths, tiny_folder):
    folder = import_model(tiny_folder, paths)
    (folder / "model.onnx").write_bytes(b"broken")
    assert {i.name: i.status for i in list_models(paths, "cpu")}[folder.name] == "invalid"
    with pytest.raises(ModelError, match="import it again"):
        resolve_reranker(paths)


def test_a_cross_encoder_folder_without_its_files_is_refused(paths, tmp_path):
    folder = write_tiny_cross_encoder(tmp_path / "no-tokenizer")
    (folder / "tokenizer.json").unlink()
    with pytest.raises(ModelError, match="has no tokenizer.json"):
        import_model(folder, paths)
    folder = write_tiny_cross_encoder(tmp_path / "no-model")
    (folder / "model.onnx").unlink()
    with pytest.raises(ModelError, match="no model.onnx"):
        import_model(folder, paths)
    assert resolve_reranker(paths) is None


@pytest.mark.parametrize("damage", ["changed", "unloadable"])
def test_a_reranker_that_cannot_load_leaves_answers_without_one_said_once(paths, tiny_folder, caplog, damage):
    import logging

    from engine.answer.assistant import imported_reranker
    from engine.models.manifest import read_manifest, write_manifest

    folder = import_model(tiny_folder, paths)
    assert imported_reranker(paths) is not None  # loaded and warmed up
    model = folder / "model.onnx"
    if damage == "changed":  # a byte short: the manifest tells
        model.write_bytes(model.read_bytes()[:-1])
    else:  # the manifest agrees, but onnxruntime cannot read it
        model.write_bytes(b"not an onnx model")
        write_manifest(folder, source=read_manifest(folder)["source"])
    with caplog.at_level(logging.WARNING, logger="engine.answer.assistant"):
        assert imported_reranker(paths) is None
    warnings = [r for r in caplog.records if r.name == "engine.answer.assistant"]
    assert len(warnings) == 1 and "answering without a reranker" in warnings[0].getMessage()
