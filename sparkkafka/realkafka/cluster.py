"""A real ZooKeeper and real Kafka brokers as local JVM processes on loopback, laid out from a scenario's
`cluster` section: one broker per id, one log dir folder per `cluster.log_dirs` entry, `broker.rack` from
`cluster.racks`, the scenario's broker configs in server.properties. A scenario with an `isolate` event
runs each JVM in a network namespace of its own instead (netns.py), where it listens on its own address.

Processes run in their own session (Ctrl-C reaches only Python, which then kills them); `RealCluster` is a
context manager whose exit, an atexit hook and SIGTERM/SIGHUP handlers SIGKILL every process it started
and delete the namespaces it made.
"""

from __future__ import annotations

import atexit
import json
import logging
import os
import shutil
import signal
import socket
import subprocess
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from . import jars, netns
from .jars import KafkaSetupError

BROKER_HEAP = ["-Xmx256m", "-Xms64m"]
ZK_HEAP = ["-Xmx128m", "-Xms32m"]
JVM_FLAGS = ["-XX:+UseSerialGC", "-XX:+ExitOnOutOfMemoryError", "-Djava.awt.headless=true"]

# Small-machine settings that change no replication rule (thread counts, the internal topics' RF on fewer
# than 3 brokers, a quiet group coordinator). A scenario's own config overrides any of them.
SMALL_MACHINE = {
    "num.network.threads": 2,
    "num.io.threads": 2,
    "background.threads": 2,
    "num.recovery.threads.per.data.dir": 1,
    "group.initial.rebalance.delay.ms": 0,
}

LOG4J = """log4j.rootLogger=INFO, file
log4j.appender.file=org.apache.log4j.FileAppender
log4j.appender.file.File={log}
log4j.appender.file.layout=org.apache.log4j.PatternLayout
log4j.appender.file.layout.ConversionPattern=[%d] %p %m (%c)%n
log4j.logger.state.change.logger=TRACE
log4j.logger.org.apache.zookeeper=WARN
"""


TOOLS_LOG4J = """log4j.rootLogger=WARN, stderr
log4j.appender.stderr=org.apache.log4j.ConsoleAppender
log4j.appender.stderr.Target=System.err
log4j.appender.stderr.layout=org.apache.log4j.PatternLayout
log4j.appender.stderr.layout.ConversionPattern=[%d] %p %m (%c)%n
"""


