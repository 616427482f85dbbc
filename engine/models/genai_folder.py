"""ONNX GenAI model folders made elsewhere (an onnx-community download, a builder output).

Refusal rules of `check_genai_folder` (a folder is data, never code):
- `genai_config.json` must be a readable JSON object with `model.decoder.filename` (or a
  decoder `pipeline`).
- No native code: the keys `custom_ops_library`, `library_path` and `backend_path` are refused
  anywhere in the config, and so is any string value ending in .so, .dll or .dylib.
- Every file the config names (keys `filename`, `*_filename`, `*_file`, `*file_path`) must be a
  relative path that stays inside the folder, also after following links; the `*filename` ones
  must exist (except `output_*`, which name files to be written).
- External data files that an ONNX graph names must stay inside the folder and exist. This is
  checked only for graphs up to 64 MiB: a bigger file holds its weights inline.
- `model.context_length` must be a whole number from 1 to 1,048,576 (2**20);
  `search.max_length`, when given, a whole number from 1 to `context_length`.
- No link anywhere in the folder may point outside it; `tokenizer.json` (or a SentencePiece
  `tokenizer.model`) must be there.

`import_genai_folder` follows file links while copying (a Hugging Face cache snapshot is all
links into its blob store), so an imported folder holds only real files.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Callable, Iterator
from pathlib import Path, PurePosixPath, PureWindowsPath

from google.protobuf.message import DecodeError

from engine.errors import ModelError
from engine.models.manifest import atomic_folder, write_manifest
from engine.models.onnx_subset import external_locations
from engine.paths import MANIFEST

CONFIG = "genai_config.json"
MAX_CONTEXT = 1 << 20
GRAPH_CHECK_LIMIT = 64 << 20
_NATIVE_CODE_KEYS = {"custom_ops_library", "library_path", "backend_path"}
_NATIVE_SUFFIXES = (".so", ".dll", ".dylib")
_FILE_KEY = re.compile(r"(filename|_file|file_path)$")
_TOKENIZER_FILES = ("tokenizer.json", "tokenizer.model")
_COPY_BLOCK = 8 << 20

Progress = Callable[[float, str], None]


# -- checking ---------------------------------------------------------------------------------
def check_genai_folder(folder: Path) -> dict:
    """The folder's genai_config.json, once the folder passes every rule above."""
    folder = Path(folder)
    config = _read_genai_config(folder)
    _check_config(config, folder, label=folder, links_ok=False)
    return config


def _read_genai_config(folder: Path) -> dict:
    if not folder.is_dir():
        raise ModelError(
            f"The model folder '{folder}' does not exist or is not a folder; "
            "choose the folder that holds genai_config.json."
        )
    config = _read_json(folder / CONFIG, folder, "import the model again or fix the file")
    model = config.get("model")
    decoder = model.get("decoder") if isinstance(model, dict) else None
    if not isinstance(decoder, dict) or not ("filename" in decoder or "pipeline" in decoder):
        refuse(folder, f"has a {CONFIG} without model.decoder.filename",
               "it is not an onnxruntime-genai language model; import a text model")
    return config


def _read_json(path: Path, label: Path, todo: str) -> dict:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        refuse(label, f"has no {path.name}", todo)
    except (OSError, ValueError) as exc:  # UnicodeDecodeError is a ValueError
        refuse(label, f"has a {path.name} that cannot be read ({exc})", todo)
    if not isinstance(data, dict):
        refuse(label, f"has a {path.name} that is not a JSON object", todo)
    return data


def _check_config(config: dict, folder: Path, *, label: Path, links_ok: bool) -> None:
    _refuse_native_code(config, label)
    _check_lengths(config, label)
    for key, name in _named_files(config):
        path = _inside(folder, name, key, label, links_ok)
        if key.endswith("filename") and not key.startswith("output"):
            _require_file(path, name, label)
            if path.suffix == ".onnx":
                check_external_data(folder, path, label, links_ok)
    if not links_ok:
        _refuse_escaping_links(folder, label)
    if not any((folder / name).is_file() for name in _TOKENIZER_FILES):
        refuse(label, "has no tokenizer.json", "copy the tokenizer files in with the model")


