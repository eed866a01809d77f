"""Linux network namespaces for a replay that cuts brokers apart (`isolate`/`heal`, docs/replay.md).

ZooKeeper and each broker JVM run in a network namespace of their own (`ip netns exec NS java ...`), linked
to the root namespace by a veth pair holding a /30 of 198.18.0.0/15 (RFC 2544's benchmark range): the
root end is the namespace's gateway to the range (it has no default route), and forwarding is switched on
for the root ends only (per interface, `net.ipv4.conf.VETH.forwarding`), so the namespaces reach each other
through the root namespace, where the clients (the producers, the kazoo observer, Kafka's tools) reach
every node directly, and nothing else on the machine is forwarded. Each replay takes one /24 of the range
(a "slot"), free when no root address of it is in use.

A network partition between two groups of brokers is, as the emulator cuts it (engine/resident.py
`partitioned`: every message between the two sides, both ways; ZooKeeper and the clients are not cut), a
blackhole route to each other side's address in every namespace of both groups, and an abort of their
established TCP connections (`ss -K`): a request to the other side then fails at once, as the emulator's
follower sees it (protocol/fetch.py: "the connection is refused or reset"), instead of hanging on a
connection whose packets vanish until replica.socket.timeout.ms. Healing deletes the routes.

The plan (names, addresses, routes, the commands) is data; `Network` runs it with `ip`.
"""

from __future__ import annotations

import fcntl
import ipaddress
import os
import re
import shutil
import subprocess
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from .jars import KafkaSetupError

RANGE = ipaddress.IPv4Network("198.18.0.0/15")  # RFC 2544: never routed beyond a test network
SLOTS = RANGE.num_addresses // 256  # one /24 per replay running at once
MAX_NODES = 64  # the /30s of a /24: ZooKeeper and up to 63 brokers
PREFIX = "sparkkafka"
LOCK = "/tmp/sparkkafka-netns.lock"  # slot choice and setup of concurrent replays, one at a time
ZK = "zk"
ZK_PORT, BROKER_PORT = 2181, 9092  # each node has its own address: Kafka's default ports
_NAME = re.compile(rf"^{PREFIX}-s(\d+)-p(\d+)-")

Command = list[str]


@dataclass(frozen=True)
class Node:
    """One JVM's namespace: its name, the root end of its veth pair (the namespace end is `eth0`), the root
    end's address (the namespace's gateway) and the node's own address, where it listens."""

    ns: str
    veth: str
    gateway: str
    addr: str


@dataclass(frozen=True)
class NetPlan:
    """The namespaces of one replay: ZooKeeper's (key "zk") and each broker's (key its id)."""

    slot: int
    nodes: dict[str | int, Node]

    def addr(self, key: str | int) -> str:
        return self.nodes[key].addr


def plan(slot: int, brokers: Sequence[int], pid: int) -> NetPlan:
    """ZooKeeper then the brokers in id order, node i on the i-th /30 of the slot's /24 (.4i+1 the gateway,
    .4i+2 the node); namespace names carry the slot and the replaying process's pid (unique per replay, and
    a dead replay's leftovers are recognised by their pid), veth names the slot and the node (IFNAMSIZ: 15)."""
    if not 0 <= slot < SLOTS:
        raise ValueError(f"slot {slot} outside 0..{SLOTS - 1}")
    keys: list[str | int] = [ZK, *sorted(brokers)]
    if len(keys) > MAX_NODES:
        raise ValueError(f"{len(brokers)} brokers: at most {MAX_NODES - 1} fit one replay's /24")
    base = int(RANGE.network_address) + slot * 256
    nodes = {}
    for i, key in enumerate(keys):
        name = key if key == ZK else f"b{key}"
        nodes[key] = Node(ns=f"{PREFIX}-s{slot}-p{pid}-{name}", veth=f"skv{slot}n{i}",
                          gateway=str(ipaddress.IPv4Address(base + 4 * i + 1)),
                          addr=str(ipaddress.IPv4Address(base + 4 * i + 2)))
    return NetPlan(slot, nodes)


