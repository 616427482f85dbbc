"""ONNX GenAI folders from elsewhere: checking, inferring genai_config.json, importing."""

from __future__ import annotations

import json
import os
from pathlib import Path

import onnx
import pytest
from onnx import TensorProto, helper

from engine.errors import ModelError
from engine.models.genai_folder import (
    check_genai_folder,
    import_genai_folder,
    infer_genai_config,
)
from engine.models.manifest import read_manifest, remove_stale_temporaries, verify_manifest

LAYERS, KV_HEADS, HEAD, VOCAB = 2, 2, 4, 32
HF_CONFIG = {
    "model_type": "qwen2",
    "num_hidden_layers": LAYERS,
    "num_attention_heads": 4,
    "num_key_value_heads": KV_HEADS,
    "hidden_size": 16,
    "vocab_size": VOCAB,
    "max_position_embeddings": 128,
    "bos_token_id": 1,
    "eos_token_id": 2,
}


# -- making folders ----------------------------------------------------------------------------
def write_decoder(path: Path, *, layers=LAYERS, past="past_key_values.%d.{}",
                  present="present.%d.{}", extra_inputs=(), external: str | None = None):
    """A decoder graph with the usual names; it passes past keys through, nothing more."""
    kv = lambda name: helper.make_tensor_value_info(  # noqa: E731
        name, TensorProto.FLOAT, ["batch", KV_HEADS, "seq", HEAD])
    inputs = [helper.make_tensor_value_info(n, TensorProto.INT64, ["batch", "seq"])
              for n in ("input_ids", "attention_mask", "position_ids", *extra_inputs)]
    outputs = [helper.make_tensor_value_info("logits", TensorProto.FLOAT, ["batch", "seq", VOCAB])]
    nodes = []
    for layer in range(layers):
        for kind in ("key", "value"):
            source, target = past.format(kind) % layer, present.format(kind) % layer
            inputs.append(kv(source))
            outputs.append(kv(target))
            nodes.append(helper.make_node("Identity", [source], [target]))
    initializers = [_external_tensor(external)] if external else []
    graph = helper.make_graph(nodes, "decoder", inputs, outputs, initializers)
    path.parent.mkdir(parents=True, exist_ok=True)
    onnx.save(helper.make_model(graph), str(path))


def _external_tensor(location: str):
    tensor = helper.make_tensor("weight", TensorProto.FLOAT, [1], [0.0])
    tensor.ClearField("float_data")
    tensor.data_location = TensorProto.EXTERNAL
    for key, value in (("location", location), ("offset", "0"), ("length", "4")):
        tensor.external_data.add(key=key, value=value)
    return tensor


def write_json(path: Path, data) -> None:
    path.write_text(json.dumps(data), encoding="utf-8")


def hf_folder(folder: Path, **config) -> Path:
    """An onnx-community style download: model.onnx, config.json, tokenizer files."""
    folder.mkdir(parents=True, exist_ok=True)
    write_decoder(folder / "model.onnx")
    write_json(folder / "config.json", {**HF_CONFIG, **config})
    tokenizer = {"added_tokens": [{"id": 7, "content": "<|im_end|>"}], "model": {"vocab": {}}}
    write_json(folder / "tokenizer.json", tokenizer)
    write_json(folder / "tokenizer_config.json", {"eos_token": "<|im_end|>"})
    return folder


def genai_folder(folder: Path) -> Path:
    hf_folder(folder)
    write_json(folder / "genai_config.json", infer_genai_config(folder))
    return folder


def edit_config(folder: Path, change) -> None:
    config = json.loads((folder / "genai_config.json").read_text())
    change(config)
    write_json(folder / "genai_config.json", config)


def refused(folder: Path, *words: str) -> str:
    with pytest.raises(ModelError) as caught:
        check_genai_folder(folder)
    message = str(caught.value)
    assert str(folder) in message
    for word in words:
        assert word in message
    return message