def free_port() -> int:
    """A TCP port free on 127.0.0.1 now (the kernel's pick for port 0)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def property_value(v: Any) -> str:
    """A YAML value as server.properties (and Kafka's tools) write it: booleans lower case, a list comma
    separated."""
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, list | tuple):
        return ",".join(property_value(x) for x in v)
    return str(v)


def server_properties(broker: int, port: int, zk_port: int, log_dirs: Sequence[str | Path],
                      rack: str | None, config: Mapping[str, Any], brokers: int, host: str = "127.0.0.1",
                      zk_host: str = "127.0.0.1") -> str:
    """server.properties of one broker: identity, listener on `host` (loopback, or its namespace's address),
    ZooKeeper, its log dir folders, its rack, the small-machine settings, then the scenario's
    `cluster.config` (which wins over all but the identity keys)."""
    props: dict[str, Any] = dict(SMALL_MACHINE)
    rf = min(3, brokers)  # Kafka's default 3 cannot be met by fewer brokers; the offsets topic would not exist
    props.update({"offsets.topic.replication.factor": rf, "transaction.state.log.replication.factor": rf,
                  "transaction.state.log.min.isr": min(2, rf)})
    props.update(config)
    props.update({
        "broker.id": broker,
        "listeners": f"PLAINTEXT://{host}:{port}",
        "advertised.listeners": f"PLAINTEXT://{host}:{port}",
        "zookeeper.connect": f"{zk_host}:{zk_port}",
        "log.dirs": ",".join(str(d) for d in log_dirs),
    })
    if rack is not None:
        props["broker.rack"] = rack
    return "".join(f"{k}={property_value(v)}\n" for k, v in props.items())


def zookeeper_properties(port: int, data_dir: Path, host: str = "127.0.0.1") -> str:
    """zoo.cfg of a standalone ZooKeeper (Kafka's config/zookeeper.properties, on loopback or `host`)."""
    return (f"dataDir={data_dir}\nclientPort={port}\nclientPortAddress={host}\nmaxClientCnxns=0\n"
            f"admin.enableServer=false\ntickTime=2000\n")


def _dir_name(name: str) -> str:
    """A `cluster.log_dirs` entry as a folder name under the broker's folder (absolute paths keep their last
    part: the scenario names dirs, the harness owns where they live)."""
    return Path(name).name or "d0"


@dataclass
class Proc:
    """One JVM: its command line, log file and the running process (None while down)."""

    name: str
    cmd: list[str]
    log: Path
    popen: subprocess.Popen | None = None
    paused: bool = False

    def start(self) -> None:
        with open(self.log, "ab") as out:
            self.popen = subprocess.Popen(self.cmd, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                          start_new_session=True)
        self.paused = False

    def alive(self) -> bool:
        return self.popen is not None and self.popen.poll() is None

    def signal(self, sig: int) -> None:
        if self.alive():
            os.killpg(self.popen.pid, sig)

    def kill(self) -> None:
        """SIGKILL and reap (a stopped process dies of SIGKILL too)."""
        if self.popen is not None:
            self.signal(signal.SIGKILL)
            try:
                self.popen.wait(timeout=30)
            except subprocess.TimeoutExpired:
                pass
        self.popen = None
        self.paused = False


@dataclass
class RealCluster:
    """ZooKeeper + brokers of a scenario's cluster under `workdir` (brokers/B/DIR for each log dir)."""

    brokers: Sequence[int]
    workdir: Path
    log_dirs: Sequence[str] = ("d0",)
    racks: Mapping[int, str] | None = None
    config: Mapping[str, Any] = field(default_factory=dict)
    version: str = "2.8.2"
    classpath: str = ""
    zk_port: int = 0
    ports: dict[int, int] = field(default_factory=dict)
    procs: dict[Any, Proc] = field(default_factory=dict)
    namespaces: bool = False  # each JVM in a network namespace of its own (netns.py), for `isolate`
    net: netns.Network | None = None

    @classmethod
    def for_scenario(cls, scenario, workdir: str | Path, version: str = "2.8.2") -> RealCluster:
        # absolute: Kafka compares an AlterReplicaLogDirs path with its log.dirs as written (LogManager)
        return cls(brokers=list(scenario.brokers), workdir=Path(workdir).absolute(), log_dirs=list(scenario.log_dirs),
                   racks=scenario.racks, config=dict(scenario.config), version=version,
                   namespaces=any(e.type == "isolate" for e in scenario.timeline))

    def host(self, key: str | int) -> str:
        """Where ZooKeeper (key "zk") or a broker listens: its namespace's address, or loopback."""
        return self.net.plan.addr(key) if self.net is not None else "127.0.0.1"

    # ------------------------------------------------------------------ layout
    def broker_dirs(self, broker: int) -> list[Path]:
        return [self.workdir / "brokers" / str(broker) / _dir_name(d) for d in self.log_dirs]

    def real_dir(self, broker: int, name: str) -> str:
        """The absolute path of the broker's log dir the scenario calls `name` (Kafka's plans and
        AlterReplicaLogDirs name dirs by path); "any" stays "any"."""
        return name if name == "any" else str(self.broker_dirs(broker)[list(self.log_dirs).index(name)])

    def replica_dir(self, broker: int, topic: str, partition: int) -> str | None:
        """The scenario's name of the log dir holding the replica's current log (not a KIP-113 `-future`
        log), None when the broker has none."""
        for name, d in zip(self.log_dirs, self.broker_dirs(broker), strict=True):
            if (d / f"{topic}-{partition}").is_dir():
                return name
        return None

    @property
    def bootstrap(self) -> str:
        return ",".join(f"{self.host(b)}:{p}" for b, p in self.ports.items())

    @property
    def zk_connect(self) -> str:
        return f"{self.host(netns.ZK)}:{self.zk_port}"

    def java(self, main: str, *args: str, heap: Sequence[str] = ("-Xmx128m",), log4j: Path | None = None) -> list[str]:
        """A java command line running `main` of Kafka's classpath (tools included); without `log4j` the
        tool logs warnings only, to stderr."""
        logging = f"file:{log4j}" if log4j else f"file:{self.workdir / 'tools-log4j.properties'}"
        return ["java", *heap, *JVM_FLAGS, f"-Dlog4j.configuration={logging}", "-cp", self.classpath, main, *args]

    def _layout(self) -> None:
        self.workdir.mkdir(parents=True, exist_ok=True)
        zk_dir = self.workdir / "zookeeper"
        (zk_dir / "data").mkdir(parents=True, exist_ok=True)
        (zk_dir / "zookeeper.properties").write_text(zookeeper_properties(self.zk_port, zk_dir / "data",
                                                                          self.host(netns.ZK)))
        (zk_dir / "log4j.properties").write_text(LOG4J.format(log=zk_dir / "zookeeper.log"))
        (self.workdir / "tools-log4j.properties").write_text(TOOLS_LOG4J)
        self.procs["zk"] = Proc("zookeeper", self._in_ns(netns.ZK, self.java(
            "org.apache.zookeeper.server.ZooKeeperServerMain", str(zk_dir / "zookeeper.properties"), heap=ZK_HEAP,
            log4j=zk_dir / "log4j.properties")), zk_dir / "stdout.log")
        for b in self.brokers:
            home = self.workdir / "brokers" / str(b)
            for d in self.broker_dirs(b):
                d.mkdir(parents=True, exist_ok=True)
            rack = (self.racks or {}).get(b)
            (home / "server.properties").write_text(server_properties(
                b, self.ports[b], self.zk_port, self.broker_dirs(b), rack, self.config, len(self.brokers),
                self.host(b), self.host(netns.ZK)))
            (home / "log4j.properties").write_text(LOG4J.format(log=home / "server.log"))
            cmd = self._in_ns(b, self.java("kafka.Kafka", str(home / "server.properties"), heap=BROKER_HEAP,
                                           log4j=home / "log4j.properties"))
            self.procs[b] = Proc(f"broker {b}", cmd, home / "stdout.log")

    def _in_ns(self, key: str | int, cmd: list[str]) -> list[str]:
        """`cmd` run in the node's network namespace, when the cluster has them."""
        return [*netns.exec_prefix(self.net.plan, key), *cmd] if self.net is not None else cmd

    # ------------------------------------------------------------------ life cycle
    def start(self, timeout_s: float = 90.0) -> RealCluster:
        """Resolve the classpath, start ZooKeeper, then the lowest broker id alone until it is the
        controller, then the others, and wait until all are registered in /brokers/ids. The emulator
        registers its brokers in id order, so its first controller is the lowest id (the first to create
        /controller, KafkaController.elect); started together, any broker could win on Kafka, and a fault
        on the controller (its AlterIsr handling stalled by a pause, a failover after a crash) would then
        differ from the emulator's run for that reason alone."""
        self.classpath = self.classpath or jars.classpath(self.version)
        _register(self)  # from here on an exit or a signal undoes what is made
        if self.namespaces:  # every node has an address of its own: Kafka's default ports
            self.net = netns.Network.allocate(self.brokers)
            self.zk_port, self.ports = netns.ZK_PORT, {b: netns.BROKER_PORT for b in self.brokers}
        else:
            self.zk_port = free_port()
            self.ports = {b: free_port() for b in self.brokers}
        self._layout()
        self.procs["zk"].start()
        self._wait(lambda zk: zk.exists("/") is not None, timeout_s, "ZooKeeper to answer")
        first = min(self.brokers)
        self.procs[first].start()
        self.wait_registered([first], timeout_s)
        for b in self.brokers:
            if b != first:
                self.procs[b].start()
        self.wait_registered(self.brokers, timeout_s)
        return self

    def fail_log_dir(self, broker: int, name: str) -> Path:
        """Make the log dir the scenario calls `name` fail as Kafka sees a dead disk, the way Kafka's
        LogDirFailureTest.causeLogDirFailure does: delete the dir and create a file in its place. The broker
        notices at its next IO on the dir (its open segment files still work): at the latest the
        high-watermark checkpoint, every replica.high.watermark.checkpoint.interval.ms (5,000 ms by default,
        ReplicaManager.startHighWatermarkCheckPointThread), whose write fails and hands the dir to the
        LogDirFailureChannel, then ReplicaManager.handleLogDirFailure takes its replicas offline and tells the
        controller (/log_dir_event_notification). The path of the file."""
        path = self.broker_dirs(broker)[list(self.log_dirs).index(name)]
        for _ in range(5):  # the broker may create a file in the dir while it is being deleted
            shutil.rmtree(path, ignore_errors=True)
            if not path.exists():
                break
        path.touch()
        return path

    def controller_failover(self) -> int:
        """Delete /controller, as Kafka's ControllerIntegrationTest moves the controller
        (zkClient.deleteController): every broker's watch on the znode fires, each tries to create it
        (KafkaController.elect), one wins and increments /controller_epoch; the others, the old controller
        included if it lost, resign. The broker that held it (-1: none)."""
        old = self.controller()
        zk = self.zk()
        if zk.exists("/controller") is not None:
            zk.delete("/controller")
        return old

    def controller_epoch(self) -> int:
        """/controller_epoch now (0: none yet; the first controller makes it 1)."""
        zk = self.zk()
        return int(zk.get("/controller_epoch")[0]) if zk.exists("/controller_epoch") else 0

    def controller(self) -> int:
        """The broker id in /controller now (-1: none)."""
        zk = self.zk()
        return json.loads(zk.get("/controller")[0])["brokerid"] if zk.exists("/controller") else -1

    def wait_registered(self, brokers: Sequence[int], timeout_s: float = 90.0) -> None:
        want = {str(b) for b in brokers}

        def ready(zk) -> bool:
            return (zk.exists("/controller") is not None and zk.exists("/brokers/ids") is not None
                    and want <= set(zk.get_children("/brokers/ids")))
        self._wait(ready, timeout_s, f"brokers {sorted(brokers)} to register")

    def _wait(self, check, timeout_s: float, what: str) -> None:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            dead = [p.name for p in self.procs.values() if p.popen is not None and not p.alive()]
            if dead:
                raise KafkaSetupError(f"{', '.join(dead)} exited while waiting for {what}: see the logs under "
                                      f"{self.workdir}")
            try:
                if check(self.zk()):
                    return
            except Exception:  # ZooKeeper not up yet
                pass
            time.sleep(0.2)
        raise KafkaSetupError(f"timed out after {timeout_s:.0f} s waiting for {what}: see {self.workdir}")

    def zk(self):
        """A connected kazoo client (one per cluster, reconnected when lost)."""
        from kazoo.client import KazooClient

        logging.getLogger("kazoo.client").setLevel(logging.CRITICAL)  # "Connection dropped" while ZK starts
        client = getattr(self, "_zk", None)
        if client is None or not client.connected:
            if client is not None:
                client.stop()
            client = KazooClient(hosts=self.zk_connect, timeout=5.0)
            client.start(timeout=5.0)
            self._zk = client
        return client

    def crash(self, broker: int) -> None:
        """kill -9: the JVM is gone, its log dirs stay (its ZooKeeper session expires later)."""
        self.procs[broker].kill()

    def shutdown(self, broker: int, timeout_s: float = 60.0) -> None:
        """SIGTERM: Kafka's controlled shutdown (leaderships moved away first), then wait for the exit."""
        p = self.procs[broker]
        p.signal(signal.SIGTERM)
        try:
            p.popen.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            p.kill()
        p.popen = None

    def restart(self, broker: int) -> None:
        self.procs[broker].start()

    def pause(self, broker: int) -> None:
        self.procs[broker].signal(signal.SIGSTOP)
        self.procs[broker].paused = True

    def resume(self, broker: int) -> None:
        self.procs[broker].signal(signal.SIGCONT)
        self.procs[broker].paused = False

    def isolate(self, pairs: frozenset[tuple[int, int]]) -> None:
        """Cut exactly the (from, to) broker pairs `pairs` (netns.cut_pairs), healing the others."""
        self.net.cut(pairs)

    def stop(self) -> None:
        """Kill every process (brokers first, then ZooKeeper), close the ZooKeeper client, delete the
        network namespaces."""
        client = getattr(self, "_zk", None)
        if client is not None:
            try:
                client.stop()
                client.close()
            except Exception:
                pass
            self._zk = None
        for key in [k for k in self.procs if k != "zk"] + ["zk"]:
            if key in self.procs:
                self.procs[key].kill()
        if self.net is not None:
            self.net.down()
            self.net = None
        _LIVE.discard(id(self))
        _CLUSTERS.pop(id(self), None)

    def __enter__(self) -> RealCluster:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()


# --------------------------------------------------------------------- kill on any exit
_LIVE: set[int] = set()
_CLUSTERS: dict[int, RealCluster] = {}
_HOOKED = False


def _kill_all(*_args) -> None:
    for c in list(_CLUSTERS.values()):
        c.stop()


def _on_signal(signum, frame) -> None:
    _kill_all()
    raise SystemExit(128 + signum)


def _register(cluster: RealCluster) -> None:
    """Remember a started cluster so an interpreter exit or SIGTERM/SIGHUP kills its processes."""
    global _HOOKED
    _LIVE.add(id(cluster))
    _CLUSTERS[id(cluster)] = cluster
    if not _HOOKED:
        atexit.register(_kill_all)
        for sig in (signal.SIGTERM, signal.SIGHUP):
            if signal.getsignal(sig) in (signal.SIG_DFL, None):
                try:
                    signal.signal(sig, _on_signal)
                except ValueError:  # not the main thread
                    pass
        _HOOKED = True
