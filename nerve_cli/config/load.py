"""Load nerve.yaml into a NerveConfig (minimal loader; full validation replaces it)."""

from __future__ import annotations

from pathlib import Path

import yaml
from pydantic import ValidationError

from nerve_cli.config.model import NerveConfig
from nerve_cli.errors import ConfigError


def load_config(home: Path) -> NerveConfig:
    path = Path(home) / "nerve.yaml"
    try:
        data = yaml.safe_load(path.read_text()) or {}
        return NerveConfig.model_validate(data)
    except (yaml.YAMLError, ValidationError) as exc:
        raise ConfigError(f"{path}: invalid: {exc}") from exc
