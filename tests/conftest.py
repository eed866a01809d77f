"""Shared pytest fixtures: one SparkSession per test run.

A SparkSession costs ~5 s to start and its first jobs ~2 s more (on this project's 2-core machine), so every
test shares one ``local[2]`` session built by ``sparkkafka.engine.session.get_spark``. Unless the environment
already sets ``SPARKKAFKA_TEST_JVM_OPTS``, the driver JVM (and, through tests/sparkutil.py, every spark-submit
/ cluster / Connect JVM) runs C1-only with SerialGC: a startup measured there took 12.2 s instead of 14.4 s.
Fine for tiny test jobs, wrong for benchmarks (state-heavy rounds up to 2.3x slower). Add
``-XX:SharedArchiveFile=<jsa>`` there to use an AppCDS archive built in CI setup (start + first job ~2.9 s
instead of ~7 s, as measured there).
"""

from __future__ import annotations

import os

import pytest

os.environ.setdefault("SPARKKAFKA_TEST_JVM_OPTS", "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC")


def pytest_configure(config: pytest.Config) -> None:
    # Also declared in pyproject.toml; repeated so the marker exists under any rootdir/ini.
    config.addinivalue_line(
        "markers", "slow: multi-process / spark-submit / Spark Connect tests (still run in CI)"
    )


@pytest.fixture(scope="session")
def spark():
    """The test run's SparkSession (local[2], sparkkafka's DEFAULT_CONF), stopped at the end."""
    from sparkkafka.engine.session import get_spark, stop_spark

    session = get_spark("local[2]")
    yield session
    stop_spark()


@pytest.fixture
def tmp_out(tmp_path):
    """A fresh, empty output directory (a run's ``out=``) as a string path."""
    out = tmp_path / "out"
    out.mkdir()
    return str(out)
