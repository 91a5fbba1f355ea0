#!/usr/bin/env bash
# Installs the Debian packages ge-plugin needs, only those missing, so that a second run does nothing.
#   libb64-0d:          perf_analyzer (shipped in tritonclient 2.51.0) links libb64.so.0d.
#   libjemalloc2:       ge-plugin serve preloads it into tritonserver (serve/memory.py, --jemalloc).
#   kubernetes-client:  `kubectl kustomize` renders the `ge-plugin deploy k8s` base in the tests; installed
#                       only when no kubectl is on PATH (a newer one from elsewhere is kept).
set -euo pipefail
packages=(libb64-0d libjemalloc2)
command -v kubectl >/dev/null || packages+=(kubernetes-client)
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
[ ${#missing[@]} -eq 0 ] && exit 0
if ! command -v apt-get >/dev/null; then
  echo "system-deps: apt-get not found; install ${missing[*]} by hand (perf_analyzer, ge-plugin serve and the deploy tests use them)" >&2
  exit 0
fi
sudo=""
[ "$(id -u)" -ne 0 ] && sudo="sudo"
echo "system-deps: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
$sudo apt-get install -y -q --no-install-recommends "${missing[@]}" >/dev/null 2>&1 || {
  $sudo apt-get update -q >/dev/null
  $sudo apt-get install -y -q --no-install-recommends "${missing[@]}" >/dev/null
}