# -- inferring ---------------------------------------------------------------------------------
def test_infers_names_and_sizes_from_graph_and_config(tmp_path):
    folder = hf_folder(tmp_path / "m")
    write_json(folder / "generation_config.json", {"eos_token_id": [2, 3], "temperature": 0.7})
    config = infer_genai_config(folder)
    model, decoder = config["model"], config["model"]["decoder"]
    assert model["type"] == "qwen2"
    assert model["context_length"] == 128 == config["search"]["max_length"]
    assert model["vocab_size"] == VOCAB
    assert model["eos_token_id"] == [2, 3, 7]  # generation_config, then the tokenizer's eos
    assert model["pad_token_id"] == 2 and model["bos_token_id"] == 1
    assert decoder["filename"] == "model.onnx"
    assert decoder["inputs"] == {
        "input_ids": "input_ids", "attention_mask": "attention_mask",
        "position_ids": "position_ids", "past_key_names": "past_key_values.%d.key",
        "past_value_names": "past_key_values.%d.value",
    }
    assert decoder["outputs"] == {"logits": "logits", "present_key_names": "present.%d.key",
                                  "present_value_names": "present.%d.value"}
    assert (decoder["num_hidden_layers"], decoder["num_attention_heads"]) == (LAYERS, 4)
    assert (decoder["num_key_value_heads"], decoder["head_size"]) == (KV_HEADS, HEAD)
    assert decoder["hidden_size"] == 16
    assert config["search"]["temperature"] == 0.7
    assert config["search"]["past_present_share_buffer"] is False


def test_infers_older_past_key_naming(tmp_path):
    folder = hf_folder(tmp_path / "m")
    write_decoder(folder / "model.onnx", past="past_{}_%d", present="present_{}_%d")
    decoder = infer_genai_config(folder)["model"]["decoder"]
    assert decoder["inputs"]["past_key_names"] == "past_key_%d"
    assert decoder["inputs"]["past_value_names"] == "past_value_%d"
    assert decoder["outputs"]["present_value_names"] == "present_value_%d"


def test_head_size_from_hidden_size_and_context_cut_to_limit(tmp_path):
    folder = hf_folder(tmp_path / "m", max_position_embeddings=10_000_000)
    config = infer_genai_config(folder)
    assert config["model"]["decoder"]["head_size"] == 16 // 4
    assert config["model"]["context_length"] == 1 << 20


def test_picks_model_onnx_among_variants_in_onnx_subfolder(tmp_path):
    folder = hf_folder(tmp_path / "m")
    (folder / "model.onnx").rename(tmp_path / "spare.onnx")
    write_decoder(folder / "onnx" / "model.onnx")
    write_decoder(folder / "onnx" / "model_q4.onnx")
    assert infer_genai_config(folder)["model"]["decoder"]["filename"] == "onnx/model.onnx"
    (folder / "onnx" / "model.onnx").unlink()
    write_decoder(folder / "onnx" / "model_fp16.onnx")
    with pytest.raises(ModelError, match="several .onnx files"):
        infer_genai_config(folder)
    config = infer_genai_config(folder, decoder="onnx/model_q4.onnx")
    assert config["model"]["decoder"]["filename"] == "onnx/model_q4.onnx"


def drop_eos(folder: Path) -> None:
    write_json(folder / "config.json", {k: v for k, v in HF_CONFIG.items() if k != "eos_token_id"})
    (folder / "tokenizer_config.json").unlink()


