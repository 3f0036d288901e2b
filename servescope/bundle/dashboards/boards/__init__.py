"""One module per dashboard, each defining `dashboard`; its name with `-` for `_` is the JSON file name."""
