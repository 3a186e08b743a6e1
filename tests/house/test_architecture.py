"""The rooms of the package import downwards only, and no two modules import each other (directly or round a
circle): what ARCHITECTURE.md promises, checked on the source."""
from __future__ import annotations

import ast
import pathlib

import pytest
from corpus import ROOT

PACKAGE = ROOT / "lib" / "flink_runbooks"

# Each room may import the rooms of a lower rank only (its own modules aside).
RANK = {"vocabulary": 0, "parse": 1, "model": 2, "collect": 3, "evidence": 3, "detectors": 4, "catalogue": 5,
        "diagnose": 5, "render": 6, "notebook": 7, "apps": 8, "__main__": 9, "__init__": 9}


def _module(path: pathlib.Path) -> str:
    parts = path.relative_to(PACKAGE).with_suffix("").parts
    return ".".join(("flink_runbooks",) + (parts[:-1] if parts[-1] == "__init__" else parts))


def _room(module: str) -> str:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else "__init__"


def _imports(path: pathlib.Path) -> set[str]:
    """The package's modules ``path`` imports, anywhere in it except under ``if TYPE_CHECKING:``."""
    tree = ast.parse(path.read_text())
    hidden = {id(n) for node in ast.walk(tree) if isinstance(node, ast.If)
              and getattr(node.test, "id", "") == "TYPE_CHECKING" for n in ast.walk(node)}
    found = set()
    for node in ast.walk(tree):
        if id(node) in hidden or not isinstance(node, ast.ImportFrom) or not node.module:
            continue
        if node.module.startswith("flink_runbooks"):
            if node.module != "flink_runbooks":  # "from flink_runbooks import notebook" imports the module alone
                found.add(node.module)
            # "from flink_runbooks.parse import layouts" imports the module flink_runbooks.parse.layouts
            found.update(f"{node.module}.{a.name}" for a in node.names if (PACKAGE.parent / (
                f"{node.module}.{a.name}".replace(".", "/") + ".py")).exists())
    return found


GRAPH = {_module(p): _imports(p) for p in PACKAGE.rglob("*.py")}


def test_rooms_import_downwards_only():
    upward = sorted(f"{source} imports {target}" for source, targets in GRAPH.items() for target in targets
                    if _room(source) != _room(target) and RANK[_room(target)] >= RANK[_room(source)])
    assert upward == []


def _cycle_from(start: str) -> list[str] | None:
    path, seen = [start], set()

    def visit(module: str) -> list[str] | None:
        for target in sorted(GRAPH.get(module, ())):
            if target == start:
                return path + [start]
            if target in seen or target not in GRAPH:
                continue
            seen.add(target)
            path.append(target)
            found = visit(target)
            if found:
                return found
            path.pop()
        return None

    return visit(start)


@pytest.mark.parametrize("module", sorted(m for m in GRAPH if _room(m) in ("vocabulary", "parse", "model", "collect",
                                                                          "evidence", "detectors", "render")))
def test_no_import_circle(module):
    cycle = _cycle_from(module)
    assert cycle is None, " -> ".join(cycle)
