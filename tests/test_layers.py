"""The layering, checked: import-linter's contracts (`.importlinter`), run as a user types it,
`lint-imports` in the checkout's root. import-linter finds `playtester` on the path and walks its
folder; the five areas sit at the top of the repository and reach that folder through the links
`playtester/capture -> ../capture` and so on, which must follow pyproject's `package-dir`. And no
two files of the package import each other, directly or round a circle (grimp's import graph)."""

from __future__ import annotations

import configparser
import shutil
import subprocess
from pathlib import Path

import pytest

tomllib = pytest.importorskip("tomllib")  # Python 3.11+

ROOT = Path(__file__).resolve().parents[1]
AREAS = ("capture", "datasets", "perception", "imitation", "exploration")
SHARED = ("errors", "files", "plugins", "cores", "workers")
"""Modules every layer may import (they import nothing of the project: the third contract)."""


def test_each_area_is_linked_into_the_package_where_it_installs():
    package_dirs = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["package-dir"]
    mapped = {package.split(".")[1]: source for package, source in package_dirs.items()
              if package.count(".") == 1 and source != package.replace(".", "/")}
    assert set(mapped) == set(AREAS)
    for area, source in mapped.items():
        link = ROOT / "playtester" / area
        assert link.is_symlink(), f"playtester/{area} should be a link to ../{source}"
        assert link.resolve() == (ROOT / source).resolve()


def test_the_import_contracts_hold():
    if shutil.which("lint-imports") is None:
        pytest.skip("import-linter is not installed (it comes with the dev extra)")
    done = subprocess.run(["lint-imports", "--no-cache"], cwd=ROOT, capture_output=True, text=True)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-2000:]
    assert "4 kept, 0 broken" in done.stdout


def test_the_app_contract_names_every_app_module():
    """A new module of the app (anything in playtester/ besides the five areas and the shared
    pieces) must be listed as forbidden to the areas, or the contract would silently stop
    covering it."""
    config = configparser.ConfigParser()
    config.read(ROOT / ".importlinter")
    forbidden = set(config["importlinter:contract:app"]["forbidden_modules"].split())
    package = ROOT / "playtester"
    app = {f"playtester.{p.stem}" for p in package.iterdir() if p.suffix == ".py" and p.stem not in ("__init__", "__main__", *SHARED)}
    app |= {f"playtester.{p.name}" for p in package.iterdir() if p.is_dir() and (p / "__init__.py").exists() and p.name not in AREAS}
    assert app and app == forbidden, f"missing: {sorted(app - forbidden)}; stale: {sorted(forbidden - app)}"


def test_the_rooms_contract_names_every_room_of_the_app():
    """Every sub-package of the app has its place in the rooms' layers, or a new room would
    import anything unchecked."""
    config = configparser.ConfigParser()
    config.read(ROOT / ".importlinter")
    layers = config["importlinter:contract:rooms"]["layers"].replace("|", " ").replace(":", " ").split()
    package = ROOT / "playtester"
    rooms = {f"playtester.{p.name}" for p in package.iterdir() if p.is_dir() and (p / "__init__.py").exists() and p.name not in AREAS}
    assert rooms and set(layers) == rooms, f"missing: {sorted(rooms - set(layers))}; stale: {sorted(set(layers) - rooms)}"


def test_no_import_cycle_between_files_of_the_package():
    """Every strongly connected part of the import graph (modules as grimp finds them from the
    package's folder, imports inside functions and under TYPE_CHECKING included) is one module."""
    grimp = pytest.importorskip("grimp")  # with import-linter (the dev extra)
    nx = pytest.importorskip("networkx")
    graph = grimp.build_graph("playtester", cache_dir=None)
    imports = nx.DiGraph()
    for module in graph.modules:
        imports.add_node(module)
        imports.add_edges_from((module, imported) for imported in graph.find_modules_directly_imported_by(module))
    assert {m.split(".")[1] for m in graph.modules if "." in m} >= set(AREAS), "grimp did not walk the areas (the links into playtester/)"
    cycles = [sorted(part) for part in nx.strongly_connected_components(imports) if len(part) > 1]
    said = []
    for part in cycles:
        edges = [f"{a} -> {b} (line {graph.get_import_details(importer=a, imported=b)[0]['line_number']})"
                 for a in part for b in part if imports.has_edge(a, b)]
        said.append("; ".join(edges))
    assert not cycles, "import cycles: " + " | ".join(said)


GAMES_NO_POLICY_PLAYS = {
    "capture/envs.py": "the factory itself",
    "capture/games.py": "the probe: spaces, key map and layout, then closed",
    "capture/window/doom_spectator.py": "the game a person plays in a window (record, the window tests)",
    "capture/window/sources.py": "a recording's frame source",
    "imitation/demos.py": "the scripted experts' demos, played from the engine's ground truth",
    "bugs/findings.py": "a finding's saved actions replayed",
    "commands/scenario.py": "`shots`: screenshots with the engine's labels",
    "commands/window.py": "`replay`: an episode's saved actions replayed",
}
"""The modules that start a game with `make_game` directly, each with why no policy plays it there."""


def test_every_env_a_policy_plays_is_built_by_make_env():
    """docs/ARCHITECTURE.md: every env a policy plays is built by one factory, `capture/envs.py
    make_env` (the explorers, the population, a load test's baseline, `eval policy`, `plan run`);
    `make_game` is called directly only where no policy plays (`GAMES_NO_POLICY_PLAYS`)."""
    import ast

    files = {p.relative_to(ROOT / "playtester").as_posix(): p for p in (ROOT / "playtester").rglob("*.py")}
    files |= {p.relative_to(ROOT).as_posix(): p for area in AREAS for p in (ROOT / area).rglob("*.py")}  # the linked areas
    callers = set()
    for name, path in sorted(files.items()):
        if any(isinstance(n, ast.Call) and getattr(n.func, "id", getattr(n.func, "attr", None)) == "make_game"
               for n in ast.walk(ast.parse(path.read_text()))):
            callers.add(name)
    assert callers == set(GAMES_NO_POLICY_PLAYS), sorted(callers)
