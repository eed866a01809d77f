"""A generated cluster's snapshot: the text a Kafka 2.8 cluster's tools print (kafka-topics --describe,
kafka-log-dirs --describe), its racks, server.properties and produce rates, as `sparkkafka import` and
`sparkkafka whatif SNAPSHOT` read them. The shipped sample (data/snapshots/sample) is the default shape;
`sparkkafka bench --operator` writes a 200-broker, 100,000-partition one.

Deterministic (seeded). The cluster: brokers 1..N over racks rack-a/b/c, three log dirs each, the sample's
eight topics at RF 3 placed by Kafka's rack-aware AdminUtils algorithm (their partition counts scaled
to `partitions` in all, their records/s kept), and what an operator meets in a real snapshot:

* uneven disks: /var/kafka/data-1 holds about half the logs of each broker, data-3 the fewest;
* leaders moved off the preferred replica, and under-replicated partitions (a follower out of the ISR,
  behind the leader);
* two partitions in an inter-broker reassignment (KIP-455: Adding/Removing Replicas), the adding
  replica part-copied;
* two KIP-113 log-dir moves in flight (a future log part-copied in another dir);
* in-sync replicas whose sizes differ a little (retention deletes segments at different times).
"""

from __future__ import annotations

import random
from pathlib import Path

import pandas as pd

from ..controller.placement import assign_replicas_to_brokers
from ..protocol.config import TOPIC_CONFIGS
from .describe import describe_lines, topic_id
from .log_dirs import describe_log_dirs_text

SEED = 2028
SAMPLE_BROKERS = 12
DIRS = ["/var/kafka/data-1", "/var/kafka/data-2", "/var/kafka/data-3"]
DIR_WEIGHTS = [5, 3, 2]  # uneven disks
GB, MB = 1 << 30, 1 << 20
# name, partitions, (min, max) bytes per partition, topic config overrides, records/s, value bytes
TOPICS = [
    ("orders", 48, (2 * GB, 24 * GB), {"retention.ms": 259200000}, 900.0, 1024),
    ("payments", 24, (1 * GB, 8 * GB), {"min.insync.replicas": 3}, 300.0, 512),
    ("clickstream", 96, (4 * GB, 40 * GB), {"retention.ms": 86400000, "segment.bytes": 536870912}, 4000.0, 800),
    ("inventory", 12, (200 * MB, 2 * GB), {}, 60.0, 2048),
    ("audit-log", 36, (1 * GB, 12 * GB), {"retention.ms": 2592000000}, 200.0, 600),
    ("user-profiles", 24, (50 * MB, 800 * MB), {"unclean.leader.election.enable": False}, 20.0, 4096),
    ("notifications", 30, (100 * MB, 3 * GB), {}, 150.0, 300),
    ("metrics.raw", 32, (3 * GB, 30 * GB), {"retention.ms": 43200000}, 2500.0, 200),
]
SERVER_PROPERTIES = """\
# static broker configs shared by every broker (broker.id and broker.rack differ per broker)
broker.id=1
broker.rack=rack-a
listeners=PLAINTEXT://:9092
log.dirs=/var/kafka/data-1,/var/kafka/data-2,/var/kafka/data-3
zookeeper.connect=zk-1:2181,zk-2:2181,zk-3:2181/kafka
num.partitions=12
default.replication.factor=3
min.insync.replicas=2
unclean.leader.election.enable=false
auto.leader.rebalance.enable=true
replica.lag.time.max.ms=30000
num.replica.fetchers=2
inter.broker.protocol.version=2.8
"""
# the topic-level configs SERVER_PROPERTIES sets, which every topic inherits: the sample's own choice of
# min.insync.replicas 2 for its RF-3 topics (Kafka's default is 1), not a default
STATIC = {"min.insync.replicas": 2, "unclean.leader.election.enable": False}


def racks_of(brokers: int) -> dict[int, str]:
    """broker.rack of brokers 1..`brokers`: rack-a, rack-b, rack-c in turn."""
    return {b: "rack-" + "abc"[(b - 1) % 3] for b in range(1, brokers + 1)}


def topics_of(partitions: int | None = None) -> list[tuple]:
    """TOPICS with their partition counts scaled to `partitions` in all (None: as they are; the largest
    takes the rounding). Each topic keeps its records/s, spread over its partitions: the emulator writes
    every record, and the sample's rates per partition at 100,000 partitions (2.7M records/s) would be
    more than a produce event may send (100M records) over a what-if's 81 s."""
    if partitions is None:
        return TOPICS
    total = sum(t[1] for t in TOPICS)
    counts = [max(1, round(t[1] * partitions / total)) for t in TOPICS]
    counts[counts.index(max(counts))] += partitions - sum(counts)
    return [(t[0], n, *t[2:]) for t, n in zip(TOPICS, counts, strict=True)]


