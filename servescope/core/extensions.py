"""What another installed distribution adds to servescope, found through its entry points.

The simulator is its own distribution (`servescope-sim`, the `sim/` folder of the repository), so that
the production wheel and image carry no simulated node, demo, mock server or fake `dcgmi`. It declares
two entry-point groups: `servescope.commands` (the `demo` and `sim` commands, and `load.mock-server`, a
command inside `load`) and `servescope.simulators` (what `serve --simulate`, `capacity run --simulate`,
`tune --launcher simulated` and `load calibrate` start). Production code reaches the simulator only
through this lookup, by name; without the distribution it gets `MissingDistributionError`, whose message
says how to install it.
"""

from __future__ import annotations

from importlib.metadata import EntryPoint, entry_points

from servescope.core.errors import ServescopeError

SIMULATOR_DISTRIBUTION = "servescope-sim"
COMMANDS_GROUP = "servescope.commands"
SIMULATORS_GROUP = "servescope.simulators"
INSTALL_HINT = "pip install servescope-sim (from a clone of the repository: pip install -e ./sim)"


class MissingDistributionError(ServescopeError):
    """What was asked for is provided by a distribution that is not installed."""

    reason = "missing_distribution"


def missing_simulator(what: str) -> MissingDistributionError:
    """The error for `what` (a command or an option, as the user typed it) without servescope-sim."""
    return MissingDistributionError(
        f"{what} needs the {SIMULATOR_DISTRIBUTION} distribution, which is not installed: {INSTALL_HINT}"
    )


def entry_point(group: str, name: str) -> EntryPoint | None:
    """The installed entry point `name` of `group`, or None."""
    return next(iter(entry_points(group=group, name=name)), None)


def simulator(name: str, what: str) -> object:
    """The simulator's hook `name` (an entry point of `servescope.simulators`), loaded; `what` names the
    command or option that asked for it in the error raised when servescope-sim is not installed."""
    found = entry_point(SIMULATORS_GROUP, name)
    if found is None:
        raise missing_simulator(what)
    loaded: object = found.load()
    return loaded