@pytest.mark.parametrize(
    ("change", "words"),
    [
        (lambda f: write_json(f / "config.json", {k: v for k, v in HF_CONFIG.items()
                                                  if k != "num_attention_heads"}),
         "num_attention_heads"),
        (lambda f: write_json(f / "config.json", {**HF_CONFIG, "num_hidden_layers": 3}),
         "num_hidden_layers = 3"),
        (lambda f: write_json(f / "config.json", {**HF_CONFIG, "num_key_value_heads": 4}),
         "num_key_value_heads = 4"),
        (lambda f: write_json(f / "config.json", {k: v for k, v in HF_CONFIG.items()
                                                  if k != "model_type"}),
         "model_type"),
        (lambda f: drop_eos(f), "eos_token_id"),
        (lambda f: (f / "config.json").unlink(), "config.json"),
        (lambda f: (f / "tokenizer.json").unlink(), "tokenizer.json"),
        (lambda f: (f / "model.onnx").unlink(), "model.onnx"),
        (lambda f: write_decoder(f / "model.onnx", layers=0), "KV cache"),
        (lambda f: write_decoder(f / "model.onnx", extra_inputs=("use_cache_branch",)),
         "use_cache_branch"),
        (lambda f: (f / "model.onnx").write_bytes(b"not a graph"), "not a readable ONNX"),
    ],
)
def test_inference_names_what_is_missing(tmp_path, change, words):
    folder = hf_folder(tmp_path / "m")
    change(folder)
    with pytest.raises(ModelError, match=words):
        infer_genai_config(folder)


# -- checking ----------------------------------------------------------------------------------
def test_good_folder_passes_and_returns_its_config(tmp_path):
    folder = genai_folder(tmp_path / "m")
    (folder / "alias.onnx").symlink_to("model.onnx")  # a link that stays inside is fine
    edit_config(folder, lambda c: c["model"]["decoder"].update(filename="alias.onnx"))
    assert check_genai_folder(folder)["model"]["context_length"] == 128


@pytest.mark.parametrize(
    "place",
    [
        lambda c: c["model"]["decoder"]["session_options"],
        lambda c: c["model"].setdefault("vision", {}).setdefault("session_options", {}),
        lambda c: c,
    ],
)
def test_refuses_custom_ops_library_anywhere(tmp_path, place):
    folder = genai_folder(tmp_path / "m")
    edit_config(folder, lambda c: place(c).update(custom_ops_library="ops"))
    refused(folder, "native code", "custom_ops_library")


def test_refuses_native_library_in_provider_options(tmp_path):
    folder = genai_folder(tmp_path / "m")
    options = [{"qnn": {"backend_path": "QnnHtp.dll"}}]
    edit_config(folder, lambda c: c["model"]["decoder"]["session_options"].update(
        provider_options=options))
    refused(folder, "native code")


@pytest.mark.parametrize(
    ("filename", "words"),
    [
        ("/etc/passwd", "absolute"),
        ("C:\\models\\model.onnx", "absolute"),
        ("../outside.onnx", "outside"),
        ("sub/../../outside.onnx", "outside"),
        ("", "names no file"),
        (7, "names no file"),
        ("missing.onnx", "missing 'missing.onnx'"),
    ],
)
def test_refuses_decoder_files_outside_or_missing(tmp_path, filename, words):
    folder = genai_folder(tmp_path / "m")
    write_decoder(tmp_path / "outside.onnx")
    edit_config(folder, lambda c: c["model"]["decoder"].update(filename=filename))
    refused(folder, words)


def test_refuses_other_component_and_adapter_files_outside(tmp_path):
    folder = genai_folder(tmp_path / "m")
    edit_config(folder, lambda c: c["model"].update(
        vision={"filename": "model.onnx", "adapter_filename": "../adapters.onnx_adapter"}))
    refused(folder, "outside")


def test_refuses_a_link_escaping_the_folder(tmp_path):
    folder = genai_folder(tmp_path / "m")
    write_decoder(tmp_path / "elsewhere.onnx")
    (folder / "model.onnx").unlink()
    (folder / "model.onnx").symlink_to(tmp_path / "elsewhere.onnx")
    refused(folder, "linking outside")


def test_refuses_a_tokenizer_link_escaping_the_folder(tmp_path):
    folder = genai_folder(tmp_path / "m")
    (tmp_path / "secret.json").write_text("{}")
    (folder / "tokenizer.json").unlink()
    (folder / "tokenizer.json").symlink_to(tmp_path / "secret.json")
    refused(folder, "tokenizer.json", "linking outside")


