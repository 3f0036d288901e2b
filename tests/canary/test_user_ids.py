"""`servescope load --user-id-header`: stable, bucketed user ids a gateway can route a known share of
users by, and the answers counted per bucket and per revision the gateway names.

The gateway is a loopback stand-in for an HTTPRoute header match: ids whose bucket is 00-09 go to the
canary, the rest to stable, and the answer says which in `x-served-by` (a ResponseHeaderModifier per
backend does that in Gateway API).
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest
from prometheus_client import CollectorRegistry

from servescope.kit.load.client import RequestSpec
from servescope.kit.load.metrics import LoadMetrics
from servescope.kit.load.runner import HttpStepRunner
from servescope.kit.load.schedule import LengthDistribution
from servescope.kit.load.user_ids import USER_REQUESTS, UserIds, UserIdSettings, attach_user_ids
from tests.support.http_fakes import QuietHandler, loopback_http

SERVESCOPE = str(Path(sys.executable).with_name("servescope"))
CANARY_BUCKETS = re.compile(r"^b0[0-9]-")  # the header match: buckets 00-09 of 100, 10 % of the users
SETTINGS = UserIdSettings(
    user_id_header="x-user-id", users=500, user_buckets=100, revision_header="x-served-by"
)


@pytest.fixture
def gateway() -> Iterator[tuple[str, list[str]]]:
    seen: list[str] = []

    class Gateway(QuietHandler):
        def answer(self, method: str) -> None:
            self.rfile.read(int(self.headers.get("Content-Length") or 0))
            if self.path != "/v1/completions":  # the route splits completions; nothing else is served
                self.reply(404, b"not routed\n", "text/plain")
                return
            user = self.headers.get("x-user-id", "")
            seen.append(user)
            backend = "canary2" if CANARY_BUCKETS.match(user) else "stable1"
            body = {"choices": [{"text": "hi"}], "usage": {"prompt_tokens": 4, "completion_tokens": 1}}
            self.reply(200, json.dumps(body).encode(), "application/json", {"x-served-by": backend})

    with loopback_http(Gateway) as base:
        yield base, seen


def test_a_user_keeps_its_bucket_and_its_id_names_it() -> None:
    ids = UserIds(SETTINGS, seed=7, registry=CollectorRegistry())
    assert ids.user_id(123) == "b23-u123" and ids.user_id(5) == "b05-u005"
    again = UserIds(SETTINGS, seed=7, registry=CollectorRegistry())
    drawn = [ids.next_id() for _ in range(20_000)]
    assert drawn[:100] == [again.next_id() for _ in range(100)]  # the same seed, the same users
    buckets = Counter(user.split("-")[0] for user in drawn)
    assert len(buckets) == 100
    share = sum(n for bucket, n in buckets.items() if bucket < "b10") / len(drawn)
    assert share == pytest.approx(0.10, abs=0.01)  # 10 of 100 buckets: 10 % of the requests
    with pytest.raises(ValueError, match="not an HTTP header name"):
        UserIdSettings(user_id_header="x user")


@pytest.mark.e2e
def test_the_gateway_routes_whole_buckets_and_the_answers_are_counted_per_bucket(
    gateway: tuple[str, list[str]],
) -> None:
    base, seen = gateway
    metrics = LoadMetrics()
    runner = HttpStepRunner(RequestSpec(base, "m", stream=False), LengthDistribution(8, 1), metrics=metrics)
    ids = attach_user_ids(runner, SETTINGS, seed=3)
    assert ids is not None
    result = runner.run_step(40.0, 3.0, seed=3)
    assert result.records and all(record.error is None for record in result.records)
    assert len(seen) == len(result.records) and all(re.fullmatch(r"b\d\d-u\d{3}", user) for user in seen)
    counted = {
        (sample.labels["user_bucket"], sample.labels["revision"]): sample.value
        for family in metrics.registry.collect()
        for sample in family.samples
        if sample.name == USER_REQUESTS
    }
    assert sum(counted.values()) == len(seen)
    # A bucket is answered by one revision only, and the canary's are exactly 00-09.
    assert {bucket for bucket, revision in counted if revision == "canary2"} <= {
        f"{b:02d}" for b in range(10)
    }
    assert all(revision == "stable1" for bucket, revision in counted if bucket >= "10")
    canary = sum(v for (_, revision), v in counted.items() if revision == "canary2")
    print(f"{len(seen)} requests, {canary:.0f} answered by the canary ({canary / len(seen):.1%})")
    assert 0.02 < canary / len(seen) < 0.25  # ~120 requests at 10 %: well within binomial bounds


@pytest.mark.e2e
def test_the_load_command_sends_the_header_and_prints_the_split(gateway: tuple[str, list[str]]) -> None:
    base, seen = gateway
    argv = [SERVESCOPE, "load", "run", "--url", base, "--model", "m", "--no-stream", "--no-engine-metrics"]
    argv += [
        "--rate",
        "20",
        "--duration",
        "2",
        "--user-id-header",
        "x-user-id",
        "--revision-header",
        "x-served-by",
    ]
    done = subprocess.run(argv, capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode in (0, 3), done.stdout + done.stderr  # 3: a busy machine's invalid step
    assert seen and all(CANARY_BUCKETS.match(user) or re.match(r"^b[1-9][0-9]-", user) for user in seen)
    assert re.search(r"answered by revision: canary2 \d+, stable1 \d+", done.stdout), done.stdout
