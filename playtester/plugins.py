"""User code named on the command line: `module:function` or `path/to/file.py:function`.

Assertions (`--assert`) and rewards (`--reward`) are plain Python callables a tester writes;
this loads them, and says which option and what to fix when it cannot.
"""

from __future__ import annotations

import importlib
import importlib.util
from pathlib import Path
from types import ModuleType
from typing import Any, Callable

from playtester.errors import UserError


def load_module(where: str, option: str, spec: str | None = None) -> ModuleType:
    """Import `where`, a dotted module name or a `.py` file; errors name `option` and `spec`
    (the whole `where:function`, when there is one)."""
    label = f"{option} {(where if spec is None else spec)!r}"
    try:
        if where.endswith(".py"):
            path = Path(where)
            if not path.is_file():
                raise UserError(f"{label}: file {path} not found")
            name = f"playtester_plugin_{option.strip('-').replace('-', '_')}_{path.stem}"
            mod_spec = importlib.util.spec_from_file_location(name, path)
            module = importlib.util.module_from_spec(mod_spec)  # type: ignore[arg-type]
            mod_spec.loader.exec_module(module)  # type: ignore[union-attr]
            return module
        return importlib.import_module(where)
    except UserError:
        raise
    except Exception as e:
        raise UserError(f"{label}: cannot load {where} ({type(e).__name__}: {e})") from None


def load_function(spec: str, option: str) -> Callable[..., Any]:
    """`module:function` or `file.py:function` → the callable; `option` names the flag in errors."""
    if ":" not in spec:
        raise UserError(f"{option} {spec!r}: write it as module:function or file.py:function")
    where, _, name = spec.rpartition(":")
    module = load_module(where, option, spec)
    fn = getattr(module, name, None)
    if not callable(fn):
        raise UserError(f"{option} {spec!r}: {where} has no function {name!r}")
    return fn
