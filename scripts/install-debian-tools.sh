#!/usr/bin/env bash
# Installs the Debian packages servescope runs for real, when missing:
#   (default)  what the tests need: `prometheus` (promtool, prometheus), `prometheus-alertmanager`
#              (amtool, alertmanager) and `chromium` (the browser test). Exits 1 when it cannot.
#   --demo     what `make demo` needs: prometheus and prometheus-alertmanager only. When they cannot be
#              installed (no root, no sudo, no network) it says so and exits 0: the demo runs without them.
#   --bench    what `make bench` needs: prometheus (alert quality) and prometheus-node-exporter (the scrape
#              reference point). Like --demo it exits 0 when it cannot: each benchmark says what it lacks.
# Needs root or sudo; prints what to do otherwise.
set -euo pipefail

mode=${1:-}
case "$mode" in
  "" | --demo | --bench) ;;
  *) echo "usage: $0 [--demo | --bench]" >&2; exit 2 ;;
esac
# demo and bench run without the packages rather than fail (and never wait for a sudo password).
demo=false
[ -n "$mode" ] && demo=true

missing=()
command -v promtool >/dev/null 2>&1 || missing+=(prometheus)
if [ "$mode" = --bench ]; then
  command -v prometheus-node-exporter >/dev/null 2>&1 || command -v node_exporter >/dev/null 2>&1 \
    || missing+=(prometheus-node-exporter)
else
  command -v amtool >/dev/null 2>&1 || missing+=(prometheus-alertmanager)
fi
[ -n "$mode" ] || command -v chromium >/dev/null 2>&1 || missing+=(chromium)

[ ${#missing[@]} -eq 0 ] && exit 0

give_up() {
  echo "servescope needs the Debian packages: ${missing[*]}. Install them as root:" >&2
  echo "  apt-get install -y --no-install-recommends ${missing[*]}" >&2
  if $demo; then
    echo "(running without them: $mode leaves out what needs them and says so)" >&2
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
case "$mode" in
  --bench) command -v promtool >/dev/null ;;
  --demo) command -v promtool >/dev/null && command -v amtool >/dev/null ;;
  *) command -v promtool >/dev/null && command -v amtool >/dev/null && command -v chromium >/dev/null ;;
esac
