#!/usr/bin/env bash
# Install the browser for the dashboard's browser tests, when it is missing: Debian's `chromium`
# (and `chromium-driver`), driven by Playwright's Python package pointed at /usr/bin/chromium
# (Playwright cannot download its own browsers here). Never fails the run: without Chromium the
# browser tests fail with a message saying what to install, and the rest of the suite runs.
set -uo pipefail

log() { echo "[setup_browser] $*" >&2; }

if [[ -n "${GROUPCOORD_CHROMIUM:-}" ]]; then
    log "using GROUPCOORD_CHROMIUM=$GROUPCOORD_CHROMIUM"
    exit 0
fi
if command -v chromium >/dev/null 2>&1; then
    exit 0
fi
if ! command -v apt-get >/dev/null 2>&1; then
    log "Chromium is missing and this is not a Debian/Ubuntu machine: install Chromium and set"
    log "GROUPCOORD_CHROMIUM to its executable; the browser tests will fail until then"
    exit 0
fi
SUDO=""
if [[ $(id -u) -ne 0 ]]; then
    if command -v sudo >/dev/null 2>&1 && sudo -n true 2>/dev/null; then
        SUDO="sudo -n"
    else
        log "Chromium is missing: run 'apt-get install -y chromium chromium-driver' as root"
        exit 0
    fi
fi
log "installing Debian's chromium and chromium-driver packages"
export DEBIAN_FRONTEND=noninteractive
if ! $SUDO apt-get install -y -q chromium chromium-driver >/dev/null; then
    $SUDO apt-get update -q >/dev/null && $SUDO apt-get install -y -q chromium chromium-driver >/dev/null \
        || log "apt-get install chromium failed; the browser tests will fail until it is installed"
fi
command -v chromium >/dev/null 2>&1 && log "done: $(command -v chromium)"
