#!/usr/bin/env bash
# librdkafka's own integration tests (its repository's tests/, see tests/README.md there) against
# groupcoord: a single node, or a 3-node cluster on ZooKeeper. Builds librdkafka offline if its
# test binary is missing, starts the server, runs each test in its own test-runner process (one
# hanging test cannot take the others with it) and prints a pass/fail table.
#
#   bench/librdkafka_suite.sh single            # the default test list against one node
#   bench/librdkafka_suite.sh cluster           # the same against `groupcoord cluster up --nodes 3`
#   TESTS="0011 0033 0081 0092" RUNS=3 bench/librdkafka_suite.sh cluster
#   GROUP_PROTOCOL=consumer TESTS=cgrp bench/librdkafka_suite.sh single   # KIP-848 consumers
#   TESTS=txn QUICK=0 bench/librdkafka_suite.sh single                    # transactions (issue 32)
#   SECURITY=sasl_ssl TESTS="0081 0097 0135" bench/librdkafka_suite.sh single   # SASL_SSL + ACLs (issue 33)
#   SECURITY=sasl_ssl REAUTH_MS=10000 QUICK=0 TESTS=0142 bench/librdkafka_suite.sh single   # KIP-368
#
# Environment (defaults in brackets):
#   LIBRDKAFKA_SRC   librdkafka checkout, outside this repository [/work/librdkafka-src]
#   LIBRDKAFKA_GIT   where to clone it from when missing [/work/.mirror/confluentinc+librdkafka/repo]
#   TESTS            test numbers to run [0001-0150 minus those below]; "cgrp" names the
#                    consumer-group tests librdkafka's CI also runs with the consumer protocol
#                    (CGRP_TESTS below); "txn" the tests that use transactions or idempotence
#                    against a real broker (TXN_TESTS below)
#   GROUP_PROTOCOL   classic or consumer: the consumers' group.protocol. "consumer" exports
#                    TEST_CONSUMER_GROUP_PROTOCOL=consumer, which test.c reads: every consumer the
#                    tests create gets group.protocol=consumer (test.conf cannot set it — test_create_
#                    handle sets it after reading test.conf), test_conf_set() then drops
#                    session.timeout.ms, heartbeat.interval.ms, partition.assignment.strategy and
#                    group.protocol.type, and tests branch on test_consumer_group_protocol_classic()
#                    [classic]
#   SKIP             never run: 0052 0077 0109 need Kafka's shell tools, 0064 and the SSL/SASL
#                    tests a secured listener [see DEFAULT_SKIP]; with SECURITY=sasl_ssl only
#                    0052 0077 0109 and 0126 (OAUTHBEARER OIDC: an identity provider)
#   SECURITY         plaintext, or sasl_ssl: the node gets one SASL_SSL listener (a CA and a
#                    server certificate for 127.0.0.1 made here with openssl; SCRAM-SHA-256/512
#                    users and PLAIN's JAAS users admin/admin-secret) and the ACL authorizer with
#                    User:admin as its super user; test.conf logs in as admin over SASL_SSL, and
#                    the SSL_* variables 0097 reads (trivup's, in librdkafka's tests/README.md)
#                    point at a client certificate made here. Single node only [plaintext]
#   MECHANISM        sasl.mechanism of test.conf with SECURITY=sasl_ssl [SCRAM-SHA-512]
#   AUTHZ            with SECURITY=sasl_ssl: super (User:admin is a super user) or everyone (no
#                    super user, allow.everyone.if.no.acl.found=true: what 0081's DescribeTopics /
#                    DescribeCluster / DescribeConsumerGroups steps with authorized operations
#                    assume — they add an ACL for the test principal and expect only the
#                    operations it grants, which a super user never sees) [super]
#   REAUTH_MS        the node's connections.max.reauth.ms with SECURITY=sasl_ssl: 0142 reads it
#                    with DescribeConfigs and runs only when it is positive [0]
#   RUNS             runs of the whole list [1]
#   PORT             the (first) node's port, below the ephemeral range [19400]
#   TEST_KAFKA_VERSION  the broker version the tests assume [3.9.0]
#   TIMEOUT_S        wall-clock limit per test [600]
#   TIMEOUT_MULTIPLIER  librdkafka's test.timeout.multiplier (a loaded machine) [2]
#   QUICK            1: test-runner -Q (quick mode); 0: full mode. Quick mode runs only the
#                    subtests declared SUB_TEST_QUICK: most consumer-group tests (0018, 0019,
#                    0022, 0050, 0113, ...) declare theirs SUB_TEST and pass in quick mode without
#                    running anything [1]
#   DEBUG            librdkafka's debug contexts for every client, written to test.conf
#                    (e.g. cgrp,protocol: the logs then show each heartbeat) [none]
#   OUT              where logs and results go [/tmp/librdkafka-suite-<mode>-<date>]
#   PYTHON           the interpreter with groupcoord installed [python3]
#   SCENARIO         librdkafka's test scenario (tests/scenarios/): default, or noautocreate —
#                    the server then runs with auto.create.topics.enable=false and only the tests
#                    of that scenario run (0045's topic_remove / non_exist, 0107, 0111) [default];
#                    the scenario creates its topics with replication factor 3: cluster mode only
#
# The test-runner flags: -Q quick mode (fewer messages), -E no sockem (socket-fault) tests, -L no
# local-only tests (those run against librdkafka's mock cluster, not a broker).
set -u -o pipefail

