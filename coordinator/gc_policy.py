"""How the server uses CPython's cyclic garbage collector.

Measured under the commit latency benchmark (5,000 commits/s, ``bench/coordinator_bench.py
--only latency``) with a ``gc.callbacks`` probe: full (generation 2) collections ran about three
times a second, took 17-27 ms each and found nothing to free. They were the p99: every request
that arrived during one waited for it. A full collection walks every container the process
holds — the imported modules, kafka-python's message classes for every API version, and the
loaded offsets and groups — although none of those ever becomes cyclic garbage.

``gc.freeze()`` moves everything tracked so far into a permanent generation that collections do
not walk (objects there are still freed by reference counting; only cycles among them would stay,
and these long-lived objects form none that die). The server freezes twice: once started (the
code), and once every ``__consumer_offsets`` partition has loaded (the state). Everything created
later — requests, responses, futures, new groups — is collected as usual.

A node embedded in a test process (coordinator/testing/embedded.py) freezes nothing: the process
is the test runner's, whose objects a freeze would keep for good, and its collections are not ours
to tune.
"""

from __future__ import annotations

import gc

__all__ = ["freeze_long_lived", "leave_to_host"]

_hosted = False


def leave_to_host() -> None:
    """The process hosts an embedded node: from now on ``freeze_long_lived`` does nothing."""
    global _hosted
    _hosted = True


def freeze_long_lived() -> None:
    """Collect what is garbage now, then exempt every surviving object from later collections."""
    if _hosted:
        return
    gc.collect()
    gc.freeze()
