"""The chat template an imported model is prompted with: the file's own when the app can render
it, else the known format of the model's family, and a record saying which and why.

The app renders templates with onnxruntime-genai's Jinja subset (engine.llm.local.LocalLLM.render),
which lacks some filters (upper, replace, reverse) and raises where a template refuses a chat
(Gemma 2's "System role not supported"); the app always sends a system message first.
"""

from __future__ import annotations

import json
import logging
from pathlib import Path

from engine.errors import ModelError

log = logging.getLogger(__name__)

# Written for this app: the plain shape of each family's turns, nothing else (no tools).
CHATML = (
    "{% for message in messages %}"
    "{{ '<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>\n' }}"
    "{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}"
)
LLAMA3 = (
    "{{ bos_token }}{% for message in messages %}"
    "{{ '<|start_header_id|>' + message['role'] + '<|end_header_id|>\n\n' + (message['content'] | trim) + '<|eot_id|>' }}"
    "{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|start_header_id|>assistant<|end_header_id|>\n\n' }}{% endif %}"
)
# Gemma has no system turn: the system text opens the first user turn.
GEMMA = (
    "{{ bos_token }}{% set ns = namespace(system='') %}{% for message in messages %}"
    "{% if message['role'] == 'system' %}{% set ns.system = message['content'] + '\n\n' %}"
    "{% else %}{% if message['role'] == 'assistant' %}{% set role = 'model' %}{% else %}{% set role = 'user' %}{% endif %}"
    "{{ '<start_of_turn>' + role + '\n' + ns.system + (message['content'] | trim) + '<end_of_turn>\n' }}"
    "{% set ns.system = '' %}{% endif %}{% endfor %}"
    "{% if add_generation_prompt %}{{ '<start_of_turn>model\n' }}{% endif %}"
)
PHI3 = (
    "{% for message in messages %}"
    "{{ '<|' + message['role'] + '|>\n' + message['content'] + '<|end|>\n' }}"
    "{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|assistant|>\n' }}{% endif %}"
)
# Mistral's [INST] format has no system turn either: it opens the first instruction.
MISTRAL = (
    "{{ bos_token }}{% set ns = namespace(system='') %}{% for message in messages %}"
    "{% if message['role'] == 'system' %}{% set ns.system = message['content'] + '\n\n' %}"
    "{% elif message['role'] == 'user' %}{{ '[INST] ' + ns.system + message['content'] + ' [/INST]' }}"
    "{% set ns.system = '' %}"
    "{% else %}{{ message['content'] + eos_token }}{% endif %}{% endfor %}"
)
FORMATS = {"ChatML": CHATML, "Llama 3": LLAMA3, "Gemma": GEMMA, "Phi-3": PHI3, "Mistral": MISTRAL}

# A family is known by a token only its format uses, in this order (Phi-4-mini's vocabulary
# also holds ChatML's markers), else by a word in the model's name.
MARKER_TOKENS = (("<|start_header_id|>", "Llama 3"), ("<start_of_turn>", "Gemma"),
                 ("<|assistant|>", "Phi-3"), ("<|im_start|>", "ChatML"), ("[INST]", "Mistral"))
NAME_WORDS = (("llama-3", "Llama 3"), ("llama 3", "Llama 3"), ("gemma", "Gemma"), ("phi", "Phi-3"),
              ("mistral", "Mistral"), ("qwen", "ChatML"), ("smollm", "ChatML"))

# What the app sends (LocalLLM measures its template with the same shape).
PROBE = [{"role": "system", "content": "probe-system-text"},
         {"role": "user", "content": "probe-user-text"},
         {"role": "assistant", "content": "probe-answer-text"},
         {"role": "user", "content": "probe-question-text"}]


def family_format(tokens: list[str], name: str = "") -> str | None:
    """The family's format name ("ChatML", "Llama 3", ...) by marker token or name, or None."""
    known = set(tokens)
    for token, family in MARKER_TOKENS:
        if token in known:
            return family
    lowered = name.lower()
    return next((family for word, family in NAME_WORDS if word in lowered), None)


def render_problem(tokenizer, template: str) -> str | None:
    """Why the app cannot use `template` (an onnxruntime_genai.Tokenizer renders it as the app
    does), or None when a system/user/assistant/user chat renders with every message in order."""
    try:
        text = tokenizer.apply_chat_template(json.dumps(PROBE), template_str=template,
                                             add_generation_prompt=True)
    except Exception as exc:  # onnxruntime-genai raises plain RuntimeError
        first_line = (str(exc).splitlines() or [type(exc).__name__])[0]
        return f"could not be rendered ({first_line[:160]})"
    position = 0
    for message in PROBE:
        found = text.find(message["content"], position)
        if found < 0:
            return f"left out the {message['role']} message of a chat"
        position = found + len(message["content"])
    return None


def settle_chat_template(folder: Path, tokens: list[str], name: str = "") -> dict:
    """Keep the file's chat template in `folder`'s tokenizer_config.json if the app can render
    it; else write the family's known format in its place (logged). Needs the folder's
    genai_config.json. Returns the record for the manifest: {"source": "file"}, or
    {"source": "fallback", "format", "reason"}, or {"source": "none", "reason"}."""
    import onnxruntime_genai as og

    config_path = Path(folder) / "tokenizer_config.json"
    config = json.loads(config_path.read_text(encoding="utf-8"))
    template = config.get("chat_template")
    try:
        tokenizer = og.Tokenizer(str(folder))
    except Exception as exc:  # onnxruntime-genai raises plain RuntimeError
        raise ModelError(f"The tokenizer rebuilt from this file cannot be loaded ({exc}); "
                         "the model cannot be imported. Choose another build of it.") from exc
    if isinstance(template, str) and template.strip():
        reason = render_problem(tokenizer, template)
        if reason is None:
            return {"source": "file"}
    else:
        reason = "is missing"
    family = family_format(tokens, name)
    if family is None or render_problem(tokenizer, FORMATS[family]) is not None:
        log.warning("%s: the chat template %s and the model's family is not known; "
                    "chats with it may fail", name or folder, reason)
        return {"source": "none", "reason": reason}
    log.warning("%s: the file's chat template %s; using the %s format instead", name or folder, reason, family)
    config["chat_template"] = FORMATS[family]
    config_path.write_text(json.dumps(config, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    _stop_at_turn_ends(Path(folder), tokens, FORMATS[family])
    return {"source": "fallback", "format": family, "reason": reason}


def _stop_at_turn_ends(folder: Path, tokens: list[str], template: str) -> None:
    """Generation stops at the end-of-turn token of the template now used (the eos ids were
    chosen from the file's own template)."""
    from engine.models.gguf_tokenizer import END_OF_TURN_TOKENS

    path = folder / "genai_config.json"
    config = json.loads(path.read_text(encoding="utf-8"))
    eos = config["model"]["eos_token_id"]
    eos = list(eos) if isinstance(eos, list) else [eos]
    ends = [tokens.index(t) for t in END_OF_TURN_TOKENS if t in template and t in tokens]
    eos += [token_id for token_id in ends if token_id not in eos]
    config["model"]["eos_token_id"] = eos[0] if len(eos) == 1 else eos
    path.write_text(json.dumps(config, indent=2), encoding="utf-8")
