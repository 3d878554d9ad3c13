"""Room for security: TLS and SASL listeners, SCRAM, the ACL authorizer. Empty until then; its
place in the import order is written in tests/test_layering.py."""
