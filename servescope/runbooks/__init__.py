"""Executable runbooks: `pages/<AlertName>.md` (package data) whose `step` blocks name typed actions,
and the service that runs them (pages, Run buttons, the Alertmanager webhook and its incidents).

A runbook is Markdown with YAML front matter (alert, severity, summary) and fenced `step` blocks; a step's
parameters are literals or exactly one `{{ labels.<name> }}` template, bound from the alert's labels and
validated by the action's typed parameters before anything runs. Read actions only read (the exporter's
/metrics and JSON API, Prometheus, `dcgmi dmon`); change actions print what they would do unless executed
explicitly, and run subprocesses only from fixed argument lists, never through a shell.

Where things are, from the Markdown to the browser:

    settings.py                       every flag and SERVESCOPE_RUNBOOK_* variable (four areas)
    model.py, document.py,            a runbook file: its types; the file and the folder; one step block
      step_block.py, binding.py       and the `{{ labels.x }}` templates
    actions/                          the typed actions (params.py: the whitelists; base.py: context,
                                      result, registry; text.py: how numbers are shown; fetch.py and
                                      trust.py: every HTTP read bounded, and only of trusted hosts)
    runner.py                         binding a step to labels and running it
    cli.py, cli_output.py             `servescope runbook list|show|run`
    server_cli.py, server.py          `servescope runbook-server`, and the app (or the exporter's routes)
    asgi.py, connections.py,          body limits and HEAD; the connection cap and header timeout; the
      step_pool.py                    bounded pool step runs take their threads from
    runbook_routes.py, step_routes.py the pages and their Run buttons
    webhook.py, payload.py,           Alertmanager's webhook, and the incidents it opens (incident_db.py:
      incident_service.py,            the SQLite file, moved aside when unusable)
      incidents.py, incident_db.py
    shell.py, markdown.py,            the pages' style and script (common/html.py is the shell), the
      runbook_html.py, incident_html.py one Markdown renderer, the page bodies
    auth.py, audit.py                 the tokens (change steps, webhook) and the change-step audit log
"""
