"""The Spark session for the pipeline: local by default, left alone under ``spark-submit``.

Under ``spark-submit`` (``PYSPARK_GATEWAY_PORT`` is set: the launcher started the JVM) the master,
driver memory and any ``--conf`` come from its command line, so this code sets none of them and
fills in only the SQL settings the submitter left unset. Run as plain Python it uses ``master``
or ``local[*]``, binds to 127.0.0.1, and workers run this interpreter (``PYSPARK_PYTHON``), which
has pyarrow and this package. Spark's INFO chatter is turned down to warnings either way.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

__all__ = ["build_session", "launched_by_spark_submit", "DEFAULTS", "ARROW_JAVA_OPTIONS"]

#: Settings applied unless the caller (``conf``) or the submitter (``spark-submit --conf``) set
#: them: deterministic timestamps, a shuffle width for small tables, real Python tracebacks.
DEFAULTS = {
    "spark.sql.session.timeZone": "UTC",
    "spark.sql.shuffle.partitions": "8",
    "spark.sql.debug.maxToStringFields": "200",
    "spark.sql.execution.pyspark.udf.faulthandler.enabled": "true",
}

#: Local runs only (under spark-submit these belong to its command line).
LOCAL = {
    "spark.driver.bindAddress": "127.0.0.1",
    "spark.driver.host": "127.0.0.1",
    "spark.ui.showConsoleProgress": "false",
    "spark.python.worker.faulthandler.enabled": "true",
}


#: Spark's log settings for pipeline runs (warnings and errors only).
LOG4J2 = Path(__file__).with_name("log4j2.properties")

#: JVM system properties for local runs. Arrow Java checks bounds and reference counts on every
#: value read; the JVM reads every column of every row the Python data source sends (profiled with
#: JFR: those checks were ~20% of its samples). The batches come from pyarrow, which validated
#: them, through Spark's own IPC reader, so the checks guard nothing here. Measured on the 2-million
#: record bench log: about +4% rows/s (bench/RESULTS.md). Under spark-submit, pass them with
#: ``--conf spark.driver.extraJavaOptions=...`` and ``spark.executor.extraJavaOptions`` instead.
ARROW_JAVA_OPTIONS = "-Darrow.enable_unsafe_memory_access=true -Darrow.enable_null_check_for_get=false"


def launched_by_spark_submit() -> bool:
    return "PYSPARK_GATEWAY_PORT" in os.environ


def build_session(master: str | None = None, conf: dict[str, str] | None = None,
                  app: str = "groupcoord-pipeline", log_level: str = "WARN") -> SparkSession:
    """A SparkSession with the ``consumer_offsets`` data source registered. ``conf`` entries
    always apply; ``master`` only outside spark-submit."""
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    from pyspark.sql import SparkSession

    from .source.datasource import ConsumerOffsetsDataSource

    conf = dict(conf or {})
    builder = SparkSession.builder.appName(app)
    submitted = launched_by_spark_submit()
    if not submitted:
        os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
        builder = builder.master(master or "local[*]")
        # Quiet from the first line: the JVM logs at INFO before setLogLevel can run.
        quiet = f"-Dlog4j2.configurationFile={LOG4J2.as_uri()}"
        java_options = conf.get("spark.driver.extraJavaOptions", "")
        if LOG4J2.exists() and "log4j2.configurationFile" not in java_options:
            java_options = f"{quiet} {java_options}"
        if "arrow.enable_unsafe_memory_access" not in java_options:
            java_options = f"{ARROW_JAVA_OPTIONS} {java_options}"
        conf["spark.driver.extraJavaOptions"] = java_options.strip()
        # local-cluster masters start executor JVMs of their own.
        conf.setdefault("spark.executor.extraJavaOptions", ARROW_JAVA_OPTIONS)
        for key, value in {**LOCAL, **DEFAULTS}.items():
            if key not in conf:
                builder = builder.config(key, value)
    for key, value in conf.items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel(log_level)
    if submitted:
        given = spark.sparkContext.getConf()
        for key, value in DEFAULTS.items():
            if key not in conf and not given.contains(key):
                spark.conf.set(key, value)
    spark.dataSource.register(ConsumerOffsetsDataSource)
    return spark
