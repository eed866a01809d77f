"""The protocol core on plain pandas frames: no Spark, no Delta (the sans-IO rule: docs/engine.md,
"Code layout")."""

from __future__ import annotations

from dataclasses import replace

import pandas as pd
import pytest
from harness import Net, batch, lai, settings

from sparkkafka.protocol import broker as B
from sparkkafka.protocol import errors, fetch, produce
from sparkkafka.protocol import frames as F
from sparkkafka.protocol.leader_and_isr import become_leader_or_follower, new_broker_rows

CFG = settings("2.8")
MIN_ISR = pd.Series({"t": 1})


class Pair:
    """Leader 1 and follower 2 of partition t-0, RF 2, driven one protocol step at a time."""

    def __init__(self, isr=(1, 2), min_isr=1):
        self.min_isr = pd.Series({"t": min_isr})
        reqs = F.concat([lai(1, 1, isr, [1, 2]), lai(2, 1, isr, [1, 2])], F.LEADER_AND_ISR)
        self.rep, self.rem, self.brk, _ = become_leader_or_follower(
            F.empty(F.REPLICA), F.empty(F.REMOTE), new_broker_rows([1, 2]), reqs, ["d0"], 0)
        self.tail = F.empty(F.RECORD)
        self.parked = F.empty(F.FETCH)
        self.pending = F.empty(F.PENDING)
        self.inflight_req = F.empty(F.FETCH)
        self.resp = (F.empty(F.FETCH_RESPONSE), F.empty(F.RECORD))
        self.results = []

    def state(self):
        lead = self.rep[self.rep.broker == 1].iloc[0]
        fol = self.rep[self.rep.broker == 2].iloc[0]
        remote = self.rem[self.rem.replica == 2].iloc[0]
        return (int(lead.leo), max(int(remote.leo), 0), int(lead.hw), int(fol.leo), int(fol.hw))

    def produce(self, n=1, acks=1, now=0, record_id=0):
        self.rep, recs, res, pend = produce.append_to_leader(self.rep, self.rem, batch(n, acks, now, record_id), self.min_isr,
                                                                  now, CFG)
        self.tail = F.concat([self.tail, recs], F.RECORD)
        self.pending = F.concat([self.pending, pend], F.PENDING)
        self.results.append(res)
        return res

    def follower_fetch(self, now):
        self.rep, self.inflight_req, _ = fetch.fetch_requests(self.rep, now, {}, CFG)

    def leader_serve(self, now):
        self.rep, self.rem, resp, recs, self.parked = fetch.serve_fetch(
            self.rep, self.rem, self.tail, self.inflight_req, self.parked, now, CFG)
        self.inflight_req = F.empty(F.FETCH)
        self.resp = (resp, recs)
        self.pending, done = produce.complete_delayed_produce(self.rep, self.pending, self.min_isr, now)
        self.results.append(done)
        return resp

    def follower_apply(self, now):
        self.rep, appended, _, _ = fetch.apply_fetch_responses(self.rep, *self.resp, now, CFG)
        self.resp = (F.empty(F.FETCH_RESPONSE), F.empty(F.RECORD))
        return appended


def pair(isr=(1, 2), min_isr=1) -> Net:
    """Leader 1 and follower 2 of t-0 stepped a broker round at a time (protocol/broker.step), after the
    round that delivered their LeaderAndIsr (the follower's first fetch is in flight)."""
    net = Net(settings("2.8", topics=("t",)), {"t": min_isr})
    net.step(leader_and_isr=F.concat([lai(1, 1, isr, [1, 2]), lai(2, 1, isr, [1, 2])], F.LEADER_AND_ISR))
    return net


def produced(net: Net) -> pd.DataFrame:
    """The produce results the last round answered."""
    return F.concat([e.frame for e in net.last.effects if isinstance(e, B.HistoryRows)
                     and e.table == "produce_results"], F.RESULT)


def test_response_carries_hw_read_before_the_fetch_moved_it():
    net = pair()
    s = net.step(produce=batch(2, 1, now=net.now))  # the fetch at 0 is served with both records
    assert s.outbox.fetch_responses.hw.tolist() == [0] and len(s.outbox.fetch_records) == 2
    net.step(produce=batch(1, 1, record_id=2, now=net.now))  # the follower appends; fetches at 2
    assert int(net.replica(2).leo) == 2
    s = net.step()  # fetch at 2 moves the HW to 2 but reports the HW it read (0)
    assert s.outbox.fetch_responses.hw.tolist() == [0]
    assert int(net.replica(1).hw) == 2

