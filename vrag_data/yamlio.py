"""Reading a YAML config file: one place for the checks and the one-line errors every config loader gives."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from vrag_data.errors import ConfigError


def read_yaml_mapping(path: str | Path, what: str = "config", example: str = "configs/") -> dict[str, Any]:
    """The YAML mapping in `path`; `ConfigError` (one line naming the file and the fix) when the file is missing,
    is not YAML, or does not hold a mapping at the top level."""
    p = Path(path)
    if not p.is_file():
        raise ConfigError(f"{p}: {what} file not found; pass an existing YAML file (see {example})")
    try:
        data = yaml.safe_load(p.read_text()) or {}
    except yaml.YAMLError as err:
        raise ConfigError(f"{p}: not valid YAML: {str(err).splitlines()[0]}") from None
    if not isinstance(data, dict):
        raise ConfigError(f"{p}: a {what} must be a YAML mapping at the top level")
    return data
