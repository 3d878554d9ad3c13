"""Offsets analytics on Spark: ``groupcoord pipeline run`` reads a data directory's
``__consumer_offsets`` log (``source``), derives tables (``transforms``), writes them as Parquet
(``outputs``) and renders a report (``report``). See ``pipeline/USAGE.md``."""
