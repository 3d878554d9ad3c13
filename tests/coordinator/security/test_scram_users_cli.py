"""``groupcoord users``: offline on a data directory, and over the wire through
AlterUserScramCredentials / DescribeUserScramCredentials behind a SASL/SCRAM gate."""

from __future__ import annotations

import fcntl
import io
import os
from pathlib import Path

import pytest
from scramp import ScramClient

from coordinator.admin.scram_apis import ScramApis
from coordinator.cli import _parser
from coordinator.security.sasl import gate_factory
from coordinator.security.sasl.scram import ScramServer
from coordinator.security.sasl.scram_formatter import make_credential
from coordinator.security.scram_credentials import FileScramStore
from coordinator.users_cli import run
from tests.coordinator.security.gate_wire import serving


def users(*argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    status = run(_parser().parse_args(["users", *argv]), out, err)
    return status, out.getvalue(), err.getvalue()


def login(store: FileScramStore, mechanism: str, name: str, password: str) -> bool:
    server = ScramServer(mechanism, store.get)
    client = ScramClient([mechanism], name, password)
    client.set_server_first(server.evaluate(client.get_client_first().encode()).decode())
    try:
        server.evaluate(client.get_client_final().encode())
    except Exception:
        return False
    return server.complete


def test_offline_add_list_delete(tmp_path: Path) -> None:
    secret = tmp_path / "pw"
    secret.write_text("a,b=c\"d\n")
    assert users("add", "alice", "--mechanism", "SCRAM-SHA-512", "--iterations", "8192",
                 "--password-file", str(secret), "--data-dir", str(tmp_path))[0] == 0
    assert users("add", "a,b", "--mechanism", "SCRAM-SHA-256", "--password", "x", "--data-dir", str(tmp_path)) == (
        0, "Completed updating config for user a,b.\n", "")
    store = FileScramStore(tmp_path)
    assert login(store, "SCRAM-SHA-512", "alice", 'a,b=c"d')
    assert not login(store, "SCRAM-SHA-512", "alice", "wrong")
    status, out, _ = users("list", "--data-dir", str(tmp_path))
    assert status == 0
    assert out.splitlines() == [
        "SCRAM credential configs for user-principal 'a,b' are SCRAM-SHA-256=iterations=4096",
        "SCRAM credential configs for user-principal 'alice' are SCRAM-SHA-512=iterations=8192"]
    assert users("delete", "alice", "--mechanism", "SCRAM-SHA-512", "--data-dir", str(tmp_path))[0] == 0
    status, _, err = users("delete", "alice", "--mechanism", "SCRAM-SHA-512", "--data-dir", str(tmp_path))
    assert status == 1 and "does not exist" in err
    assert sorted(FileScramStore(tmp_path).users()) == ["a,b"]


def test_offline_refuses_a_running_node_and_bad_input(tmp_path: Path) -> None:
    assert users("add", "x", "--mechanism", "SCRAM-SHA-256", "--password", "p", "--iterations", "100",
                 "--data-dir", str(tmp_path))[0] == 2
    fd = os.open(tmp_path / ".lock", os.O_CREAT | os.O_RDWR)
    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)  # as a running node holds it
    try:
        status, _, err = users("list", "--data-dir", str(tmp_path))
        assert status == 1 and "in use by a running groupcoord" in err
    finally:
        os.close(fd)
    with pytest.raises(SystemExit):
        users("add", "x", "--mechanism", "MD5", "--password", "p", "--data-dir", str(tmp_path))


def test_over_the_wire_with_scram_login(tmp_path: Path) -> None:
    store = FileScramStore(tmp_path)
    store.alter({("admin", "SCRAM-SHA-256"): make_credential("SCRAM-SHA-256", "admin-secret")}, set())
    new_gate = gate_factory("SCRAM-SHA-256,PLAIN", {"PLAIN": 'x.y.z.PlainLoginModule required user_p="q";'.replace(
        "x.y.z", "org.apache.kafka.common.security.plain")}, store.get)
    config = tmp_path / "client.properties"
    config.write_text("security.protocol=SASL_PLAINTEXT\nsasl.mechanism=SCRAM-SHA-256\n"
                      "sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required "
                      'username="admin" password="admin-secret";\n')
    with serving(new_gate, ScramApis(store).handlers()) as port:
        wire = ["--bootstrap-server", f"127.0.0.1:{port}", "--command-config", str(config)]
        assert users("add", "bob", "--mechanism", "SCRAM-SHA-512", "--password", "bob-pw", *wire)[0] == 0
        assert login(store, "SCRAM-SHA-512", "bob", "bob-pw")
        status, out, _ = users("list", *wire)
        assert status == 0 and "user-principal 'bob' are SCRAM-SHA-512=iterations=4096" in out
        status, _, err = users("delete", "bob", "--mechanism", "SCRAM-SHA-256", *wire)
        assert status == 1 and "error 91" in err
        assert users("delete", "bob", "--mechanism", "SCRAM-SHA-512", *wire)[0] == 0
        assert store.get("bob", "SCRAM-SHA-512") is None
        # PLAIN login and a wrong password.
        config.write_text("security.protocol=SASL_PLAINTEXT\nsasl.mechanism=PLAIN\nsasl.jaas.config="
                          'org.apache.kafka.common.security.plain.PlainLoginModule required username="p" password="q";\n')
        assert users("list", *wire)[0] == 0
        config.write_text("security.protocol=SASL_PLAINTEXT\nsasl.mechanism=SCRAM-SHA-256\nsasl.jaas.config="
                          'x required username="admin" password="nope";\n')
        status, _, err = users("list", *wire)
        assert status == 1 and "Authentication failed during authentication" in err
