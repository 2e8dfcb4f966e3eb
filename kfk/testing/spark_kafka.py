"""Spark's own Kafka source (spark-sql-kafka-0-10), for comparing kfk's Spark export with what Spark reads itself.

pyspark's wheel ships Spark without its Kafka connector; Spark users add it with `--packages`. Here it is resolved
with mvn (kfk.testing.apache_kafka.maven_jars) into the kfk cache at the installed pyspark's version, and a session
gets it through `spark.jars`. Only the jars pyspark does not already ship go there (the connector, its token
provider, kafka-clients, commons-pool2): the rest (Scala, Hadoop's client, lz4, snappy...) are pyspark's own, and a
second copy of another version on the classpath would be a conflict.

A pyspark release can reach PyPI before its connector reaches Maven Central (pyspark 4.3.0's had not when this was
written): then the newest connector known to be published, FALLBACK_VERSION, is used with it and
`SparkKafkaConnector.version` says so.
"""

from __future__ import annotations

import importlib.metadata
import importlib.util
import re
from dataclasses import dataclass
from pathlib import Path

from kfk.testing.apache_kafka import MavenUnavailable, cache_dir, maven_jars

CONNECTOR = ("org.apache.spark", "spark-sql-kafka-0-10_2.13")
FALLBACK_VERSION = "4.2.0"
_NOT_FOUND = re.compile(r"Could not find artifact|was not found in")
_VERSIONED_JAR = re.compile(r"^(?P<name>.+?)-\d[^-]*(-[A-Za-z0-9.]+)?\.jar$")


@dataclass(frozen=True)
class SparkKafkaConnector:
    version: str  # the connector's version (pyspark's, unless it is not on Maven Central)
    jars: list[Path]  # what spark.jars needs beyond pyspark's jars

    @property
    def spark_jars(self) -> str:
        """The value of the spark.jars setting."""
        return ",".join(map(str, self.jars))


def _artifact_name(jar: str) -> str:
    match = _VERSIONED_JAR.match(jar)
    return match.group("name") if match else jar


def _pyspark_jar_names() -> set[str]:
    spec = importlib.util.find_spec("pyspark")
    if spec is None or not spec.submodule_search_locations:
        raise MavenUnavailable("pyspark is not installed: pip install 'kfk[spark]'")
    jars_dir = Path(next(iter(spec.submodule_search_locations))) / "jars"
    return {_artifact_name(path.name) for path in jars_dir.glob("*.jar")}


def spark_kafka_connector() -> SparkKafkaConnector:
    """Spark's Kafka connector for the installed pyspark, resolved once into the cache; MavenUnavailable if neither
    pyspark's version nor FALLBACK_VERSION can be resolved."""
    pyspark_version = importlib.metadata.version("pyspark")
    shipped = _pyspark_jar_names()
    failures = []
    for version in dict.fromkeys([pyspark_version, FALLBACK_VERSION]):
        directory = cache_dir() / "spark-kafka" / f"pyspark-{pyspark_version}" / version
        unpublished = directory / "unpublished"
        if unpublished.exists():  # an earlier run found it missing: not asked again (delete the file to ask)
            failures.append(unpublished.read_text())
            continue
        try:
            jars = maven_jars(directory, [(*CONNECTOR, version)], f"{CONNECTOR[1]} {version}")
        except MavenUnavailable as error:
            if _NOT_FOUND.search(str(error)):
                unpublished.write_text(str(error))
            failures.append(str(error))
            continue
        return SparkKafkaConnector(version, [jar for jar in jars if _artifact_name(jar.name) not in shipped])
    raise MavenUnavailable("\n".join(failures))
