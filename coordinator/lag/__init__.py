"""Consumer lag, pure: in offsets (``offsets``), in time (``time_lag``) and Burrow's partition and
group status (``burrow``), shared by the server, the ``groupcoord groups`` tool and the pipeline.
No I/O and no clock: callers hand in the time."""
