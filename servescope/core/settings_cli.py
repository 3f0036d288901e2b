"""The one bridge from pydantic settings models to typer options.

A command declares which models it takes; every field becomes one option whose flag (`json_schema_extra`
key `cli`), help text, environment variables and default come from the field. The command line, the
environment and the generated configuration reference therefore cannot drift apart, and a bad value is
reported once, the same way, naming the flag.
"""

from __future__ import annotations

import inspect
import types
import typing
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Annotated, Any, TypeVar

import typer
from pydantic import AliasChoices, BaseModel, ConfigDict, Field, ValidationError
from pydantic.fields import FieldInfo
from pydantic_settings import BaseSettings, SettingsConfigDict

# Re-exported: the commands that build on settings_command import it from here.
from servescope.core.cli_errors import usage_error as usage_error  # noqa: PLC0414
from servescope.core.errors import ServescopeError, validation_message

ENV_PREFIX = "SERVESCOPE_"
Model = TypeVar("Model", bound=BaseModel)
Value = TypeVar("Value")


def area_config(area: str) -> SettingsConfigDict:
    """Environment variables of an area are SERVESCOPE_<AREA>_<FIELD>."""
    # populate_by_name: the CLI passes fields by name even where an env alias exists (NODE_NAME).
    return SettingsConfigDict(
        env_prefix=f"{ENV_PREFIX}{area.upper()}_", extra="ignore", populate_by_name=True
    )


class FixedOptions(BaseModel):
    """Options a command was given, as given: an unknown one is refused, and none changes once checked."""

    model_config = ConfigDict(extra="forbid", frozen=True)


def setting(default: Value, cli: str, description: str, **constraints: Any) -> Value:
    """A settings field: its default, its command-line flag, its help text and pydantic's constraints."""
    field: Value = Field(default, json_schema_extra={"cli": cli}, description=description, **constraints)
    return field


def repeated(default: Callable[[], Value], cli: str, description: str) -> Value:
    """A repeatable option's setting (KEY=VALUE pairs, names): its default is built afresh per model."""
    field: Value = Field(default_factory=default, json_schema_extra={"cli": cli}, description=description)
    return field


def cli_flag(model: type[BaseModel], field: str) -> str:
    """The command-line flag that sets `field`, as declared on the field (`--x` or `--x/--no-x`)."""
    extra = model.model_fields[field].json_schema_extra
    if not isinstance(extra, dict) or not isinstance(extra.get("cli"), str):
        raise KeyError(f"{model.__name__}.{field} declares no command-line flag")
    return str(extra["cli"])


def env_names(model: type[BaseModel], field: str) -> list[str]:
    """The environment variables that set `field`, the preferred one first (none for a plain model)."""
    if not issubclass(model, BaseSettings):
        return []
    alias = model.model_fields[field].validation_alias
    if isinstance(alias, AliasChoices):
        return [str(choice) for choice in alias.choices]
    return [f"{model.model_config.get('env_prefix', '')}{field}".upper()]


def field_default(info: FieldInfo) -> Any:
    """The default a user gets, also for `default_factory` fields (never PydanticUndefined)."""
    return info.get_default(call_default_factory=True)


def _option_default(info: FieldInfo) -> Any:
    """The default as the option shows and parses it: a mapping becomes its KEY=VALUE items."""
    default = field_default(info)
    if isinstance(default, dict):
        return [f"{key}={value}" for key, value in default.items()]
    return default


def _parameter_name(flag: str) -> str:
    return flag.split("/", maxsplit=1)[0].lstrip("-").replace("-", "_")


def _option_type(annotation: Any) -> Any:
    """The type typer parses: Literal choices and other constrained types reach pydantic as text."""
    origin = typing.get_origin(annotation)
    if origin is Annotated:
        return _option_type(typing.get_args(annotation)[0])
    if origin is typing.Literal:
        return str
    if origin in (typing.Union, types.UnionType):
        members = [arg for arg in typing.get_args(annotation) if arg is not type(None)]
        return _option_type(members[0]) if len(members) == 1 else str
    if origin in (list, dict):
        return list[str]  # a dict field takes one KEY=VALUE per repetition; its model parses them
    return annotation


@dataclass(frozen=True)
class Option:
    """One option of a command: which model and field it sets, and its Python parameter name."""

    model: type[BaseModel]
    field: str
    flag: str
    parameter: str


def options_of(models: Sequence[type[BaseModel]]) -> list[Option]:
    """Every field of every model that declares a flag, in declaration order."""
    found: list[Option] = []
    for model in models:
        for field in model.model_fields:
            try:
                flag = cli_flag(model, field)
            except KeyError:
                continue
            found.append(Option(model, field, flag, _parameter_name(flag)))
    names = [option.parameter for option in found]
    duplicated = {name for name in names if names.count(name) > 1}
    if duplicated:
        raise ValueError(f"two settings share the option name(s) {sorted(duplicated)}")
    return found


def _parameter(option: Option, panel: str | None) -> inspect.Parameter:
    info = option.model.model_fields[option.field]
    envvars = env_names(option.model, option.field)
    typer_option = typer.Option(
        option.flag,  # typer reads "--x/--no-x" as a boolean pair
        help=info.description,
        envvar=envvars or None,
        show_envvar=bool(envvars),
        rich_help_panel=panel,
    )
    return inspect.Parameter(
        option.parameter,
        inspect.Parameter.KEYWORD_ONLY,
        default=_option_default(info),
        annotation=Annotated[_option_type(info.annotation), typer_option],
    )


class SettingsError(ServescopeError, ValueError):
    """A value of the command line or environment that a settings model refused; names the flag."""

    reason = "settings_invalid"


def build_models(options: Sequence[Option], values: Mapping[str, Any]) -> dict[type[BaseModel], BaseModel]:
    """One instance per model from the parsed option values; raises SettingsError naming the flag."""
    by_model: dict[type[BaseModel], dict[str, Any]] = {}
    for option in options:
        by_model.setdefault(option.model, {})[option.field] = values[option.parameter]
    built: dict[type[BaseModel], BaseModel] = {}
    for model, fields in by_model.items():
        try:
            built[model] = model(**fields)
        except ValidationError as exc:

            def flag(loc: tuple[int | str, ...], model: type[BaseModel] = model) -> str:
                field = str(loc[0]) if loc else ""
                return cli_flag(model, field).split("/")[0] if field in model.model_fields else field

            raise SettingsError(validation_message(exc, flag)) from None
    return built


Runner = Callable[[dict[type[BaseModel], BaseModel], dict[str, Any]], None]


def settings_command(
    models: Sequence[type[BaseModel]],
    run: Runner,
    *,
    doc: str,
    extra: Sequence[inspect.Parameter] = (),
    panels: Mapping[type[BaseModel], str] | None = None,
    error_code: int = 2,
) -> Callable[..., None]:
    """A typer command whose options are the models' fields (plus `extra` parameters of its own).

    `run` gets one instance per model and the values of the extra parameters. A value a model refuses
    is printed as `servescope: error: invalid value for --flag: reason` and exits with `error_code`.
    """
    options = options_of(models)
    extra_names = [parameter.name for parameter in extra]

    def command(**values: Any) -> None:
        try:
            built = build_models(options, values)
        except SettingsError as exc:
            usage_error(str(exc), error_code)
        run(built, {name: values[name] for name in extra_names})

    parameters = [*extra, *(_parameter(o, (panels or {}).get(o.model)) for o in options)]
    command.__signature__ = inspect.Signature(parameters)  # type: ignore[attr-defined]
    command.__doc__ = inspect.cleandoc(doc)
    return command
