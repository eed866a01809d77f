"""sparkkafka: a Spark-native, distributed emulator of Apache Kafka's replication layer."""

from __future__ import annotations

from .engine.session import default_worker_python
from .errors import NotYetSupportedError, ScenarioError, SparkKafkaError
from .scenario import Scenario, load_scenario, parse_scenario
from .scenario.kafka_import import import_cluster

__version__ = "0.1.0"

default_worker_python()  # a SparkSession built after this import runs its Python workers on this interpreter


def __getattr__(name: str):
    # Spark-dependent names are imported on first use, so scenario validation stays light.
    if name == "Cluster":
        from .cluster import Cluster

        return Cluster
    if name == "report":  # matplotlib is imported on first use only
        from .reporting import report

        return report
    if name in ("get_spark", "stop_spark"):
        from .engine import session

        return getattr(session, name)
    raise AttributeError(name)


__all__ = ["Cluster", "NotYetSupportedError", "Scenario", "ScenarioError", "SparkKafkaError", "get_spark",
           "import_cluster", "load_scenario", "parse_scenario", "report", "stop_spark"]
