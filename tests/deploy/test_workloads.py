"""What an SRE checks in the exporter DaemonSet and the runbook Deployment before applying them."""

from __future__ import annotations

import pytest

from servescope.core.settings_cli import env_names
from servescope.deploy import dcgm
from servescope.deploy.names import NONROOT_UID
from servescope.deploy.options import DeployOptions
from servescope.deploy.render import documents
from servescope.deploy.runbooks import ALERTMANAGER_TOKEN_FILE
from servescope.exporter.settings import DcgmSettings, NodeSettings, VllmSettings
from tests.deploy.manifests import TOKENS, VARIANTS, Doc, container, find, matches, pod_spec, rendered

POD_RESOURCES = "/var/lib/kubelet/pod-resources"


def _daemonset(variant: str = "default") -> Doc:
    return find(rendered(variant), "DaemonSet", "servescope")


def _deployment(variant: str = "default") -> Doc:
    return find(rendered(variant), "Deployment", "servescope-runbooks")


def _env(workload: Doc) -> dict[str, Doc]:
    return {item["name"]: item for item in container(workload).get("env", [])}


def _arg(workload: Doc, flag: str) -> str:
    args = container(workload)["args"]
    assert args.count(flag) == 1, f"{flag} in {args}"
    value: str = args[args.index(flag) + 1]
    return value


def test_daemonset_runs_on_gpu_nodes_through_their_taint() -> None:
    spec = pod_spec(_daemonset())
    assert spec["nodeSelector"] == {"nvidia.com/gpu.present": "true"}
    assert {"key": "nvidia.com/gpu", "operator": "Exists"} in spec["tolerations"]  # every effect
    assert pod_spec(_daemonset("elsewhere"))["nodeSelector"] == {"node-role.example.com/gpu": ""}


def test_node_name_comes_from_the_downward_api_and_is_what_the_exporter_reads() -> None:
    env = _env(_daemonset())
    assert env["NODE_NAME"]["valueFrom"] == {"fieldRef": {"fieldPath": "spec.nodeName"}}
    assert "NODE_NAME" in env_names(NodeSettings, "hostname")


def test_the_exporter_sees_every_gpu_and_takes_none() -> None:
    exporter = container(_daemonset())
    env = _env(_daemonset())
    assert env["NVIDIA_VISIBLE_DEVICES"]["value"] == "all"
    assert env["NVIDIA_DRIVER_CAPABILITIES"]["value"] == "utility"
    resources = exporter["resources"]
    assert not any(key.startswith("nvidia.com/") for part in resources.values() for key in part)


def test_probes_ask_the_container_port_it_listens_on() -> None:
    exporter = container(_daemonset())
    ports = {p["name"]: p["containerPort"] for p in exporter["ports"]}
    assert ports == {"metrics": 9108}
    assert exporter["args"] == ["serve", "--listen", ":9108"]
    assert exporter["livenessProbe"]["httpGet"] == {"path": "/healthz", "port": "metrics"}
    assert exporter["readinessProbe"]["httpGet"] == {"path": "/readyz", "port": "metrics"}
    runbooks = container(_deployment())
    assert {p["name"]: p["containerPort"] for p in runbooks["ports"]} == {"http": 9110}
    assert _arg(_deployment(), "--listen") == ":9110"
    assert runbooks["livenessProbe"]["httpGet"] == {"path": "/healthz", "port": "http"}
    assert runbooks["readinessProbe"]["httpGet"] == {"path": "/readyz", "port": "http"}


@pytest.mark.parametrize("variant", sorted(VARIANTS))
def test_both_workloads_are_locked_down(variant: str) -> None:
    for workload in (_daemonset(variant), _deployment(variant)):
        security = container(workload)["securityContext"]
        assert security["readOnlyRootFilesystem"] is True
        assert security["allowPrivilegeEscalation"] is False
        assert security["capabilities"]["drop"] == ["ALL"]
        assert pod_spec(workload)["securityContext"]["seccompProfile"] == {"type": "RuntimeDefault"}
        # Only the runbook service (its change steps) and an exporter that watches its node's pods talk to
        # the API server, each with the RBAC rendered for it.
        talks = workload["kind"] == "Deployment" or VARIANTS[variant].exporter_watches_pods
        assert pod_spec(workload)["automountServiceAccountToken"] is talks
        mounts = {m["mountPath"]: m["name"] for m in container(workload)["volumeMounts"]}
        volumes = {v["name"]: v for v in pod_spec(workload)["volumes"]}
        assert "emptyDir" in volumes[mounts["/tmp"]], "a read-only root needs a writable /tmp"
        assert set(mounts.values()) <= set(volumes)
        assert "privileged" not in security


