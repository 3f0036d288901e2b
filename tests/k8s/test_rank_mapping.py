"""Which engine is on which GPU: one data-parallel rank to its own GPUs, or no mapping at all."""

from __future__ import annotations

from pathlib import Path

from servescope.exporter.gpu_directory import GpuDirectory
from servescope.exporter.stores.signals import GpuProcess
from servescope.exporter.vllm.join import EndpointGpus, engine_gpus, join_endpoint
from servescope.exporter.vllm.procfs import ProcFs
from servescope.exporter.vllm.source import VllmSource
from tests.k8s.procfs_tree import API_PORT, ROOT_PID, WORKERS, Netns, ProcTree, dp2_tree, reachable
from tests.k8s.test_discovery import DP2_METRICS, RecordingScraper

URL = f"http://127.0.0.1:{API_PORT}/metrics"
A, B, C = (f"GPU-{n}0000000-0000-0000-0000-00000000000{n}" for n in (1, 2, 3))


def directory(processes: dict[str, set[int]]) -> GpuDirectory:
    d = GpuDirectory()
    d.update({"0": A, "1": B, "2": C})
    for uuid, pids in processes.items():
        d.set_processes(uuid, frozenset(pids))
    return d


def engine_gpu_info(procfs: ProcFs, d: GpuDirectory, metrics: str) -> tuple[set[tuple[str, str]], list[str]]:
    """(engine, uuid) pairs of servescope_engine_gpu_info, and the problems' reasons, after one cycle."""
    scraper = RecordingScraper()
    scraper.text = metrics
    source = VllmSource([], directory=d, procfs=procfs, scraper=scraper, connect=reachable)  # type: ignore[arg-type]
    collection = source.collect()
    source.close()
    pairs = {
        (s.label_values[1], s.label_values[3])
        for s in collection.samples
        if s.spec.name == "servescope_engine_gpu_info"
    }
    return pairs, [p.reason for p in collection.problems]


def test_each_dp_rank_maps_to_its_own_gpu(tmp_path: Path) -> None:
    procfs = ProcFs(dp2_tree(tmp_path / "proc").root)
    d = directory({A: {WORKERS["0"]}, B: {WORKERS["1"]}})
    assert engine_gpu_info(procfs, d, DP2_METRICS.read_text()) == ({("0", A), ("1", B)}, [])


def test_ranks_sharing_a_gpu_give_no_mapping_and_say_ambiguous_dp(tmp_path: Path) -> None:
    procfs = ProcFs(dp2_tree(tmp_path / "proc").root)
    d = directory({A: {WORKERS["0"], WORKERS["1"]}})
    assert engine_gpu_info(procfs, d, DP2_METRICS.read_text()) == (set(), ["ambiguous_dp"])


def tree_without_rank_titles(root: Path) -> ProcTree:
    """An older vLLM: two engines, but its engine cores carry no DP rank in their title."""
    ns = Netns("net:[1]", [], [("0.0.0.0", API_PORT, 5555)])
    tree = ProcTree(root, ns)
    tree.process(ROOT_PID, 1, "python3", argv=("-m", "vllm.entrypoints.openai.api_server"), sockets=(5555,))
    for core, worker in ((9504, 9591), (9505, 9579)):
        tree.process(core, ROOT_PID, "VLLM::EngineCore")
        tree.process(worker, core, "VLLM::Worker")
    return tree


def test_two_engines_without_rank_titles_give_no_mapping(tmp_path: Path) -> None:
    procfs = ProcFs(tree_without_rank_titles(tmp_path / "proc").root)
    d = directory({A: {9591}, B: {9579}})
    assert engine_gpu_info(procfs, d, DP2_METRICS.read_text()) == (set(), ["ambiguous_dp"])


def tp2_tree(root: Path, environ: dict[str, str] | None = None) -> ProcTree:
    """One engine with tensor-parallel size 2: an EngineCore and two workers."""
    ns = Netns("net:[1]", [], [("0.0.0.0", API_PORT, 5555)])
    tree = ProcTree(root, ns)
    argv = ("/venv/bin/vllm", "serve", "m", "--tensor-parallel-size", "2")
    tree.process(ROOT_PID, 1, "python3", argv=argv, sockets=(5555,), comm="vllm")
    tree.process(9504, ROOT_PID, "VLLM::EngineCore_DP0", environ=environ)
    tree.process(9591, 9504, "VLLM::Worker")
    tree.process(9592, 9504, "VLLM::Worker")
    return tree


def single_engine_metrics() -> str:
    return "\n".join(line for line in DP2_METRICS.read_text().splitlines() if 'engine="1"' not in line) + "\n"


