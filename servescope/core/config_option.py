"""`--config FILE`: the alert bundle's config as every build command takes it, and its errors as one line."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Annotated

import typer
from pydantic import ValidationError

from servescope.core.cli_errors import usage_error
from servescope.core.config import AlertsConfig, load_config
from servescope.core.errors import validation_message

ConfigOption = Annotated[
    Path | None,
    typer.Option(
        "--config",
        help="YAML file overriding any field of the alerts config: thresholds, windows, selector, URLs "
        "(servescope/core/config.py, each field with its description). Default: the built-in defaults.",
    ),
]


def _config_field(loc: tuple[int | str, ...]) -> str:
    # A check across fields (the durations) has no location: it is about the config as a whole.
    return ".".join(map(str, loc)) or "config"


def config_error(path: Path | None, exc: ValueError) -> str:
    """One line naming the file and the field a config could not be loaded for."""
    if isinstance(exc, ValidationError):
        return validation_message(exc, _config_field, prefix=f"{path}: ")
    return str(exc)


def config_or_exit(
    path: Path | None, adjust: Callable[[AlertsConfig], AlertsConfig] = lambda cfg: cfg
) -> AlertsConfig:
    """The config in `path` (the defaults without one), then `adjust`ed (a profile); a bad file exits 1
    naming the file and the field."""
    try:
        return adjust(load_config(path))
    except ValueError as exc:  # a pydantic ValidationError is one too
        usage_error(config_error(path, exc), 1)
