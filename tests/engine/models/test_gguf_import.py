"""GGUF import: weights map exactly, and the ONNX decoder matches an independent numpy forward
pass, with and without a KV cache, for each architecture and tensor type."""

from __future__ import annotations

import json

import gguf
import numpy as np
import onnx
import onnxruntime as ort
import pytest
from gguf import GGMLQuantizationType as QT

from engine.errors import ModelError
from engine.models.gguf_import import import_gguf
from engine.models.gguf_weights import BLOCK, BlockWeight, matmul_weight
from engine.models.manifest import read_manifest, verify_manifest
from tests.helpers.gguf_factory import reference_logits, write_tiny_gguf

PROMPT = [5, 77, 120, 33, 201, 9, 64, 150]
DECODE = [42, 99, 7]


def dequantize_block_weight(weight: BlockWeight) -> np.ndarray:
    """MatMulNBits semantics: (code - zero_point) * scale, codes packed low nibble first."""
    if weight.bits == 4:
        codes = np.stack([weight.packed & 0x0F, weight.packed >> 4], axis=-1).reshape(weight.n, -1, BLOCK)
    else:
        codes = weight.packed
    if weight.zero_points is None:
        zero = np.full(weight.scales.shape, 2 ** (weight.bits - 1), np.float32)
    elif weight.bits == 8:
        zero = weight.zero_points.astype(np.float32)
    else:
        zero = np.stack([weight.zero_points & 0x0F, weight.zero_points >> 4], axis=-1).reshape(weight.n, -1)
        zero = zero[:, : weight.scales.shape[1]]
    values = (codes.astype(np.float32) - zero[..., None]) * weight.scales[..., None]
    if weight.offsets is not None:
        values = values + weight.offsets[..., None]
    return values.reshape(weight.n, -1)


def _one_tensor_gguf(tmp_path, kind: QT, values: np.ndarray):
    path = tmp_path / f"{kind.name}.gguf"
    writer = gguf.GGUFWriter(str(path), "llama")
    writer.add_tensor("w.weight", gguf.quants.quantize(values, kind), raw_dtype=kind)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return gguf.GGUFReader(path).tensors[0]


@pytest.mark.parametrize("kind", [QT.Q4_0, QT.Q4_1, QT.Q8_0])
def test_gguf_blocks_map_onto_matmulnbits_without_added_error(tmp_path, kind):
    rng = np.random.default_rng(1)
    values = rng.standard_normal((48, 128)).astype(np.float32)
    values[3, :32] = 0.25  # a flat block: Q4_1 stores scale 0, which must still come out right
    tensor = _one_tensor_gguf(tmp_path, kind, values)
    expected = gguf.quants.dequantize(np.asarray(tensor.data), kind)
    got = dequantize_block_weight(matmul_weight(tensor))
    np.testing.assert_allclose(got, expected, rtol=1e-6, atol=1e-6)


def _run_decoder(folder, prompt, steps):
    """Last-position logits after the prompt, then after each decode token, through the KV cache."""
    options = ort.SessionOptions()
    options.intra_op_num_threads = 1
    session = ort.InferenceSession(str(folder / "model.onnx"), options, providers=["CPUExecutionProvider"])
    config = json.loads((folder / "genai_config.json").read_text())["model"]["decoder"]
    layers, kv, head = config["num_hidden_layers"], config["num_key_value_heads"], config["head_size"]
    kv_type = np.float16 if session.get_inputs()[2].type == "tensor(float16)" else np.float32
    past = {f"past_key_values.{i}.{k}": np.zeros((1, kv, 0, head), kv_type)
            for i in range(layers) for k in ("key", "value")}
    outputs, tokens = [], list(prompt)
    feed_ids = list(prompt)
    for step in range(len(steps) + 1):
        feeds = {"input_ids": np.array([feed_ids], np.int64),
                 "attention_mask": np.ones((1, len(tokens)), np.int64), **past}
        results = dict(zip([o.name for o in session.get_outputs()], session.run(None, feeds)))
        outputs.append(results["logits"][0, -1].astype(np.float64))
        past = {name.replace("present", "past_key_values"): value
                for name, value in results.items() if name.startswith("present")}
        if step < len(steps):
            feed_ids = [steps[step]]
            tokens.append(steps[step])
    return np.stack(outputs)