def test_a_tp_group_is_one_engine_on_its_gpus(tmp_path: Path) -> None:
    procfs = ProcFs(tp2_tree(tmp_path / "proc").root)
    d = directory({A: {9591}, B: {9592}})
    assert engine_gpu_info(procfs, d, single_engine_metrics()) == ({("0", A), ("0", B)}, [])


def test_cuda_visible_devices_uuids_name_a_ranks_gpus_when_nvml_lists_no_pid(tmp_path: Path) -> None:
    procfs = ProcFs(tp2_tree(tmp_path / "proc", {"CUDA_VISIBLE_DEVICES": f"{C},0", "HOME": "/"}).root)
    joined = join_endpoint(URL, procfs, directory({}), {ROOT_PID})
    # "0" is an index in the engine container's own numbering: not this node's GPU 0, not used.
    assert joined.ranks == {"0": [GpuProcess("2", C, 9504)]} and not joined.ambiguous


def test_engine_gpus_decides_per_engine_or_not_at_all() -> None:
    a, b = GpuProcess("0", A, 1), GpuProcess("1", B, 2)
    assert engine_gpus(["0"], EndpointGpus([a, b])) == {"0": [a, b]}
    assert engine_gpus(["0", "1"], EndpointGpus([a, b], {"0": [a], "1": [b]})) == {"0": [a], "1": [b]}
    assert engine_gpus(["0", "1"], EndpointGpus([a, b], {"0": [a]})) is None  # rank 1 unknown
    assert engine_gpus(["0", "1"], EndpointGpus([a], {"0": [a], "1": [a]}, ambiguous=True)) is None


def endpoint_pods(procfs: ProcFs, d: GpuDirectory) -> set[tuple[str, ...]]:
    scraper = RecordingScraper()
    source = VllmSource([], directory=d, procfs=procfs, scraper=scraper, connect=reachable)  # type: ignore[arg-type]
    samples = source.collect().samples
    source.close()
    return {s.label_values for s in samples if s.spec.name == "servescope_serving_endpoint_pod_info"}


def test_an_endpoint_gets_the_pod_that_holds_all_its_gpus(tmp_path: Path) -> None:
    procfs = ProcFs(dp2_tree(tmp_path / "proc").root)
    d = directory({A: {WORKERS["0"]}, B: {WORKERS["1"]}})
    assert endpoint_pods(procfs, d) == set()  # the kubelet has not answered
    d.set_holders({A: frozenset({("serving", "dp-0", "vllm")}), B: frozenset({("serving", "dp-0", "vllm")})})
    assert endpoint_pods(procfs, d) == {(URL, "serving", "dp-0", "vllm", "")}  # no revision known
    d.set_holders({A: frozenset({("serving", "dp-0", "vllm")}), B: frozenset({("chat", "c-0", "engine")})})
    assert endpoint_pods(procfs, d) == set()  # two containers: which one serves is not told


def serving_pods(procfs: ProcFs, d: GpuDirectory) -> set[tuple[str, str, str]]:
    """The (namespace, pod, container) values on the endpoint's normalised serving series."""
    scraper = RecordingScraper()
    source = VllmSource([], directory=d, procfs=procfs, scraper=scraper, connect=reachable)  # type: ignore[arg-type]
    samples = source.collect().samples
    source.close()
    engine = ("model_name", "engine", "endpoint")
    serving = [
        s for s in samples if s.spec.name.startswith("servescope_serving_") and s.spec.labels[:3] == engine
    ]
    assert serving, "no serving series"
    assert all(s.spec.labels[3:6] == ("namespace", "pod", "container") for s in serving)
    return {(s.label_values[3], s.label_values[4], s.label_values[5]) for s in serving}


def test_serving_series_carry_the_pod_that_holds_all_their_gpus(tmp_path: Path) -> None:
    procfs = ProcFs(dp2_tree(tmp_path / "proc").root)
    d = directory({A: {WORKERS["0"]}, B: {WORKERS["1"]}})
    assert serving_pods(procfs, d) == {("", "", "")}  # not known: rendered without the labels
    d.set_holders({A: frozenset({("serving", "dp-0", "vllm")}), B: frozenset({("serving", "dp-0", "vllm")})})
    assert serving_pods(procfs, d) == {("serving", "dp-0", "vllm")}
    d.set_holders({A: frozenset({("serving", "dp-0", "vllm")}), B: frozenset({("chat", "c-0", "engine")})})
    assert serving_pods(procfs, d) == {("", "", "")}