def _refuse_native_code(config: dict, label: Path) -> None:
    for path, value in _walk(config):
        key = _last_key(path)
        native = key in _NATIVE_CODE_KEYS or (
            isinstance(value, str) and value.lower().endswith(_NATIVE_SUFFIXES)
        )
        if native:
            refuse(label, f"asks to load native code ({path}: {value!r}), which is never done",
                   f"remove '{key}' from {CONFIG}, or use a model that needs no custom operators")


def _check_lengths(config: dict, label: Path) -> None:
    context = config["model"].get("context_length")
    if not _whole(context) or not 1 <= context <= MAX_CONTEXT:
        refuse(label, f"has model.context_length = {context!r}",
               f"set it in {CONFIG} to the model's context, a whole number up to {MAX_CONTEXT}")
    search = config.get("search", {})
    max_length = search.get("max_length") if isinstance(search, dict) else None
    if max_length is not None and (not _whole(max_length) or not 1 <= max_length <= context):
        refuse(label, f"has search.max_length = {max_length!r}",
               f"set it in {CONFIG} to a whole number from 1 to context_length ({context})")


def _whole(value) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _walk(node, prefix: str = "") -> Iterator[tuple[str, object]]:
    """(dotted key, value) for every entry of every object in the config."""
    if isinstance(node, dict):
        for key, value in node.items():
            path = f"{prefix}.{key}" if prefix else str(key)
            yield path, value
            yield from _walk(value, path)
    elif isinstance(node, list):
        for index, item in enumerate(node):
            yield from _walk(item, f"{prefix}[{index}]")


def _named_files(config: dict) -> Iterator[tuple[str, object]]:
    """(key, value) for each entry that names a file; the key is the last part of the path."""
    for path, value in _walk(config):
        key = _last_key(path)
        if _FILE_KEY.search(key):
            yield key, value


def _last_key(path: str) -> str:
    return path.rsplit(".", 1)[-1]


def _inside(folder: Path, name, key: str, label: Path, links_ok: bool) -> Path:
    """folder/name, refused unless it is a relative path that stays inside the folder."""
    if not isinstance(name, str) or not name:
        refuse(label, f"names no file in '{key}' ({name!r})", f"fix '{key}' in {CONFIG}")
    if PurePosixPath(name).is_absolute() or PureWindowsPath(name).anchor:
        refuse(label, f"names an absolute path ('{name}')",
               "keep the model's files inside its folder and name them relative to it")
    if ".." in re.split(r"[\\/]", name):
        refuse(label, f"names a file outside itself ('{name}')",
               "keep the model's files inside its folder")
    path = folder / name
    if not links_ok and not path.resolve().is_relative_to(folder.resolve()):
        refuse(label, f"has '{name}' linking outside the folder",
               "replace the link with the real file")
    return path


def _require_file(path: Path, name: str, label: Path) -> None:
    if not path.is_file():
        refuse(label, f"is missing '{name}'", "download or copy the whole model folder again")


def _refuse_escaping_links(folder: Path, label: Path) -> None:
    root = folder.resolve()
    for parent, dirs, files in os.walk(folder):
        for name in dirs + files:
            path = Path(parent) / name
            if path.is_symlink() and not path.resolve().is_relative_to(root):
                refuse(label, f"has '{path.relative_to(folder)}' linking outside the folder",
                       "replace the link with the real file")


def check_external_data(folder: Path, onnx_path: Path, label: Path, links_ok: bool) -> None:
    if onnx_path.stat().st_size > GRAPH_CHECK_LIMIT:
        return
    base = PurePosixPath(onnx_path.relative_to(folder).parent.as_posix())
    for location in _external_locations(onnx_path, label):
        if ".." in re.split(r"[\\/]", location):
            refuse(label, f"has a graph reading data outside the folder ('{location}')",
                   "keep the model's files inside its folder")
        name = str(base / location)
        _require_file(_inside(folder, name, "external data", label, links_ok), name, label)


