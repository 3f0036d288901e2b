"""Executable runbooks: `pages/<AlertName>.md` (package data) whose `step` blocks name typed actions,
and the service that runs them (pages, Run buttons, the Alertmanager webhook and its incidents).

A runbook is Markdown with YAML front matter (alert, severity, summary) and fenced `step` blocks; a step's
parameters are literals or exactly one `{{ labels.<name> }}` template, bound from the alert's labels and
validated by the action's typed parameters before anything runs. Read actions only read (the alert's own
exporter's /metrics and JSON API, DCGM fields included, and Prometheus); change actions print the exact
Kubernetes API calls they would make unless executed explicitly, and act through the API (lightkube,
common/kube.py), never through a shell or a binary.

Where things are, from the Markdown to the browser:

    settings.py                       every flag and SERVESCOPE_RUNBOOK_* variable (four areas)
    model.py, document.py,            a runbook file: its types; the file and the folder; one step block
      step_block.py, binding.py       and the `{{ labels.x }}` templates
    actions/                          the typed actions (params.py: the whitelists; base.py: context,
                                      result, registry; text.py: how numbers are shown; fetch.py and
                                      trust.py: every HTTP read bounded, and only of trusted hosts)
    runner.py                         binding a step to labels and running it
    cli.py, cli_output.py             `servescope runbook list|show|run`
    server_cli.py, server.py          `servescope runbook-server` (core/http_server.py bounds it), the app
    asgi.py, step_pool.py             body limits and HEAD; the bounded pool step runs take threads from
    runbook_routes.py, step_routes.py the pages and their Run buttons
    webhook.py, payload.py,           Alertmanager's webhook, and the incidents it opens (incident_db.py:
      incident_service.py,            the SQLite file, moved aside when unusable; caps.py: what is kept
      incidents.py, incident_db.py,   of an alert; retention.py: what is deleted; the service resumes
      caps.py, retention.py           read steps a stop left unfinished)
    shell.py, markdown.py,            the pages, Jinja2 templates in templates/ (core/html.py builds the
      runbook_html.py, incident_html.py environment and the shell); the prose by markdown-it-py
    auth.py, audit.py, refusals.py    the tokens (change steps, webhook), the hash-chained audit trail, and
                                      what refused requests become (counts, rate-limited logs)
"""
