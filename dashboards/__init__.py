"""Grafana dashboards as code (grafanalib): one `<name>.dashboard.py` per dashboard, built to JSON."""
