"""Chat templates from the GGUF: kept when the app can render them, else replaced by the family's
known format (ChatML, Llama 3, Gemma, Phi-3, Mistral), which the manifest and `models list` say."""

from __future__ import annotations

import json
import logging

import pytest

from engine.cli.main import main
from engine.errors import ModelError
from engine.models.chat_templates import FORMATS, PROBE, family_format, settle_chat_template
from engine.models.gguf_import import import_gguf
from engine.models.gguf_tokenizer import write_tokenizer_files
from engine.models.manifest import read_manifest
from tests.engine.models.test_gguf_tokenizer import genai_tokenizer, write_genai_config, write_gguf
from tests.helpers import gguf_factory
from tests.helpers.tiny_vocab import byte_level_vocab

# Each family: its turn markers (the first two take ids 1 and 2: bos and eos), and a template
# in the family's style that the app renders.
FAMILIES = {
    "ChatML": (["<|im_start|>", "<|im_end|>"], byte_level_vocab()["chat_template"]),
    "Llama 3": (["<|begin_of_text|>", "<|eot_id|>", "<|start_header_id|>", "<|end_header_id|>"], (
        "{% set loop_messages = messages %}{% for message in loop_messages %}"
        "{% set content = '<|start_header_id|>' + message['role'] + '<|end_header_id|>\n\n' + message['content'] | trim + '<|eot_id|>' %}"
        "{% if loop.index0 == 0 %}{% set content = bos_token + content %}{% endif %}{{ content }}{% endfor %}"
        "{% if add_generation_prompt %}{{ '<|start_header_id|>assistant<|end_header_id|>\n\n' }}{% endif %}")),
    "Gemma": (["<bos>", "<eos>", "<start_of_turn>", "<end_of_turn>"], (
        "{{ bos_token }}{% if messages[0]['role'] == 'system' %}{% set first = messages[0]['content'] + '\n\n' %}"
        "{% set loop_messages = messages[1:] %}{% else %}{% set first = '' %}{% set loop_messages = messages %}{% endif %}"
        "{% for message in loop_messages %}{% if message['role'] == 'assistant' %}{% set role = 'model' %}"
        "{% else %}{% set role = message['role'] %}{% endif %}"
        "{{ '<start_of_turn>' + role + '\n' + (first if loop.first else '') + message['content'] | trim + '<end_of_turn>\n' }}"
        "{% endfor %}{% if add_generation_prompt %}{{ '<start_of_turn>model\n' }}{% endif %}")),
    "Phi-3": (["<s>", "<|end|>", "<|system|>", "<|user|>", "<|assistant|>"], (
        "{% for message in messages %}{% if message['role'] == 'system' and message['content'] %}"
        "{{ '<|system|>\n' + message['content'] + '<|end|>\n' }}{% elif message['role'] == 'user' %}"
        "{{ '<|user|>\n' + message['content'] + '<|end|>\n' }}{% elif message['role'] == 'assistant' %}"
        "{{ '<|assistant|>\n' + message['content'] + '<|end|>\n' }}{% endif %}{% endfor %}"
        "{% if add_generation_prompt %}{{ '<|assistant|>\n' }}{% endif %}")),
    "Mistral": (["<s>", "</s>", "[INST]", "[/INST]"], (
        "{% if messages[0]['role'] == 'system' %}{% set system = messages[0]['content'] %}"
        "{% set loop_messages = messages[1:] %}{% else %}{% set loop_messages = messages %}{% endif %}"
        "{{ bos_token }}{% for message in loop_messages %}"
        "{% if (message['role'] == 'user') != (loop.index0 % 2 == 0) %}"
        "{{ raise_exception('Conversation roles must alternate user/assistant/user/assistant/...') }}{% endif %}"
        "{% if message['role'] == 'user' %}{% if loop.first and system is defined %}"
        "{{ '[INST] ' + system + '\n\n' + message['content'] + ' [/INST]' }}"
        "{% else %}{{ '[INST] ' + message['content'] + ' [/INST]' }}{% endif %}"
        "{% else %}{{ message['content'] + eos_token }}{% endif %}{% endfor %}")),
}
# Templates the app cannot use: one refuses a system message (as Gemma 2's does), one uses a
# filter onnxruntime-genai lacks, one drops the system message.
REFUSES_SYSTEM = ("{% if messages[0]['role'] == 'system' %}{{ raise_exception('System role not supported') }}"
                  "{% endif %}{% for message in messages %}{{ message['content'] }}{% endfor %}")
UNKNOWN_FILTER = "{% for message in messages %}{{ message['role'] | upper }}: {{ message['content'] }}{% endfor %}"
DROPS_SYSTEM = "{% for message in messages %}{% if message['role'] != 'system' %}{{ message['content'] }}{% endif %}{% endfor %}"

# What each known format makes of the probe chat (bos/eos as the family names them).
EXPECTED = {
    "ChatML": ("<|im_start|>system\nprobe-system-text<|im_end|>\n<|im_start|>user\nprobe-user-text<|im_end|>\n"
               "<|im_start|>assistant\nprobe-answer-text<|im_end|>\n<|im_start|>user\nprobe-question-text<|im_end|>\n"
               "<|im_start|>assistant\n"),
    "Llama 3": ("<|begin_of_text|><|start_header_id|>system<|end_header_id|>\n\nprobe-system-text<|eot_id|>"
                "<|start_header_id|>user<|end_header_id|>\n\nprobe-user-text<|eot_id|>"
                "<|start_header_id|>assistant<|end_header_id|>\n\nprobe-answer-text<|eot_id|>"
                "<|start_header_id|>user<|end_header_id|>\n\nprobe-question-text<|eot_id|>"
                "<|start_header_id|>assistant<|end_header_id|>\n\n"),
    "Gemma": ("<bos><start_of_turn>user\nprobe-system-text\n\nprobe-user-text<end_of_turn>\n"
              "<start_of_turn>model\nprobe-answer-text<end_of_turn>\n"
              "<start_of_turn>user\nprobe-question-text<end_of_turn>\n<start_of_turn>model\n"),
    "Phi-3": ("<|system|>\nprobe-system-text<|end|>\n<|user|>\nprobe-user-text<|end|>\n"
              "<|assistant|>\nprobe-answer-text<|end|>\n<|user|>\nprobe-question-text<|end|>\n<|assistant|>\n"),
    "Mistral": ("<s>[INST] probe-system-text\n\nprobe-user-text [/INST]probe-answer-text</s>"
                "[INST] probe-question-text [/INST]"),
}


