"""Delta Lake's own Spark reader for a run's tables (docs/tables.md, "Reading the tables").

sparkkafka writes its tables with delta-rs and needs no JAR. To read them with ``spark.read.format("delta")``
a session needs Delta's JVM connector, and each Delta release is compiled against one Spark minor version: a
connector built for another one fails at the first read (``NoSuchMethodError`` inside Spark's planner).
Delta 4.4.0 ships one artifact per supported Spark minor on Maven Central (``io.delta:delta-spark_4.X_2.13``;
the unsuffixed ``delta-spark_2.13`` is the Spark 4.2 build), so the connector is chosen from the running
pyspark's version. pip's ``delta-spark`` package (the Python half) carries no JAR and asks for its own
version's (``configure_spark_with_delta_pip``), which for delta-spark 4.4.1 is not published: this module
names the 4.4.0 connector instead (docs/jvm-packages.md has the measurements).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

__all__ = ["DELTA_VERSION", "DeltaConnectorError", "configure_delta", "delta_package"]

#: The Delta release whose connector is used: the newest with a JAR on Maven Central (measured 2026-12-02).
DELTA_VERSION = "4.4.0"
#: Spark (major, minor) -> the Delta artifact compiled against it.
ARTIFACTS: dict[tuple[int, int], str] = {
    (4, 0): "delta-spark_4.0_2.13",
    (4, 1): "delta-spark_4.1_2.13",
    (4, 2): "delta-spark_4.2_2.13",
}
SQL_EXTENSION = "io.delta.sql.DeltaSparkSessionExtension"
CATALOG = "org.apache.spark.sql.delta.catalog.DeltaCatalog"


class DeltaConnectorError(RuntimeError):
    """No released Delta connector is built for this pyspark: reading the tables with Delta's Spark reader
    would fail inside the JVM, so it is refused up front with what does work."""


def _minor(pyspark_version: str) -> tuple[int, int]:
    parts = pyspark_version.split(".")
    try:
        return int(parts[0]), int(parts[1])
    except (IndexError, ValueError):
        raise DeltaConnectorError(f"pyspark version {pyspark_version!r} is not MAJOR.MINOR[.PATCH]") from None


def delta_package(pyspark_version: str | None = None) -> str:
    """The Maven coordinate (``spark.jars.packages``) of the Delta connector for `pyspark_version` (default:
    the installed pyspark's), or DeltaConnectorError naming the version when Delta publishes none for it."""
    if pyspark_version is None:
        import pyspark

        pyspark_version = pyspark.__version__
    artifact = ARTIFACTS.get(_minor(pyspark_version))
    if artifact is None:
        known = ", ".join(f"{a}.{b}" for a, b in ARTIFACTS)
        raise DeltaConnectorError(
            f"no Delta Lake connector exists for pyspark {pyspark_version}: Delta {DELTA_VERSION} is built for "
            f"Spark {known} only. Read the tables with deltalake (DeltaTable(path).to_pandas()) or "
            "Cluster.for_path(spark, RUN), or use a venv with pip install 'sparkkafka[delta-spark]' "
            f"(pyspark 4.2.0 + delta-spark 4.4.1) and spark.jars.packages=io.delta:{ARTIFACTS[(4, 2)]}:{DELTA_VERSION}")
    return f"io.delta:{artifact}:{DELTA_VERSION}"


def configure_delta(builder: SparkSession.Builder, pyspark_version: str | None = None,
                    extra_packages: tuple[str, ...] = ()) -> SparkSession.Builder:
    """`builder` with Delta's connector (delta_package), its SQL extension and catalog set, so the session it
    builds reads ``spark.read.format("delta")``, ``versionAsOf`` and ``DESCRIBE HISTORY``. `extra_packages`
    join the connector in ``spark.jars.packages`` (a builder keeps only the last value of a key). The JAR
    comes from Maven Central through Spark's Ivy the first time (~100 s cold, into ``spark.jars.ivy`` or
    ``~/.ivy2.5.2``)."""
    packages = ",".join([delta_package(pyspark_version), *extra_packages])
    return (builder.config("spark.jars.packages", packages)
            .config("spark.sql.extensions", SQL_EXTENSION)
            .config("spark.sql.catalog.spark_catalog", CATALOG))
