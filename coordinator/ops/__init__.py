"""Room for the operations wing (HTTP: metrics, health, the dashboard). Empty until then; its place
in the import order is written in tests/test_layering.py."""