@pytest.mark.parametrize(
    ("location", "words"),
    [("../weights.bin", "outside"), ("/tmp/weights.bin", "absolute"), ("gone.bin", "missing")],
)
def test_refuses_external_data_outside_or_missing(tmp_path, location, words):
    folder = genai_folder(tmp_path / "m")
    write_decoder(folder / "model.onnx", external=location)
    refused(folder, words)


def test_accepts_external_data_beside_the_graph(tmp_path):
    folder = genai_folder(tmp_path / "m")
    write_decoder(folder / "model.onnx", external="model.onnx.data")
    (folder / "model.onnx.data").write_bytes(b"\0" * 4)
    check_genai_folder(folder)


@pytest.mark.parametrize(
    ("key", "value", "words"),
    [
        ("max_length", 0, "search.max_length = 0"),
        ("max_length", 129, "search.max_length = 129"),  # beyond context_length 128
        ("max_length", "128", "search.max_length = '128'"),
        ("max_length", 64.5, "search.max_length = 64.5"),
        ("context_length", 2**20 + 1, "model.context_length = 1048577"),
        ("context_length", -1, "model.context_length = -1"),
        ("context_length", True, "model.context_length = True"),
        ("context_length", None, "model.context_length = None"),
    ],
)
def test_refuses_absurd_lengths(tmp_path, key, value, words):
    folder = genai_folder(tmp_path / "m")
    section = "search" if key == "max_length" else "model"
    edit_config(folder, lambda c: c[section].update({key: value}))
    refused(folder, words)


def test_accepts_a_max_length_below_context(tmp_path):
    folder = genai_folder(tmp_path / "m")
    edit_config(folder, lambda c: c["search"].update(max_length=64))
    assert check_genai_folder(folder)["search"]["max_length"] == 64


@pytest.mark.parametrize(
    ("text", "words"),
    [("{not json", "cannot be read"), ("[1, 2]", "not a JSON object"),
     ('{"model": {}}', "model.decoder.filename")],
)
def test_refuses_bad_config_files(tmp_path, text, words):
    folder = genai_folder(tmp_path / "m")
    (folder / "genai_config.json").write_text(text)
    refused(folder, words)


def test_refuses_missing_folder_and_config(tmp_path):
    refused(tmp_path / "nowhere", "does not exist")
    refused(hf_folder(tmp_path / "m"), "has no genai_config.json")


# -- importing ---------------------------------------------------------------------------------
def test_import_infers_config_writes_manifest_and_skips_extras(tmp_path):
    src = hf_folder(tmp_path / "download")
    write_decoder(src / "model_q4.onnx")
    (src / "model_q4.onnx_data").write_bytes(b"q4")
    (src / ".cache").mkdir()
    (src / ".cache" / "lock").write_text("x")
    seen = []
    installed = import_genai_folder(src, tmp_path / "models", "tiny",
                                    progress=lambda f, m: seen.append(f))
    assert installed == tmp_path / "models" / "tiny"
    assert check_genai_folder(installed)["model"]["decoder"]["filename"] == "model.onnx"
    assert verify_manifest(installed, hashes=True)
    source = read_manifest(installed)["source"]
    assert source["genai_config"] == "inferred" and source["path"] == str(src.resolve())
    names = {p.name for p in installed.rglob("*")}
    assert {"model_q4.onnx", "model_q4.onnx_data", ".cache", "lock"}.isdisjoint(names)
    assert seen == sorted(seen) and seen[0] == 0.0 and seen[-1] == 1.0
    assert sorted(os.listdir(tmp_path / "models")) == ["tiny"]


def test_import_keeps_an_existing_genai_config_and_names_from_folder(tmp_path):
    src = genai_folder(tmp_path / "Qwen 2.5 (onnx)")
    edit_config(src, lambda c: c["search"].update(max_length=100))
    installed = import_genai_folder(src, tmp_path / "models")
    assert installed.name == "Qwen-2.5-onnx"
    assert check_genai_folder(installed)["search"]["max_length"] == 100
    assert read_manifest(installed)["source"]["genai_config"] == "included"