@pytest.mark.parametrize("acks", [1, 0])
def test_acks_1_and_0_answer_at_append(acks):
    p = Pair()
    res = p.produce(3, acks=acks)
    assert len(res) == 1
    assert bool(res.acked.iloc[0]) is (acks == 1)
    assert res.error.isna().all()
    assert p.state()[0] == 3 and p.state()[2] == 0  # appended, not yet replicated


def test_acks_all_completes_only_when_hw_passes_it():
    net = pair()
    net.step(produce=batch(2, -1, now=net.now))  # appended and served at once; the HW is still 0
    assert produced(net).empty and len(net.state.pending) == 1
    net.step()  # the follower appends both and fetches at 2
    assert produced(net).empty
    net.step()  # the follower's LEO 2 reaches the leader: HW 2
    done = produced(net)
    assert done.acked.tolist() == [True] and done.base_offset.tolist() == [0] and done.error.isna().all()
    assert net.state.pending.empty


def test_acks_all_times_out_without_the_follower():
    p = Pair()
    p.produce(1, acks=-1, now=0)
    p.leader_serve(29999)
    assert p.results[-1].empty
    p.leader_serve(30000)
    assert p.results[-1].error.tolist() == [errors.REQUEST_TIMED_OUT]
    assert p.state()[0] == 1  # no error path rolls the append back


def test_invalid_acks_appends_nothing():
    p = Pair()
    res = p.produce(1, acks=2)
    assert res.error.tolist() == [errors.INVALID_REQUIRED_ACKS] and p.state()[0] == 0


def test_not_enough_replicas_before_append():
    p = Pair(isr=(1,), min_isr=2)
    res = p.produce(1, acks=-1)
    assert res.error.tolist() == [errors.NOT_ENOUGH_REPLICAS] and p.state()[0] == 0
    assert p.produce(1, acks=1).acked.tolist() == [True]  # acks=1 ignores min ISR


def test_produce_to_follower_is_refused():
    p = Pair()
    rep, recs, res, _ = produce.append_to_leader(p.rep, p.rem, batch(1, 1, broker=2), MIN_ISR, 0, CFG)
    assert res.error.tolist() == [errors.NOT_LEADER_OR_FOLLOWER] and recs.empty


def test_fetch_max_bytes_limits_a_partition_but_returns_one_record():
    p = Pair()
    p.produce(50)  # 10 bytes each
    p.follower_fetch(0)
    cfg = replace(CFG, replica_fetch_max_bytes=95)
    p.rep, p.rem, resp, recs, _ = fetch.serve_fetch(p.rep, p.rem, p.tail, p.inflight_req, p.parked, 0, cfg)
    assert len(recs) == 10
    p.resp = (resp, recs)
    p.follower_apply(0)
    assert p.state()[3] == 10
    cfg = replace(CFG, replica_fetch_max_bytes=1)
    p.follower_fetch(0)
    _, _, _, recs, _ = fetch.serve_fetch(p.rep, p.rem, p.tail, p.inflight_req, F.empty(F.FETCH), 0, cfg)
    assert recs.offset.tolist() == [10]  # KIP-74: at least one record even above the limit


def test_stale_leader_and_isr_is_ignored():
    """ReplicaManager.becomeLeaderOrFollower's lines, each with the request's correlation id and controller id."""
    p = Pair()
    req = lai(2, 2, [2], [1, 2], epoch=0).assign(controller_id=3, correlation_id=7)
    rep, rem, brk, lines = become_leader_or_follower(p.rep, p.rem, p.brk, req, ["d0"], 0)
    assert rep[rep.broker == 2].leader.iloc[0] == 1
    assert lines.message.tolist() == [
        "[Broker id=2] Handling LeaderAndIsr request correlationId 7 from controller 3 for 1 partitions",
        "[Broker id=2] Ignoring LeaderAndIsr request from controller 3 with correlation id 7 epoch 1 for partition "
        "t-0 since its associated leader epoch 0 matches the current leader epoch"]
    req = lai(2, 2, [2], [1, 2], epoch=1, ctrl=0).assign(controller_id=3, correlation_id=8)
    rep, rem, brk, lines = become_leader_or_follower(p.rep, p.rem, p.brk, req, ["d0"], 0)
    assert lines.message.tolist()[1:] == [
        "[Broker id=2] Ignoring LeaderAndIsr request from controller 3 with correlation id 8 since its controller "
        "epoch 0 is old. Latest known controller epoch is 1"]



