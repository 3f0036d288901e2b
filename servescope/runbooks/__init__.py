"""Executable runbooks: `pages/<AlertName>.md` (package data) whose `step` blocks name typed actions,
and the service that runs them (pages, Run buttons, the Alertmanager webhook and its incidents).

A runbook is Markdown with YAML front matter (alert, severity, summary) and fenced `step` blocks; a step's
parameters are literals or exactly one `{{ labels.<name> }}` template, bound from the alert's labels and
validated by the action's typed parameters before anything runs. Read actions only read (the exporter's
/metrics and JSON API, Prometheus, `dcgmi dmon`); change actions print what they would do unless executed
explicitly, and run subprocesses only from fixed argument lists, never through a shell.
"""
