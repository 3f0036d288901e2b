"""servescope's own errors share one base: a message for people and a snake_case `reason` for programs,
while each keeps the built-in base callers already catch (ValueError, LookupError, OSError...)."""

from __future__ import annotations

import ast
import importlib
import inspect
import pkgutil
import re
from pathlib import Path

import pytest
import typer
from typer.testing import CliRunner

import servescope
from servescope.core.cli_errors import complain, usage_error
from servescope.core.errors import ServescopeError

PACKAGE = Path(servescope.__file__).parent
# Left out: the simulator and the demo (test tools, not the product), the command's entry point (it runs
# the CLI), generated protobuf modules, and the Locust file (importing Locust patches the interpreter
# with gevent: its errors are checked from its source instead).
LEFT_OUT = ("servescope.sim", "servescope.demo")
NOT_IMPORTED = ("servescope.__main__", "servescope.kit.load.locustfile")


def _modules() -> list[str]:
    names = [m.name for m in pkgutil.walk_packages([str(PACKAGE)], "servescope.")]
    return [
        n
        for n in names
        if not n.startswith(LEFT_OUT) and n not in NOT_IMPORTED and not n.endswith(("_pb2", "_pb2_grpc"))
    ]


# The built-in base each kept, so `except ValueError` and the like still catch them.
KEPT_BASES = {
    "RunbookError": ValueError,
    "UnknownAlertError": LookupError,
    "TokenFileError": ValueError,
    "TemplateError": ValueError,
    "BindingError": ValueError,
    "ParamError": ValueError,
    "UnknownStepError": LookupError,
    "QueueFullError": RuntimeError,
    "PoolBusyError": RuntimeError,
    "BodyTimeoutError": ValueError,
    "BodyTooLargeError": ValueError,
    "AuditError": OSError,
    "StoreError": RuntimeError,
    "KubeConfigError": RuntimeError,
    "DurationError": ValueError,
    "ChildFailedError": RuntimeError,
    "SettingsError": ValueError,
    "ExpositionError": ValueError,
    "LabelsRefusedError": ValueError,
    "CountersError": ValueError,
    "SizingError": ValueError,
    "PromQLError": ValueError,
    "IncompatibleRunsError": ValueError,
    "LaunchError": RuntimeError,
}
SNAKE = re.compile(r"[a-z][a-z0-9]*(?:_[a-z0-9]+)*")


def _errors() -> dict[str, type[ServescopeError]]:
    for name in _modules():
        importlib.import_module(name)
    found: dict[str, type[ServescopeError]] = {}
    todo = [ServescopeError]
    while todo:
        for sub in todo.pop().__subclasses__():
            if sub.__module__.startswith("servescope."):
                found[sub.__name__] = sub
            todo.append(sub)
    return found


def test_every_error_of_the_package_has_a_snake_case_reason_and_keeps_its_old_base() -> None:
    errors = _errors()
    assert len(errors) >= 33, sorted(errors)
    for name, cls in errors.items():
        assert SNAKE.fullmatch(cls.reason), (name, cls.reason)
    for name, base in KEPT_BASES.items():
        assert issubclass(errors[name], base), name
    # Each names what went wrong in its own word, not the base's.
    plain = sorted(n for n, c in errors.items() if c.reason == ServescopeError.reason)
    assert plain == ["ApiError", "FetchError", "LabelsRefusedError", "NvmlError", "RefusedError"], plain


def test_every_exception_class_of_the_package_derives_from_the_one_base() -> None:
    """Every exception class the package defines (outside the simulator and the demo), private ones
    included, is a ServescopeError: one `except`, one reason label, wherever it is raised."""
    outside = []
    for name in _modules():
        for attr, value in vars(importlib.import_module(name)).items():
            defined_here = inspect.isclass(value) and value.__module__ == name
            if defined_here and issubclass(value, BaseException) and not issubclass(value, ServescopeError):
                outside.append(f"{name}.{attr}")
    assert not outside, outside
    assert len(_modules()) > 250  # the walk found the package, not an empty folder


def test_the_locust_file_s_errors_derive_from_the_one_base() -> None:
    tree = ast.parse((PACKAGE / "kit" / "load" / "locustfile.py").read_text())
    classes = [node for node in ast.walk(tree) if isinstance(node, ast.ClassDef)]
    errors = [node for node in classes if node.name.endswith("Error")]
    assert errors
    for node in errors:
        assert [ast.unparse(base) for base in node.bases] == ["ServescopeError"], node.name


def test_an_instance_may_carry_its_own_reason() -> None:
    from servescope.exporter.nvml.errors import NvmlError
    from servescope.runbooks.actions.trust import RefusedTargetError
    from servescope.runbooks.webhook import RefusedError

    assert ServescopeError("boom").reason == "error"
    assert ServescopeError("boom", reason="disk_full").reason == "disk_full"
    assert str(ServescopeError("boom", reason="disk_full")) == "boom"
    refused = RefusedTargetError("not_trusted", "instance 10.0.0.1 is not trusted")
    assert (refused.reason, refused.refusal, str(refused)) == (
        "not_trusted",
        "not_trusted",
        "instance 10.0.0.1 is not trusted",
    )
    assert RefusedError(401, "unauthorized", "no token").reason == "unauthorized"
    assert NvmlError(3, "nvmlDeviceGetPowerUsage").reason == "not_supported"


@pytest.mark.parametrize("code", [1, 2])
def test_a_command_s_error_is_one_line_on_stderr_and_its_status(code: int) -> None:
    app = typer.Typer()

    @app.command()
    def broken() -> None:
        complain("3 rules", kind="lint")
        usage_error("--config x.yaml: no such file", code)

    result = CliRunner().invoke(app, [])
    assert result.exit_code == code
    assert result.stdout == ""
    assert result.stderr == "servescope: lint: 3 rules\nservescope: error: --config x.yaml: no such file\n"
