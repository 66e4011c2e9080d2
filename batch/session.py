"""The Spark session of the batch jobs: one per process, quiet, Arrow-enabled.

Python workers run this interpreter (``PYSPARK_PYTHON``), so the tasks import the same situflow
as the driver; on a cluster the workers need the same installation (batch/README.md).
"""

from __future__ import annotations

import os
import shutil
import sys
from typing import TYPE_CHECKING

from situflow.errors import SituflowError

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

#: Shuffle partitions: the jobs group a few thousand replay intervals at most, and Spark's
#: default of 200 would start 200 mostly empty Python tasks per shuffle.
SHUFFLE_PARTITIONS = 8
#: Set in a driver that ``spark-submit`` started (the port of its JVM).
SUBMITTED = "PYSPARK_GATEWAY_PORT"


def spark_session(master: str | None = None, app: str = "situflow") -> SparkSession:
    """The process's Spark session on ``master`` (``local[*]`` when None and no
    ``spark-submit`` set one), with Arrow transfers, no web UI and warnings only.

    Raises ``SituflowError`` saying what to install when pyspark or Java is missing (py4j's own
    message, "Java gateway process exited", does not say it)."""
    try:
        from pyspark.sql import SparkSession
    except ImportError:
        raise SituflowError("the Spark jobs need pyspark: pip install 'situflow[spark]'") from None
    if not os.environ.get("JAVA_HOME") and shutil.which("java") is None:
        raise SituflowError("Spark needs Java 17 or later: install a Java runtime or set "
                            "JAVA_HOME")
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    builder = (SparkSession.builder.appName(app)
               .config("spark.ui.enabled", "false")
               .config("spark.ui.showConsoleProgress", "false")
               .config("spark.sql.shuffle.partitions", str(SHUFFLE_PARTITIONS))
               .config("spark.sql.execution.arrow.pyspark.enabled", "true")
               .config("spark.sql.session.timeZone", "UTC")
               .config("spark.executorEnv.PYSPARK_PYTHON", sys.executable))
    if os.environ.get("PYTHONPATH"):  # a checkout run in place: its tasks import the same code
        builder = builder.config("spark.executorEnv.PYTHONPATH", os.environ["PYTHONPATH"])
    if master is not None:
        builder = builder.master(master)
    elif SUBMITTED not in os.environ:  # spark-submit passes its --master to the session itself
        builder = builder.master("local[*]")
    session = builder.getOrCreate()
    session.sparkContext.setLogLevel("WARN")
    return session
