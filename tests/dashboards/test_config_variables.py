"""Dashboards built from a config: a fleet label of the config (fleet_by) becomes a variable that narrows
every filter after it, and the runbook link is the config's; the defaults add nothing."""

from __future__ import annotations

from servescope.bundle.dashboards.build import names, render
from servescope.core.config import AlertsConfig

FLEETS = AlertsConfig.model_validate({"fleet_by": ["cluster"], "runbook_base_url": "https://rb.example"})


def _variables(name: str, cfg: AlertsConfig) -> dict[str, dict]:  # type: ignore[type-arg]
    return {v["name"]: v for v in render(name, cfg)["templating"]["list"]}


def test_a_fleet_label_is_a_variable_that_narrows_the_filters_after_it() -> None:
    for name in names():
        found = _variables(name, FLEETS)
        filters = set(found) - {"datasource", "cluster"}
        if not filters:
            assert "cluster" not in found, name  # a dashboard that filters nothing gets no fleet filter
            continue
        assert list(found)[:2] == ["datasource", "cluster"], name
        assert found["cluster"]["query"] == "label_values(servescope_gpu_info, cluster)"
        for variable in filters:
            assert 'cluster=~"$cluster"' in found[variable]["query"], (name, variable)
            # "All" is the values within the chosen clusters, not every value.
            assert found[variable].get("allValue") is None, (name, variable)


def test_the_defaults_have_no_fleet_variable_and_match_everything() -> None:
    for name in names():
        found = _variables(name, AlertsConfig())
        assert "cluster" not in found
        assert all(v.get("allValue") == ".*" for key, v in found.items() if key != "datasource"), name


def test_every_dashboard_links_to_the_configured_runbooks() -> None:
    for name in names():
        links = {link["title"]: link["url"] for link in render(name, FLEETS)["links"]}
        assert links["Runbooks"] == "https://rb.example/runbooks", name