def _reference_steps(path, prompt, steps):
    full = reference_logits(path, list(prompt) + list(steps))
    return full[len(prompt) - 1:]


def _import(tmp_path, accuracy_level=0, **shape):
    source = write_tiny_gguf(tmp_path / "tiny.gguf", **shape)
    folder = import_gguf(source, tmp_path / "model", accuracy_level=accuracy_level)
    return source, folder


EXACT_TYPES = ["F32", "F16", "BF16", "Q8_0", "Q4_0", "Q4_1"]


@pytest.mark.parametrize("arch", ["llama", "qwen2"])
@pytest.mark.parametrize("weight_type", EXACT_TYPES)
def test_decoder_matches_numpy_reference(tmp_path, arch, weight_type):
    source, folder = _import(tmp_path, arch=arch, weight_type=weight_type)
    got = _run_decoder(folder, PROMPT, DECODE)
    expected = _reference_steps(source, PROMPT, DECODE)
    scale = np.abs(expected).max()
    np.testing.assert_allclose(got, expected, atol=2e-4 * scale, rtol=0)


@pytest.mark.parametrize("weight_type", ["Q4_K", "Q6_K", "Q5_0"])
def test_requantized_types_stay_close_to_reference(tmp_path, weight_type):
    source, folder = _import(tmp_path, weight_type=weight_type, hidden=256, heads=4, kv_heads=2, ffn=512)
    got = _run_decoder(folder, PROMPT, DECODE)
    expected = _reference_steps(source, PROMPT, DECODE)
    for row_got, row_expected in zip(got, expected):
        assert np.corrcoef(row_got, row_expected)[0, 1] > 0.99


@pytest.mark.parametrize("embed_type", ["Q8_0", "Q4_0", "Q4_1", "F16", "Q4_K", "Q5_K", "Q6_K", "Q5_0"])
def test_embedding_types_and_untied_output(tmp_path, embed_type):
    """Every quantized table is gathered from its blocks, exactly (Q6_K in blocks of 16); the
    offsets of Q4_1/Q4_K/Q5_K are gathered beside them."""
    source, folder = _import(tmp_path, embed_type=embed_type, tied_output=False, hidden=256, ffn=256)
    got = _run_decoder(folder, PROMPT, DECODE)
    expected = _reference_steps(source, PROMPT, DECODE)
    np.testing.assert_allclose(got, expected, atol=2e-4 * np.abs(expected).max(), rtol=0)


def test_fast_int8_kernels_stay_close_to_reference(tmp_path):
    """accuracy_level 4 (the default) quantizes activations to int8 inside each matmul."""
    source, folder = _import(tmp_path, accuracy_level=4, weight_type="Q4_1")
    got = _run_decoder(folder, PROMPT, DECODE)
    expected = _reference_steps(source, PROMPT, DECODE)
    for row_got, row_expected in zip(got, expected):
        assert np.corrcoef(row_got, row_expected)[0, 1] > 0.995


def test_float16_kv_cache_option_stays_close_to_reference(tmp_path):
    """kv_float16: attention and its cache in float16 (an option: issue 19's measurements)."""
    source = write_tiny_gguf(tmp_path / "tiny.gguf", weight_type="Q4_1")
    folder = import_gguf(source, tmp_path / "model", accuracy_level=0, kv_float16=True)
    got = _run_decoder(folder, PROMPT, DECODE)
    expected = _reference_steps(source, PROMPT, DECODE)
    np.testing.assert_allclose(got, expected, atol=2e-3 * np.abs(expected).max(), rtol=0)


