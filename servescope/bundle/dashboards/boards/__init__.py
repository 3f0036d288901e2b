"""One module per dashboard, each defining `dashboard(cfg)`: the dashboard built from an alerts config.
Its name with `-` for `_` is the JSON file name."""