def test_without_host_access_the_exporter_is_an_unprivileged_pod() -> None:
    spec = pod_spec(_daemonset("unprivileged"))
    assert spec["securityContext"]["runAsNonRoot"] is True
    assert spec["securityContext"]["runAsUser"] == NONROOT_UID
    assert "hostPID" not in spec and "hostNetwork" not in spec
    assert not any("hostPath" in v for v in spec["volumes"])
    assert "add" not in container(_daemonset("unprivileged"))["securityContext"]["capabilities"]
    assert "runtimeClassName" not in spec and "priorityClassName" not in spec
    assert not any(d["kind"] == "Namespace" for d in rendered("unprivileged"))


def test_the_exporter_topology_gets_host_pids_root_and_only_the_capabilities_it_reads_proc_with() -> None:
    for variant in ("default", "agent"):  # agent: --topology podmonitor with --process-memory
        spec = pod_spec(_daemonset(variant))
        assert spec["hostPID"] is True
        assert spec["securityContext"]["runAsUser"] == 0
        capabilities = container(_daemonset(variant))["securityContext"]["capabilities"]
        assert capabilities == {"drop": ["ALL"], "add": ["DAC_READ_SEARCH", "SYS_PTRACE"]}
    namespace = find(rendered(), "Namespace")
    assert namespace["metadata"] == {
        "name": "servescope",
        "labels": {"pod-security.kubernetes.io/enforce": "privileged"},
    }
    env = _env(_daemonset())
    # The engines are scraped by Prometheus too: their raw series are not re-exported a second time.
    assert env["SERVESCOPE_VLLM_PASSTHROUGH"]["value"] == "false"
    assert env_names(VllmSettings, "passthrough") == ["SERVESCOPE_VLLM_PASSTHROUGH"]
    assert "SERVESCOPE_VLLM_DISCOVERY" not in env


def test_the_podmonitor_topology_needs_no_host_pids_and_no_capability() -> None:
    spec = pod_spec(_daemonset("podmonitor"))
    assert "hostPID" not in spec
    assert "add" not in container(_daemonset("podmonitor"))["securityContext"]["capabilities"]
    # UID 0 only to connect to the kubelet's socket, which is root's.
    assert spec["securityContext"]["runAsUser"] == 0
    assert [v["hostPath"]["path"] for v in spec["volumes"] if "hostPath" in v] == [POD_RESOURCES]
    env = _env(_daemonset("podmonitor"))
    assert env["SERVESCOPE_VLLM_DISCOVERY"]["value"] == "false"
    assert env_names(VllmSettings, "discovery") == ["SERVESCOPE_VLLM_DISCOVERY"]


@pytest.mark.parametrize("variant", ["default", "podmonitor", "agent"])
def test_pod_resources_are_mounted_read_only_from_the_kubelet(variant: str) -> None:
    volumes = {v["name"]: v for v in pod_spec(_daemonset(variant))["volumes"]}
    mounts = container(_daemonset(variant))["volumeMounts"]
    mount = next(m for m in mounts if m["mountPath"] == POD_RESOURCES)
    assert mount["readOnly"] is True
    assert volumes[mount["name"]]["hostPath"] == {"path": POD_RESOURCES, "type": "Directory"}
    # Mounted where the exporter looks by default: no setting needed.
    assert POD_RESOURCES + "/kubelet.sock" == "/var/lib/kubelet/pod-resources/kubelet.sock"


def test_gpu_operator_defaults_runtime_class_and_priority() -> None:
    spec = pod_spec(_daemonset())
    assert spec["runtimeClassName"] == "nvidia"
    assert spec["priorityClassName"] == "system-node-critical"
    assert "hostNetwork" not in spec


