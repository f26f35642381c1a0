"""The package's import graph, read from the source with ``ast``: no circles, no import up the floors, small rooms.

An import is any ``import embreg.x`` or ``from embreg.x import y`` anywhere in a module (at its top, inside a
function, or under ``if TYPE_CHECKING:``): a circle through a lazy import is still a circle. The floors are those of
docs/architecture.md; a module may import its own floor and the floors below.
"""

from __future__ import annotations

import ast
from collections import defaultdict
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[1] / "src" / "embreg"

FLOORS: dict[str, int] = {
    # ground: errors, configuration, the registry and the helpers every floor shares
    "": 0,
    # ids -> ids, ids -> vectors, building blocks, datasets, the run directory's files
    "sse": 1,
    "embeddings": 1,
    "nn": 1,
    "data": 1,
    "runs": 1,
    "models.output": 1,  # the model protocol: what regularisers read from a model, below the models themselves
    "models.protocols": 1,
    "models.hidden_states": 1,
    "regularizers": 2,
    "metrics": 2,
    "optim": 2,
    "models": 3,
    "batching": 4,
    "train": 4,
    "analysis": 4,
    "tasks": 5,
    "recipes": 6,
    "serving": 7,
    "tasks.*.serving": 7,  # a task's serving adapter sits on the serving floor
    "integrations": 7,
    "studies": 8,
    "cli": 9,
    "demo": 9,
    "__init__": 9,  # the package itself (embreg.load)
}
"""Floor of each room (a top-level package or module of ``embreg``; the most specific entry wins)."""

GROUND_MODULES = {
    "errors",
    "config",
    "registry",
    "progress",
    "papers",
    "_locking",
    "_native",
    "cli_arguments",
    "id_kinds",
}

MAX_MODULES_PER_FOLDER = 20
"""No folder but ``models/`` (one model per file) holds more modules directly."""


def module_names(root: Path = SRC) -> dict[str, Path]:
    """``{dotted module name: file}`` of every module under ``root`` (a package is its ``__init__``)."""
    out = {}
    for path in root.rglob("*.py"):
        parts = list(path.relative_to(root.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        out[".".join(parts)] = path
    return out


def import_graph(root: Path = SRC) -> dict[str, set[str]]:
    """``{module: the embreg modules it imports}`` (a ``from package import name`` counts as the package unless
    ``name`` is a module of it)."""
    modules = module_names(root)

    def resolve(name: str) -> str | None:
        while name and name not in modules:
            name = name.rpartition(".")[0]
        return name or None

    graph: dict[str, set[str]] = defaultdict(set)
    for name, path in modules.items():
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                targets = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                targets = [f"{node.module}.{alias.name}" for alias in node.names]
            else:
                continue
            for target in targets:
                resolved = resolve(target) if target.split(".")[0] == "embreg" else None
                if resolved and resolved != name:
                    graph[name].add(resolved)
        graph.setdefault(name, set())
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan's algorithm, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    counter = 0
    for root in sorted(graph):
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = counter
                    counter += 1
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph.get(child, ())))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(sorted(component))
    return found


def floor(module: str) -> int:
    """The floor of ``module`` (see :data:`FLOORS`)."""
    parts = module.split(".")[1:]
    if not parts:
        return FLOORS["__init__"]
    if len(parts) >= 3 and parts[0] == "tasks" and parts[2] == "serving":
        return FLOORS["tasks.*.serving"]
    if len(parts) >= 2 and ".".join(parts[:2]) in FLOORS:
        return FLOORS[".".join(parts[:2])]
    if parts[0] in GROUND_MODULES:
        return FLOORS[""]
    return FLOORS[parts[0]]


def test_the_package_has_no_import_circle() -> None:
    found = cycles(import_graph())
    assert not found, "import circles (each line: modules that import each other):\n" + "\n".join(
        " <-> ".join(c) for c in found
    )


def test_no_module_imports_a_higher_floor() -> None:
    upward = [
        f"{module} (floor {floor(module)}) imports {target} (floor {floor(target)})"
        for module, targets in sorted(import_graph().items())
        for target in sorted(targets)
        if floor(target) > floor(module)
    ]
    assert not upward, "\n".join(upward)


def test_every_room_has_a_floor() -> None:
    unplaced = []
    for module in module_names():
        try:
            floor(module)
        except KeyError:
            unplaced.append(module)
    assert not unplaced, f"rooms FLOORS does not place: {unplaced}"


def test_a_room_missing_from_the_floors_is_named() -> None:
    with pytest.raises(KeyError):
        floor("embreg.newroom.module")


def test_no_folder_but_the_models_holds_more_than_twenty_modules() -> None:
    crowded = {
        str(folder.relative_to(SRC.parent)): count
        for folder in [SRC, *(p for p in SRC.rglob("*") if p.is_dir())]
        if folder.name != "models"
        and (count := len([f for f in folder.glob("*.py") if f.name != "__init__.py"])) > MAX_MODULES_PER_FOLDER
    }
    assert not crowded, crowded


@pytest.mark.parametrize(
    ("graph", "expected"),
    [
        ({"a": {"b"}, "b": {"c"}, "c": set()}, []),
        ({"a": {"b"}, "b": {"a"}}, [["a", "b"]]),
        ({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}, [["a", "b", "c"]]),
        ({"a": {"a"}}, []),
    ],
)
def test_the_circle_finder_finds_circles_and_only_them(graph: dict[str, set[str]], expected: list[list[str]]) -> None:
    assert cycles(graph) == expected


def test_lazy_and_type_checking_imports_count(tmp_path: Path) -> None:
    package = tmp_path / "embreg"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "a.py").write_text("import embreg.b\n")
    (package / "b.py").write_text("def f():\n    from embreg.a import x\n")
    (package / "c.py").write_text("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from embreg import d\n")
    (package / "d.py").write_text("from embreg.c import y\n")
    assert cycles(import_graph(package)) == [["embreg.a", "embreg.b"], ["embreg.c", "embreg.d"]]
