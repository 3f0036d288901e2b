"""The Alertmanager webhook receiver: incidents in SQLite, read steps on a bounded pool, auth, limits."""