def test_four_bit_output_layer_option(tmp_path):
    """lm_head_bits=4 re-quantizes the 8-bit (tied Q8_0) output layer to 4-bit blocks."""
    source = write_tiny_gguf(tmp_path / "tiny.gguf", weight_type="Q4_0", embed_type="Q8_0")
    folder = import_gguf(source, tmp_path / "model", accuracy_level=0, lm_head_bits=4)
    model = onnx.load(str(folder / "model.onnx"), load_external_data=False)
    head = next(n for n in model.graph.node if n.output[0] == "logits")
    assert next(a.i for a in head.attribute if a.name == "bits") == 4
    got = _run_decoder(folder, PROMPT, DECODE)
    expected = _reference_steps(source, PROMPT, DECODE)
    for row_got, row_expected in zip(got, expected):
        assert np.corrcoef(row_got, row_expected)[0, 1] > 0.99


def test_import_writes_a_complete_genai_folder(tmp_path):
    progress = []
    source = write_tiny_gguf(tmp_path / "tiny.gguf")
    folder = import_gguf(source, tmp_path / "model", lambda f, m: progress.append(f))
    names = {p.name for p in folder.iterdir()}
    assert {"model.onnx", "model.onnx.data", "genai_config.json", "tokenizer.json", "manifest.json"} <= names
    assert verify_manifest(folder, hashes=True)
    assert progress[0] == 0.0 and progress[-1] == 1.0 and progress == sorted(progress)
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".")]  # no temp folder left


def test_unsupported_architecture_is_refused_by_name(tmp_path):
    path = tmp_path / "gpt2.gguf"
    writer = gguf.GGUFWriter(str(path), "gpt2")
    writer.add_tensor("token_embd.weight", np.zeros((4, 32), np.float32))
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    with pytest.raises(ModelError, match="'gpt2'") as refused:
        import_gguf(path, tmp_path / "out")
    for arch in ("llama", "qwen2", "qwen3", "smollm3", "gemma3", "phi3"):  # and it says what would do
        assert arch in str(refused.value)
    assert not (tmp_path / "out").exists()


def test_not_a_gguf_file_is_refused(tmp_path):
    path = tmp_path / "fake.gguf"
    path.write_bytes(b"not a gguf at all" * 10)
    with pytest.raises(ModelError, match="fake.gguf"):
        import_gguf(path, tmp_path / "out")


REAL_PROMPT = "<|im_start|>user\nWhat is the capital of France?<|im_end|>\n<|im_start|>assistant\n"


@pytest.fixture(scope="module")
def real_gguf():
    from engine.models.registry import BUILTIN_LLM, find_package_file

    return find_package_file(BUILTIN_LLM.files[0])


@pytest.mark.slow
def test_real_model_import_is_exact_in_float(tmp_path, real_gguf):
    """With float32 activations the imported SmolLM2 matches the numpy reference closely."""
    from tokenizers import Tokenizer

    folder = import_gguf(real_gguf, tmp_path / "exact", accuracy_level=0)
    ids = Tokenizer.from_file(str(folder / "tokenizer.json")).encode(REAL_PROMPT).ids
    expected = _reference_steps(real_gguf, ids[:-2], ids[-2:])
    got = _run_decoder(folder, ids[:-2], ids[-2:])
    np.testing.assert_allclose(got, expected, atol=1e-4 * np.abs(expected).max(), rtol=0)


@pytest.mark.slow
def test_real_model_default_build_stays_close_to_reference(builtin_llm_dir, real_gguf):
    from tokenizers import Tokenizer

    ids = Tokenizer.from_file(str(builtin_llm_dir / "tokenizer.json")).encode(REAL_PROMPT).ids
    expected = reference_logits(real_gguf, ids)[-1]
    got = _run_decoder(builtin_llm_dir, ids, [])[-1]
    assert np.corrcoef(got, expected)[0, 1] > 0.998
    assert int(got.argmax()) in set(np.argsort(expected)[-3:].tolist())