def test_import_follows_file_links_like_a_hugging_face_cache(tmp_path):
    blobs = tmp_path / "blobs"
    hf_folder(blobs)
    snapshot = tmp_path / "snapshot"
    snapshot.mkdir()
    for path in blobs.iterdir():
        (snapshot / path.name).symlink_to(path)
    installed = import_genai_folder(snapshot, tmp_path / "models", "cached")
    assert not any(p.is_symlink() for p in installed.rglob("*"))
    check_genai_folder(installed)


def test_import_refuses_before_copying_anything(tmp_path):
    src = genai_folder(tmp_path / "m")
    edit_config(src, lambda c: c["model"]["decoder"]["session_options"].update(
        custom_ops_library="libops.so"))
    with pytest.raises(ModelError, match="native code"):
        import_genai_folder(src, tmp_path / "models", "m")
    assert not (tmp_path / "models").exists()


@pytest.mark.parametrize("name", ["../escape", ".hidden", "a/b", ""])
def test_import_refuses_unsafe_names(tmp_path, name):
    src = genai_folder(tmp_path / "m")
    with pytest.raises(ModelError, match="cannot be a model name"):
        import_genai_folder(src, tmp_path / "models", name or " ")


def test_import_refuses_to_copy_a_folder_onto_itself(tmp_path):
    models = tmp_path / "models"
    src = genai_folder(models / "m")
    with pytest.raises(ModelError, match="overlaps"):
        import_genai_folder(src, models, "m")
    check_genai_folder(src)


class CopyFailed(Exception):
    pass


def fail_mid_copy(fraction: float, message: str) -> None:
    if message.startswith("Copying") and fraction > 0.3:
        raise CopyFailed(message)


def test_failed_import_leaves_no_folder(tmp_path):
    src = hf_folder(tmp_path / "download")
    (src / "weights.bin").write_bytes(os.urandom(1 << 16))
    models = tmp_path / "models"
    with pytest.raises(CopyFailed):
        import_genai_folder(src, models, "tiny", progress=fail_mid_copy)
    assert os.listdir(models) == []


def test_failed_replacement_keeps_the_old_model(tmp_path):
    models = tmp_path / "models"
    old = import_genai_folder(hf_folder(tmp_path / "v1"), models, "tiny")
    before = read_manifest(old)
    src = hf_folder(tmp_path / "v2")
    (src / "weights.bin").write_bytes(os.urandom(1 << 16))
    with pytest.raises(CopyFailed):
        import_genai_folder(src, models, "tiny", progress=fail_mid_copy)
    assert os.listdir(models) == ["tiny"]
    assert read_manifest(old) == before and verify_manifest(old, hashes=True)
    # Replacing the same name is allowed when it succeeds.
    import_genai_folder(src, models, "tiny")
    assert "weights.bin" in read_manifest(old)["files"]


def test_stale_temporary_folder_is_not_a_model(tmp_path):
    models = tmp_path / "models"
    stale = models / ".tiny.tmp-deadbeef"  # what a kill during a copy leaves behind
    genai_folder(stale)
    assert not verify_manifest(stale)
    installed = import_genai_folder(hf_folder(tmp_path / "download"), models, "tiny")
    assert [p.name for p in models.iterdir() if not p.name.startswith(".")] == ["tiny"]
    assert verify_manifest(installed)
    remove_stale_temporaries(models)
    assert os.listdir(models) == ["tiny"]


# -- end to end: the inferred config runs in onnxruntime-genai ---------------------------------
def byte_level_alphabet() -> list[str]:
    """The 256 characters a byte-level BPE uses for the bytes 0..255, in byte order."""
    printable = [*range(ord("!"), ord("~") + 1), *range(0xA1, 0xAD), *range(0xAE, 0x100)]
    others = [b for b in range(256) if b not in printable]
    chars = {b: chr(b) for b in printable} | {b: chr(256 + i) for i, b in enumerate(others)}
    return [chars[b] for b in range(256)]


