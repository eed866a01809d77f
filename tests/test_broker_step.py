"""The broker round as one pure function (protocol/broker.step): driven round by round with no Spark,
asserting the brokers' state and the effects the engine would execute."""

from __future__ import annotations

from dataclasses import replace

import pandas as pd
import pytest
from harness import Net, batch, lai, run_step, settings

from sparkkafka.protocol import broker as B
from sparkkafka.protocol import frames as F
from sparkkafka.protocol import leader_epoch as LE
from sparkkafka.protocol.config import LONG_MAX

CFG = settings("2.8", topics=("t",), replica_high_watermark_checkpoint_interval_ms=1000)


def values(net: Net) -> tuple[int, int, int, int, int]:
    """The seed table's five values: leader LEO, remote LEO (L's view of F), leader HW, follower LEO and HW."""
    lead, fol, rem = net.replica(1), net.replica(2), net.remote(1, 2)
    return int(lead.leo), max(int(rem.leo), 0), int(lead.hw), int(fol.leo), int(fol.hw)


def checkpoints(net: Net) -> dict[int, tuple]:
    return {e.broker: e.entries for e in net.effects(B.WriteHwCheckpoint)}


def test_seed_hw_table_as_a_sequence_of_steps():
    """ReplicaFetcherThread.processPartitionData, one broker round per step: the follower learns the HW one
    fetch late; every step's HW checkpoint writes, appended records and fetch responses."""
    net = Net(CFG, {"t": 1})
    net.step(leader_and_isr=F.concat([lai(1), lai(2)], F.LEADER_AND_ISR))
    assert values(net) == (0, 0, 0, 0, 0)
    assert checkpoints(net) == {1: (("t", 0, 0),), 2: (("t", 0, 0),)}  # first round: the checkpoint task starts
    assert [(e.broker, e.log_dir, e.partitions) for e in net.effects(B.WritePartitionsListing)] == [
        (1, "d0", (("t", 0),)), (2, "d0", (("t", 0),))]
    assert net.last.outbox.fetches["fetch_offset"].tolist() == [0]  # follower fetches (offset 0)
    assert not net.effects(B.AppendRecords)

    s = net.step()  # the follower's first fetch (offset 0) parks: nothing to read yet
    assert values(net) == (0, 0, 0, 0, 0) and len(s.state.parked) == 1 and s.outbox.fetch_responses.empty

    s = net.step(produce=batch(1, acks=1, now=net.now))
    # producer writes; the new data completes the parked fetch at once: HW stays 0, the leader responds
    # with record 0 and HW 0
    assert values(net) == (1, 0, 0, 0, 0) and s.state.parked.empty
    (app,) = net.effects(B.AppendRecords)
    assert app.records[["broker", "log_dir", "offset", "is_future"]].values.tolist() == [[1, "d0", 0, False]]
    assert s.outbox.fetch_responses[["broker", "src", "fetch_offset", "hw", "leo"]].values.tolist() == [[2, 1, 0, 0, 1]]
    assert s.outbox.fetch_records["offset"].tolist() == [0]
    res = [e.frame for e in net.effects(B.HistoryRows) if e.table == "produce_results"][0]
    assert res[["base_offset", "acked"]].values.tolist() == [[0, True]]  # acks=1: answered at append
    assert not checkpoints(net)  # not due again before replica.high.watermark.checkpoint.interval.ms

    s = net.step()
    # the follower appends record 0: HW = min(own LEO 1, HW 0 in the response) = 0; it fetches at 1
    assert values(net) == (1, 0, 0, 1, 0)
    (app,) = net.effects(B.AppendRecords)
    assert app.records[["broker", "offset"]].values.tolist() == [[2, 0]]
    assert s.outbox.fetches["fetch_offset"].tolist() == [1]

    s = net.step()
    # the fetch at 1 moves the remote LEO to 1 and the leader HW to 1; nothing to send yet: parked
    assert values(net) == (1, 1, 1, 1, 0)
    assert s.outbox.fetch_responses.empty and len(s.state.parked) == 1

    seen = []
    while int(net.replica(2).hw) < 1:
        s = net.step()
        seen.append(values(net))
        assert len(seen) < 10
    # the parked fetch expires (replica.fetch.wait.max.ms) with HW 1; the follower then learns it
    assert seen[-1] == (1, 1, 1, 1, 1) and set(seen[:-1]) <= {(1, 1, 1, 1, 0)}
    assert net.log[["broker", "offset"]].values.tolist() == [[1, 0], [2, 0]]

    while not checkpoints(net):  # the next HW checkpoint writes the HW both replicas reached
        net.step()
    assert net.now - 100 == CFG.replica_high_watermark_checkpoint_interval_ms
    assert checkpoints(net) == {1: (("t", 0, 1),), 2: (("t", 0, 1),)}


