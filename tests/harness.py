"""The one test harness for the broker round (protocol/broker.step) with no Spark. `run_step` is the only
place tests call `step`, so a change of its signature is a one-line edit here. `Net` drives brokers whose
messages are delivered the next round (as the engines deliver them), an in-memory log table kept by
executing the AppendRecords and TruncateLog effects, and the other effects recorded per round."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any

import pandas as pd

from sparkkafka.protocol import broker as B
from sparkkafka.protocol import frames as F
from sparkkafka.protocol.config import (
    EmulatorSettings,
    RoundSettings,
    TopicSettings,
    broker_config,
    topic_settings,
)
from sparkkafka.protocol.leader_and_isr import new_broker_rows

# outbox field -> the inbox field it arrives in next round (messages between brokers)
ROUTES = {"fetches": "fetches", "fetch_responses": "fetch_responses", "fetch_records": "fetch_records",
          "epoch_requests": "epoch_requests", "epoch_responses": "epoch_responses"}


def apply_log_effects(log: pd.DataFrame, effects) -> pd.DataFrame:
    """The log table (RECORD columns plus log_dir, is_future) after a round's AppendRecords and TruncateLog."""
    for e in effects:
        if isinstance(e, B.AppendRecords):
            log = pd.concat([log, e.records[list(log.columns)]], ignore_index=True)
        elif isinstance(e, B.TruncateLog):
            if len(e.flips):  # a swapped-in future log's records become current (log_truncation.truncate)
                fl = F.locate(e.flips, log, ["broker", "log_dir", "topic", "partition"])
                log.loc[(fl >= 0) & log["is_future"].to_numpy(), "is_future"] = False
            if len(e.cuts):
                c = log.merge(e.cuts, on=["broker", "log_dir", "topic", "partition"], how="left",
                              suffixes=("", "_cut"))
                log = log[~(c["offset_cut"].notna() & (c["offset"] >= c["offset_cut"])).to_numpy()]
                log = log.reset_index(drop=True)
    return log


def lai(broker: int, leader: int = 1, isr=(1, 2), replicas=(1, 2), epoch: int = 0, ctrl: int = 1,
        topic: str = "t", partition: int = 0, is_new: bool = True, zk: int = 0) -> pd.DataFrame:
    """One LeaderAndIsr entry the controller sends `broker` (ControllerChannelManager), as a frame."""
    return F.conform(pd.DataFrame([{
        "broker": broker, "topic": topic, "partition": partition, "leader": leader, "leader_epoch": epoch,
        "controller_epoch": ctrl, "isr": F.csv(isr), "replicas": F.csv(replicas), "is_new": is_new, "log_dir": None,
        "zk_version": zk,
    }]), F.LEADER_AND_ISR)


def batch(n: int, acks: int, now: int = 0, record_id: int = 0, broker: int = 1, topic: str = "t",
          partition: int = 0) -> pd.DataFrame:
    """One produce request of `n` records of 10 bytes to `broker`, with a 30 s delivery timeout."""
    return F.conform(pd.DataFrame([{
        "broker": broker, "topic": topic, "partition": partition, "record_id": record_id, "count": n,
        "acks": acks, "value_bytes": 10, "key": None, "sent_ms": now, "deadline_ms": now + 30000,
    }]), F.PRODUCE)


def run_step(state: B.BrokerState, inbox: B.Inbox, now: int, config: B.RoundFacts,
             read: B.Reader = B.no_reads) -> B.Step:
    """One broker round, protocol/broker.step: every test that steps a broker comes through here."""
    return B.step(state, inbox, now, config.cfg.rules, config, read=read)


def settings(profile: str = "2.8", config: Mapping[str, Any] | None = None, topics: Sequence[str] = (),
             **fields: Any) -> RoundSettings:
    """A round's settings (config.RoundSettings) as the driver builds them (RoundLoop.params): Kafka's broker
    defaults with the scenario's broker `config` (Kafka names, config.broker_config), the emulator's defaults,
    `profile`'s rules, the topic configs of `topics` (their defaults); then `fields` (RoundSettings fields)
    replaced. Every test that needs a round's `cfg` builds it here."""
    broker = broker_config(config)
    tcfg = {t: TopicSettings.of(broker, {}) for t in topics}
    return replace(RoundSettings.of(broker, EmulatorSettings.of(), profile, **topic_settings(tcfg)), **fields)


class Net:
    """Brokers stepped round by round; `log` is the log table their effects built."""

    def __init__(self, cfg: RoundSettings, min_isr: dict, brokers=(1, 2), log_dirs=("d0",), round_ms: int = 100,
                 state: B.BrokerState | None = None, log: pd.DataFrame | None = None) -> None:
        self.config = B.RoundFacts(cfg=cfg, min_isr=min_isr, log_dirs=tuple(log_dirs))
        self.state = state if state is not None else B.BrokerState(brokers=new_broker_rows(list(brokers)))
        self.inbox = B.Inbox()
        self.now = 0
        self.round_ms = round_ms
        self.log = log if log is not None else F.empty({**F.RECORD, "log_dir": F.STR, "is_future": F.BOOL})
        self.last: B.Step | None = None
        self.reads: list[B.ReadLog] = []  # the log reads the brokers asked for, in order

    def step(self, **messages) -> B.Step:
        """One round at `now` with the messages in flight plus `messages` (inbox field -> frame); the
        outbox's broker-to-broker messages are delivered next round; `now` advances by one round."""
        inbox = replace(self.inbox, **{k: v if isinstance(v, dict) else
                                       pd.concat([getattr(self.inbox, k), v], ignore_index=True)
                                       for k, v in messages.items()})
        current = self.log[~self.log["is_future"].to_numpy()]
        reader = B.read_from(current)
        s = run_step(self.state, inbox, self.now, self.config, read=lambda r: self.reads.append(r) or reader(r))
        self.state, self.last = s.state, s
        self.inbox = B.Inbox(**{dst: getattr(s.outbox, src) for src, dst in ROUTES.items()})
        self.log = apply_log_effects(self.log, s.effects)
        self.now += self.round_ms
        return s

    def replica(self, broker: int, topic: str = "t", partition: int = 0) -> pd.Series:
        r = self.state.replicas
        return r[(r["broker"] == broker) & (r["topic"] == topic) & (r["partition"] == partition)].iloc[0]

    def remote(self, leader: int, replica: int, topic: str = "t", partition: int = 0) -> pd.Series:
        r = self.state.remotes
        return r[(r["broker"] == leader) & (r["replica"] == replica) & (r["topic"] == topic)
                 & (r["partition"] == partition)].iloc[0]

    def effects(self, kind: type) -> list:
        return [e for e in self.last.effects if isinstance(e, kind)]

