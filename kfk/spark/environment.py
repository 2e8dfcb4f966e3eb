"""What Spark needs from the machine, checked before it starts, and a SparkSession set up for kfk.

- pyspark (4.2 or later: the Python Data Source API with read limits) and pyarrow: the optional extra
  ``pip install 'kfk[spark]'``;
- a Java runtime, 17 or later (Spark 4 runs on Java 17 and 21): JAVA_HOME/bin/java, else java on PATH;
- PYSPARK_PYTHON set to the running interpreter unless the user chose one: Spark's Python workers otherwise start
  ``python3`` from PATH, which may be outside the virtualenv that has kfk;
- SPARK_LOCAL_IP=127.0.0.1 for local masters (no reverse DNS lookups of the host name, no binding to a public
  interface), and spark.ui.showConsoleProgress=false so that Spark's console bar does not mix with kfk's.

Nothing here imports pyspark at module level: the checks must run where it is missing.
"""

from __future__ import annotations

import importlib.metadata
import importlib.util
import os
import re
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator, Mapping
from contextlib import contextmanager, suppress
from typing import Any

__all__ = ["INSTALL_HINT", "SparkSetupError", "check_java", "check_pyspark", "create_session", "jvm_log_path",
           "session_for_a_run"]

INSTALL_HINT = "pip install 'kfk[spark]'"
MINIMUM_PYSPARK = (4, 2)
MINIMUM_JAVA = 17


class SparkSetupError(RuntimeError):
    """The machine lacks something Spark needs; the message says what to install or set."""


def check_pyspark() -> str:
    """The installed pyspark version; SparkSetupError naming the install command if pyspark or pyarrow is
    missing or pyspark is too old."""
    missing = [name for name in ("pyspark", "pyarrow") if importlib.util.find_spec(name) is None]
    if missing:
        raise SparkSetupError(f"{' and '.join(missing)} {'is' if len(missing) == 1 else 'are'} not installed; "
                              f"kfk's Spark support needs them: {INSTALL_HINT}")
    version = importlib.metadata.version("pyspark")
    numbers = tuple(int(part) for part in re.findall(r"\d+", version)[:2])
    if numbers < MINIMUM_PYSPARK:
        raise SparkSetupError(f"pyspark {version} is too old (kfk needs {'.'.join(map(str, MINIMUM_PYSPARK))} or "
                              f"later, for the Python Data Source API with read limits): {INSTALL_HINT} --upgrade")
    return version


def java_executable() -> str | None:
    java_home = os.environ.get("JAVA_HOME")
    if java_home:
        candidate = os.path.join(java_home, "bin", "java")
        if os.access(candidate, os.X_OK):
            return candidate
    return shutil.which("java")


def parse_java_version(text: str) -> int | None:
    """The major version in ``java -version`` output: "17.0.15" -> 17, "1.8.0_392" -> 8, "21" -> 21."""
    match = re.search(r'version "(\d+)(?:\.(\d+))?', text)
    if match is None:
        return None
    major = int(match.group(1))
    if major == 1 and match.group(2) is not None:
        return int(match.group(2))
    return major


def check_java() -> tuple[str, int]:
    """(path, major version) of the Java that Spark will run on; SparkSetupError if none or too old."""
    java = java_executable()
    advice = (f"Spark needs Java {MINIMUM_JAVA} or later: install it (Debian/Ubuntu: apt-get install "
              f"openjdk-{MINIMUM_JAVA}-jre-headless) or point JAVA_HOME at one")
    if java is None:
        java_home = "unset" if "JAVA_HOME" not in os.environ else f"{os.environ['JAVA_HOME']}, with no bin/java"
        raise SparkSetupError(f"no Java runtime found (JAVA_HOME is {java_home} and there is no java on PATH). "
                              f"{advice}")
    try:
        result = subprocess.run([java, "-version"], capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired) as error:
        raise SparkSetupError(f"{java} -version failed ({error}). {advice}") from None
    major = parse_java_version(result.stderr + result.stdout)
    if major is None:
        raise SparkSetupError(f"cannot tell the version of {java} ({(result.stderr or result.stdout).strip()!r}). "
                              f"{advice}")
    if major < MINIMUM_JAVA:
        raise SparkSetupError(f"{java} is Java {major}. {advice}")
    return java, major


