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
from collections.abc import Callable
from concurrent.futures import Future
from pathlib import Path
from typing import Any

import background
import pytest

os.environ.setdefault("SPARKKAFKA_TEST_JVM_OPTS", "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC")


def pytest_configure(config: pytest.Config) -> None:
    # Also declared in pyproject.toml; repeated so the marker exists under any rootdir/ini.
    config.addinivalue_line(
        "markers", "slow: multi-process / spark-submit / Spark Connect tests (still run in CI)"
    )
    config.addinivalue_line(
        "markers", "replay(scenario): the test asserts on `sparkkafka replay scenario --on-kafka 2.8.2` (the "
        "`replayed` fixture), run in the background from the end of collection (tests/background.py)"
    )
    config.addinivalue_line(
        "markers", "offload(work=fn, lane='replays'): `fn(tmp, **params)` (the child processes the test waits "
        "on) runs in the background from the end of collection; the `offloaded` fixture is its result "
        "(tests/background.py)"
    )


def _replay_scenario(item: pytest.Item) -> Path | None:
    marker = item.get_closest_marker("replay")
    return Path(marker.args[0]) if marker else None


def _offload_work(item: pytest.Item) -> Callable[..., Any] | None:
    marker = item.get_closest_marker("offload")
    return marker.kwargs["work"] if marker else None


def _start_offload(item: pytest.Item, tmp: Path) -> Future:
    marker = item.get_closest_marker("offload")
    return background.start_offload(marker.kwargs["work"], tmp, _offload_params(item),
                                    marker.kwargs.get("lane", "replays"))


def _offload_params(item: pytest.Item) -> dict[str, Any]:
    callspec = getattr(item, "callspec", None)
    return dict(callspec.params) if callspec else {}


def _waits(item: pytest.Item) -> int:
    """0: runs at once; 1: waits on its offloaded work; 2: on a replay."""
    if _replay_scenario(item):
        return 2
    return 1 if _offload_work(item) else 0


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """The tests that wait on background work last, so the rest of the run overlaps that work."""
    items.sort(key=_waits)  # stable: each group keeps its order


def pytest_collection_finish(session: pytest.Session) -> None:
    """Start the selected tests' background work (tests/background.py): the replays in the order their
    tests come, then the offloaded work (the side venv first on its lane when any needs it)."""
    if session.config.option.collectonly:
        return
    items = session.items
    base = offloads = None
    for item in items:
        if (scenario := _replay_scenario(item)) is not None:
            base = base or session.config._tmp_path_factory.mktemp("replays")
            background.start_replay(scenario, base)
    for n, item in enumerate(items):
        if _offload_work(item) is not None:
            offloads = offloads or session.config._tmp_path_factory.mktemp("offload")
            _start_offload(item, offloads / str(n))


def pytest_sessionfinish(session: pytest.Session) -> None:
    background.shutdown()


@pytest.fixture(scope="session")
def spark():
    """The test run's SparkSession (local[2], sparkkafka's DEFAULT_CONF), stopped at the end."""
    from sparkkafka.engine.session import get_spark, stop_spark

    session = get_spark("local[2]")
    yield session
    stop_spark()


@pytest.fixture
def replayed(request, tmp_path):
    """The replay of the test's `@pytest.mark.replay(SCENARIO)` (realkafka_util.Replayed), waited for; it
    started at collection's end, or starts now."""
    scenario = _replay_scenario(request.node)
    assert scenario is not None, "the replayed fixture needs @pytest.mark.replay(SCENARIO)"
    done = background.start_replay(scenario, tmp_path).result(timeout=1800)
    print(f"{scenario.stem}: replayed in {done.wall_s:.1f} s")  # the cost, in the test's captured output
    return done


@pytest.fixture
def offloaded(request, tmp_path):
    """What the test's `@pytest.mark.offload(work=fn)` returned, waited for; it started at collection's end (in
    a directory of its own), or starts now in the test's tmp_path."""
    assert _offload_work(request.node) is not None, "the offloaded fixture needs @pytest.mark.offload(work=fn)"
    return _start_offload(request.node, tmp_path / "offload").result(timeout=2400)


@pytest.fixture
def tmp_out(tmp_path):
    """A fresh, empty output directory (a run's ``out=``) as a string path."""
    out = tmp_path / "out"
    out.mkdir()
    return str(out)