MODE=${1:-single}
case "$MODE" in single|cluster) ;; *) echo "usage: $0 single|cluster" >&2; exit 2 ;; esac
HERE=$(cd "$(dirname "$0")/.." && pwd)
SRC=${LIBRDKAFKA_SRC:-/work/librdkafka-src}
GIT=${LIBRDKAFKA_GIT:-/work/.mirror/confluentinc+librdkafka/repo}
RUNS=${RUNS:-1}
PORT=${PORT:-19400}
KAFKA_VERSION=${TEST_KAFKA_VERSION:-3.9.0}
TIMEOUT_S=${TIMEOUT_S:-600}
MULT=${TIMEOUT_MULTIPLIER:-2}
PYTHON=${PYTHON:-python3}
OUT=${OUT:-/tmp/librdkafka-suite-$MODE-${GROUP_PROTOCOL:-classic}${SECURITY:+-$SECURITY}-$(date -u +%Y%m%dT%H%M%S)}
SECURITY=${SECURITY:-plaintext}
case "$SECURITY" in plaintext|sasl_ssl) ;; *) echo "SECURITY must be plaintext or sasl_ssl" >&2; exit 2 ;; esac
if [ "$SECURITY" = sasl_ssl ] && [ "$MODE" != single ]; then
    echo "SECURITY=sasl_ssl runs on a single node only" >&2; exit 2
fi
MECHANISM=${MECHANISM:-SCRAM-SHA-512}
REAUTH_MS=${REAUTH_MS:-0}
AUTHZ=${AUTHZ:-super}
case "$AUTHZ" in super|everyone) ;; *) echo "AUTHZ must be super or everyone" >&2; exit 2 ;; esac
DEFAULT_SKIP="0052 0077 0109 0064 0097 0115 0119 0124 0126 0128 0133 0134 0135 0142"
[ "$SECURITY" = sasl_ssl ] && DEFAULT_SKIP="0052 0077 0109 0126"
SKIP=${SKIP:-$DEFAULT_SKIP}
SCENARIO=${SCENARIO:-default}
QUICK=${QUICK:-1}
QUICK_FLAG=-Q
[ "$QUICK" = 0 ] && QUICK_FLAG=""
GROUP_PROTOCOL=${GROUP_PROTOCOL:-classic}
case "$GROUP_PROTOCOL" in
    classic) unset TEST_CONSUMER_GROUP_PROTOCOL ;;
    consumer) export TEST_CONSUMER_GROUP_PROTOCOL=consumer ;;
    *) echo "GROUP_PROTOCOL must be classic or consumer" >&2; exit 2 ;;