# Spark's default log4j profile logs INFO/WARN lines to stderr under kfk's progress bar; errors are enough.
LOG4J2_PROPERTIES = """\
rootLogger.level = error
rootLogger.appenderRef.stderr.ref = stderr
appender.stderr.type = Console
appender.stderr.name = stderr
appender.stderr.target = SYSTEM_ERR
appender.stderr.layout.type = PatternLayout
appender.stderr.layout.pattern = %d{yy/MM/dd HH:mm:ss} %p %c{1}: %m%n%ex
"""


def _kfk_spark_dir() -> str:
    directory = os.path.join(tempfile.gettempdir(), f"kfk-spark-{os.getuid()}")
    os.makedirs(directory, exist_ok=True)
    return directory


def _quiet_logging_option() -> str:
    path = os.path.join(_kfk_spark_dir(), "log4j2.properties")
    if not os.path.exists(path):
        with open(path, "w", encoding="utf-8") as handle:
            handle.write(LOG4J2_PROPERTIES)
    return f"-Dlog4j2.configurationFile=file:{path}"


def jvm_log_path() -> str:
    """Where a quiet session's JVM writes its stderr (one file per kfk process)."""
    return os.path.join(_kfk_spark_dir(), f"spark-{os.getpid()}.log")


@contextmanager
def _jvm_stderr_to(path: str) -> Iterator[None]:
    """While the JVM starts, point this process's stderr (fd 2) at `path`: the JVM and the Python workers it starts
    inherit it, so the launcher's and Spark's own lines ("Using incubator modules", "Setting default log level")
    go there instead of the terminal; this process gets its stderr back at once."""
    sys.stderr.flush()
    saved = os.dup(2)
    target = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    try:
        os.dup2(target, 2)
        yield
    finally:
        os.dup2(saved, 2)
        os.close(saved)
        os.close(target)


def create_session(master: str, app_name: str, conf: Mapping[str, str] | None = None, verbose: bool = False) -> Any:
    """A SparkSession for kfk jobs (or the active one: getOrCreate), with the kfk data source registered.

    PYSPARK_PYTHON and SPARK_LOCAL_IP are set for local masters only: on a cluster the executors' Python is the
    cluster's business (kfk must be installed there, e.g. ``pip install 'kfk[spark]'`` on every node). Unless
    `verbose`, Spark logs only errors and the JVM's stderr goes to jvm_log_path()."""
    if master.startswith("local"):
        os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
        os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    from pyspark.sql import SparkSession

    from kfk.spark import register

    builder = SparkSession.builder.master(master).appName(app_name)
    # Parquet timestamps as INT64 microseconds (Spark writes legacy INT96 by default, which other readers treat as
    # zone-less nanoseconds); dates for --partition-by in UTC.
    settings = {"spark.ui.showConsoleProgress": "false", "spark.sql.session.timeZone": "UTC",
                "spark.sql.parquet.outputTimestampType": "TIMESTAMP_MICROS"}
    if not verbose:  # Spark's own log down to errors
        settings["spark.log.level"] = "ERROR"
        if "spark.driver.extraJavaOptions" not in (conf or {}):
            settings["spark.driver.extraJavaOptions"] = _quiet_logging_option()
    settings.update(conf or {})
    for key, value in settings.items():
        builder = builder.config(key, value)
    if verbose:
        spark = builder.getOrCreate()
    else:
        with _jvm_stderr_to(jvm_log_path()):
            spark = builder.getOrCreate()
    register(spark)
    return spark


@contextmanager
def session_for_a_run(master: str, app_name: str, conf: Mapping[str, str] | None = None,
                      verbose: bool = False) -> Iterator[Any]:
    """create_session's session for one run, stopped when the run ends if the run started it: getOrCreate returns
    the session already running in this process, if any (a notebook's, the tests'), and that one its owner stops.
    Stopping it ends Spark's jobs and its Python workers now, not whenever the JVM notices this process is gone."""
    from pyspark import SparkContext

    started_here = SparkContext._active_spark_context is None
    spark = create_session(master, app_name, conf, verbose)
    try:
        yield spark
    finally:
        if started_here:
            with suppress(Exception):  # a JVM already gone: the run's own error is the one to see
                spark.stop()
