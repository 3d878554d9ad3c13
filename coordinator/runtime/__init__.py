"""The records-first coordinator runtime, one shard per partition of a coordinator topic: a handler
returns (records, response); the runtime appends the records, replays them with the same
``replay()`` loading uses, and answers once they are durable. Snapshots of each partition make
loading cost the live state rather than the whole log. What it runs is a coordinator type
(``coordinator_types.py``); ``runtime.py`` states its rules and names the module of each concern."""
