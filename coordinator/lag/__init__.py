"""Consumer lag, pure: in offsets, in time, Burrow's status, when offsets expire (shared by the server, the CLI and the pipeline)."""
