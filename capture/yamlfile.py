"""Reading a YAML file a user gave, with errors that name it."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from playtester.capture.errors import UserError


def read_yaml(path: str | Path, what: str) -> Any:
    """The parsed contents of `path`; a missing file or invalid YAML is one `UserError` line
    beginning with `what` (e.g. "key map keys.yaml")."""
    try:
        return yaml.safe_load(Path(path).read_text())
    except FileNotFoundError:
        raise UserError(f"{what}: file not found") from None
    except yaml.YAMLError as e:
        raise UserError(f"{what}: not valid YAML ({str(e).splitlines()[0]})") from None