def setup_commands(p: NetPlan) -> list[Command]:
    """Each namespace, its veth pair, addresses, a route to the range (only: no default route, so nothing
    leaves the machine from 198.18.0.0/15, and a DNS lookup from a JVM fails at once instead of timing out;
    ZooKeeper's client looks its server's name up) via the root end, and forwarding on the root end (what
    arrives on it may leave by another namespace's veth)."""
    out: list[Command] = []
    for n in p.nodes.values():
        out += [["ip", "netns", "add", n.ns],
                ["ip", "link", "add", n.veth, "type", "veth", "peer", "name", "eth0", "netns", n.ns],
                ["ip", "addr", "add", f"{n.gateway}/30", "dev", n.veth],
                ["ip", "link", "set", n.veth, "up"],
                ["sysctl", "-q", "-w", f"net.ipv4.conf.{n.veth}.forwarding=1"],
                ["ip", "-n", n.ns, "addr", "add", f"{n.addr}/30", "dev", "eth0"],
                ["ip", "-n", n.ns, "link", "set", "eth0", "up"],
                ["ip", "-n", n.ns, "link", "set", "lo", "up"],
                ["ip", "-n", n.ns, "route", "add", str(RANGE), "via", n.gateway]]
    return out


def teardown_commands(p: NetPlan) -> list[Command]:
    """Delete each namespace (its veth pair goes with it), then any root end left (a namespace made, its
    veth not moved in yet)."""
    return ([["ip", "netns", "delete", n.ns] for n in p.nodes.values()]
            + [["ip", "link", "delete", n.veth] for n in p.nodes.values()])


def exec_prefix(p: NetPlan, key: str | int) -> Command:
    """The command prefix that runs a process in the node's namespace (ip execs it: same pid)."""
    return ["ip", "netns", "exec", p.nodes[key].ns]


def cut_pairs(isolations: Iterable[tuple[Iterable[int], Iterable[int]]]) -> frozenset[tuple[int, int]]:
    """(from, to) broker pairs that cannot talk while `isolations` ((side a, side b) each) hold: both
    directions of every pair across each isolation (engine/resident.py `partitioned`)."""
    out = set()
    for a, b in isolations:
        a, b = set(a), set(b)
        out |= {(x, y) for x in a for y in b if x != y} | {(y, x) for x in a for y in b if x != y}
    return frozenset(out)


def cut_commands(p: NetPlan, before: frozenset[tuple[int, int]], after: frozenset[tuple[int, int]]) -> list[Command]:
    """From the cut `before` to `after`: a blackhole route in `from`'s namespace to `to`'s address for each new
    pair, then the abort of `from`'s connections to it; the route's deletion for each pair no longer cut."""
    out: list[Command] = []
    for x, y in sorted(after - before):
        out.append(["ip", "-n", p.nodes[x].ns, "route", "add", "blackhole", f"{p.addr(y)}/32"])
    for x, y in sorted(after - before):
        out.append([*exec_prefix(p, x), "ss", "-K", "dst", p.addr(y)])
    for x, y in sorted(before - after):
        out.append(["ip", "-n", p.nodes[x].ns, "route", "delete", "blackhole", f"{p.addr(y)}/32"])
    return out


def slot_of(address: str) -> int | None:
    """The slot of an address of the range, None outside it."""
    a = ipaddress.IPv4Address(address)
    return (int(a) - int(RANGE.network_address)) // 256 if a in RANGE else None


def free_slot(used: Iterable[int]) -> int:
    taken = set(used)
    for s in range(SLOTS):
        if s not in taken:
            return s
    raise KafkaSetupError(f"every /24 of {RANGE} is in use by other replays' namespaces")


def stale(namespaces: Iterable[str], alive) -> list[str]:
    """This module's namespaces whose replaying process is gone (`alive(pid)` false): a replay killed by
    SIGKILL leaves them; the next replay deletes them."""
    return [n for n in namespaces if (m := _NAME.match(n)) and not alive(int(m.group(2)))]


# --------------------------------------------------------------------- running the plan


def _run(cmd: Command, check: bool = True) -> subprocess.CompletedProcess:
    """One command; with `check`, KafkaSetupError with its stderr when it fails."""
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=30)
    if check and done.returncode != 0:
        raise KafkaSetupError(f"{' '.join(cmd)} exited {done.returncode}: {done.stderr.strip()}")
    return done


def namespaces() -> list[str]:
    """The network namespaces `ip netns` names (this module's and any other)."""
    done = _run(["ip", "netns", "list"], check=False)
    return [line.split()[0] for line in done.stdout.splitlines() if line.strip()]