def _external_locations(path: Path, label: Path) -> set[str]:
    try:
        return external_locations(path.read_bytes())
    except (OSError, DecodeError) as exc:
        _unreadable(path, label, exc)


def _load_graph(path: Path, label: Path):
    import onnx  # about a second: only an import reads the whole graph

    try:
        return onnx.load(str(path), load_external_data=False)
    except (OSError, DecodeError, ValueError) as exc:
        _unreadable(path, label, exc)


def _unreadable(path: Path, label: Path, exc: Exception):
    refuse(label, f"has '{path.name}' that is not a readable ONNX file ({exc})",
           "download or copy the model again")


def refuse(label: Path, what: str, todo: str):
    raise ModelError(f"The model folder '{label}' {what}; {todo}.")


# -- inferring a genai_config.json ------------------------------------------------------------
def infer_genai_config(folder: Path, decoder: str | None = None) -> dict:
    """A genai_config.json for a folder with a decoder .onnx, config.json and tokenizer files.

    `decoder` is the .onnx file to use (relative to the folder) when there are several."""
    folder = Path(folder)
    todo = "it needs the config.json that came with the model"
    hf = _text_config(_read_json(folder / "config.json", folder, todo))
    decoder = decoder or _find_decoder(folder)
    path = _inside(folder, decoder, "decoder", folder, links_ok=True)
    _require_file(path, decoder, folder)
    if not any((folder / name).is_file() for name in _TOKENIZER_FILES):
        refuse(folder, "has no tokenizer.json", "copy the tokenizer files in with the model")
    graph = _load_graph(path, folder).graph
    inputs, past = _map_inputs(_shapes(graph.input), folder)
    outputs, present = _map_outputs(_shapes(graph.output), folder)
    _check_present(past, present, folder)
    sizes = _sizes(hf, past, _shapes(graph.output).get("logits"), folder)
    generation = _optional_json(folder / "generation_config.json")
    model = {
        "type": _model_type(hf, folder),
        "context_length": sizes.pop("context_length"),
        "vocab_size": sizes.pop("vocab_size"),
        "decoder": {
            "session_options": {"log_id": "onnxruntime-genai", "provider_options": []},
            "filename": decoder,
            "inputs": inputs,
            "outputs": outputs,
            **sizes,
        },
        **_token_ids(folder, hf, generation),
    }
    return {"model": model, "search": _search(generation, model["context_length"])}


def _text_config(hf: dict) -> dict:
    """Multimodal configs keep the language model's sizes under text_config."""
    text = hf.get("text_config")
    return {**hf, **text} if isinstance(text, dict) else hf


def _find_decoder(folder: Path) -> str:
    for sub in (folder, folder / "onnx"):
        found = sorted(p.name for p in sub.glob("*.onnx") if p.is_file())
        if len(found) == 1 or "model.onnx" in found:
            name = found[0] if len(found) == 1 else "model.onnx"
            return (sub / name).relative_to(folder).as_posix()
        if found:
            refuse(folder, f"has several .onnx files in '{sub.name}' ({', '.join(found)})",
                   "choose the decoder to use")
    refuse(folder, "has neither genai_config.json nor a model.onnx",
           "choose a folder with an ONNX export of a text model")


def _shapes(values) -> dict[str, list[int | None]]:
    """name -> dims (None where the dim is symbolic) for graph inputs or outputs."""
    shapes = {}
    for value in values:
        dims = value.type.tensor_type.shape.dim
        shapes[value.name] = [d.dim_value if d.HasField("dim_value") else None for d in dims]
    return shapes


def _layer_pattern(name: str) -> str | None:
    """'past_key_values.3.key' -> 'past_key_values.%d.key'; None when there is no number."""
    pattern, count = re.subn(r"\d+", "%d", name, count=1)
    return pattern if count else None


def _kv_kind(pattern: str) -> str | None:
    # The prefix 'past_key_values' holds both words, so only the rest says key or value.
    rest = pattern.replace("past_key_values", "")
    return "value" if "value" in rest else "key" if "key" in rest else None


