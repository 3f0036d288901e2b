"""A central runbook service asks the exporter of the alert's own node, named by its `instance` label,
and only when that label is a plain host:port on the exporters' port (labels are untrusted)."""

from __future__ import annotations

from urllib.parse import urlsplit

import pytest
from hypothesis import given
from hypothesis import strategies as st

from servescope.runbooks.actions import RunContext

CENTRAL = RunContext(exporter_url="http://servescope.monitoring.svc:9108", exporter_per_instance=True)


@pytest.mark.parametrize(
    ("instance", "expected"),
    [
        ("10.0.0.5:9108", "http://10.0.0.5:9108"),
        ("gpu-node-7.cluster.local:9108", "http://gpu-node-7.cluster.local:9108"),
        ("[fd00::5]:9108", "http://[fd00::5]:9108"),
    ],
)
def test_the_alerts_exporter_is_asked(instance: str, expected: str) -> None:
    assert CENTRAL.for_labels({"instance": instance}).exporter_url == expected


@pytest.mark.parametrize(
    "instance",
    [
        "",
        "10.0.0.5:22",  # not the exporters' port
        "10.0.0.5",
        "evil.example/x:9108",
        "user@host:9108",
        "http://host:9108",
        "host:9108/metrics",
        "a b:9108",
        "host:9108?x=1",
        "-host:9108",
    ],
)
def test_anything_else_keeps_the_configured_exporter(instance: str) -> None:
    assert CENTRAL.for_labels({"instance": instance}).exporter_url == CENTRAL.exporter_url


def test_off_by_default() -> None:
    ctx = RunContext(exporter_url="http://127.0.0.1:9108")
    assert ctx.for_labels({"instance": "10.0.0.5:9108"}) is ctx


@given(st.text(max_size=80))
def test_no_label_value_leaves_the_exporters_port_or_adds_a_path(instance: str) -> None:
    url = urlsplit(CENTRAL.for_labels({"instance": instance}).exporter_url)
    assert url.scheme == "http" and url.port == 9108
    assert url.path == "" and not url.query and not url.fragment and url.username is None
