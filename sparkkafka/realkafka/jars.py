"""The classpath of a real Apache Kafka (broker, ZooKeeper 3.5, admin tools), resolved with Maven into a
cache folder: no JAR is shipped with sparkkafka, the first use downloads Kafka's artifacts from the Maven
repositories the local `mvn` is set up for (about a minute), later uses read the cached classpath file.

Kafka's own distribution (kafka_2.13-2.8.2.tgz) is these artifacts: kafka_2.13 (the broker, its admin
commands and their dependencies, ZooKeeper 3.5.9 among them), kafka-tools (ProducerPerformance) and the
slf4j-log4j12 binding its bin/ scripts put on the classpath.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

from ..errors import SparkKafkaError

SUPPORTED = ("2.8.2",)
SCALA = "2.13"
SLF4J_LOG4J = "1.7.30"  # the binding Kafka 2.8.2's distribution ships (gradle/dependencies.gradle)

POM = """<project xmlns="http://maven.apache.org/POM/4.0.0">
  <modelVersion>4.0.0</modelVersion>
  <groupId>sparkkafka</groupId><artifactId>realkafka-classpath</artifactId><version>{version}</version>
  <dependencies>
    <dependency><groupId>org.apache.kafka</groupId><artifactId>kafka_{scala}</artifactId><version>{version}</version></dependency>
    <dependency><groupId>org.apache.kafka</groupId><artifactId>kafka-tools</artifactId><version>{version}</version></dependency>
    <dependency><groupId>org.slf4j</groupId><artifactId>slf4j-log4j12</artifactId><version>{slf4j}</version></dependency>
  </dependencies>
</project>
"""


class KafkaSetupError(SparkKafkaError):
    """Real Kafka cannot be set up here (no Maven, no Java, no network, an unsupported version)."""


def cache_dir(version: str) -> Path:
    """~/.cache/sparkkafka/kafka-VERSION (XDG_CACHE_HOME honoured)."""
    base = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    return base / "sparkkafka" / f"kafka-{version}"


def pom(version: str) -> str:
    """The small pom whose dependency tree is Kafka's distribution classpath."""
    return POM.format(version=version, scala=SCALA, slf4j=SLF4J_LOG4J)


def classpath(version: str = "2.8.2", timeout_s: float = 900.0) -> str:
    """The Java classpath of Kafka `version`, resolving it with `mvn dependency:build-classpath` the first
    time. Raises KafkaSetupError naming what is missing."""
    if version not in SUPPORTED:
        raise KafkaSetupError(f"Kafka {version} is not supported by replay: supported versions are "
                              f"{', '.join(SUPPORTED)}")
    if shutil.which("java") is None:
        raise KafkaSetupError("java is not on PATH: real Kafka needs a JVM (Java 8 to 17 for Kafka 2.8)")
    out = cache_dir(version)
    cp_file = out / "classpath.txt"
    if cp_file.is_file() and _complete(cp_file.read_text().strip()):
        return cp_file.read_text().strip()
    mvn = shutil.which("mvn")
    if mvn is None:
        raise KafkaSetupError("mvn is not on PATH: replay resolves Kafka's JARs with Maven "
                              "(apt-get install maven), into " + str(out))
    out.mkdir(parents=True, exist_ok=True)
    (out / "pom.xml").write_text(pom(version))
    tmp = out / "classpath.txt.tmp"
    try:
        done = subprocess.run([mvn, "-q", "-B", "dependency:build-classpath", f"-Dmdep.outputFile={tmp}"],
                              cwd=out, capture_output=True, text=True, timeout=timeout_s)
    except subprocess.TimeoutExpired as e:
        raise KafkaSetupError(f"mvn did not resolve Kafka {version} within {timeout_s:.0f} s "
                              f"(is the network to the Maven repository up?)") from e
    if done.returncode != 0 or not tmp.is_file():
        tail = "\n".join((done.stdout + done.stderr).strip().splitlines()[-15:])
        raise KafkaSetupError(f"mvn could not resolve Kafka {version} (network or repository unreachable?):\n{tail}")
    text = tmp.read_text().strip()
    if not _complete(text):
        raise KafkaSetupError(f"mvn resolved an incomplete classpath for Kafka {version}: {text[:200]}")
    tmp.replace(cp_file)
    return text


def _complete(cp: str) -> bool:
    """Every entry exists and the broker, ZooKeeper and tools JARs are among them."""
    parts = [p for p in cp.split(os.pathsep) if p]
    names = " ".join(Path(p).name for p in parts)
    return bool(parts) and all(Path(p).is_file() for p in parts) and all(
        k in names for k in (f"kafka_{SCALA}-", "zookeeper-", "kafka-tools-"))
