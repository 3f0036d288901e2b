"""Who holds a GPU: the one container a series may be labelled with, or none."""

from __future__ import annotations

from servescope.exporter.gpu_directory import NO_POD, GpuDirectory

LLAMA = ("serving", "llama-0", "vllm")
CHAT = ("chat", "chat-0", "engine")


def test_a_container_holding_every_gpu_is_the_sole_holder() -> None:
    directory = GpuDirectory()
    directory.set_holders({"GPU-0": frozenset({LLAMA}), "GPU-1": frozenset({LLAMA})})
    assert directory.sole_holder(["GPU-0"]) == LLAMA
    assert directory.sole_holder(["GPU-0", "GPU-1"]) == LLAMA


def test_shared_unheld_or_no_gpus_name_no_pod() -> None:
    directory = GpuDirectory()
    directory.set_holders(
        {"GPU-0": frozenset({LLAMA, CHAT}), "GPU-1": frozenset({LLAMA}), "GPU-2": frozenset({CHAT})}
    )
    assert directory.sole_holder(["GPU-0"]) == NO_POD  # time-sliced between two pods
    assert directory.sole_holder(["GPU-1", "GPU-3"]) == NO_POD  # GPU-3 is nobody's
    assert directory.sole_holder(["GPU-1", "GPU-2"]) == NO_POD  # two containers
    assert directory.sole_holder([]) == NO_POD
