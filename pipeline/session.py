"""The Spark session for the pipeline, local by default and left alone under ``spark-submit``.

Under ``spark-submit`` (``PYSPARK_GATEWAY_PORT`` is set: the launcher started the JVM) the master
and driver memory come from its command line, so the code sets neither; run as plain Python it
uses ``--master`` or ``local[*]``. Workers run this interpreter (``PYSPARK_PYTHON``), which has
pyarrow and this package. Spark's INFO chatter is turned down to warnings.
"""

from __future__ import annotations

import os
import sys
from typing import Any

__all__ = ["build_session", "launched_by_spark_submit"]


def launched_by_spark_submit() -> bool:
    return "PYSPARK_GATEWAY_PORT" in os.environ


def build_session(master: str | None = None, conf: dict[str, str] | None = None, app: str = "groupcoord-pipeline") -> Any:
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    from pyspark.sql import SparkSession

    from .source.datasource import ConsumerOffsetsDataSource

    builder = SparkSession.builder.appName(app)
    if not launched_by_spark_submit():
        os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
        builder = (builder.master(master or "local[*]")
                   .config("spark.driver.bindAddress", "127.0.0.1")
                   .config("spark.driver.host", "127.0.0.1")
                   .config("spark.ui.showConsoleProgress", "false"))
    settings = {
        "spark.sql.session.timeZone": "UTC",
        "spark.sql.shuffle.partitions": "8",
        "spark.sql.debug.maxToStringFields": "200",
        "spark.python.worker.faulthandler.enabled": "true",
        "spark.sql.execution.pyspark.udf.faulthandler.enabled": "true",
        **(conf or {}),
    }
    for key, value in settings.items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("WARN")
    spark.dataSource.register(ConsumerOffsetsDataSource)
    return spark
