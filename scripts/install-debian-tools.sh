#!/usr/bin/env bash
# Installs the Debian packages servescope runs for real, when missing:
#   (default)  what the tests need: `prometheus` (promtool, prometheus), `prometheus-alertmanager`
#              (amtool, alertmanager) and `chromium` (the browser test). Exits 1 when it cannot.
#   --demo     what `make demo` needs: prometheus and prometheus-alertmanager only. When they cannot be
#              installed (no root, no sudo, no network) it says so and exits 0: the demo runs without them.
# Needs root or sudo; prints what to do otherwise.
set -euo pipefail

demo=false
[ "${1:-}" = "--demo" ] && demo=true

missing=()
command -v promtool >/dev/null 2>&1 || missing+=(prometheus)
command -v amtool >/dev/null 2>&1 || missing+=(prometheus-alertmanager)
$demo || command -v chromium >/dev/null 2>&1 || missing+=(chromium)

[ ${#missing[@]} -eq 0 ] && exit 0

give_up() {
  echo "servescope needs the Debian packages: ${missing[*]}. Install them as root:" >&2
  echo "  apt-get install -y --no-install-recommends ${missing[*]}" >&2
  if $demo; then
    echo "(the demo runs without them, with no Prometheus or Alertmanager)" >&2
    exit 0
  fi
  exit 1
}

if [ "$(id -u)" -eq 0 ]; then
  sudo=()
elif command -v sudo >/dev/null 2>&1 && ! $demo; then
  sudo=(sudo)
elif command -v sudo >/dev/null 2>&1 && sudo -n true 2>/dev/null; then
  sudo=(sudo -n)  # the demo never waits for a password: it runs without the packages instead
else
  give_up
fi

echo "installing Debian packages: ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
if ! { "${sudo[@]}" apt-get update -qq && \
       "${sudo[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null; }; then
  give_up
fi
command -v promtool >/dev/null && command -v amtool >/dev/null && { $demo || command -v chromium >/dev/null; }