def write_byte_tokenizer(folder: Path) -> None:
    vocab = {c: i for i, c in enumerate(byte_level_alphabet())} | {"<|im_end|>": 256}
    special = {"id": 256, "content": "<|im_end|>", "single_word": False, "lstrip": False,
               "rstrip": False, "normalized": False, "special": True}
    byte_level = {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True,
                  "use_regex": True}
    write_json(folder / "tokenizer.json", {
        "version": "1.0", "added_tokens": [special], "normalizer": None,
        "pre_tokenizer": byte_level, "post_processor": None, "decoder": byte_level,
        "model": {"type": "BPE", "vocab": vocab, "merges": [], "unk_token": None,
                  "continuing_subword_prefix": "", "end_of_word_suffix": "",
                  "fuse_unk": False, "byte_fallback": False, "dropout": None},
    })
    write_json(folder / "tokenizer_config.json",
               {"tokenizer_class": "GPT2Tokenizer", "eos_token": "<|im_end|>"})


def write_counting_decoder(path: Path, vocab: int) -> None:
    """A working decoder whose next token is always the last one plus one; each layer's
    present is its past with the new positions appended, as exports from elsewhere do."""
    import numpy as np
    from onnx import numpy_helper

    scores = np.full((vocab, vocab), -10.0, np.float32)
    scores[np.arange(vocab - 1), np.arange(1, vocab)] = 10.0
    initializers = [
        numpy_helper.from_array(scores, "scores"),
        numpy_helper.from_array(np.ones((vocab, KV_HEADS * HEAD), np.float32), "kv_table"),
        numpy_helper.from_array(np.array([0, 0, KV_HEADS, HEAD], np.int64), "kv_shape"),
    ]
    nodes = [
        helper.make_node("Gather", ["scores", "input_ids"], ["logits"]),
        helper.make_node("Gather", ["kv_table", "input_ids"], ["kv_flat"]),
        helper.make_node("Reshape", ["kv_flat", "kv_shape"], ["kv_split"]),
        helper.make_node("Transpose", ["kv_split"], ["kv_new"], perm=[0, 2, 1, 3]),
    ]
    inputs = [helper.make_tensor_value_info(n, TensorProto.INT64, ["batch", "seq"])
              for n in ("input_ids", "attention_mask", "position_ids")]
    outputs = [helper.make_tensor_value_info("logits", TensorProto.FLOAT,
                                             ["batch", "seq", vocab])]
    for layer in range(LAYERS):
        for kind in ("key", "value"):
            past, present = f"past_key_values.{layer}.{kind}", f"present.{layer}.{kind}"
            inputs.append(helper.make_tensor_value_info(
                past, TensorProto.FLOAT, ["batch", KV_HEADS, "past", HEAD]))
            outputs.append(helper.make_tensor_value_info(
                present, TensorProto.FLOAT, ["batch", KV_HEADS, "total", HEAD]))
            nodes.append(helper.make_node("Concat", [past, "kv_new"], [present], axis=2))
    graph = helper.make_graph(nodes, "counting", inputs, outputs, initializers)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.checker.check_model(model)
    onnx.save(model, str(path))


def test_imported_folder_generates_with_onnxruntime_genai(tmp_path):
    og = pytest.importorskip("onnxruntime_genai")
    src = tmp_path / "download"
    src.mkdir()
    write_json(src / "config.json", {**HF_CONFIG, "vocab_size": 257, "eos_token_id": 256,
                                     "max_position_embeddings": 64})
    write_byte_tokenizer(src)
    write_counting_decoder(src / "model.onnx", vocab=257)
    installed = import_genai_folder(src, tmp_path / "models", "counting")

    model = og.Model(str(installed))
    tokenizer = og.Tokenizer(model)
    params = og.GeneratorParams(model)
    params.set_search_options(max_length=6, do_sample=False)
    generator = og.Generator(model, params)
    generator.append_tokens(tokenizer.encode("a"))
    new = []
    while not generator.is_done():
        generator.generate_next_token()
        new.append(int(generator.get_next_tokens()[0]))
    assert tokenizer.decode(new) == "bcdef"
