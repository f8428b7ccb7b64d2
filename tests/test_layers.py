"""The layering, checked: import-linter's contracts (`.importlinter`) over the package laid out
as an install lays it out. The editable install maps `playtester.capture` onto the top-level
`capture/` folder, which import-linter's module finder cannot follow, so the test copies each
package's modules to where pyproject's `package-dir` installs them."""

from __future__ import annotations

import configparser
import os
import shutil
import subprocess
from pathlib import Path

import pytest

tomllib = pytest.importorskip("tomllib")  # Python 3.11+

ROOT = Path(__file__).resolve().parents[1]
AREAS = ("capture", "datasets", "perception", "imitation", "exploration")
SHARED = ("errors", "files", "plugins")
"""Modules every layer may import (they import nothing of the project: the third contract)."""


@pytest.fixture(scope="module")
def installed(tmp_path_factory) -> Path:
    """A folder holding `playtester/` with every sub-package at its installed place."""
    if shutil.which("lint-imports") is None:
        pytest.skip("import-linter is not installed (it comes with the dev extra)")
    target = tmp_path_factory.mktemp("site")
    package_dirs = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["package-dir"]
    for package, source in package_dirs.items():
        folder = target.joinpath(*package.split("."))
        folder.mkdir(parents=True, exist_ok=True)
        for module in (ROOT / source).glob("*.py"):
            shutil.copy(module, folder / module.name)
    return target


def test_the_import_contracts_hold(installed):
    done = subprocess.run(["lint-imports", "--config", str(ROOT / ".importlinter")], cwd=installed, capture_output=True,
                          text=True, env={**os.environ, "PYTHONPATH": str(installed)})
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-2000:]
    assert "3 kept, 0 broken" in done.stdout


def test_the_app_contract_names_every_app_module(installed):
    """A new module of the app (anything in playtester/ besides the five areas and the shared
    pieces) must be listed as forbidden to the areas, or the contract would silently stop
    covering it."""
    config = configparser.ConfigParser()
    config.read(ROOT / ".importlinter")
    forbidden = set(config["importlinter:contract:app"]["forbidden_modules"].split())
    package = installed / "playtester"
    app = {f"playtester.{p.stem}" for p in package.iterdir() if p.suffix == ".py" and p.stem not in ("__init__", "__main__", *SHARED)}
    app |= {f"playtester.{p.name}" for p in package.iterdir() if p.is_dir() and (p / "__init__.py").exists() and p.name not in AREAS}
    assert app and app == forbidden, f"missing: {sorted(app - forbidden)}; stale: {sorted(forbidden - app)}"