def test_a_request_mixing_stale_and_newer_entries_logs_each_in_kafka_words():
    """One line per entry, the ignored ones first (as ReplicaManager logs them), with each entry's own
    numbers: a new controller resends every replica's current state (ReplicaStateMachine.startup)."""
    p = Pair()
    reqs = F.concat([lai(1, 1, [1, 2], [1, 2], epoch=0, ctrl=2), lai(2, 1, [1], [1, 2], epoch=4, ctrl=2)],
                    F.LEADER_AND_ISR)
    reqs = reqs.assign(controller_id=3, correlation_id=[5, 9])
    rep, _, brk, lines = become_leader_or_follower(p.rep, p.rem, p.brk, reqs, ["d0"], 0)
    per_entry = lines[lines.topic.notna()]
    assert per_entry[["broker", "controller_epoch", "topic", "partition"]].values.tolist() == [
        [1, 2, "t", 0], [2, 2, "t", 0]]
    assert lines.message.tolist() == [
        "[Broker id=1] Handling LeaderAndIsr request correlationId 5 from controller 3 for 1 partitions",
        "[Broker id=2] Handling LeaderAndIsr request correlationId 9 from controller 3 for 1 partitions",
        "[Broker id=1] Ignoring LeaderAndIsr request from controller 3 with correlation id 5 epoch 2 for partition "
        "t-0 since its associated leader epoch 0 matches the current leader epoch",
        "[Broker id=2] Completed LeaderAndIsr request correlationId 9 from controller 3 epoch 2 for the "
        "become-follower transition for partition t-0 with leader 1"]
    assert rep.set_index("broker").leader_epoch.to_dict() == {1: 0, 2: 4}
    assert brk.set_index("broker").controller_epoch.to_dict() == {1: 2, 2: 2}

def test_new_replicas_go_to_the_dir_with_fewest_logs():
    reqs = F.concat([lai(1, 1, [1], [1], partition=p) for p in range(5)], F.LEADER_AND_ISR)
    rep, *_ = become_leader_or_follower(F.empty(F.REPLICA), F.empty(F.REMOTE), new_broker_rows([1]), reqs,
                                        ["d0", "d1"], 0)
    assert rep.sort_values("partition").log_dir.tolist() == ["d0", "d1", "d0", "d1", "d0"]


def test_leader_alone_in_isr_commits_at_once():
    p = Pair(isr=(1,))
    p.produce(3)
    assert p.state()[2] == 3


def test_follower_disconnect_backs_off():
    p = Pair()
    p.rep, req, _ = fetch.fetch_requests(p.rep, 0, {2: frozenset({1})}, CFG)
    assert req.empty
    assert p.rep[p.rep.broker == 2].backoff_until_ms.iloc[0] == -1  # nothing was in flight
    p.rep, req, _ = fetch.fetch_requests(p.rep, 0, {}, CFG)
    assert len(req) == 1
    p.rep, req, _ = fetch.fetch_requests(p.rep, 100, {2: frozenset({1})}, CFG)  # leader dies under it
    f = p.rep[p.rep.broker == 2].iloc[0]
    assert not f.fetch_in_flight and f.backoff_until_ms == 100 + CFG.replica_fetch_backoff_ms


def test_response_to_a_superseded_fetch_is_ignored():
    """A LeaderAndIsr restarts the follower's fetching: the answer to the request it had in flight
    (here fenced by the leader's new epoch) must not fail the new one."""
    p = Pair()
    p.produce(3)
    p.follower_fetch(0)
    old = p.inflight_req
    bump = [lai(b, 1, [1, 2], [1, 2], epoch=1) for b in (1, 2)]
    p.rep, p.rem, p.brk, _ = become_leader_or_follower(p.rep, p.rem, p.brk, F.concat(bump, F.LEADER_AND_ISR),
                                                       ["d0"], 100)
    p.follower_fetch(100)
    new = p.inflight_req
    p.inflight_req = old
    fenced = p.leader_serve(100)
    assert fenced.error.tolist() == ["FENCED_LEADER_EPOCH"]
    p.follower_apply(200)
    f = p.rep[p.rep.broker == 2].iloc[0]
    assert f.fetch_in_flight and f.backoff_until_ms == -1  # still waiting for its own request
    p.inflight_req = new
    p.leader_serve(200)
    p.follower_apply(300)
    assert p.state()[3] == 3