# -- integer zero points (issue 31) ----------------------------------------------------------
def _offset_source(tmp_path, weight_type: str):
    """A tiny llama (Q4_1) or a Qwen3 with rows of 256 (Q4_K, zero-mean blocks as trained
    weights have), every matmul of that type."""
    from tests.helpers.gguf_arch_factory import family, write_family_gguf

    fam = family("llama") if weight_type == "Q4_1" else family("qwen3", hidden=256, ffn=512, head_dim=64)
    return write_family_gguf(tmp_path / f"{weight_type}.gguf", fam, weight_type=weight_type, embed_type="Q8_0")


def _matmul_zero_points(folder) -> tuple[dict, onnx.ModelProto]:
    """MatMulNBits node name -> the element type of its zero points (None without any)."""
    model = onnx.load(str(folder / "model.onnx"), load_external_data=False)
    types = {i.name: i.data_type for i in model.graph.initializer}
    return {n.name: types.get(n.input[3]) if len(n.input) > 3 and n.input[3] else None
            for n in model.graph.node if n.op_type == "MatMulNBits"}, model


# Largest logit difference from the exact path, over the largest logit, both at accuracy level 4.
# Measured on these files: 8-bit blocks 4.5e-3 (Q4_K) and 8.3e-3 (Q4_1) (2.0e-3 and 6.8e-3 with
# float activations); 4-bit ones, a quarter of the file's step off, 3.4e-2 and 8.4e-2.
ZERO_POINT_TOLERANCE = {"zero_points_8bit": 2e-2, "zero_points": 2e-1}


@pytest.mark.parametrize("offsets", list(ZERO_POINT_TOLERANCE))
@pytest.mark.parametrize("weight_type", ["Q4_1", "Q4_K"])
def test_integer_zero_points_stay_close_to_the_exact_path(tmp_path, weight_type, offsets):
    source = _offset_source(tmp_path, weight_type)
    exact = import_gguf(source, tmp_path / "exact", offsets="exact")
    folded = import_gguf(source, tmp_path / "folded", offsets=offsets)
    zero_points, model = _matmul_zero_points(folded)
    head = [name for name in zero_points if name.startswith("lm_head")]
    assert head and zero_points.pop(head[0]) is None  # the tied Q8_0 output has no offsets
    assert zero_points and set(zero_points.values()) == {onnx.TensorProto.UINT8}
    assert not [n.name for n in model.graph.node if "offsets" in n.name or "block_sums" in n.name]
    assert set(_matmul_zero_points(exact)[0].values()) == {None}
    want, got = _run_decoder(exact, PROMPT, DECODE), _run_decoder(folded, PROMPT, DECODE)
    assert np.abs(got - want).max() <= ZERO_POINT_TOLERANCE[offsets] * np.abs(want).max()
    source_record = read_manifest(folded)["source"]
    assert source_record["offsets"] == offsets
    assert source_record["weights"]["blk.0.ffn_up.weight"] == f"{weight_type} re-quantized as int{8 if '8' in offsets else 4}"


def test_offsets_default_per_architecture_and_exact_in_float(monkeypatch):
    from engine.models import gguf_import

    monkeypatch.setattr(gguf_import, "DEFAULT_OFFSETS", {"llama": "zero_points_8bit"})
    assert gguf_import.offsets_for("llama", 4, None) == "zero_points_8bit"
    assert gguf_import.offsets_for("llama", 0, None) == "exact"  # float activations: exact arithmetic
    assert gguf_import.offsets_for("qwen3", 4, None) == "exact"  # not measured: exact
    assert gguf_import.offsets_for("llama", 4, "exact") == "exact"
    with pytest.raises(ValueError, match="offsets must be one of"):
        gguf_import.offsets_for("llama", 4, "float")
