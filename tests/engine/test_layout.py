"""The layout's rules, read from the source: the engine never reaches into the GUI, no two
modules import each other (even inside a function), and every package says what lives in it."""

from __future__ import annotations

import ast
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
PACKAGES = ("engine", "desktop_app")


def _modules() -> dict[str, Path]:
    found = {}
    for package in PACKAGES:
        for path in (REPO / package).rglob("*.py"):
            parts = list(path.relative_to(REPO).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts.pop()
            found[".".join(parts)] = path
    return found


MODULES = _modules()


def _known(name: str) -> str:
    """The longest prefix of a dotted name that is one of our modules, or ''."""
    while name and name not in MODULES:
        name = name.rpartition(".")[0]
    return name


def _imports(path: Path) -> set[str]:
    """Every module of ours that a file imports, at the top or inside a function."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found.update(_known(alias.name) for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            for alias in node.names:
                full = f"{node.module}.{alias.name}"
                found.add(full if full in MODULES else _known(node.module))
    found.discard("")
    return found


def _graph() -> dict[str, set[str]]:
    graph = {}
    for name, path in MODULES.items():
        # a module's own packages run before it anyway: importing them is no circle
        graph[name] = {dep for dep in _imports(path) if dep != name and not name.startswith(dep + ".")}
    return graph


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected groups of more than one module (Tarjan, iteratively)."""
    order, low, on_stack, stack, groups = {}, {}, set(), [], []
    for root in graph:
        if root in order:
            continue
        work = [(root, iter(sorted(graph[root])))]
        order[root] = low[root] = len(order)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in order:
                    order[child] = low[child] = len(order)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph.get(child, ())))))
                elif child in on_stack:
                    low[node] = min(low[node], order[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == order[node]:
                group = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    group.append(member)
                    if member == node:
                        break
                if len(group) > 1:
                    groups.append(sorted(group))
    return groups


def test_the_engine_never_imports_the_gui():
    offenders = {name: sorted(dep for dep in _imports(path) if dep.startswith("desktop_app"))
                 for name, path in MODULES.items() if name.startswith("engine")}
    assert {name: deps for name, deps in offenders.items() if deps} == {}


def test_no_two_modules_import_each_other():
    assert _cycles(_graph()) == []


def test_the_cycle_finder_finds_a_circle():
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]


def test_every_package_says_what_lives_in_it():
    packages = [path for path in MODULES.values() if path.name == "__init__.py"]
    assert len(packages) >= 15
    missing = [str(path.relative_to(REPO)) for path in packages
               if not ast.get_docstring(ast.parse(path.read_text(encoding="utf-8")))]
    assert missing == []


def test_the_engine_top_level_holds_only_the_shared_vocabulary():
    top = sorted(p.stem for p in (REPO / "engine").glob("*.py") if p.stem not in ("__init__", "__main__"))
    assert top == ["atomic_file", "child_process", "config", "conversations", "errors", "hashing", "paths",
                   "safe_text", "types"]


# Highest first. A package may import its own modules and those of any lower layer, never one of
# its own layer or above. "shared" is the engine's top-level modules (the shared vocabulary:
# types, errors, paths, hashing, config, ...) and the engine package itself.
LAYERS = (
    ("__main__",),
    ("cli",),
    ("server", "evaluation"),
    ("answer", "fleet"),
    ("store",),
    ("ingest", "llm", "kiosk"),
    ("models",),  # the GGUF importer and the model registry: below the LLM that runs them
    ("encoders",),
    ("shared",),
)


def _unit(module: str) -> str:
    """The layer unit of an engine module: its subpackage, or "shared" for the rest."""
    parts = module.split(".")
    if len(parts) > 2 or (len(parts) == 2 and (REPO / "engine" / parts[1]).is_dir()):
        return parts[1]
    return "__main__" if parts[-1] == "__main__" else "shared"


# The one import upwards left, known: Settings.assistant_settings() builds the answer's settings
# (imported inside the method). Moving it to engine.answer would change the API its callers and
# tests use.
KNOWN_UPWARDS = {("engine.config", "engine.answer.assistant")}


def _layer_breaks(graph: dict[str, set[str]]) -> list[str]:
    rank = {unit: depth for depth, layer in enumerate(LAYERS) for unit in layer}
    breaks = []
    for name, deps in sorted(graph.items()):
        if not name.startswith("engine"):
            continue
        for dep in sorted(d for d in deps if d.startswith("engine")):
            here, there = _unit(name), _unit(dep)
            if here != there and rank[there] <= rank[here] and (name, dep) not in KNOWN_UPWARDS:
                breaks.append(f"{name} -> {dep} ({here} may not import {there})")
    return breaks


def test_engine_packages_import_only_lower_layers():
    assert {_unit(name) for name in MODULES if name.startswith("engine")} == set(sum(LAYERS, ()))
    assert _layer_breaks(_graph()) == []


def test_the_layer_check_finds_an_import_upwards():
    assert _layer_breaks({"engine.server.state": {"engine.cli.common"},
                          "engine.models.registry": {"engine.llm.process"},
                          "engine.store.indexer": {"engine.models.registry"}}) == [
        "engine.models.registry -> engine.llm.process (models may not import llm)",
        "engine.server.state -> engine.cli.common (server may not import cli)",
    ]


def test_no_public_class_is_defined_twice():
    """One owner per concern: a shared type (CancelFlag, say) lives once, in the lowest layer
    that needs it, rather than once per package."""
    owners: dict[str, list[str]] = {}
    for name, path in MODULES.items():
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ClassDef) and not node.name.startswith("_") and name.startswith("engine"):
                owners.setdefault(node.name, []).append(name)
    assert {cls: names for cls, names in owners.items() if len(names) > 1} == {}