esac
CGRP_TESTS="0018 0019 0022 0029 0030 0031 0034 0045 0050 0051 0056 0069 0084 0099 0102 0106 0113 0118 0120 0122 0130 0132 0140 0153"
[ "${TESTS:-}" = cgrp ] && TESTS=$CGRP_TESTS
# The librdkafka tests that drive a real broker with transactions (their list in librdkafka's
# tests/test.c): 0103 (misuse, commit/abort, consume-transform-produce, fencing, empty transactions,
# watermarks by isolation level), 0129 (fetching aborted data only), 0090 (idempotence), and those
# calling init_transactions on the way: 0055 (latency), 0061 (consumer lag over transactions), 0137
# (barrier batch consume). Left out: 0098-consumer-txn is compiled only WITH_RAPIDJSON (this build
# has WITH_RAPIDJSON=n, so it only prints a skip) and drives Kafka's TransactionProducerCli through
# $KAFKA_PATH/bin/kafka-run-class.sh, a Kafka distribution we do not have (as 0052/0077/0109);
# 0094 is a sockem test (-E skips it); 0105 and 0144 run against librdkafka's mock cluster only (-L).
# 0103 creates its topics with replication factor 3: run it in cluster mode (on one node CreateTopics
# refuses, as a one-broker Kafka does). Its do_test_fatal_idempo_error_without_kip360 calls
# DeleteRecords; librdkafka's SUBTESTS=<substring of a subtest name> runs one subtest family alone.
TXN_TESTS="0103 0129 0090 0055 0061 0137"
[ "${TESTS:-}" = txn ] && TESTS=$TXN_TESTS
EXTRA_SETTINGS=()
# ASSIGNMENT_INTERVAL_MS: group.consumer.assignment.interval.ms for the server [0]. librdkafka's
# tests assume the Kafka 4.0-4.2 coordinator, which computes a target assignment on every group
# epoch bump; Kafka 4.3's batching (KIP-1263, default 1000 ms) holds back an assignment asked for
# within a second of the previous one until the member's next heartbeat, 5 s later, which test
# 0045's subscribe/unsubscribe/subscribe steps do not expect. ASSIGNMENT_INTERVAL_MS=1000 runs
# them with the default.
EXTRA_SETTINGS=(--set "group.consumer.assignment.interval.ms=${ASSIGNMENT_INTERVAL_MS:-0}")
if [ "$SCENARIO" = noautocreate ]; then
    EXTRA_SETTINGS+=(--set auto.create.topics.enable=false)
    TESTS=${TESTS:-0045 0107 0111}
fi
mkdir -p "$OUT"

# --- build (offline) -------------------------------------------------------------------------------
# With OpenSSL (Debian's libssl-dev): TLS, and SCRAM, which librdkafka implements itself on top of
# OpenSSL's HMAC/PBKDF2 (WITH_SASL_SCRAM needs WITH_SSL only); PLAIN is built in. Cyrus libsasl2 is
# needed for GSSAPI alone, which stays off. A build made without SSL is redone.
if ! grep -q '^#define WITH_SSL 1' "$SRC/config.h" 2>/dev/null; then
    rm -f "$SRC/tests/test-runner"
fi
if [ ! -x "$SRC/tests/test-runner" ]; then
    if [ ! -d "$SRC" ]; then
        git clone -q "$GIT" "$SRC" || exit 1
    fi
    if [ ! -f /usr/include/openssl/ssl.h ]; then
        echo "OpenSSL headers missing: apt-get install libssl-dev" >&2; exit 1
    fi
    echo "building librdkafka in $SRC (log: $OUT/build.log)"
    (cd "$SRC" && ./configure --no-download --enable-ssl --disable-gssapi --disable-curl && make clean \
        && make -j2 libs && make -C tests -j2 build) > "$OUT/build.log" 2>&1 \
        || { tail -20 "$OUT/build.log"; exit 1; }
fi
export LD_LIBRARY_PATH="$SRC/src:$SRC/src-cpp${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"

# --- the test list ---------------------------------------------------------------------------------
if [ -z "${TESTS:-}" ]; then
    # Every test numbered 0001-0150 that the build has (the list in test.c).
    TESTS=$(grep -o '_TEST_DECL([0-9]\{4\}_' "$SRC/tests/test.c" | grep -o '[0-9]\{4\}' | sort -u \
            | awk '$1 >= "0001" && $1 <= "0150"' | tr '\n' ' ')
fi
RUN_LIST=""
for t in $TESTS; do
    case " $SKIP " in *" $t "*) ;; *) RUN_LIST="$RUN_LIST $t" ;; esac
done

# --- the server ------------------------------------------------------------------------------------
SERVER_PID=""
stop_server() {
    if [ -n "$SERVER_PID" ] && kill -0 "$SERVER_PID" 2>/dev/null; then
        kill -INT "$SERVER_PID" 2>/dev/null   # `cluster up` stops its nodes on Ctrl-C; serve stops too
        for _ in $(seq 1 60); do kill -0 "$SERVER_PID" 2>/dev/null || break; sleep 0.5; done
        kill -TERM "$SERVER_PID" 2>/dev/null
    fi
}
trap stop_server EXIT

