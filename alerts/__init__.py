"""Alert rules as code: one config object in, Prometheus rules, the PrometheusRule CRD and "
"Alertmanager out."""