def _recovered(broker, offsets, epochs, hw, cache):
    disk = pd.DataFrame({"broker": [broker], "topic": ["t"], "partition": [0], "log_dir": ["d0"], "hw": [hw],
                         "recovery_point": [0], "epoch_cache": [LE.encode(cache)]})
    log = pd.DataFrame({"broker": broker, "log_dir": "d0", "topic": "t", "partition": 0, "offset": offsets,
                        "leader_epoch": epochs})
    empty = log.iloc[:0]
    return B.RecoveredLogs(disk, log, disk.iloc[:0], empty)


@pytest.mark.parametrize("profile, cut", [("0.10", 2), ("2.8", None)])
def test_restart_then_become_follower_truncates(profile, cut):
    """A follower restarts with records 0..3 and a checkpointed HW of 2, then becomes follower of a
    leader that holds only 0..2. Before 0.11 (no leader epochs) makeFollowers truncates to the HW at
    once: a TruncateLog effect cutting its log at 2. From 2.8 it keeps its log and asks the leader
    (fetch with DivergingEpoch): the cut comes from the leader's answer, at the leader's epoch end."""
    cfg = settings(profile, topics=("t",))
    net = Net(cfg, {"t": 1}, brokers=(1,))
    net.step(leader_and_isr=lai(1, isr=(1,), replicas=(1, 2), epoch=0))
    net.step(produce=batch(3, acks=1, now=100))
    assert int(net.replica(1).leo) == 3

    start = pd.DataFrame({"broker": pd.array([2], dtype="int32")})
    stamped = [0, 0, 0, 0] if profile != "0.10" else [-1, -1, -1, -1]
    recovered = {2: _recovered(2, [0, 1, 2, 3], stamped, hw=2, cache=[(0, 0)] if profile != "0.10" else [])}
    net.step(start=start, recovered=recovered,
             leader_and_isr=F.concat([lai(b, isr=(1,), replicas=(1, 2), epoch=1, is_new=False) for b in (1, 2)],
                                     F.LEADER_AND_ISR))
    f = net.replica(2)
    assert int(f.leader) == 1
    cuts = [e.cuts for e in net.effects(B.TruncateLog)]
    if cut is not None:
        assert len(cuts) == 1
        assert cuts[0][["broker", "log_dir", "topic", "partition", "offset"]].values.tolist() == [[2, "d0", "t", 0, 2]]
        assert (int(f.leo), int(f.hw)) == (2, 2)
        return
    assert not cuts and int(f.leo) == 4  # the log is kept until the leader answers
    for _ in range(5):
        net.step()
        cuts += [e.cuts for e in net.effects(B.TruncateLog)]
        if cuts:
            break
    assert cuts[0][["broker", "offset"]].values.tolist() == [[2, 3]]  # record 3 diverges from the leader's log
    assert int(net.replica(2).leo) == 3