def family_vocab(family: str, template: str | None) -> dict:
    """The tiny byte-level vocabulary with the family's markers as its special tokens."""
    vocab = byte_level_vocab()
    markers = FAMILIES[family][0]
    tokens = ["<|endoftext|>", *markers[:2]] + vocab["tokens"][3:] + markers[2:]
    types = vocab["token_types"] + [3] * len(markers[2:])
    return vocab | {"tokens": tokens, "token_types": types, "chat_template": template}


def tokenizer_folder(tmp_path, family: str, template: str | None):
    vocab = family_vocab(family, template)
    folder = tmp_path / "model"
    ids = write_tokenizer_files(write_gguf(tmp_path / "vocab.gguf", vocab), folder)
    write_genai_config(folder, len(vocab["tokens"]), ids)
    return folder, vocab


def rendered(folder) -> str:
    config = json.loads((folder / "tokenizer_config.json").read_text(encoding="utf-8"))
    tokenizer = genai_tokenizer(folder, 0, {})  # the config is already there
    return tokenizer.apply_chat_template(json.dumps(PROBE), template_str=config["chat_template"],
                                         add_generation_prompt=True)


@pytest.mark.parametrize("family", list(FAMILIES))
def test_a_family_template_the_app_renders_is_kept(tmp_path, family):
    folder, vocab = tokenizer_folder(tmp_path, family, FAMILIES[family][1])
    assert settle_chat_template(folder, vocab["tokens"]) == {"source": "file"}
    assert rendered(folder) == EXPECTED[family]


@pytest.mark.parametrize("family", list(FAMILIES))
def test_each_known_format_renders_its_family_turns(tmp_path, family):
    folder, vocab = tokenizer_folder(tmp_path, family, FORMATS[family])
    assert family_format(vocab["tokens"]) == family
    assert rendered(folder) == EXPECTED[family]


@pytest.mark.parametrize(("family", "template", "reason"), [
    ("Gemma", REFUSES_SYSTEM, "could not be rendered (System role not supported"),
    ("Mistral", UNKNOWN_FILTER, "could not be rendered ("),
    ("Phi-3", DROPS_SYSTEM, "left out the system message of a chat"),
    ("Llama 3", None, "is missing"),
])
def test_a_template_the_app_cannot_use_falls_back_to_the_family_format(tmp_path, caplog, family, template, reason):
    folder, vocab = tokenizer_folder(tmp_path, family, template)
    with caplog.at_level(logging.WARNING):
        record = settle_chat_template(folder, vocab["tokens"], "tiny")
    assert record["source"] == "fallback" and record["format"] == family
    assert record["reason"].startswith(reason)
    assert f"using the {family} format instead" in caplog.text
    assert rendered(folder) == EXPECTED[family]


def test_no_family_known_leaves_the_template_and_says_so(tmp_path):
    folder, vocab = tokenizer_folder(tmp_path, "ChatML", UNKNOWN_FILTER)
    plain = [t for t in vocab["tokens"] if t not in ("<|im_start|>",)]
    assert settle_chat_template(folder, plain, "some-model")["source"] == "none"


def test_family_by_name_when_no_marker_token():
    assert family_format(["<s>", "</s>", "a"], "Mistral-7B-Instruct-v0.1") == "Mistral"
    assert family_format(["<s>", "</s>", "a"], "tiny") is None


def test_import_records_the_fallback_and_models_list_says_it(tmp_path, monkeypatch, capsys):
    vocab = family_vocab("Gemma", REFUSES_SYSTEM)
    monkeypatch.setattr(gguf_factory, "byte_level_vocab", lambda: vocab)
    source = gguf_factory.write_tiny_gguf(tmp_path / "tiny.gguf")
    data = tmp_path / "data"
    folder = import_gguf(source, data / "models" / "tiny")
    record = read_manifest(folder)["source"]["chat_template"]
    assert (record["source"], record["format"]) == ("fallback", "Gemma")
    assert main(["models", "list", "--data-dir", str(data), "--provider", "cpu"]) == 0
    out = capsys.readouterr().out
    assert "tiny: chat template: Gemma (the file's template could not be rendered (System role not supported" in out


def test_a_tokenizer_onnxruntime_genai_cannot_load_refuses_the_import(tmp_path):
    folder, vocab = tokenizer_folder(tmp_path, "ChatML", None)
    (folder / "tokenizer.json").write_text("{not json", encoding="utf-8")
    with pytest.raises(ModelError, match="tokenizer rebuilt from this file cannot be loaded"):
        settle_chat_template(folder, vocab["tokens"])


def test_a_fallback_format_stops_at_its_end_of_turn_token(tmp_path):
    folder, vocab = tokenizer_folder(tmp_path, "Gemma", None)  # no template: eos alone so far
    settle_chat_template(folder, vocab["tokens"])
    eos = json.loads((folder / "genai_config.json").read_text(encoding="utf-8"))["model"]["eos_token_id"]
    assert eos == [2, vocab["tokens"].index("<end_of_turn>")]