def _used_slots() -> set[int]:
    """Slots with a root address in use (a live replay's veths, or ones still being deleted) or named by a
    namespace."""
    done = _run(["ip", "-o", "-4", "addr", "show"], check=False)
    addrs = re.findall(r"inet (\d+\.\d+\.\d+\.\d+)/", done.stdout)
    named = {int(m.group(1)) for n in namespaces() if (m := _NAME.match(n))}
    return {s for a in addrs if (s := slot_of(a)) is not None} | named


def alive(pid: int) -> bool:
    """Whether a process `pid` exists (signal 0)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


# Run in the probe namespace: a loopback connection, `ss -K` on it, then whether the client side saw it
# aborted (the kernel needs CONFIG_INET_DIAG_DESTROY; without it the sockets stay and a cut hangs).
_ABORT_PROBE = """
import socket, subprocess
server = socket.create_server(("127.0.0.1", 0))
client = socket.create_connection(server.getsockname(), timeout=2)
peer, _ = server.accept()
subprocess.run(["ss", "-K", "dst", "127.0.0.1", "dport", "=", str(server.getsockname()[1])], capture_output=True)
client.settimeout(1)
try:
    client.sendall(b"x")
    client.recv(1)
    print("kept")
except TimeoutError:  # no answer, but the connection is there
    print("kept")
except OSError:  # ECONNABORTED
    print("aborted")
"""


def unavailable() -> str | None:
    """Why network partitions cannot be made here (None: they can): no iproute2 or ss, `ip netns add`
    refused (it needs CAP_NET_ADMIN), or `ss -K` not aborting a connection (the kernel's socket destroy,
    CONFIG_INET_DIAG_DESTROY). Tried in a namespace made and deleted at once."""
    import sys

    for tool in ("ip", "ss", "sysctl"):
        if shutil.which(tool) is None:
            return f"no `{tool}` command (iproute2, procps) on this machine"
    probe = f"{PREFIX}-probe-p{os.getpid()}"
    done = _run(["ip", "netns", "add", probe], check=False)
    if done.returncode != 0:
        return f"`ip netns add` is not permitted ({done.stderr.strip() or f'exit {done.returncode}'}; it needs " \
               "root or CAP_NET_ADMIN)"
    try:
        _run(["ip", "-n", probe, "link", "set", "lo", "up"], check=False)
        done = _run(["ip", "netns", "exec", probe, sys.executable, "-c", _ABORT_PROBE], check=False)
    finally:
        _run(["ip", "netns", "delete", probe], check=False)
    if done.stdout.strip() != "aborted":
        return ("`ss -K` does not abort TCP connections here (the kernel lacks CONFIG_INET_DIAG_DESTROY), so a "
                f"cut would leave established connections hanging ({(done.stdout + done.stderr).strip()[-200:]})")
    return None


@dataclass
class Network:
    """A NetPlan made real: `up()` creates it, `cut(pairs)` sets the blackholes, `down()` deletes it all
    (idempotent: the cluster's stop, atexit and the signal handlers call it)."""

    plan: NetPlan
    pairs: frozenset[tuple[int, int]] = field(default_factory=frozenset)
    is_up: bool = False

    @classmethod
    def allocate(cls, brokers: Sequence[int]) -> Network:
        """A free slot's plan, made real: under a file lock, so that two replays do not take the same slot,
        after deleting the namespaces of replays whose process is gone."""
        with open(LOCK, "a") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            for ns in stale(namespaces(), alive):
                _run(["ip", "netns", "delete", ns], check=False)
            net = cls(plan(free_slot(_used_slots()), brokers, os.getpid()))
            net.up()
        return net

    def up(self) -> None:
        self.is_up = True  # from the first command on, down() has something to undo
        try:
            for cmd in setup_commands(self.plan):
                _run(cmd)
        except BaseException:
            self.down()
            raise

    def cut(self, pairs: frozenset[tuple[int, int]]) -> None:
        for cmd in cut_commands(self.plan, self.pairs, pairs):
            _run(cmd, check=cmd[1] != "netns")  # ss -K with no socket to abort is fine
        self.pairs = pairs

    def down(self) -> None:
        if not self.is_up:
            return
        for cmd in teardown_commands(self.plan):
            _run(cmd, check=False)  # a veth already gone with its namespace
        self.is_up = False
        self.pairs = frozenset()
