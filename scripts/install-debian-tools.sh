#!/usr/bin/env bash
# Installs the Debian packages the test suite runs for real (promtool from `prometheus`, amtool from `prometheus-alertmanager`, `chromium` for the browser test), when missing.
# Needs root or sudo; prints what to do otherwise.
set -euo pipefail

missing=()
command -v promtool >/dev/null 2>&1 || missing+=(prometheus)
command -v amtool >/dev/null 2>&1 || missing+=(prometheus-alertmanager)
command -v chromium >/dev/null 2>&1 || missing+=(chromium)

[ ${#missing[@]} -eq 0 ] && exit 0

if [ "$(id -u)" -eq 0 ]; then
  sudo=()
elif command -v sudo >/dev/null 2>&1; then
  sudo=(sudo)
else
  echo "servescope tests need: ${missing[*]} (Debian packages). Install them as root:" >&2
  echo "  apt-get install -y --no-install-recommends ${missing[*]}" >&2
  exit 1
fi

echo "installing Debian packages: ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
"${sudo[@]}" apt-get update -qq
"${sudo[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
command -v promtool >/dev/null && command -v amtool >/dev/null && command -v chromium >/dev/null