def test_reads_come_through_the_reader_and_a_missing_reader_is_an_error():
    """A follower fetching below the leader's in-memory tail gets records read from the log (ReadLog)."""
    cfg = replace(CFG, tail_records=1)
    net = Net(cfg, {"t": 1})
    net.step(leader_and_isr=F.concat([lai(1, isr=(1,)), lai(2, isr=(1,))], F.LEADER_AND_ISR))
    state, inbox = net.state, net.inbox
    net.step(produce=batch(5, acks=1, now=100))
    assert len(net.state.tail) <= 5
    # a fresh fetch from offset 0 after the tail was trimmed to 1 record
    net.step()
    assert len(net.state.tail) == 1
    req = F.conform(pd.DataFrame([{"broker": 1, "src": 2, "topic": "t", "partition": 0, "fetch_offset": 0,
                                   "current_leader_epoch": 0, "last_fetched_epoch": -1, "log_start_offset": 0,
                                   "sent_ms": net.now, "deadline_ms": net.now + 500,
                                   "quota_bytes": LONG_MAX}]), F.FETCH)
    asked = []
    current = net.log[~net.log["is_future"]]
    reader = B.read_from(current)
    s = run_step(net.state, B.Inbox(fetches=req), net.now, net.config, read=lambda r: asked.append(r) or reader(r))
    assert asked and asked[0].ranges[["broker", "from_offset"]].values.tolist() == [[1, 0]]
    assert s.outbox.fetch_records["offset"].tolist()[:1] == [0]
    with pytest.raises(ValueError, match="no reader"):
        run_step(net.state, B.Inbox(fetches=req), net.now, net.config)
    assert state is not None and inbox is not None


def test_a_paused_broker_keeps_its_state_and_its_messages():
    """A stop-the-world stall: broker 2 processes nothing and sends nothing; what reached it waits
    (Step.deferred); its replica still has its history row."""
    net = Net(CFG, {"t": 1})
    net.step(leader_and_isr=F.concat([lai(1), lai(2)], F.LEADER_AND_ISR))
    s = net.step(produce=batch(1, acks=1, now=net.now))
    assert len(s.outbox.fetch_responses) == 1  # on its way to broker 2
    before = net.state
    paused = run_step(net.state, net.inbox, net.now, B.RoundFacts(**{**net.config.__dict__, "paused": frozenset({2})}))
    mine = paused.state.replicas[paused.state.replicas["broker"] == 2].reset_index(drop=True)
    pd.testing.assert_frame_equal(mine, before.replicas[before.replicas["broker"] == 2].reset_index(drop=True))
    assert paused.deferred.fetch_responses["broker"].tolist() == [2] and len(paused.deferred.fetch_records) == 1
    assert paused.outbox.fetches.empty  # broker 2 sends nothing
    (rs,) = [e.frame for e in paused.effects if isinstance(e, B.HistoryRows) and e.table == "replica_state"]
    assert sorted(rs["broker"].tolist()) == [1, 2]


def test_a_follower_that_stops_fetching_holds_no_records_in_the_leaders_tail():
    """The leader's tail keeps the records its fetching followers still need. A follower cut off for longer
    than one long-polled fetch and one backoff (replica.fetch.wait.max.ms + replica.fetch.backoff.ms) no
    longer holds them there (a broker down for 20 s would keep 20 s of every partition it follows); when
    it fetches again, the records it lacks are read from the log: the same records, in order."""
    net = Net(CFG, {"t": 1})
    net.step(leader_and_isr=F.concat([lai(1), lai(2)], F.LEADER_AND_ISR))
    for i in range(5):
        net.step(produce=batch(2, acks=1, now=net.now, record_id=10 * i))
    net.config, kept = replace(net.config, unreachable={2: frozenset({1}), 1: frozenset({2})}), []
    quiet = CFG.replica_fetch_wait_max_ms + CFG.replica_fetch_backoff_ms
    for i in range(5, 5 + quiet // net.round_ms + 5):
        net.step(produce=batch(2, acks=1, now=net.now, record_id=10 * i))
        kept.append(len(net.state.tail))
        if i == 7:  # what was on its way has arrived
            caught_up = int(net.replica(2).leo)
    assert int(net.replica(2).leo) == caught_up  # it fetched nothing while cut off
    assert max(kept) > 2 and kept[-1] == 0  # the tail held its records for a while, then let them go
    net.config, net.reads = replace(net.config, unreachable={}), []
    leo = int(net.replica(1).leo)
    for _ in range(quiet // net.round_ms + 5):  # its backoff ends; it fetches again
        net.step()
    assert net.reads and net.reads[0].ranges[["broker", "from_offset"]].values.tolist() == [[1, caught_up]]
    follower = net.log[net.log["broker"] == 2].sort_values("offset")
    leader = net.log[net.log["broker"] == 1].sort_values("offset")
    assert int(net.replica(2).leo) == leo
    assert follower["record_id"].tolist() == leader["record_id"].tolist()[:leo]
