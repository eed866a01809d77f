"""Kafka's own admin commands run against a RealCluster (each a short JVM: kafka.admin.* main classes, as the
bin/kafka-*.sh scripts run them), and a steady producer (the confluent-kafka client, librdkafka)."""

from __future__ import annotations

import itertools
import json
import subprocess
import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from .cluster import RealCluster, property_value
from .jars import KafkaSetupError

TOOL_HEAP = ("-Xmx128m", "-XX:TieredStopAtLevel=1")  # a tool runs seconds: C1 only starts it faster


def run_tool(cluster: RealCluster, main: str, *args: str, timeout_s: float = 120.0) -> str:
    """Run a Kafka command-line main class; its stdout, or KafkaSetupError with its output on failure."""
    done = subprocess.run(cluster.java(main, *args, heap=TOOL_HEAP), capture_output=True, text=True,
                          timeout=timeout_s)
    if done.returncode != 0:
        raise KafkaSetupError(f"{main} {' '.join(args)} exited {done.returncode}:\n{done.stdout}{done.stderr}")
    return done.stdout


def reassign(cluster: RealCluster, plan: dict, throttle: int | None, workdir: Path,
             log_dirs_throttle: int | None = None) -> str:
    """kafka-reassign-partitions --execute (KIP-455, AdminClient) with the scenario's plan and throttles."""
    path = Path(workdir) / f"reassign-{time.monotonic_ns()}.json"
    path.write_text(json.dumps(plan))
    args = ["--bootstrap-server", cluster.bootstrap, "--reassignment-json-file", str(path), "--execute"]
    if throttle is not None:
        args += ["--throttle", str(throttle)]
    if log_dirs_throttle is not None:
        args += ["--replica-alter-log-dirs-throttle", str(log_dirs_throttle)]
    try:
        return run_tool(cluster, "kafka.admin.ReassignPartitionsCommand", *args)
    except KafkaSetupError as e:
        if not storage_race(str(e)):
            raise
        time.sleep(0.5)  # the new replica's log being created; the partitions' moves started already
        return run_tool(cluster, "kafka.admin.ReassignPartitionsCommand", *args, "--additional")


def storage_race(output: str) -> bool:
    """Whether --execute failed only on a log dir it could not yet alter: AlterReplicaLogDirs answered
    KAFKA_STORAGE_ERROR for a replica the reassignment had just made the broker create (seen once in seven
    replays of diff-throttled-move; ReassignPartitionsCommand.alterReplicaLogDirs retries only
    ReplicaNotAvailableException). The partition moves were submitted before it, so the tool is run once more
    with --additional, as an operator would, which submits the same targets and alters the dirs again."""
    return "Failed to alter dir for" in output and "KafkaStorageException" in output


def delete_topic(cluster: RealCluster, topic: str, wait_s: float = 10.0) -> str:
    """kafka-topics --delete. TopicCommand first lists the topics (TopicCommand.ensureTopicExists) through
    the AdminClient's least loaded broker, and a broker that has just registered after a restart may not hold
    the topic in its metadata cache yet: the tool then exits 'does not exist as expected' without sending the
    deletion (seen once in a loaded suite run, the restarted broker registering 5 s after its restart). It is
    run again, as an operator would, until the brokers' metadata holds the topic (at most `wait_s`)."""
    deadline = time.monotonic() + wait_s
    while True:
        try:
            return run_tool(cluster, "kafka.admin.TopicCommand", "--bootstrap-server", cluster.bootstrap,
                            "--delete", "--topic", topic)
        except KafkaSetupError as e:
            if not metadata_race(str(e), topic) or time.monotonic() > deadline:
                raise
            time.sleep(0.2)


def metadata_race(output: str, topic: str) -> bool:
    """Whether TopicCommand failed only on its own topic listing (the topic absent from the metadata it got)."""
    return f"Topic '{topic}' does not exist as expected" in output


def verify(cluster: RealCluster, plan: dict, workdir: Path) -> str:
    """kafka-reassign-partitions --verify of one plan (ReassignPartitionsCommand.verifyAssignment, 2.8): each
    partition's and named log dir's state; once nothing moves, it also removes the throttles --execute set."""
    path = Path(workdir) / f"verify-{time.monotonic_ns()}.json"
    path.write_text(json.dumps(plan))
    return run_tool(cluster, "kafka.admin.ReassignPartitionsCommand", "--bootstrap-server", cluster.bootstrap,
                    "--verify", "--reassignment-json-file", str(path))


def describe_log_dirs(cluster: RealCluster, topics: list[str]) -> str:
    """kafka-log-dirs --describe --topic-list (kafka.admin.LogDirsCommand, DescribeLogDirs of every broker),
    the scenario's topics only (the internal ones a consumer creates are left out, as --exclude-internal does
    for kafka-topics)."""
    return run_tool(cluster, "kafka.admin.LogDirsCommand", "--bootstrap-server", cluster.bootstrap, "--describe",
                    "--topic-list", ",".join(topics))