def _group_layers(names, what: str, folder: Path) -> dict[str, tuple[str, dict]]:
    """kind ('key'/'value') -> (pattern, {layer: shape}) for the per-layer names."""
    groups: dict[str, tuple[str, dict]] = {}
    for name, shape in names.items():
        pattern = _layer_pattern(name)
        kind = _kv_kind(pattern) if pattern else None
        if kind is None or (kind in groups and groups[kind][0] != pattern):
            refuse(folder, f"has a decoder {what} '{name}' that onnxruntime-genai cannot use",
                   "export the model for onnxruntime-genai (its model builder) instead")
        layer = int(re.search(r"\d+", name).group())
        groups.setdefault(kind, (pattern, {}))[1][layer] = shape
    return groups


def _map_inputs(shapes: dict, folder: Path) -> tuple[dict, dict]:
    known = {"input_ids", "inputs_embeds", "attention_mask", "position_ids"}
    if "input_ids" not in shapes and "inputs_embeds" not in shapes:
        refuse(folder, "has a decoder without an input_ids input", "export a text decoder")
    inputs = {name: name for name in sorted(known & shapes.keys())}
    past = _group_layers({n: s for n, s in shapes.items() if n not in known}, "input", folder)
    if set(past) != {"key", "value"}:
        refuse(folder, "has a decoder without past key/value inputs",
               "export it with a KV cache (with past, use_cache=True)")
    _check_layers(past, folder)
    inputs["past_key_names"] = past["key"][0]
    inputs["past_value_names"] = past["value"][0]
    return inputs, past


def _map_outputs(shapes: dict, folder: Path) -> tuple[dict, dict]:
    if "logits" not in shapes:
        refuse(folder, "has a decoder without a logits output", "export a causal language model")
    present = _group_layers({n: s for n, s in shapes.items() if n != "logits"}, "output", folder)
    outputs = {"logits": "logits"}
    if "key" in present:
        outputs["present_key_names"] = present["key"][0]
    if "value" in present:
        outputs["present_value_names"] = present["value"][0]
    return outputs, present


def _check_layers(groups: dict, folder: Path) -> None:
    layers = [set(layer_shapes) for _, layer_shapes in groups.values()]
    count = len(layers[0])
    if any(found != set(range(count)) for found in layers):
        refuse(folder, "has a decoder whose per-layer key/value names skip layers",
               "export the model again")


def _check_present(past: dict, present: dict, folder: Path) -> None:
    if set(present) != {"key", "value"} or len(present["key"][1]) != len(past["key"][1]):
        refuse(folder, "has a decoder whose present key/value outputs do not match its past "
               "inputs", "export it with a KV cache (with past, use_cache=True)")
    _check_layers(present, folder)


def _sizes(hf: dict, past: dict, logits_shape, folder: Path) -> dict:
    """Model sizes from config.json, checked against the graph where its dims are fixed."""
    heads = _config_int(hf, folder, "num_attention_heads", "n_head", "num_heads")
    hidden = _config_int(hf, folder, "hidden_size", "n_embd", "d_model")
    kv_shape = past["key"][1][0]  # (batch, kv heads, past length, head size)
    kv_shape = kv_shape if len(kv_shape) == 4 else [None] * 4
    config_kv = _first(hf, "num_key_value_heads", "n_head_kv") or heads
    config_head = _first(hf, "head_dim") or hidden // heads
    context = _config_int(hf, folder, "max_position_embeddings", "n_positions",
                          "max_sequence_length", "seq_length")
    return {
        "num_hidden_layers": _agree("num_hidden_layers",
                                    _first(hf, "num_hidden_layers", "n_layer", "num_layers"),
                                    len(past["key"][1]), folder),
        "num_attention_heads": heads,
        "hidden_size": hidden,
        "num_key_value_heads": _agree("num_key_value_heads", config_kv, kv_shape[1], folder),
        "head_size": _agree("head_dim", config_head, kv_shape[3], folder),
        "vocab_size": _agree("vocab_size", _first(hf, "vocab_size"),
                             (logits_shape or [None])[-1], folder),
        # A context beyond the checked limit is cut to it rather than refused.
        "context_length": min(context, MAX_CONTEXT),
    }


