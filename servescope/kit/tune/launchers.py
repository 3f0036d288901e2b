"""Launchers: (re)start the engine with a trial's flags, hand back a step runner, stop it.

Flags become argv items (`--max-num-seqs 8`, `--enable-chunked-prefill` / `--no-enable-chunked-prefill`,
None left out), never shell text: the command template is split once with shlex and `{flags}` stands for
the flag items. A failed start (the process exits, /health never answers, OOM) raises LaunchError, which
the study records as an infeasible trial with the last lines the engine logged (its output always goes
to a file: the reason a start failed is in it). The step runner is made for each configuration, so
requests carry what it needs (vLLM's `priority` under `scheduling_policy=priority`). A local engine
runs as a `Child`: in its own process group, sent SIGTERM should this process die, and stopped (or
dropped after a failed start) with its whole group, so that vLLM's worker processes go with it.
"""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import tempfile
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

from servescope.core.errors import ServescopeError
from servescope.core.processes import Child, ChildFailedError, log_tail
from servescope.kit.load.records import StepRunner
from servescope.kit.tune.space import FLAG_NAME, Value


class LaunchError(ServescopeError, RuntimeError):
    """The engine did not start with these flags."""

    reason = "launch_failed"


RunnerFor = Callable[[Mapping[str, Value]], StepRunner]  # the step runner for one configuration
LOG_LINES = 15  # of the engine's log, quoted in an infeasible trial's reason


class Launcher(Protocol):
    """Starts an engine configuration and stops it again."""

    def start(self, params: Mapping[str, Value]) -> StepRunner: ...
    def stop(self) -> None: ...


def flag_argv(params: Mapping[str, Value]) -> list[str]:
    """vLLM's command-line form of `params`; raises ValueError naming a bad flag name."""
    argv: list[str] = []
    for name, value in params.items():
        if not FLAG_NAME.match(name):
            raise ValueError(f"flag {name!r}: names are lower_case flag names")
        option = "--" + name.replace("_", "-")
        if value is None:
            continue
        if isinstance(value, bool):
            argv.append(option if value else "--no-" + option[2:])
        else:
            argv += [option, str(value)]
    return argv


@dataclass(slots=True)
class CommandLauncher:
    """Restarts a local process from a template, waits for its /health, stops its process group."""

    template: str  # e.g. "vllm serve facebook/opt-125m --port 18221 {flags}"
    health_url: str
    runner: RunnerFor
    start_timeout_s: float = 300.0
    log_path: Path | None = None  # None: a file in a temporary folder
    fixed: Mapping[str, Value] = field(default_factory=dict)
    env: Mapping[str, str] = field(default_factory=dict)  # added to this process's environment
    stop_grace_s: float = 30.0
    _child: Child | None = None

    def argv(self, params: Mapping[str, Value]) -> list[str]:
        flags = flag_argv({**self.fixed, **params})
        out: list[str] = []
        for word in shlex.split(self.template):
            out += flags if word == "{flags}" else [word]
        return out

    def start(self, params: Mapping[str, Value]) -> StepRunner:
        self.stop()
        if self.log_path is None:
            self.log_path = Path(tempfile.mkdtemp(prefix="servescope-tune-")) / "engine.log"
        log = self.log_path
        log.parent.mkdir(parents=True, exist_ok=True)
        log.write_text("")  # one configuration's output at a time: its own start, not the last one's
        child = Child("the engine", self.argv(params), log, env={**os.environ, **self.env})
        try:
            child.start()
        except OSError as err:
            raise LaunchError(f"cannot run {self.template.split()[0]!r}: {err}") from err
        self._child = child
        try:
            child.wait_ready(self.health_url, self.start_timeout_s)
        except ChildFailedError as err:
            self.stop()  # the engine's workers may outlive it in its process group
            first = str(err).splitlines()[0]
            raise LaunchError(f"{first}; its log ends with:\n{log_tail(log, LOG_LINES)}") from err
        return self.runner({**self.fixed, **params})

    def stop(self) -> None:
        """SIGTERM to the engine's process group, SIGKILL to what is left of it after the grace."""
        child, self._child = self._child, None
        if child is not None:
            child.stop(grace=self.stop_grace_s)


@dataclass(slots=True)
class KubernetesLauncher:
    """Patches a Deployment's container args with the trial's flags; a dry run only prints the patch."""

    deployment: str
    namespace: str
    base_args: Sequence[str]
    runner: RunnerFor
    execute: bool = False
    container_index: int = 0
    rollout_timeout_s: int = 600
    printed: list[str] = field(default_factory=list)

    def patch(self, params: Mapping[str, Value]) -> str:
        """The JSON patch replacing the container's args."""
        path = f"/spec/template/spec/containers/{self.container_index}/args"
        return json.dumps([{"op": "replace", "path": path, "value": [*self.base_args, *flag_argv(params)]}])

    def commands(self, params: Mapping[str, Value]) -> list[list[str]]:
        target = ["-n", self.namespace, f"deployment/{self.deployment}"]
        return [
            ["kubectl", "patch", *target, "--type=json", "-p", self.patch(params)],
            ["kubectl", "rollout", "status", *target, f"--timeout={self.rollout_timeout_s}s"],
        ]

    def start(self, params: Mapping[str, Value]) -> StepRunner:
        if not self.execute:
            self.printed += [shlex.join(command) for command in self.commands(params)]
            raise LaunchError("dry run: the patch was printed, not applied (pass --execute to apply it)")
        for command in self.commands(params):
            done = subprocess.run(
                command, capture_output=True, text=True, timeout=self.rollout_timeout_s + 30, check=False
            )
            if done.returncode != 0:
                raise LaunchError(f"{shlex.join(command[:3])} failed: {done.stderr.strip()[-500:]}")
        return self.runner(params)

    def stop(self) -> None:
        """The next patch replaces this configuration; nothing to stop in between."""