def create_topic(cluster: RealCluster, name: str, partitions: int, replication_factor: int,
                 assignment: Mapping[int, Sequence[int]] | None = None, config: Mapping | None = None) -> str:
    """kafka-topics --create (kafka.admin.TopicCommand, CreateTopics through the AdminClient); with an
    assignment, `--replica-assignment` in its "1:2,2:3" form. The tool's output."""
    args = ["--bootstrap-server", cluster.bootstrap, "--create", "--topic", name]
    if assignment:
        args += ["--replica-assignment", ",".join(":".join(str(b) for b in assignment[p]) for p in sorted(assignment))]
    else:
        args += ["--partitions", str(partitions), "--replication-factor", str(replication_factor)]
    for k, v in (config or {}).items():
        args += ["--config", f"{k}={property_value(v)}"]
    return run_tool(cluster, "kafka.admin.TopicCommand", *args)


def config_args(entity: str, name: int | str, config: Mapping[str, object]) -> list[str]:
    """kafka-configs --alter arguments of a set_config event (kafka.admin.ConfigCommand): `--entity-type
    topics|brokers`, `--entity-name NAME` or, for the brokers' cluster-wide default, `--entity-default`;
    the set keys in one `--add-config k=v,...` (a value holding commas in ConfigCommand's `[a,b]` form), the
    null ones in `--delete-config`."""
    args = ["--alter", "--entity-type", entity]
    args += ["--entity-default"] if name == "default" else ["--entity-name", str(name)]
    added = []
    for k, v in config.items():
        if v is not None:
            text = property_value(v)
            added.append(f"{k}=[{text}]" if "," in text else f"{k}={text}")
    if added:
        args += ["--add-config", ",".join(added)]
    deleted = [k for k, v in config.items() if v is None]
    if deleted:
        args += ["--delete-config", ",".join(deleted)]
    return args


def alter_config(cluster: RealCluster, entity: str, name: int | str, config: Mapping[str, object]) -> str:
    """kafka-configs --bootstrap-server ... --alter (IncrementalAlterConfigs for a topic, AlterConfigs for a
    broker or the default, as ConfigCommand 2.8 sends them); the tool's output ("Completed updating
    config for topic t.")."""
    return run_tool(cluster, "kafka.admin.ConfigCommand", "--bootstrap-server", cluster.bootstrap,
                    *config_args(entity, name, config))


_IDS = itertools.count()


@dataclass
class SteadyProducer:
    """Sends `rate_per_sec` records of `value_bytes` to the `partitions` (round-robin) for `duration_ms`, in
    10 ms ticks, or `records` records at once when no rate is given; acks as given, no retries (the
    emulator's producer does not retry). Each value starts with a unique id so that acked records can be
    looked for in the logs afterwards (`acked_ids`). Its metadata is refreshed every second besides after each
    error: in one replay on a loaded machine the producer kept sending to a leader whose log dir had failed
    long after the controller had moved the leadership, every write refused with KAFKA_STORAGE_ERROR
    (librdkafka's refresh on that error did not find the new leader; why is not known). Runs in a thread."""

    cluster: RealCluster
    topic: str
    partitions: list[int]
    rate_per_sec: float | None
    duration_ms: int
    acks: str = "1"
    value_bytes: int = 100
    records: int | None = None
    acked_ids: set[int] = field(default_factory=set)
    acked: dict[int, int] = field(default_factory=dict)
    failed: dict[int, int] = field(default_factory=dict)
    errors: dict[str, int] = field(default_factory=dict)
    _thread: threading.Thread | None = None
    _stop: threading.Event = field(default_factory=threading.Event)

    def _report(self, err, msg) -> None:
        p = msg.partition()
        if err is None:
            self.acked[p] = self.acked.get(p, 0) + 1
            self.acked_ids.add(int(msg.value()[:12]))
        else:
            self.failed[p] = self.failed.get(p, 0) + 1
            self.errors[err.name()] = self.errors.get(err.name(), 0) + 1

    def _due(self, elapsed_s: float) -> int:
        if self.rate_per_sec is None:
            return self.records or 0
        return int(min(elapsed_s * 1000, self.duration_ms) * self.rate_per_sec / 1000)

    def _run(self) -> None:
        from confluent_kafka import Producer

        prod = Producer({"bootstrap.servers": self.cluster.bootstrap, "acks": self.acks, "retries": 0,
                         "linger.ms": 5, "enable.idempotence": False, "message.timeout.ms": 30000,
                         "queue.buffering.max.kbytes": 262144, "topic.metadata.refresh.interval.ms": 1000})
        pad = b"x" * max(self.value_bytes - 12, 0)
        start = time.monotonic()
        sent = 0
        total = self._due(float("inf"))
        while not self._stop.is_set() and sent < total:
            due = self._due(time.monotonic() - start)
            while sent < due:
                p = self.partitions[sent % len(self.partitions)]
                try:
                    prod.produce(self.topic, b"%012d" % next(_IDS) + pad, partition=p, on_delivery=self._report)
                    sent += 1
                except BufferError:
                    prod.poll(0.05)
            prod.poll(0)
            time.sleep(0.01)
        prod.flush(60)

    def start(self) -> SteadyProducer:
        self._thread = threading.Thread(target=self._run, name=f"producer-{self.topic}", daemon=True)
        self._thread.start()
        return self

    def join(self, timeout_s: float | None = None) -> None:
        if self._thread is not None:
            self._thread.join(timeout_s)

    def stop(self) -> None:
        self._stop.set()
        self.join(90)

    def halt(self) -> None:
        """Stop sending, without waiting for the flush (the cluster is going away)."""
        self._stop.set()


