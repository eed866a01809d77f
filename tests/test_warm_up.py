"""The session warm-up a new resident cluster starts while the driver sets it up (engine/warm_up.py)."""

from __future__ import annotations

import pytest

from sparkkafka.engine.resident import placing_rows
from sparkkafka.engine.warm_up import warm_up


class _Session:
    """A stand-in key for a session never warmed before (the warm-up remembers sessions it warmed)."""


def _placed(spark, tasks: int = 2):
    return lambda: placing_rows(spark, tasks).repartitionById(tasks, "broker")


def test_the_warm_up_runs_an_empty_resident_window_once_per_session(spark):
    key = _Session()
    thread = warm_up(key, _placed(spark))
    assert thread is not None
    thread.join(timeout=120)
    assert not thread.is_alive()
    assert thread.error is None  # the barrier map, the local checkpoint and the collect all ran
    assert warm_up(key, _placed(spark)) is None  # the same session: already warm, no second job


def test_a_failed_warm_up_is_kept_on_its_thread_not_raised(spark):
    def broken():
        raise RuntimeError("no executors")

    thread = warm_up(_Session(), broken)
    thread.join(timeout=60)
    assert isinstance(thread.error, RuntimeError)


@pytest.mark.parametrize("engine", ["resident", "local"])
def test_a_new_cluster_warms_only_for_resident_windows_and_the_first_window_waits(spark, tmp_out, engine):
    from sparkkafka.cluster import Cluster

    sc = {"seed": 1, "cluster": {"brokers": 3, "emulator": {"engine": engine}},
          "topics": [{"name": "t", "partitions": 2, "replication_factor": 3}],
          "timeline": [{"at": 0, "produce": {"topic": "t", "partition": "all", "acks": "all", "rate_per_sec": 20,
                                            "duration_ms": 300}}],
          "run": {"until_ms": 500}}
    c = Cluster.from_scenario(sc, spark=spark, out=tmp_out, overwrite=True)
    warm = c.loop._warm
    if engine == "local":
        assert warm is None
    c.run(500)
    assert c.loop._warm is None  # joined (and dropped) before the first window's job
    if warm is not None:
        assert not warm.is_alive() and warm.error is None
    s = c.summary()
    assert s["acked"] > 0 and s["lost_acked"] == 0