def test_dcgm_comes_from_the_operator_s_dcgm_exporter_on_the_same_node() -> None:
    env = _env(_daemonset())
    service = find(rendered(), "Service", "servescope-dcgm-exporter")
    assert service["metadata"]["namespace"] == "gpu-operator"
    assert service["spec"]["internalTrafficPolicy"] == "Local"
    # The GPU Operator's dcgm-exporter pods: label app=nvidia-dcgm-exporter, port 9400.
    assert service["spec"]["selector"] == {"app": "nvidia-dcgm-exporter"}
    assert service["spec"]["ports"][0]["targetPort"] == 9400
    url = env[env_names(DcgmSettings, "exporter_url")[0]]["value"]
    assert url == "http://servescope-dcgm-exporter.gpu-operator.svc:9400/metrics"
    # The Service never carries the labels the Operator's own ServiceMonitor selects: scraped once.
    assert "app" not in service["metadata"]["labels"]


@pytest.mark.parametrize(
    ("variant", "expected"),
    [
        ("host-network", {"SERVESCOPE_DCGM_EXPORTER_URL": "http://$(NODE_IP):9400/metrics"}),
        ("podmonitor", {"SERVESCOPE_DCGM_ENABLED": "false"}),
        # dcgmi in the image, reading the GPU Operator's standalone host engine (dmon --host).
        ("unprivileged", {"SERVESCOPE_DCGM_HOST": "nvidia-dcgm.gpu-operator.svc:5555"}),
    ],
)
def test_the_other_dcgm_sources(variant: str, expected: dict[str, str]) -> None:
    env = _env(_daemonset(variant))
    dcgm = {name: item["value"] for name, item in env.items() if name.startswith("SERVESCOPE_DCGM_")}
    assert dcgm == expected
    assert not [d for d in rendered(variant) if d["metadata"]["name"] == "servescope-dcgm-exporter"]
    if variant == "host-network":
        spec = pod_spec(_daemonset(variant))
        assert spec["hostNetwork"] is True and spec["dnsPolicy"] == "ClusterFirstWithHostNet"
        # $(NODE_IP) is expanded by the kubelet only from a variable defined earlier in the list.
        names = list(env)
        assert names.index("NODE_IP") < names.index("SERVESCOPE_DCGM_EXPORTER_URL")


def test_requests_and_limits_are_set_and_no_cpu_limit_throttles_collection() -> None:
    for workload in (_daemonset(), _deployment()):
        resources = container(workload)["resources"]
        assert set(resources["requests"]) == {"cpu", "memory"}
        assert set(resources["limits"]) == {"memory"}
    assert container(_daemonset())["resources"]["requests"]["memory"] == "128Mi"


def test_services_select_their_pods_and_name_existing_ports() -> None:
    for name, workload in (("servescope", _daemonset()), ("servescope-runbooks", _deployment())):
        service = find(rendered(), "Service", name)
        pod_labels = workload["spec"]["template"]["metadata"]["labels"]
        assert matches(service["spec"]["selector"], pod_labels)
        assert matches(workload["spec"]["selector"]["matchLabels"], pod_labels)
        port_names = {p["name"] for p in container(workload)["ports"]}
        assert {p["targetPort"] for p in service["spec"]["ports"]} <= port_names
    # Neither Service may pick up the other's pods.
    assert not matches(
        find(rendered(), "Service", "servescope")["spec"]["selector"],
        _deployment()["spec"]["template"]["metadata"]["labels"],
    )


def test_runbook_service_reads_its_tokens_from_the_mounted_secret() -> None:
    deployment = _deployment()
    secret = find(rendered(with_tokens=True), "Secret", "servescope-runbooks", namespace="servescope")
    volumes = {v["name"]: v for v in pod_spec(deployment)["volumes"]}
    token_files = [_arg(deployment, "--webhook-token-file"), _arg(deployment, "--token-file")]
    for path in token_files:
        folder, _, key = path.rpartition("/")
        mount = next(m for m in container(deployment)["volumeMounts"] if m["mountPath"] == folder)
        assert mount["readOnly"] is True
        assert volumes[mount["name"]]["secret"]["secretName"] == secret["metadata"]["name"]
        assert key in secret["stringData"]
    assert token_files[0].endswith("/token")
    # Alertmanager reads the same key of a Secret of that name, as kube-prometheus-stack mounts it.
    assert ALERTMANAGER_TOKEN_FILE == "/etc/alertmanager/secrets/servescope-runbooks/token"