def _first(hf: dict, *keys: str):
    return next((hf[k] for k in keys if _whole(hf.get(k)) and hf[k] > 0), None)


def _config_int(hf: dict, folder: Path, *keys: str) -> int:
    value = _first(hf, *keys)
    if value is None:
        refuse(folder, f"has a config.json without {keys[0]}",
               "use the config.json that came with the model")
    return value


def _agree(name: str, from_config, from_graph, folder: Path) -> int:
    if from_config and from_graph and from_config != from_graph:
        refuse(folder, f"has config.json saying {name} = {from_config} but a decoder with "
               f"{from_graph}", "the two files come from different models; download both again")
    value = from_config or from_graph
    if not value:
        refuse(folder, f"does not say its {name} (config.json has none and the decoder's "
               "dims are not fixed)", f"add {name} to config.json")
    return value


def _model_type(hf: dict, folder: Path) -> str:
    model_type = hf.get("model_type")
    if not isinstance(model_type, str) or not model_type:
        refuse(folder, "has a config.json without model_type",
               "use the config.json that came with the model")
    return model_type


def _optional_json(path: Path) -> dict:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def _token_ids(folder: Path, hf: dict, generation: dict) -> dict:
    pick = (lambda key: generation.get(key, hf.get(key)))
    eos = [t for t in _as_list(pick("eos_token_id")) if _whole(t)]
    # Chat models end a turn with the tokenizer's eos token, which config.json often omits.
    turn_end = _tokenizer_eos_id(folder)
    if _whole(turn_end) and turn_end not in eos:
        eos.append(turn_end)
    if not eos:
        refuse(folder, "does not say its end-of-text token (eos_token_id)",
               "add eos_token_id to config.json or generation_config.json")
    ids = {"eos_token_id": eos[0] if len(eos) == 1 else eos}
    pad = pick("pad_token_id")
    ids["pad_token_id"] = pad if _whole(pad) else eos[0]
    if _whole(pick("bos_token_id")):
        ids["bos_token_id"] = pick("bos_token_id")
    return ids


def _as_list(value) -> list:
    return value if isinstance(value, list) else [value]


def _tokenizer_eos_id(folder: Path) -> int | None:
    token = _optional_json(folder / "tokenizer_config.json").get("eos_token")
    token = token.get("content") if isinstance(token, dict) else token
    if not isinstance(token, str):
        return None
    tokenizer = _optional_json(folder / "tokenizer.json")
    for added in tokenizer.get("added_tokens") or []:
        if isinstance(added, dict) and added.get("content") == token:
            return added.get("id")
    vocab = (tokenizer.get("model") or {}).get("vocab")
    return vocab.get(token) if isinstance(vocab, dict) else None


def _search(generation: dict, context: int) -> dict:
    def number(key: str, default: float):
        value = generation.get(key)
        is_number = isinstance(value, (int, float)) and not isinstance(value, bool)
        return value if is_number else default

    return {
        "diversity_penalty": 0.0,
        "do_sample": generation.get("do_sample") is True,
        "early_stopping": True,
        "length_penalty": 1.0,
        "max_length": context,
        "min_length": 0,
        "no_repeat_ngram_size": 0,
        "num_beams": 1,
        "num_return_sequences": 1,
        # Exports from elsewhere concatenate past and new keys into a longer present, which
        # the shared-buffer mode (built for GroupQueryAttention graphs) cannot hold.
        "past_present_share_buffer": False,
        "repetition_penalty": number("repetition_penalty", 1.0),
        "temperature": number("temperature", 1.0),
        "top_k": number("top_k", 50),
        "top_p": number("top_p", 1.0),
    }


