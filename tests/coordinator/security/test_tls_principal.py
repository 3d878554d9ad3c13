"""ssl.principal.mapping.rules (Kafka's SslPrincipalMapperTest cases) and the DN of a certificate."""

from __future__ import annotations

import pytest
import trustme
from cryptography import x509
from cryptography.hazmat.primitives.serialization import Encoding

from coordinator.config import ConfigError
from coordinator.security.ssl_principal import NoMatchingRule, PrincipalMapper, parse_rules, subject_dn

RULES = ("RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/,"
         "RULE:^CN=(.*?),OU=(.*?),O=(.*?),L=(.*?),ST=(.*?),C=(.*?)$/$1@$2/L,"
         "RULE:^.*[Cc][Nn]=([a-zA-Z0-9.]*).*$/$1/U,"
         "DEFAULT")


@pytest.mark.parametrize(("dn", "name"), [
    ("CN=kafka1,OU=ServiceUsers,O=Org,C=US", "kafka1"),
    ("CN=Duke,OU=JavaSoft,O=Sun Microsystems,L=Palo Alto,ST=CA,C=US", "duke@javasoft"),
    ("OU=xyz,CN=abc.def,O=Org", "ABC.DEF"),
    ("O=Org,C=US", "O=Org,C=US"),  # DEFAULT: the DN itself
])
def test_rules_apply_in_order(dn: str, name: str) -> None:
    assert PrincipalMapper(RULES).name(dn) == name


def test_escaped_slashes_and_no_matching_rule() -> None:
    mapper = PrincipalMapper(r"RULE:^CN=([^,]*)\/x,.*$/$1\/y/")
    assert mapper.name("CN=a/x,O=b") == "a/y"
    with pytest.raises(NoMatchingRule):
        mapper.name("CN=a,O=b")


@pytest.mark.parametrize("rules", ["RULE:CN=(.*)/$1", "RULE:(/x/Z", "NONSENSE", "DEFAULT,RULE:"])
def test_malformed_rules_name_the_setting(rules: str) -> None:
    with pytest.raises(ConfigError, match="ssl.principal.mapping.rules"):
        parse_rules(rules)


def test_the_dn_is_in_rfc2253_order_and_anonymous_without_a_certificate() -> None:
    ca = trustme.CA()
    leaf = ca.issue_cert("svc", common_name="svc", organization_name="Example", organization_unit_name="Ops")
    der = x509.load_pem_x509_certificate(leaf.cert_chain_pems[0].bytes()).public_bytes(Encoding.DER)
    dn = subject_dn(der)
    assert dn.startswith("CN=svc,") and "OU=Ops" in dn and dn.index("OU=Ops") < dn.index("O=Example")
    assert PrincipalMapper().principal(der) == "User:" + dn
    assert PrincipalMapper().principal(None) == "User:ANONYMOUS"
