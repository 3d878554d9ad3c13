"""The transaction coordinator's settings, as the rules read them (``coordinator/config.py``
holds the server settings with Kafka's names: ``transaction.max.timeout.ms``, ...)."""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["TransactionConfig"]


@dataclass(frozen=True, slots=True)
class TransactionConfig:
    #: ``transaction.max.timeout.ms``: a longer client timeout is INVALID_TRANSACTION_TIMEOUT.
    max_timeout_ms: int = 900_000
    #: ``transactional.id.expiration.ms``: an idle id in Empty/Complete* is removed after this.
    id_expiration_ms: int = 604_800_000
    #: ``transaction.abort.timed.out.transaction.cleanup.interval.ms``.
    abort_timed_out_interval_ms: int = 10_000
    #: ``transaction.remove.expired.transaction.cleanup.interval.ms``.
    remove_expired_interval_ms: int = 3_600_000
