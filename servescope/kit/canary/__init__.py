"""`servescope canary analyze`: a canary revision of a model against its stable revision, per SLI, from
Prometheus, with the test each verdict rests on, its effect size and its sample counts."""
