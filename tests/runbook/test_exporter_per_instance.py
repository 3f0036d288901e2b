"""A central runbook service asks the exporter of the alert's own node: the address Prometheus scraped for
the alert's `instance` (a node name on Kubernetes), or an instance --exporter-allow names; never another
node's, never a link-local, metadata or loopback-mapped address (labels are untrusted)."""

from __future__ import annotations

from collections.abc import Iterator
from urllib.parse import urlsplit

import pytest
from hypothesis import given
from hypothesis import strategies as st

from servescope.core.addresses import parse_address
from servescope.runbooks.actions import RunContext
from servescope.runbooks.actions.trust import TARGETS, RefusedTargetError, allowed, exporter_base

CENTRAL = RunContext(exporter_url="http://servescope.monitoring.svc:9108", exporter_per_instance=True)


def base(instance: str, *allow: str, prometheus: str | None = None) -> str:
    ctx = CENTRAL.model_copy(update={"exporter_allow": allow, "prometheus_url": prometheus})
    return exporter_base(ctx.for_labels({"instance": instance}))


@pytest.fixture
def targets(monkeypatch: pytest.MonkeyPatch) -> Iterator[dict[str, str]]:
    """Prometheus' active targets of the exporter job, as /api/v1/targets would give them."""
    found = {
        "node-a": "http://10.1.0.4:9108",
        "node-b": "http://10.1.0.5:9108",
        "10.1.0.5:9108": "http://10.1.0.5:9108",
    }
    TARGETS.forget()
    monkeypatch.setattr(TARGETS, "_ask", staticmethod(lambda ctx: found))
    yield found
    TARGETS.forget()


def test_a_node_name_is_found_through_prometheus_targets(targets: dict[str, str]) -> None:
    assert base("node-b", prometheus="http://prom:9090") == "http://10.1.0.5:9108"
    assert base("10.1.0.5:9108", prometheus="http://prom:9090") == "http://10.1.0.5:9108"
    with pytest.raises(RefusedTargetError, match=r"the exporter of instance 'node-z'.*not known") as refused:
        base("node-z", prometheus="http://prom:9090")
    assert "another node's exporter would answer for it" in str(refused.value)


@pytest.mark.parametrize(
    ("instance", "allow", "expected"),
    [
        ("10.0.0.5:9108", "10.0.0.0/8", "http://10.0.0.5:9108"),
        ("gpu-node-7.nodes.example:9108", "*.nodes.example", "http://gpu-node-7.nodes.example:9108"),
        ("GPU-node-7.Nodes.Example:9108", "*.nodes.example", "http://GPU-node-7.Nodes.Example:9108"),
        ("[fd00::5]:9108", "fd00::/8", "http://[fd00::5]:9108"),
        ("node-b", "node-b", "http://node-b:9108"),  # an exact name, on the exporters' port
        ("anything.example:9108", "*", "http://anything.example:9108"),
    ],
)
def test_allow_entries_match_addresses_names_and_patterns(instance: str, allow: str, expected: str) -> None:
    assert base(instance, allow) == expected


@pytest.mark.parametrize(
    "instance",
    [
        "169.254.169.254:9108",
        "[::ffff:169.254.169.254]:9108",
        "[::ffff:a9fe:a9fe]:9108",
        "[64:ff9b::a9fe:a9fe]:9108",
        "[::ffff:127.0.0.1]:9108",
        "2852039166:9108",
        "0xa9.0xfe.0xa9.0xfe:9108",
        "169.254.43518:9108",
        "[fe80::1]:9108",
        "metadata.google.internal:9108",
        "metadata.google.internal.",
        "[fd00:ec2::254]:9108",
    ],
)
def test_link_local_metadata_and_mapped_addresses_are_never_asked(instance: str) -> None:
    with pytest.raises(RefusedTargetError) as refused:
        base(instance, "*", "0.0.0.0/0", "::/0")
    assert refused.value.refusal == "link_local"


def test_an_untrusted_instance_is_refused_naming_it() -> None:
    with pytest.raises(RefusedTargetError, match=r"'evil.example:9108'.*no --prometheus-url") as refused:
        base("evil.example:9108", "10.0.0.0/8")
    assert refused.value.refusal == "untrusted"


def test_no_instance_label_keeps_the_configured_exporter() -> None:
    assert exporter_base(CENTRAL.for_labels({})) == CENTRAL.exporter_url


def test_off_by_default() -> None:
    ctx = RunContext(exporter_url="http://127.0.0.1:9108")
    assert ctx.for_labels({"instance": "10.0.0.5:9108"}) is ctx


@pytest.mark.parametrize(
    ("host", "entries", "expected"),
    [
        ("x.nodes.example", ("*.nodes.example",), True),
        ("nodes.example", ("*.nodes.example",), False),
        ("10.0.0.1", ("10.0.0.0/8",), True),
        ("10.0.0.1", ("fd00::/8",), False),
        ("node-b", ("node-b",), True),
        ("node-bb", ("node-b",), False),
    ],
)
def test_allowed(host: str, entries: tuple[str, ...], expected: bool) -> None:
    assert allowed(host, entries) is expected


@given(st.text(min_size=1, max_size=80))
def test_no_label_value_leads_outside_the_allowed_network(instance: str) -> None:
    try:
        url = urlsplit(base(instance, "10.0.0.0/8"))
    except RefusedTargetError:
        return
    address = parse_address(url.hostname or "")
    assert url.scheme == "http" and address is not None and address.version == 4
    assert str(address).startswith("10.") and url.path == "" and not url.query and url.username is None
