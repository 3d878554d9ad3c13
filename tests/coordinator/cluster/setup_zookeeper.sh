#!/usr/bin/env bash
# Install ZooKeeper for the cluster-mode tests, when it is missing: Debian's `zookeeper` package
# (3.8; the server jar lands in /usr/share/java/zookeeper.jar). Tests start their own servers on
# free loopback ports (coordinator/cluster/local_zookeeper.py); nothing runs as a system service.
#
# Elsewhere, install ZooKeeper 3.6+ by hand and export GROUPCOORD_ZOOKEEPER_CLASSPATH with its jars
# (e.g. '/opt/zookeeper/lib/*'). This script never fails the test run: without ZooKeeper the
# cluster tests fail with a message saying what to install, and the rest of the suite runs.
set -uo pipefail

log() { echo "[setup_zookeeper] $*" >&2; }

if [[ -n "${GROUPCOORD_ZOOKEEPER_CLASSPATH:-}" ]]; then
    log "using GROUPCOORD_ZOOKEEPER_CLASSPATH=$GROUPCOORD_ZOOKEEPER_CLASSPATH"
    exit 0
fi
if [[ -f /usr/share/java/zookeeper.jar ]]; then
    exit 0
fi
if ! command -v apt-get >/dev/null 2>&1; then
    log "ZooKeeper is missing and this is not a Debian/Ubuntu machine: install ZooKeeper 3.6+ and set"
    log "GROUPCOORD_ZOOKEEPER_CLASSPATH to its jars; the cluster tests will fail until then"
    exit 0
fi
SUDO=""
if [[ $(id -u) -ne 0 ]]; then
    if command -v sudo >/dev/null 2>&1 && sudo -n true 2>/dev/null; then
        SUDO="sudo -n"
    else
        log "ZooKeeper is missing: run 'apt-get install -y zookeeper' as root; the cluster tests will fail until then"
        exit 0
    fi
fi
log "installing Debian's zookeeper package"
export DEBIAN_FRONTEND=noninteractive
if ! $SUDO apt-get install -y -q zookeeper >/dev/null; then
    $SUDO apt-get update -q >/dev/null && $SUDO apt-get install -y -q zookeeper >/dev/null \
        || log "apt-get install zookeeper failed; the cluster tests will fail until it is installed"
fi
[[ -f /usr/share/java/zookeeper.jar ]] && log "done: /usr/share/java/zookeeper.jar"
exit 0