# -- importing ---------------------------------------------------------------------------------
def import_genai_folder(
    src: Path,
    models_dir: Path,
    name: str | None = None,
    progress: Progress | None = None,
    *,
    decoder: str | None = None,
) -> Path:
    """Copy a model folder into models_dir/<name>, whole or not at all; returns that folder.

    An existing model of the same name is replaced in one rename. `decoder` picks the .onnx
    file when genai_config.json has to be inferred and the folder holds several."""
    src = Path(src)
    report = progress or (lambda fraction, message: None)
    name = _model_name(name) if name else _model_name(_plain_name(src.name))
    final = Path(models_dir) / name
    if not src.is_dir():
        refuse(src, "does not exist or is not a folder", "choose the model's folder")
    if overlap(src, final):
        refuse(src, f"overlaps the place it would be installed ('{final}')",
               "import it from a folder outside the models folder")
    report(0.0, f"Checking {src}")
    config, inferred = _source_config(src, decoder)
    files = _files_to_copy(src, config)
    with atomic_folder(final) as tmp:
        copy_files(src, tmp, files, report)
        if inferred:
            (tmp / CONFIG).write_text(json.dumps(config, indent=4), encoding="utf-8")
        _check_config(config, tmp, label=src, links_ok=False)
        report(0.95, "Writing the manifest")
        write_manifest(tmp, source=_source(src, config, inferred))
    report(1.0, f"Imported {name}")
    return final


def _model_name(name: str) -> str:
    if not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9._-]{0,99}", name):
        raise ModelError(
            f"'{name}' cannot be a model name; use up to 100 letters, digits, '.', '-' or '_', "
            "starting with a letter or digit."
        )
    return name


def overlap(src: Path, final: Path) -> bool:
    src, final = src.resolve(), final.resolve()
    return src.is_relative_to(final) or final.is_relative_to(src)


def _plain_name(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]+", "-", text).strip(".-_") or "model"


def _source_config(src: Path, decoder: str | None) -> tuple[dict, bool]:
    """The config to install and whether it was inferred; checked (links allowed) first."""
    inferred = not (src / CONFIG).exists()
    config = infer_genai_config(src, decoder) if inferred else _read_genai_config(src)
    _check_config(config, src, label=src, links_ok=True)
    return config, inferred


def _files_to_copy(src: Path, config: dict) -> list[str]:
    """Relative paths to copy: all but hidden files, the old manifest and unused .onnx variants."""
    used = {name for key, name in _named_files(config) if isinstance(name, str)}
    files = []
    for parent, dirs, names in os.walk(src):
        dirs[:] = sorted(d for d in dirs if not d.startswith("."))
        for folder in dirs:
            if (Path(parent) / folder).is_symlink():
                refuse(src, f"has a link to a folder ('{folder}')",
                       "replace it with the real folder")
        for file in sorted(names):
            rel = (Path(parent) / file).relative_to(src).as_posix()
            if not file.startswith(".") and rel != MANIFEST:
                files.append(rel)
    unused = [f for f in files if f.endswith(".onnx") and f not in used]
    # model_q4.onnx and its model_q4.onnx_data go together.
    return [f for f in files if not any(f.startswith(u) for u in unused)]


def copy_files(src: Path, dest: Path, files: list[str], report: Progress) -> None:
    sizes = {rel: (src / rel).stat().st_size for rel in files}
    total, done = max(1, sum(sizes.values())), 0
    for rel in files:
        target = dest / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        report(0.05 + 0.85 * done / total, f"Copying {rel}")
        try:
            _copy_file(src / rel, target, lambda n: report(0.05 + 0.85 * (done + n) / total,
                                                           f"Copying {rel}"))
        except OSError as exc:
            refuse(src, f"could not be copied ({exc})", "check the disk space and the files")
        done += sizes[rel]


def _copy_file(source: Path, target: Path, copied_so_far: Callable[[int], None]) -> None:
    """Copies in blocks (following links) so that big weight files still show progress."""
    copied = 0
    with open(source, "rb") as reader, open(target, "wb") as writer:
        while block := reader.read(_COPY_BLOCK):
            writer.write(block)
            copied += len(block)
            copied_so_far(copied)


def _source(src: Path, config: dict, inferred: bool) -> dict:
    return {
        "kind": "onnx-genai-folder",
        "path": str(src.resolve()),
        "decoder": config["model"]["decoder"].get("filename"),
        "genai_config": "inferred" if inferred else "included",
    }
