"""``groupcoord faults``: list, inject and clear faults on a node started with
``test.faults.enable=true`` (docs/testing.md). Placeholder until the command lands."""
