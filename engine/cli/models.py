"""The `models` commands: list, prepare, import and remove models."""

from __future__ import annotations

import json

from engine.cli.common import common_options, paths_of, progress_line, usage
from engine.safe_text import visible


def add_commands(commands) -> None:
    models = commands.add_parser("models", help="list, prepare, import and remove models")
    actions = models.add_subparsers(title="actions", metavar="ACTION")
    models.set_defaults(run=lambda args: usage(models))

    listing = actions.add_parser("list", parents=[common_options(runs_model=True)], help="the models and their status")
    listing.add_argument("--json", action="store_true", help="one JSON object per model")
    listing.add_argument("--verify", action="store_true",
                         help="check every file's SHA-256 against its manifest (reads each file)")
    listing.set_defaults(run=_models_list)

    prepare = actions.add_parser("prepare", parents=[common_options()],
                                 help="convert the built-in models for use (once); checks the "
                                      "prepared files' SHA-256s and prepares damaged ones again")
    prepare.set_defaults(run=_models_prepare)

    importing = actions.add_parser("import", parents=[common_options()],
                                   help="import a .gguf file or an ONNX model folder")
    importing.add_argument("path", metavar="PATH", help="a .gguf file, or a folder holding an ONNX model")
    importing.add_argument("--force", action="store_true",
                           help="import a GGUF model even if it seems too big for the free memory")
    importing.set_defaults(run=_models_import)

    removing = actions.add_parser("remove", parents=[common_options()],
                                  help="delete an imported model (a built-in one cannot be removed)")
    removing.add_argument("name", metavar="NAME", help="the model's name, as 'models list' shows it")
    removing.set_defaults(run=_models_remove)


def _models_list(args) -> int:
    from engine.models.catalog import size_text
    from engine.models.registry import list_models

    infos = list_models(paths_of(args), args.provider, verify=args.verify)
    if args.json:
        for info in infos:
            print(json.dumps(info.to_dict()))
        return 0
    header = ("NAME", "KIND", "SOURCE", "SIZE", "QUANTIZATION", "LICENCE", "STATUS", "PROVIDER")
    rows = [(i.name, i.kind, i.source, size_text(i.size_bytes), i.quantization or "-", i.licence,
             i.status, i.provider) for i in infos]
    print(_table([header, *rows]))
    for line in _notes(infos):
        print(visible(line))
    return 0


def _notes(infos) -> list[str]:
    """What the table has no room for: tensors that were not kept exactly, and a chat template
    replaced by its family's known format."""
    notes = []
    for info in infos:
        if info.requantized:
            notes.append(f"{info.name}: re-quantized {info.requantized}; every other tensor kept exactly")
        elif info.quantization:
            notes.append(f"{info.name}: every tensor kept exactly")
        if info.chat_template:
            notes.append(f"{info.name}: chat template: {info.chat_template}")
    return notes


def _models_prepare(args) -> int:
    from engine.errors import ModelError
    from engine.models.registry import (
        BUILTIN_EMBEDDER,
        BUILTIN_LLM,
        package_file_mismatch,
        prepare_builtin_llm,
        resolve_embedder,
    )

    paths = paths_of(args)
    damaged = _damaged(paths)
    with progress_line(f"Preparing {BUILTIN_LLM.name}") as progress:
        folder = prepare_builtin_llm(paths, progress, verify=True)
    repaired = " (its damaged files were prepared again)" if BUILTIN_LLM.name in damaged else ""
    print(visible(f"{BUILTIN_LLM.name}: ready in {folder}{repaired}"))
    files = resolve_embedder(paths)
    problem = package_file_mismatch(BUILTIN_EMBEDDER) if paths.bundled_models is None else None
    if problem:
        raise ModelError(f"{BUILTIN_EMBEDDER.name} is damaged: {problem}")
    print(visible(f"{BUILTIN_EMBEDDER.name}: ready in {files.model.parent}"))
    return 0


def _damaged(paths) -> set[str]:
    """The names of the built-in models whose files do not match their SHA-256s (no
    provider matters here: it only fills the listing's provider column)."""
    from engine.models.registry import BUILTINS, list_models

    builtin = {model.name for model in BUILTINS}
    return {i.name for i in list_models(paths, "cpu", verify=True) if i.name in builtin and i.status == "invalid"}


def _models_import(args) -> int:
    from engine.models.registry import import_model

    with progress_line(f"Importing {args.path}") as progress:
        folder = import_model(args.path, paths_of(args), progress, force=args.force)
    print(visible(f"Imported '{folder.name}' into {folder}"))
    return 0


def _models_remove(args) -> int:
    from engine.models.registry import remove_model

    remove_model(paths_of(args), args.name)
    print(visible(f"Removed '{args.name}'"))
    return 0


def _table(rows: list[tuple]) -> str:
    """Aligned columns; a model's name comes from a file name, so every cell is made visible."""
    rows = [tuple(visible(str(cell)) for cell in row) for row in rows]
    widths = [max(len(str(row[i])) for row in rows) for i in range(len(rows[0]))]
    return "\n".join(
        "  ".join(str(cell).ljust(width) for cell, width in zip(row, widths)).rstrip()
        for row in rows
    )
