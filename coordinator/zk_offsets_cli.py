"""``groupcoord zk-offsets``: ZooKeeper-era consumer offsets — export, import, migrate (issue 36).
Placeholder until the command lands."""
