"""The bundle: alert rules, Alertmanager config, dashboards and runbook pages, from one config."""
