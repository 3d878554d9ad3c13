"""SASL on ``SASL_PLAINTEXT``/``SASL_SSL`` listeners: PLAIN and SCRAM servers and the per-connection gate."""

from .gate import GateReply, GateState, SaslGate, Verdict, gate_factory, jaas_config_keys

__all__ = ["GateReply", "GateState", "SaslGate", "Verdict", "gate_factory", "jaas_config_keys"]
