"""`python -m tests.support.kube CONFIG.json HOST:PORT`: the fake API server as a process of its own
(inside a test's network namespace), its requests appended to CONFIG's `log` as JSON Lines.

CONFIG: {"rbac": "<rendered manifests YAML>", "tokens": {"<token>": ["namespace", "serviceaccount"]},
"objects": [...], "installed": [["group", "plural"], ...], "log": "<path>"}.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from tests.support.kube.rbac import Rbac
from tests.support.kube.server import FakeApi, serve
from tests.support.kube.store import Store


class _LoggedApi(FakeApi):
    log_path: Path

    def record(self, entry: dict[str, object]) -> None:
        super().record(entry)
        with self.log_path.open("a") as handle:
            handle.write(json.dumps(entry) + "\n")


def main() -> None:
    config = json.loads(Path(sys.argv[1]).read_text())
    host, _, port = sys.argv[2].rpartition(":")
    store = Store()
    for obj in config.get("objects", []):
        store.add(obj)
    tokens = {token: (account[0], account[1]) for token, account in config["tokens"].items()}
    api = _LoggedApi(store, Rbac.from_yaml(config["rbac"]), tokens)
    api.log_path = Path(config["log"])
    api.installed |= {(group, plural) for group, plural in config.get("installed", [])}
    server = serve(api, host, int(port))
    print(f"fake kube api serving on {host}:{server.server_address[1]}", flush=True)
    server.serve_forever()


if __name__ == "__main__":
    main()