# --- SASL_SSL: certificates, users, settings --------------------------------------------------------
# A CA; the server's certificate for 127.0.0.1 / localhost (librdkafka checks the host name:
# ssl.endpoint.identification.algorithm=https); a client certificate with an encrypted key in PEM,
# DER and PKCS#12 for 0097, which reads them through trivup's SSL_* variables.
make_certs() {
    local d=$OUT/ssl pw=client-key-secret
    mkdir -p "$d" && cd "$d" || exit 1
    {
        openssl req -x509 -newkey rsa:2048 -nodes -keyout ca.key -out ca.pem -days 30 -subj "/CN=groupcoord test CA"
        openssl req -newkey rsa:2048 -nodes -keyout server.key -out server.csr -subj "/CN=localhost"
        printf 'subjectAltName=IP:127.0.0.1,DNS:localhost\n' > server.ext
        openssl x509 -req -in server.csr -CA ca.pem -CAkey ca.key -CAcreateserial -out server.crt -days 30 \
            -extfile server.ext
        cat server.crt server.key > server.pem
        openssl req -newkey rsa:2048 -keyout client.key -passout "pass:$pw" -out client.csr -subj "/CN=admin"
        openssl x509 -req -in client.csr -CA ca.pem -CAkey ca.key -CAcreateserial -out client.pem -days 30
        openssl x509 -in client.pem -outform DER -out client.der
        openssl x509 -in ca.pem -outform DER -out ca.der
        openssl pkey -in client.key -passin "pass:$pw" -outform DER -out client.key.der
        openssl pkcs12 -export -in client.pem -inkey client.key -passin "pass:$pw" -certfile ca.pem \
            -out client.p12 -passout "pass:$pw"
    } > "$OUT/certs.log" 2>&1 || { tail -20 "$OUT/certs.log"; exit 1; }
    export SSL_password=$pw SSL_pkcs=$d/client.p12 SSL_pub_der=$d/client.der SSL_pub_pem=$d/client.pem \
        SSL_priv_der=$d/client.key.der SSL_priv_pem=$d/client.key SSL_ca_der=$d/ca.der \
        SSL_all_cas_pem=$d/ca.pem SSL_client_auth=none
    cd "$HERE" || exit 1
}
SECURE_SETTINGS=()
if [ "$SECURITY" = sasl_ssl ]; then
    make_certs
    mkdir -p "$OUT/data"
    for mech in SCRAM-SHA-256 SCRAM-SHA-512; do
        PYTHONPATH="$HERE" "$PYTHON" -m coordinator users add admin --mechanism "$mech" --password admin-secret \
            --data-dir "$OUT/data" > /dev/null || exit 1
    done
    SECURE_SETTINGS=(--set "listeners=SASL_SSL://127.0.0.1:$PORT" --set "ssl.keystore.location=$OUT/ssl/server.pem"
        --set "sasl.enabled.mechanisms=SCRAM-SHA-512,SCRAM-SHA-256,PLAIN"
        --set "listener.name.sasl_ssl.plain.sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule required user_admin=\"admin-secret\";"
        --set authorizer.class.name=groupcoord --set "connections.max.reauth.ms=$REAUTH_MS")
    if [ "$AUTHZ" = super ]; then
        SECURE_SETTINGS+=(--set super.users=User:admin)
    else
        SECURE_SETTINGS+=(--set allow.everyone.if.no.acl.found=true)
    fi
fi

cd "$HERE"
if [ "$MODE" = single ]; then
    BOOTSTRAP="127.0.0.1:$PORT"
    LISTEN=(--listen "$BOOTSTRAP")
    [ "$SECURITY" = sasl_ssl ] && LISTEN=()
    PYTHONPATH="$HERE" setsid "$PYTHON" -m coordinator serve --data-dir "$OUT/data" "${LISTEN[@]}" \
        --set num.partitions=4 "${EXTRA_SETTINGS[@]}" "${SECURE_SETTINGS[@]}" > "$OUT/server.log" 2>&1 &
    SERVER_PID=$!
    READY="msg=listening"
else
    BOOTSTRAP="127.0.0.1:$PORT,127.0.0.1:$((PORT + 1)),127.0.0.1:$((PORT + 2))"
    PYTHONPATH="$HERE" setsid "$PYTHON" -m coordinator cluster up --nodes 3 --base-port "$PORT" --dir "$OUT/cluster" \
        --set num.partitions=4 --set default.replication.factor=3 "${EXTRA_SETTINGS[@]}" > "$OUT/server.log" 2>&1 &
    SERVER_PID=$!
    READY="$PORT"
fi
for _ in $(seq 1 120); do
    grep -q "$READY" "$OUT/server.log" 2>/dev/null && break
    kill -0 "$SERVER_PID" 2>/dev/null || { echo "server exited:"; tail -20 "$OUT/server.log"; exit 1; }
    sleep 0.5
done
sleep 2  # the cluster's controller elects the first leaders

