"""The engine core never imports Kafka, Faust or Spark: services and jobs adapt it."""

from __future__ import annotations

import subprocess
import sys

FORBIDDEN = ("faust", "aiokafka", "kafka", "confluent_kafka", "pyspark")


def test_the_core_imports_without_kafka_faust_or_spark():
    blocker = (
        "import sys\n"
        "class Block:\n"
        "    def find_spec(self, name, path=None, target=None):\n"
        f"        if name.split('.')[0] in {FORBIDDEN!r}:\n"
        "            raise ImportError('core must not import ' + name)\n"
        "sys.meta_path.insert(0, Block())\n"
        "import pkgutil, importlib, situflow\n"
        "for m in pkgutil.walk_packages(situflow.__path__, 'situflow.'):\n"
        "    importlib.import_module(m.name)\n"
    )
    subprocess.run([sys.executable, "-c", blocker], check=True)
