"""Launchers: flags as argv, a local command restarted and health-checked, a Kubernetes patch dry run."""

from __future__ import annotations

import json
import os
import shlex
import sys
import time
from pathlib import Path
from typing import cast

import pytest

from servescope.kit.load.records import StepRunner
from servescope.kit.tune.launchers import CommandLauncher, KubernetesLauncher, LaunchError, flag_argv
from tests.support import free_port

# A stand-in engine process at the process boundary: serves /health, or exits 3 the way vLLM exits
# when the memory it is asked for is not free.
ENGINE = """
import http.server, sys
args = sys.argv[2:]
if "--gpu-memory-utilization" in args and float(args[args.index("--gpu-memory-utilization") + 1]) > 0.96:
    print("ValueError: Free memory on device is less than desired GPU memory utilization", flush=True)
    sys.exit(3)
class Health(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        self.send_response(200 if self.path == "/health" else 404)
        self.end_headers()
    def log_message(self, *args):
        pass
http.server.HTTPServer(("127.0.0.1", int(sys.argv[1])), Health).serve_forever()
"""


def test_flags_become_vllm_options_and_never_shell_text() -> None:
    params = {
        "max_num_seqs": 8,
        "enable_chunked_prefill": False,
        "quantization": None,
        "kv_cache_dtype": "fp8",
    }
    assert flag_argv(params) == [
        "--max-num-seqs",
        "8",
        "--no-enable-chunked-prefill",
        "--kv-cache-dtype",
        "fp8",
    ]
    assert flag_argv({"enable_prefix_caching": True}) == ["--enable-prefix-caching"]
    assert flag_argv({"x": "a; rm -rf /"}) == ["--x", "a; rm -rf /"]  # one argv item, no shell
    with pytest.raises(ValueError, match="'--evil'"):
        flag_argv({"--evil": 1})


@pytest.mark.e2e
def test_a_local_command_is_started_health_checked_and_stopped(tmp_path: Path) -> None:
    script = tmp_path / "engine.py"
    script.write_text(ENGINE)
    port = free_port()
    sentinel = cast(StepRunner, object())  # the runner the launcher hands back, untouched
    asked: list[dict[str, object]] = []
    launcher = CommandLauncher(
        f"{sys.executable} {script} {port} {{flags}}",
        f"http://127.0.0.1:{port}/health",
        runner=lambda params: asked.append(dict(params)) or sentinel,
        start_timeout_s=20,
        log_path=tmp_path / "engine.log",
    )
    assert launcher.start({"max_num_seqs": 8}) is sentinel
    assert asked == [{"max_num_seqs": 8}], "the runner is made for the configuration it loads"
    assert launcher._child is not None
    process = launcher._child.process
    assert process is not None and process.poll() is None
    launcher.stop()
    assert process.poll() is not None
    with pytest.raises(OSError):
        os.killpg(process.pid, 0)  # the whole process group is gone
    with pytest.raises(
        LaunchError, match=r"(?s)exited with status 3.*its log ends with:.*less than desired GPU memory"
    ):
        launcher.start({"gpu_memory_utilization": 0.99})


def _gone(pid: int, within_s: float = 10.0) -> bool:
    """Whether `pid` has exited (a zombie counts: it runs no more) within `within_s` seconds."""
    deadline = time.monotonic() + within_s
    while time.monotonic() < deadline:
        try:
            state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except (FileNotFoundError, ProcessLookupError):
            return True
        if state == "Z":
            return True
        time.sleep(0.1)
    return False


@pytest.mark.e2e
def test_what_the_engine_started_in_its_group_stops_with_it(tmp_path: Path) -> None:
    script = tmp_path / "engine.py"
    script.write_text(ENGINE)
    port = free_port()
    helper_pid = tmp_path / "helper.pid"
    # The engine's own helper (as vLLM's workers are), deaf to SIGTERM: left in its group when it exits.
    engine = shlex.join([sys.executable, str(script), str(port)])
    shell = f"(trap '' TERM; exec sleep 300) & echo $! > {shlex.quote(str(helper_pid))}; exec {engine} \"$@\""
    launcher = CommandLauncher(
        f"sh -c {shlex.quote(shell)} sh {{flags}}",
        f"http://127.0.0.1:{port}/health",
        runner=lambda _: cast(StepRunner, object()),
        start_timeout_s=20,
        log_path=tmp_path / "engine.log",
        stop_grace_s=5,
    )
    launcher.start({"max_num_seqs": 8})
    helper = int(helper_pid.read_text())
    assert not _gone(helper, within_s=0.5)
    launcher.stop()
    assert _gone(helper)
    helper_pid.unlink()
    with pytest.raises(LaunchError, match=r"(?s)exited with status 3.*less than desired GPU memory"):
        launcher.start({"gpu_memory_utilization": 0.99})
    failed_helper = int(helper_pid.read_text())
    assert _gone(failed_helper)  # a failed start leaves nothing of the engine running


def test_kubernetes_dry_run_prints_the_patch_and_applies_nothing() -> None:
    launcher = KubernetesLauncher(
        "vllm", "serving", ["--model", "m"], runner=lambda _: cast(StepRunner, None)
    )
    with pytest.raises(LaunchError, match="dry run"):
        launcher.start({"max_num_seqs": 64})
    patch = json.loads(launcher.patch({"max_num_seqs": 64}))
    assert patch == [
        {
            "op": "replace",
            "path": "/spec/template/spec/containers/0/args",
            "value": ["--model", "m", "--max-num-seqs", "64"],
        }
    ]
    assert launcher.printed[0].startswith("kubectl patch -n serving deployment/vllm --type=json -p ")
    assert launcher.printed[1] == "kubectl rollout status -n serving deployment/vllm --timeout=600s"