printf 'bootstrap.servers=%s\ntest.timeout.multiplier=%s\n' "$BOOTSTRAP" "$MULT" > "$OUT/test.conf"
[ -n "${DEBUG:-}" ] && printf 'debug=%s\n' "$DEBUG" >> "$OUT/test.conf"
if [ "$SECURITY" = sasl_ssl ]; then
    # The client certificate is not asked for on SASL_SSL (ssl.client.auth is none): 0097 needs
    # ssl.key.location set to run, and sends it along.
    printf '%s\n' security.protocol=SASL_SSL "sasl.mechanism=$MECHANISM" sasl.username=admin \
        sasl.password=admin-secret "ssl.ca.location=$OUT/ssl/ca.pem" "ssl.certificate.location=$OUT/ssl/client.pem" \
        "ssl.key.location=$OUT/ssl/client.key" "ssl.key.password=$SSL_password" >> "$OUT/test.conf"
fi

# --- run ------------------------------------------------------------------------------------------
RESULTS="$OUT/results.tsv"
SEC_DESC=$SECURITY
[ "$SECURITY" = sasl_ssl ] && SEC_DESC="$SECURITY mechanism=$MECHANISM authz=$AUTHZ reauth.ms=$REAUTH_MS"
: > "$RESULTS"
echo "mode=$MODE bootstrap=$BOOTSTRAP librdkafka=$(git -C "$SRC" describe --tags --always 2>/dev/null)" \
     "TEST_KAFKA_VERSION=$KAFKA_VERSION scenario=$SCENARIO group.protocol=$GROUP_PROTOCOL quick=$QUICK runs=$RUNS" \
     "security=$SEC_DESC out=$OUT"
for run in $(seq 1 "$RUNS"); do
    for t in $RUN_LIST; do
        log="$OUT/run$run-$t.log"
        start=$(date +%s)
        # A failing test aborts its process (SIGABRT): the subshell reports it in the test's log.
        (cd "$SRC/tests" && RDKAFKA_TEST_CONF="$OUT/test.conf" TEST_KAFKA_VERSION="$KAFKA_VERSION" TESTS="$t" \
            timeout "$TIMEOUT_S" ./test-runner $QUICK_FLAG -E -L -s "$SCENARIO"; exit $?) > "$log" 2>&1
        rc=$?
        secs=$(( $(date +%s) - start ))
        # The summary table: "| 0033_regex_subscribe | PASSED | 68.297s |", one line per test of that number.
        rows=$(sed 's/\x1b\[[0-9;]*m//g' "$log" | grep -E "^\| *$t[_a-z0-9]* +\|" \
               | awk -F'|' '{gsub(/ /,"",$2); gsub(/ /,"",$3); print $2":"$3}' | tr '\n' ' ')
        if [ -z "$rows" ]; then
            if [ $rc -eq 124 ]; then rows="$t:TIMEOUT"; else rows="$t:NO-SUMMARY(rc=$rc)"; fi
        fi
        if echo "$rows" | grep -q -E "FAILED|TIMEOUT|NO-SUMMARY"; then
            verdict=FAIL
            reason=$(sed 's/\x1b\[[0-9;]*m//g' "$log" | grep -E "TEST FAILURE|Test .* FAILED|### Test" | head -2 \
                     | tr '\n' ' ' | cut -c1-300)
        elif echo "$rows" | grep -q PASSED; then
            verdict=PASS; reason=""
        else
            verdict=SKIP
            reason=$(sed 's/\x1b\[[0-9;]*m//g' "$log" | grep -i -E "skipping|skipped:" | head -1 | cut -c1-200)
        fi
        printf '%s\t%s\t%s\t%ss\t%s\t%s\n' "$run" "$t" "$verdict" "$secs" "$rows" "$reason" | tee -a "$RESULTS"
        kill -0 "$SERVER_PID" 2>/dev/null || { echo "the server exited during $t"; break 2; }
    done
done

# --- table ----------------------------------------------------------------------------------------
echo
echo "| test | $(for r in $(seq 1 "$RUNS"); do printf 'run %s | ' "$r"; done)"
echo "|---|$(for _ in $(seq 1 "$RUNS"); do printf -- '---|'; done)"
for t in $RUN_LIST; do
    line="| $t |"
    for r in $(seq 1 "$RUNS"); do
        v=$(awk -F'\t' -v r="$r" -v t="$t" '$1==r && $2==t {print $3" ("$4")"}' "$RESULTS")
        line="$line ${v:--} |"
    done
    echo "$line"
done
echo
echo "passed: $(awk -F'\t' '$3=="PASS"' "$RESULTS" | wc -l), failed: $(awk -F'\t' '$3=="FAIL"' "$RESULTS" | wc -l)," \
     "skipped: $(awk -F'\t' '$3=="SKIP"' "$RESULTS" | wc -l); logs in $OUT"
awk -F'\t' '$3=="FAIL" {print "FAIL run " $1 " " $2 ": " $5 " " $6}' "$RESULTS"