def build(rng: random.Random, brokers: int = SAMPLE_BROKERS, partitions: int | None = None
          ) -> tuple[pd.DataFrame, pd.DataFrame, pd.DataFrame]:
    """(topics, partitions, logs) frames in the shape describe_lines / describe_log_dirs_text take."""
    racks = racks_of(brokers)
    ids = list(racks)
    topics, parts, logs = [], [], []
    from_broker = {t: STATIC[b] for t, b in TOPIC_CONFIGS.items() if b and b in STATIC}
    reassigning = {("orders", 7), ("clickstream", 40)}
    moving = {("payments", 3), ("metrics.raw", 11)}
    for t, n, (lo, hi), overrides, _, _ in topics_of(partitions):
        configs = {**from_broker, **overrides}  # the topic's own, else the sample's server.properties
        topics.append({"topic": t, "topic_id": topic_id(SEED, t), "partition_count": n, "replication_factor": 3,
                       "configs": configs, "min_insync_replicas": configs["min.insync.replicas"],
                       "marked_for_deletion": False})
        assignment = assign_replicas_to_brokers(ids, n, 3, racks, seed=rng.randrange(1 << 30))
        for p, reps in assignment.items():
            size = rng.randrange(lo, hi)
            isr, leader, adding, removing = list(reps), reps[0], [], []
            roll = rng.random()
            if roll < 0.06:  # leadership moved off the preferred replica (a past failure)
                leader = reps[1]
            elif roll < 0.10:  # under-replicated: the last follower fell out of the ISR
                isr = reps[:2]
            replicas = list(reps)
            if (t, p) in reassigning:  # KIP-455: moving the last replica to a broker in the same rack
                old = reps[-1]
                new = next(b for b in ids if racks[b] == racks[old] and b not in reps)
                target = reps[:-1] + [new]
                replicas, adding, removing = target + [old], [new], [old]
            for b in replicas:
                d = rng.choices(DIRS, DIR_WEIGHTS)[0]
                if b in adding:
                    bytes_ = size * rng.randrange(10, 60) // 100
                elif b not in isr:
                    bytes_ = max(0, size - rng.randrange(50 * MB, 400 * MB))
                else:
                    bytes_ = max(0, size - rng.randrange(0, 64 * MB))  # retention's segment deletions differ a little
                logs.append({"broker": b, "log_dir": d, "topic": t, "partition": p, "size": bytes_, "offset_lag": 0,
                             "is_future": False})
                if (t, p) in moving and b == replicas[0]:
                    other = next(x for x in DIRS if x != d)
                    logs.append({"broker": b, "log_dir": other, "topic": t, "partition": p,
                                 "size": bytes_ * rng.randrange(20, 80) // 100, "offset_lag": rng.randrange(1, 99999),
                                 "is_future": True})
            parts.append({"topic": t, "partition": p, "leader": leader, "replicas": replicas,
                          "isr": [b for b in replicas if b in isr], "adding": adding, "removing": removing})
    return pd.DataFrame(topics), pd.DataFrame(parts), pd.DataFrame(logs)




def write(out: Path, brokers: int = SAMPLE_BROKERS, partitions: int | None = None, seed: int = SEED) -> Path:
    """Write the snapshot's files into `out` (made if missing): topics-describe.txt, log-dirs.txt,
    racks.txt, server.properties, rates.csv. The defaults write the shipped sample."""
    rng = random.Random(seed)
    topics, parts, logs = build(rng, brokers, partitions)
    racks = racks_of(brokers)
    ids = list(racks)
    out.mkdir(parents=True, exist_ok=True)
    lines = describe_lines(topics, parts, live_brokers=ids)
    (out / "topics-describe.txt").write_text("\n".join(lines) + "\n")
    dirs = pd.DataFrame([(b, d, None) for b in ids for d in DIRS], columns=["broker", "log_dir", "error"])
    (out / "log-dirs.txt").write_text(describe_log_dirs_text(dirs, logs, ids))
    (out / "racks.txt").write_text("# broker.rack of each broker\n" + "".join(f"{b}={r}\n" for b, r in racks.items()))
    (out / "server.properties").write_text(SERVER_PROPERTIES)
    (out / "rates.csv").write_text("topic,records_per_sec,value_bytes,acks\n"
                                   + "".join(f"{t},{r},{vb},all\n" for t, _, _, _, r, vb in topics_of(partitions)))
    return out
