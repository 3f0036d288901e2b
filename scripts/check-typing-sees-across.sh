#!/usr/bin/env bash
# Proves that mypy sees across the package's folders: a module of the alert bundle that uses a name the
# exporter's catalog does not have must fail the type check. (With the old package-dir mapping this
# passed silently.) mypy checks a shadow copy of alerts/config.py with one wrong line appended; the
# file on disk is never changed.
set -euo pipefail
cd "$(dirname "$0")/.."
mypy=${MYPY:-.venv/bin/mypy}
target=servescope/core/config.py
shadow=$(mktemp --suffix=.py)
trap 'rm -f "$shadow"' EXIT
cat "$target" > "$shadow"
printf '\n\nfrom servescope.core import catalog as _catalog\n\nwrong: int = _catalog.NO_SUCH_NAME.oops()\n' >> "$shadow"
if out=$("$mypy" --no-incremental --shadow-file "$target" "$shadow" "$target" 2>&1); then
  echo "FAIL: mypy accepted a cross-folder reference to a missing name:" >&2
  echo "$out" >&2
  exit 1
fi
if ! grep -q 'NO_SUCH_NAME' <<<"$out"; then
  echo "FAIL: mypy failed, but not on the deliberate error:" >&2
  echo "$out" >&2
  exit 1
fi
echo "ok: mypy refuses a wrong cross-folder reference ($(grep -c 'error:' <<<"$out") error)"
