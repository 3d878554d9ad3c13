"""Importing the node's code into a user's test process without kafka-python's import warnings.

The node's code is built on kafka-python's protocol classes. kafka-python 3.0 reads each class's
JSON schema with ``importlib.resources.read_text`` (kafka/protocol/schemas/load_json.py), which
Python 3.11 deprecates (https://docs.python.org/3.11/library/importlib.resources.html): the first
import of those classes raises two DeprecationWarnings per class, over two hundred in all, which
a user's pytest run would report as if they were the user's. The plugin and the servers import
the node's code with exactly those two warnings ignored; every other warning, and these same two
raised by anything else, reach the user as before.
"""

from __future__ import annotations

import importlib
import re
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from types import ModuleType

__all__ = ["KAFKA_PYTHON_IMPORT_WARNINGS", "import_quietly", "kafka_python_warnings_ignored"]

#: (message, module the warning is attributed to): ``read_text`` is called by kafka-python's
#: schema loader, and it calls ``open_text``, which warns as well.
KAFKA_PYTHON_IMPORT_WARNINGS = (
    ("read_text is deprecated", "kafka.protocol.schemas.load_json"),
    ("open_text is deprecated", "importlib.resources._legacy"),
)


@contextmanager
def kafka_python_warnings_ignored() -> Iterator[None]:
    """Ignore kafka-python's import warnings (and only those) inside the block. Warning filters
    are the process's: use it in the thread that imports, around the import only."""
    with warnings.catch_warnings():
        for message, module in KAFKA_PYTHON_IMPORT_WARNINGS:
            warnings.filterwarnings("ignore", message=re.escape(message), category=DeprecationWarning,
                                    module=re.escape(module) + "$")
        yield


def import_quietly(name: str) -> ModuleType:
    """``importlib.import_module(name)`` with kafka-python's import warnings ignored."""
    with kafka_python_warnings_ignored():
        return importlib.import_module(name)
