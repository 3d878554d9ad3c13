#!/usr/bin/env bash
# Install Prometheus for tests/coordinator/ops/test_grafana_queries.py, when it is missing: Debian's
# `prometheus` package (the server binary lands in /usr/bin/prometheus). The test starts its own
# Prometheus on a free loopback port with a temporary configuration and storage directory; the
# package's own service is not used (policy-rc.d or a stopped systemd unit is fine).
#
# Elsewhere, put a Prometheus 2.x binary on PATH or export GROUPCOORD_PROMETHEUS with its path.
# This script never fails the test run: without Prometheus the Grafana query test fails with a
# message naming this script, and the rest of the suite runs.
set -uo pipefail

log() { echo "[setup_prometheus] $*" >&2; }

if [[ -n "${GROUPCOORD_PROMETHEUS:-}" ]]; then
    log "using GROUPCOORD_PROMETHEUS=$GROUPCOORD_PROMETHEUS"
    exit 0
fi
if command -v prometheus >/dev/null 2>&1; then
    exit 0
fi
if ! command -v apt-get >/dev/null 2>&1; then
    log "Prometheus is missing and this is not a Debian/Ubuntu machine: install Prometheus 2.x and put it"
    log "on PATH or set GROUPCOORD_PROMETHEUS to its binary; the Grafana query test will fail until then"
    exit 0
fi
SUDO=""
if [[ $(id -u) -ne 0 ]]; then
    if command -v sudo >/dev/null 2>&1 && sudo -n true 2>/dev/null; then
        SUDO="sudo -n"
    else
        log "Prometheus is missing: run 'apt-get install -y --no-install-recommends prometheus' as root;"
        log "the Grafana query test will fail until then"
        exit 0
    fi
fi
log "installing Debian's prometheus package"
export DEBIAN_FRONTEND=noninteractive
# Without recommends: the node exporter it recommends is of no use to the test.
if ! $SUDO apt-get install -y -q --no-install-recommends prometheus >/dev/null; then
    $SUDO apt-get update -q >/dev/null && $SUDO apt-get install -y -q --no-install-recommends prometheus >/dev/null \
        || log "apt-get install prometheus failed; the Grafana query test will fail until it is installed"
fi
command -v prometheus >/dev/null 2>&1 && log "done: $(command -v prometheus)"
exit 0