def test_runbook_service_keeps_its_state_in_a_volume_and_asks_this_deployment_s_services() -> None:
    deployment = _deployment()
    state = next(m for m in container(deployment)["volumeMounts"] if m["name"] == "state")["mountPath"]
    assert _arg(deployment, "--incidents-db").startswith(state + "/")
    assert _arg(deployment, "--audit-log").startswith(state + "/")
    assert _arg(deployment, "--exporter-url") == "http://servescope.servescope.svc:9108"
    assert (
        _arg(deployment, "--prometheus-url") == "http://kube-prometheus-stack-prometheus.monitoring.svc:9090"
    )
    assert (
        _arg(deployment, "--alertmanager-url")
        == "http://kube-prometheus-stack-alertmanager.monitoring.svc:9093"
    )
    assert deployment["spec"]["replicas"] == 1 and deployment["spec"]["strategy"] == {"type": "Recreate"}
    claim = {v["name"]: v for v in pod_spec(_deployment("elsewhere"))["volumes"]}["state"]
    assert claim == {"name": "state", "persistentVolumeClaim": {"claimName": "servescope-incidents"}}
    # The chart's names for release `prom`: <release>-<chart>, 26 characters at most.
    assert (
        _arg(_deployment("elsewhere"), "--prometheus-url")
        == "http://prom-kube-prometheus-stack-prometheus.metrics.svc:9090"
    )
    assert pod_spec(deployment)["securityContext"]["runAsNonRoot"] is True


def test_a_secret_in_alertmanager_s_namespace_carries_only_the_webhook_token() -> None:
    docs = rendered("elsewhere", with_tokens=True)
    theirs = find(docs, "Secret", "servescope-runbooks", namespace="alerting")
    ours = find(docs, "Secret", "servescope-runbooks", namespace="observability")
    assert theirs["stringData"] == {"token": ours["stringData"]["token"]}
    together = DeployOptions(namespace="monitoring", create_namespace=False)
    assert len([d for d in documents(together, TOKENS) if d["kind"] == "Secret"]) == 1


def test_dcgmi_reads_the_host_engine_it_is_given_and_nothing_dcgmi_reads_as_an_option() -> None:
    options = VARIANTS["unprivileged"].model_copy(update={"dcgm_host": "10.0.0.7:5555"})
    env = {e["name"]: e.get("value") for e in dcgm.exporter_env(options)}
    assert env == {"SERVESCOPE_DCGM_HOST": "10.0.0.7:5555"}
    with pytest.raises(ValueError, match="dcgm_host"):
        DeployOptions(dcgm="dcgmi", dcgm_host="--help")


@pytest.mark.parametrize("variant", sorted(VARIANTS))
def test_the_exporter_may_list_and_watch_pods_only_when_it_learns_revisions(variant: str) -> None:
    docs = rendered(variant)
    roles = [d for d in docs if d["kind"] == "ClusterRole" and d["metadata"]["name"] == "servescope"]
    env = _env(_daemonset(variant))
    if not VARIANTS[variant].exporter_watches_pods:
        assert roles == [] and "SERVESCOPE_K8S_POD_LABELS" not in env
        return
    (role,) = roles
    assert role["rules"] == [{"apiGroups": [""], "resources": ["pods"], "verbs": ["list", "watch"]}]
    binding = find(docs, "ClusterRoleBinding", "servescope")
    account = {"kind": "ServiceAccount", "name": "servescope", "namespace": VARIANTS[variant].namespace}
    assert binding["subjects"] == [account]
    assert env["SERVESCOPE_K8S_POD_LABELS"]["value"] == "true"
    order = env["SERVESCOPE_K8S_REVISION_POD_LABELS"]["value"].split()
    assert order == VARIANTS[variant].revision_pod_labels
