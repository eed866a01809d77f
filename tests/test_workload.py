"""Producers' batches (scenario/workload.py): what the driver and the resident tasks send each round."""

import numpy as np
import pandas as pd

from sparkkafka.protocol.frames import PRODUCE
from sparkkafka.scenario.workload import Workload


def test_round_robin_batches_carry_consecutive_record_ids_in_the_produce_schema():
    w = Workload(round_ms=100, request_timeout_ms=30000)
    w.add({"topic": "t", "partition": "all", "acks": -1, "value_bytes": 100, "rate_per_sec": 50,
           "duration_ms": 1000}, now=0, partition_count=3)
    w.add({"topic": "u", "partition": 2, "acks": 1, "value_bytes": 10, "records": 4, "key": "k"}, now=0,
          partition_count=5)
    b = w.batches(0)  # t: 5 records due by 100 ms over partitions 0,1,2 (2,2,1); u: its 4 records at once
    assert list(b.columns) == list(PRODUCE) and [str(d) for d in b.dtypes] == list(PRODUCE.values())
    assert b[["topic", "partition", "record_id", "count"]].values.tolist() == [
        ["t", 0, 0, 2], ["t", 1, 2, 2], ["t", 2, 4, 1], ["u", 2, 5, 4]]
    assert (b["broker"] == -1).all() and (b["deadline_ms"] == 30000).all() and b["key"].tolist() == [None] * 3 + ["k"]
    nxt = w.batches(100)  # t continues where it stopped (records 0,1,2,0,1: partition 2 is next); u is done
    assert nxt[["topic", "partition", "record_id", "count"]].values.tolist() == [
        ["t", 2, 9, 2], ["t", 0, 11, 2], ["t", 1, 13, 1]]
    assert w.batches(1000)["count"].sum() == 50 - 10  # what its rate makes due by the end of its duration
    assert w.batches(1100).empty and not w.active
    assert isinstance(nxt.index, pd.RangeIndex) and np.array_equal(nxt["sent_ms"], [100] * 3)


def test_a_producers_batches_share_its_topic_and_key_objects():
    """One object per producer in the topic and key columns (not a copy per row): the brokers' lookups on
    the batches, and on the records and results made from them, take frames.distinct's one-object path."""
    w = Workload(round_ms=100, request_timeout_ms=30000)
    w.add({"topic": "".join(["t", "1"]), "partition": "all", "acks": -1, "value_bytes": 100, "rate_per_sec": 600,
           "duration_ms": 1000, "key": "".join(["k", "1"])}, now=0, partition_count=60)
    b = w.batches(0)
    assert len(b) == 60
    for c in ("topic", "key"):
        v = b[c].to_numpy()
        assert len({id(x) for x in v}) == 1, c


def test_advance_moves_the_workload_as_batches_does_without_making_them():
    """The driver's copy follows a resident window's rounds with `advance` when no batch can fail: after it,
    the next batches carry the record ids, partitions and counts they would have after `batches`."""
    def workload():
        w = Workload(round_ms=100, request_timeout_ms=30000)
        w.add({"topic": "t", "partition": "all", "acks": -1, "value_bytes": 100, "rate_per_sec": 37,
               "duration_ms": 700}, now=0, partition_count=5)
        w.add({"topic": "u", "partition": 1, "acks": 1, "value_bytes": 10, "records": 3}, now=0, partition_count=2)
        return w

    made, moved = workload(), workload()
    assert moved.written()[0] == ["t"] * 5 + ["u"] and moved.written()[1].tolist() == [0, 1, 2, 3, 4, 1]
    for now in range(0, 400, 100):
        assert moved.advance(now) == int(made.batches(now)["count"].sum())
    assert moved.next_record_id == made.next_record_id and len(moved.producers) == len(made.producers) == 1
    for now in range(400, 900, 100):  # the rest of t's records, where the made batches would send them
        pd.testing.assert_frame_equal(moved.batches(now), made.batches(now))
    assert not moved.active and moved.written()[1].tolist() == []
