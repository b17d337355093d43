"""The import graph of our own modules: acyclic at module level, and ARCHITECTURE.md's layer rules.

Every `tomgym` module is imported (a module whose optional third-party dependency is missing is
skipped for the import, not for the graph), then each file's imports are read with `ast`:
- module-level imports (what runs on `import`) must form no cycle;
- any import, lazy ones inside functions included: `envs` never imports `agents`, `training`
  or `scripts`; `rewards` never imports `agents` or `training`; `agents` never imports
  `training`; nothing outside `scripts` imports `scripts`; only the TRL adapter imports `trl`;
  the runner layer of `training` imports neither job package, and `training.eval` never
  imports `training.rl`.
"""

from __future__ import annotations

import ast
import importlib
import tomllib
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
TRL_ADAPTER = "tomgym.training.rl.trl_adapter"
FORBIDDEN = {
    "tomgym.envs": ("tomgym.agents", "tomgym.training", "tomgym.scripts"),
    "tomgym.rewards": ("tomgym.agents", "tomgym.training", "tomgym.scripts"),
    "tomgym.agents": ("tomgym.training", "tomgym.scripts"),
    "tomgym.training": ("tomgym.scripts",),
    # The runner layer is shared by both jobs; evaluation never depends on training's RL side.
    "tomgym.training.runner": ("tomgym.training.eval", "tomgym.training.rl"),
    "tomgym.training.routing": ("tomgym.training.eval", "tomgym.training.rl"),
    "tomgym.training.run_folder": ("tomgym.training.eval", "tomgym.training.rl"),
    "tomgym.training.eval": ("tomgym.training.rl",),
}


def _modules() -> dict[str, Path]:
    """Every module name of the installed namespace -> its file (from the build's package-dir)."""
    config = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))
    found: dict[str, Path] = {}
    for package, folder in config["tool"]["setuptools"]["package-dir"].items():
        root = REPO / folder
        for path in sorted(root.rglob("*.py")):
            parts = path.relative_to(root).with_suffix("").parts
            if parts[-1] == "__init__":
                parts = parts[:-1]
            found[".".join((package, *parts))] = path
    return found


MODULES = _modules()


def _within(name: str, package: str) -> bool:
    return name == package or name.startswith(package + ".")


def _imports(module: str, path: Path) -> list[tuple[str, bool]]:
    """(imported module, at module level?) for every import in the file; `from X import y`
    names the submodule X.y when y is one."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    is_package = path.name == "__init__.py"
    top_level = {id(node) for node in _module_level(tree.body)}
    out: list[tuple[str, bool]] = []
    for node in ast.walk(tree):
        names: list[str] = []
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = module.split(".") if is_package else module.split(".")[:-1]
                anchor = anchor[: len(anchor) - node.level + 1]
                base = ".".join([*anchor, *([base] if base else [])])
            for alias in node.names:
                sub = f"{base}.{alias.name}"
                names.append(sub if sub in MODULES else base)
        out.extend((name, id(node) in top_level) for name in names)
    return out


def _module_level(body: list[ast.stmt]) -> list[ast.stmt]:
    """Statements that run on import: the body, and the bodies of its if/try blocks (not
    `if TYPE_CHECKING:`, which never runs)."""
    nodes: list[ast.stmt] = []
    for node in body:
        nodes.append(node)
        if isinstance(node, ast.If) and ast.unparse(node.test).endswith("TYPE_CHECKING"):
            nodes += _module_level(node.orelse)
        elif isinstance(node, ast.If):
            nodes += _module_level(node.body) + _module_level(node.orelse)
        elif isinstance(node, ast.Try):
            nodes += _module_level(node.body) + _module_level(node.orelse)
            for handler in node.handlers:
                nodes += _module_level(handler.body)
    return nodes


@pytest.mark.parametrize("module", sorted(MODULES))
def test_every_module_imports(module: str) -> None:
    try:
        importlib.import_module(module)
    except ModuleNotFoundError as exc:
        if exc.name and not exc.name.startswith("tomgym"):
            pytest.skip(f"optional dependency {exc.name} is not installed")
        raise


def test_module_level_imports_have_no_cycle() -> None:
    graph = {
        module: sorted({name for name, top in _imports(module, path) if top and name in MODULES})
        for module, path in MODULES.items()
    }
    state: dict[str, int] = {}  # 1 = on the current path, 2 = done

    def visit(module: str, path: list[str]) -> None:
        state[module] = 1
        for target in graph[module]:
            if state.get(target) == 1:
                cycle = path[path.index(target) :] + [target]
                pytest.fail("import cycle: " + " -> ".join(cycle))
            if target not in state:
                visit(target, [*path, target])
        state[module] = 2

    for module in sorted(graph):
        if module not in state:
            visit(module, [module])


def test_layer_rules_and_the_only_trl_importer() -> None:
    broken = []
    for module, path in MODULES.items():
        for name, _top in _imports(module, path):
            for layer, banned in FORBIDDEN.items():
                if _within(module, layer) and any(_within(name, b) for b in banned):
                    broken.append(f"{module} imports {name}")
            if _within(name, "trl") and module != TRL_ADAPTER:
                broken.append(f"{module} imports {name} (only {TRL_ADAPTER} may)")
    assert not broken, "\n".join(broken)


def test_the_graph_reader_sees_known_edges() -> None:
    # Guards the test itself: a reader that found no imports would pass everything above.
    edges = dict.fromkeys(
        n for n, top in _imports("tomgym.training.runner", MODULES["tomgym.training.runner"]) if top
    )
    assert "tomgym.training.routing" in edges and "tomgym.rewards.episode" in edges
    trl = [n for n, _ in _imports(TRL_ADAPTER, MODULES[TRL_ADAPTER]) if _within(n, "trl")]
    assert trl