def logged_ids(cluster: RealCluster, topic: str) -> set[int]:
    """The record ids present in `topic` now, read from the beginning by a consumer (read_committed is
    irrelevant: no transactions), up to each partition's end."""
    from confluent_kafka import Consumer, TopicPartition

    cons = Consumer({"bootstrap.servers": cluster.bootstrap, "group.id": f"sparkkafka-check-{time.time_ns()}",
                     "enable.auto.commit": False, "auto.offset.reset": "earliest", "enable.partition.eof": True})
    try:
        meta = cons.list_topics(topic, timeout=30).topics[topic]
        parts = [TopicPartition(topic, p, 0) for p in meta.partitions]
        cons.assign(parts)
        left, ids, deadline = {tp.partition for tp in parts}, set(), time.monotonic() + 60
        while left and time.monotonic() < deadline:
            msg = cons.poll(1.0)
            if msg is None:
                continue
            if msg.error():
                if msg.error().code() == msg.error()._PARTITION_EOF:
                    left.discard(msg.partition())
                continue
            ids.add(int(msg.value()[:12]))
        return ids
    finally:
        cons.close()


def produce_now(cluster: RealCluster, topic: str, partition: int, records: int, value_bytes: int,
                acks: str = "all") -> int:
    """Send `records` records at once (a pre-fill) and wait for them; the number acked."""
    from confluent_kafka import Producer

    ok = [0]

    def cb(err, _msg) -> None:
        ok[0] += err is None

    prod = Producer({"bootstrap.servers": cluster.bootstrap, "acks": acks, "linger.ms": 20,
                     "queue.buffering.max.kbytes": 262144})
    value = b"x" * value_bytes
    for _ in range(records):
        while True:
            try:
                prod.produce(topic, value, partition=partition, on_delivery=cb)
                break
            except BufferError:
                prod.poll(0.05)
    prod.flush(120)
    return ok[0]


def log_bytes(cluster: RealCluster, broker: int, topic: str, partition: int) -> int:
    """Size on disk of one replica's log segments (*.log files of TOPIC-PARTITION in any of the broker's log
    dirs; a future log `-future` of KIP-113 is not counted)."""
    total = 0
    for d in cluster.broker_dirs(broker):
        folder = d / f"{topic}-{partition}"
        if folder.is_dir():
            total += sum(f.stat().st_size for f in folder.glob("*.log"))
    return total


def segment_end_offset(path: Path) -> int:
    """The offset after the last whole record batch of one segment file (v2 batches: baseOffset int64,
    batchLength int32, ..., lastOffsetDelta int32 at byte 23, as DefaultRecordBatch lays them out); its base
    offset (the file name) when it holds none. A batch cut by a SIGKILL mid-write is not counted."""
    end = int(path.stem)
    data = path.read_bytes()
    pos = 0
    while pos + 27 <= len(data):
        base, length = int.from_bytes(data[pos:pos + 8], "big"), int.from_bytes(data[pos + 8:pos + 12], "big")
        if length <= 0 or pos + 12 + length > len(data):
            break
        end = base + int.from_bytes(data[pos + 23:pos + 27], "big", signed=True) + 1
        pos += 12 + length
    return end


def log_end_offset(cluster: RealCluster, broker: int, topic: str, partition: int) -> int | None:
    """One replica's log end offset read from its newest segment on disk (None: no replica there); read
    after the brokers stopped, it is what each had appended."""
    for d in cluster.broker_dirs(broker):
        segments = sorted((d / f"{topic}-{partition}").glob("*.log"), key=lambda f: int(f.stem))
        if segments:
            return segment_end_offset(segments[-1])
    return None
