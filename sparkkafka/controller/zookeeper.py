"""The cluster metadata store standing in for ZooKeeper, with Kafka 2.8's znode layout (ZkData.scala) and the
conditional writes of ``KafkaZkClient`` (KafkaZkClient.scala: registerControllerAndIncrementControllerEpoch,
updateLeaderAndIsr, checkedEphemeralCreate).

Deterministic: a logical ``zxid`` goes up by one per successful write (no wall clock), so broker epochs
(``registerBroker`` returns the registration's czxid, KIP-380) are reproducible. Versions are ZooKeeper data
versions: 0 at creation, +1 per write. Controller writes may pass ``expected_controller_epoch_version``: like
``KafkaZkClient.retryRequestsUntilConnected(.., expectedControllerEpochZkVersion)`` (KAFKA-6082) the write is
then a multi-op whose first op checks the ``/controller_epoch`` version, so a zombie controller's writes fail
with ``ControllerMovedError``. Saved to one JSON file in the run directory (``save``/``load``).
"""

from __future__ import annotations

import copy
import json
import os
import tempfile
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import IO, Any

TopicPartition = tuple[str, int]
FILE_NAME = "zookeeper.json"
ISR_CHANGE_PREFIX = "isr_change_"  # IsrChangeNotificationSequenceZNode.SequenceNumberPrefix
STATE_KEYS = ("leader", "leader_epoch", "isr", "controller_epoch")  # TopicPartitionStateZNode (version 1)
ANY_VERSION = -1  # ZkVersion.MatchAnyVersion


class ZooKeeperError(Exception):
    """Base of the ``KeeperException`` analogues."""


class NoNodeError(ZooKeeperError, KeyError):
    """KeeperException.NoNodeException (Code.NONODE); also a KeyError (a lookup of a missing path)."""

    def __str__(self) -> str:
        return str(self.args[0]) if self.args else ""


class NodeExistsError(ZooKeeperError):
    """KeeperException.NodeExistsException (Code.NODEEXISTS)."""


class BadVersionError(ZooKeeperError):
    """KeeperException.BadVersionException (Code.BADVERSION)."""


class ControllerMovedError(BadVersionError):
    """Kafka's ControllerMovedException: the /controller_epoch version check of a controller write failed.

    A BADVERSION on the epoch znode, hence the subclass; catch it before BadVersionError, since a
    partition-znode BADVERSION means "re-read and retry" but this one means "resign".
    """


@dataclass(frozen=True)
class TopicZNode:
    """``/brokers/topics/<t>``: replicas per partition, KIP-455 adding/removing replicas, znode data version."""

    replicas: dict[int, tuple[int, ...]]
    adding: dict[int, tuple[int, ...]]
    removing: dict[int, tuple[int, ...]]
    version: int


def _replica_map(m: Mapping[Any, Sequence[int]] | None) -> dict[int, tuple[int, ...]]:
    return {
        int(p): tuple(int(b) for b in rs) for p, rs in sorted((m or {}).items(), key=lambda kv: int(kv[0]))
    }


def _non_empty(m: Mapping[Any, Sequence[int]] | None) -> dict[int, tuple[int, ...]]:
    return {p: rs for p, rs in _replica_map(m).items() if rs}


def _json_map(m: Mapping[int, Sequence[int]]) -> dict[str, list[int]]:
    return {str(p): list(rs) for p, rs in m.items()}


def _state(state: Mapping[str, Any]) -> dict[str, Any]:
    if set(state) != set(STATE_KEYS):
        raise ValueError(f"partition state needs exactly the keys {STATE_KEYS}, got {sorted(state)}")
    return {k: [int(b) for b in state[k]] if k == "isr" else int(state[k]) for k in STATE_KEYS}


def _nested(value: Any, depth: int) -> str:
    """``value`` as json.dump(indent=1, sort_keys=True) writes it `depth` levels deep (JSON text has newlines
    only between tokens: strings escape theirs). Built here for the plain data a snapshot holds (dicts with
    string keys, lists, strings, ints): json's indenting encoder is pure Python and ~1.7x slower; anything
    else is left to it."""
    return _indented(value, " " * depth)


def _indented(v: Any, pad: str) -> str:
    t = type(v)
    if t is int:
        return str(v)
    if t is str:
        return json.dumps(v)
    if t is dict and all(type(k) is str for k in v):
        if not v:
            return "{}"
        inner = pad + " "
        return "{\n" + ",\n".join(f"{inner}{json.dumps(k)}: {_indented(x, inner)}" for k, x in sorted(v.items())) \
            + "\n" + pad + "}"
    if t is list or t is tuple:
        if not v:
            return "[]"
        inner = pad + " "
        return "[\n" + ",\n".join(inner + _indented(x, inner) for x in v) + "\n" + pad + "]"
    return json.dumps(v, indent=1, sort_keys=True).replace("\n", "\n" + pad)


_STATE_KEY_SET = frozenset(STATE_KEYS)


def _state_entry(topic: str, partition: int, state: Mapping[str, Any], version: int) -> str:
    """One entry of the snapshot's partition_states, as `_nested(entry, 2)` writes it: a template for the
    states `_state` makes (its four keys, ints), ~5x cheaper (a snapshot of 333k partitions: seconds)."""
    isr = state.get("isr") if state.keys() == _STATE_KEY_SET else None
    ints = (partition, version, state.get("controller_epoch"), state.get("leader"), state.get("leader_epoch"))
    if type(isr) is not list or not all(type(x) is int for x in (*ints, *isr)) or type(topic) is not str:
        return _nested({"topic": topic, "partition": partition, "state": state, "version": version}, 2)
    ids = "[]" if not isr else "[\n     " + ",\n     ".join(map(str, isr)) + "\n    ]"
    return (f'{{\n   "partition": {partition},\n   "state": {{\n    "controller_epoch": {state["controller_epoch"]},'
            f'\n    "isr": {ids},\n    "leader": {state["leader"]},\n    "leader_epoch": {state["leader_epoch"]}'
            f'\n   }},\n   "topic": {json.dumps(topic)},\n   "version": {version}\n  }}')


def _stat(path: str) -> tuple[int, int, int] | None:
    """What tells a file apart from what was written there before: inode, size, modification time."""
    try:
        st = os.stat(path)
    except OSError:
        return None
    return st.st_ino, st.st_size, st.st_mtime_ns


def _match(actual: int, expected: int) -> None:
    if expected != ANY_VERSION and actual != expected:
        raise BadVersionError(f"expected version {expected}, znode is at {actual}")


class ZooKeeper:
    """Znodes kept: /controller, /controller_epoch, /brokers/ids, /brokers/topics (+ partition state),
    /admin/delete_topics, /isr_change_notification, /admin/reassign_partitions, /admin/preferred_replica_election."""

    def __init__(self) -> None:
        self.zxid = 0
        self._saved: tuple | None = None  # (zxid, file, its stat) of this object's last save (save)
        self._controller: int | None = None
        self._epoch: tuple[int, int] | None = None  # (/controller_epoch value, its data version)
        self._brokers: dict[int, int] = {}  # broker id -> czxid (broker epoch)
        self._topics: dict[str, TopicZNode] = {}
        self._states: dict[TopicPartition, tuple[dict[str, Any], int]] = {}
        self._delete_topics: set[str] = set()
        self._isr_changes: dict[str, list[TopicPartition]] = {}
        self._isr_seq = 0  # next sequence number under /isr_change_notification (one per creation)
        self._admin: dict[str, dict] = {}  # "reassign_partitions" / "preferred_replica_election" -> data

    def _write(self) -> int:
        """Take the next zxid; called once every check of the operation has passed."""
        self.zxid += 1
        return self.zxid

    def _fence(self, expected: int | None) -> None:
        """The multi-op's leading CheckOp on /controller_epoch, when the caller is a (possibly zombie) controller."""
        if expected is None:
            return
        if self._epoch is None:
            raise NoNodeError("/controller_epoch")
        if self._epoch[1] != expected:
            raise ControllerMovedError(
                f"Controller epoch zkVersion check fails. Expected zkVersion = {expected}"
            )

    # -- controller (KafkaZkClient.registerControllerAndIncrementControllerEpoch, KafkaController.elect) --

    def register_controller_and_increment_epoch(
        self, broker_id: int, expected_epoch_version: int
    ) -> tuple[int, int]:
        """Multi-op: create ephemeral /controller and set /controller_epoch to epoch+1 if its version matches.

        /controller_epoch is first created as 0 if absent (``maybeCreateControllerEpochZNode``), so the first
        controller gets epoch 1. Raises NodeExistsError (checked first, as the multi's first op) or
        BadVersionError. Returns (new epoch, new epoch znode version).
        """
        if self._epoch is None:
            self._epoch = (0, 0)
            self._write()
        if self._controller is not None:
            raise NodeExistsError(f"/controller (held by broker {self._controller})")
        _match(self._epoch[1], expected_epoch_version)
        self._write()
        self._controller = int(broker_id)
        self._epoch = (self._epoch[0] + 1, self._epoch[1] + 1)
        return self._epoch

    def controller(self) -> int | None:
        return self._controller

    def controller_epoch(self) -> tuple[int, int]:
        """(epoch, znode version); (0, 0) before any election (KafkaController.InitialControllerEpoch[ZkVersion])."""
        return self._epoch or (0, 0)

    def delete_controller(self, *, expected_controller_epoch_version: int | None = None) -> None:
        """Delete /controller (resignation); Kafka's ``deleteController`` ignores NONODE, callers may too."""
        self._fence(expected_controller_epoch_version)
        if self._controller is None:
            raise NoNodeError("/controller")
        self._write()
        self._controller = None

    # -- brokers (KafkaZkClient.registerBroker) --

    def register_broker(self, broker_id: int) -> int:
        """Create ephemeral /brokers/ids/<id>; returns the broker epoch (its czxid)."""
        if broker_id in self._brokers:
            raise NodeExistsError(f"/brokers/ids/{broker_id}")
        epoch = self._brokers[int(broker_id)] = self._write()
        return epoch

    def unregister_broker(self, broker_id: int) -> None:
        """Session expiry/close: removes every ephemeral of the broker's session, so /controller too if it held it."""
        if broker_id not in self._brokers:
            raise NoNodeError(f"/brokers/ids/{broker_id}")
        self._write()
        del self._brokers[broker_id]
        if self._controller == broker_id:
            self._controller = None

    def live_brokers(self) -> dict[int, int]:
        """Broker id -> broker epoch, by id."""
        return dict(sorted(self._brokers.items()))

    # -- topics (AdminZkClient, KafkaZkClient.setTopicZNode / deleteTopicZNode) --

    def create_topic(self, name: str, assignment: Mapping[int, Sequence[int]]) -> None:
        if name in self._topics:
            raise NodeExistsError(f"/brokers/topics/{name}")
        self._write()
        self._topics[name] = TopicZNode(_replica_map(assignment), {}, {}, 0)

    def topic_znode(self, name: str) -> TopicZNode:
        """The whole topic znode: replicas, adding/removing replicas and data version."""
        if name not in self._topics:
            raise NoNodeError(f"/brokers/topics/{name}")
        return self._topics[name]

    def replicas_of(self, tp: TopicPartition) -> list[int]:
        """One partition's replica list (AR), without copying the topic's whole assignment."""
        return list(self.topic_znode(tp[0]).replicas[tp[1]])

    def topic_assignment(self, name: str) -> dict[int, list[int]]:
        """Partition -> replica list (AR, in order); a fresh dict."""
        return {p: list(rs) for p, rs in self.topic_znode(name).replicas.items()}

    def set_assignment(
        self,
        name: str,
        assignment: Mapping[int, Sequence[int]],
        adding: Mapping[int, Sequence[int]] | None = None,
        removing: Mapping[int, Sequence[int]] | None = None,
        expected_version: int = ANY_VERSION,
        *,
        expected_controller_epoch_version: int | None = None,
    ) -> int:
        """Replace the topic znode (empty adding/removing lists dropped); Kafka writes it with MatchAnyVersion."""
        self._fence(expected_controller_epoch_version)
        old = self.topic_znode(name)
        _match(old.version, expected_version)
        self._write()
        self._topics[name] = TopicZNode(
            _replica_map(assignment), _non_empty(adding), _non_empty(removing), old.version + 1
        )
        return old.version + 1

    def set_partition_assignment(
        self,
        tp: TopicPartition,
        replicas: Sequence[int],
        adding: Sequence[int] = (),
        removing: Sequence[int] = (),
        *,
        expected_controller_epoch_version: int | None = None,
    ) -> int:
        """Rewrite the topic znode with one partition's (replicas, adding, removing) replaced (the
        controller's updateReplicaAssignmentForPartition); the other partitions are kept as they are."""
        z = self.topic_znode(tp[0])
        p = int(tp[1])
        return self.set_assignment(
            tp[0], {**z.replicas, p: tuple(replicas)}, {**z.adding, p: tuple(adding)},
            {**z.removing, p: tuple(removing)},
            expected_controller_epoch_version=expected_controller_epoch_version,
        )

    def delete_topic_znodes(self, name: str, *, expected_controller_epoch_version: int | None = None) -> None:
        """Recursive delete of /brokers/topics/<t>, partition state znodes included (``deleteTopicZNode``)."""
        self._fence(expected_controller_epoch_version)
        self.topic_znode(name)
        self._write()
        del self._topics[name]
        for tp in [tp for tp in self._states if tp[0] == name]:
            del self._states[tp]

    def topics(self) -> list[str]:
        return sorted(self._topics)

    # -- partition state znodes (TopicPartitionStateZNode, KafkaZkClient.updateLeaderAndIsr) --

    def create_partition_state(
        self,
        tp: TopicPartition,
        state: Mapping[str, Any],
        *,
        expected_controller_epoch_version: int | None = None,
    ) -> int:
        """Create /brokers/topics/<t>/partitions/<p>/state; returns its version, 0."""
        self._fence(expected_controller_epoch_version)
        self.topic_znode(tp[0])
        tp = (tp[0], int(tp[1]))
        if tp in self._states:
            raise NodeExistsError(f"/brokers/topics/{tp[0]}/partitions/{tp[1]}/state")
        new = _state(state)
        self._write()
        self._states[tp] = (new, 0)
        return 0

    def has_partition_state(self, tp: TopicPartition) -> bool:
        return tp in self._states

    def get_partition_state(self, tp: TopicPartition) -> tuple[dict[str, Any], int]:
        """(state dict copy, znode version)."""
        if tp not in self._states:
            raise NoNodeError(f"/brokers/topics/{tp[0]}/partitions/{tp[1]}/state")
        state, version = self._states[tp]
        return copy.deepcopy(state), version

    def partition_states(self, name: str, missing_ok: bool = False) -> Iterator[tuple[int, list[int], Mapping[str, Any], int]]:
        """(partition, replica list, state, znode version) of each partition of topic `name`, in partition
        order (NoNodeError for one without a state znode; `missing_ok`: such partitions are left out): the
        stored values, not copies (a reader of every partition, such as the controller's partition table,
        would otherwise deep-copy each state: ~1 s per 100,000 partitions). Callers must not change them."""
        for p, reps in sorted(self.topic_znode(name).replicas.items()):
            if (name, p) not in self._states:
                if missing_ok:
                    continue
                raise NoNodeError(f"/brokers/topics/{name}/partitions/{p}/state")
            state, version = self._states[(name, p)]
            yield p, reps, state, version

    def set_partition_state(
        self,
        tp: TopicPartition,
        state: Mapping[str, Any],
        expected_version: int,
        expected_controller_epoch_version: int | None = None,
    ) -> int:
        """Conditional set: ControllerMovedError (epoch fence, checked first), NoNodeError, BadVersionError.

        Returns the new version (the new zkVersion / partition epoch).
        """
        self._fence(expected_controller_epoch_version)
        _, version = self.get_partition_state(tp)
        _match(version, expected_version)
        new = _state(state)
        self._write()
        self._states[(tp[0], int(tp[1]))] = (new, version + 1)
        return version + 1

    # -- /isr_change_notification (ReplicationUtils / KafkaZkClient.propagateIsrChanges) --

    def create_isr_change_notification(self, partitions: Iterable[TopicPartition]) -> str:
        """Create a sequential node listing the partitions whose ISR changed; returns e.g. isr_change_0000000000."""
        name = f"{ISR_CHANGE_PREFIX}{self._isr_seq:010d}"
        self._write()
        self._isr_seq += 1
        self._isr_changes[name] = [(str(t), int(p)) for t, p in partitions]
        return name

    def isr_change_notifications(self) -> list[tuple[str, list[TopicPartition]]]:
        return [(n, list(tps)) for n, tps in sorted(self._isr_changes.items())]

    def delete_isr_change_notification(
        self, name: str, *, expected_controller_epoch_version: int | None = None
    ) -> None:
        self._delete_child(self._isr_changes, "/isr_change_notification", name, expected_controller_epoch_version)

    def _delete_child(self, children: dict | set, parent: str, name: str, expected: int | None) -> None:
        """A controller's fenced delete of parent/name (NoNodeError when it is not there)."""
        self._fence(expected)
        if name not in children:
            raise NoNodeError(f"{parent}/{name}")
        self._write()
        if isinstance(children, dict):
            del children[name]
        else:
            children.discard(name)

    # -- /admin/delete_topics (AdminZkClient.deleteTopic, TopicDeletionManager) --

    def mark_topic_for_deletion(self, name: str) -> None:
        """Create /admin/delete_topics/<t> (NodeExistsError = TopicAlreadyMarkedForDeletion)."""
        if name in self._delete_topics:
            raise NodeExistsError(f"/admin/delete_topics/{name}")
        self._write()
        self._delete_topics.add(name)

    def topics_to_delete(self) -> list[str]:
        return sorted(self._delete_topics)

    def delete_topic_deletion_node(
        self, name: str, *, expected_controller_epoch_version: int | None = None
    ) -> None:
        self._delete_child(self._delete_topics, "/admin/delete_topics", name, expected_controller_epoch_version)

    # -- /admin/reassign_partitions, /admin/preferred_replica_election: opaque JSON-native dicts --

    def _admin_get(self, node: str) -> dict | None:
        return copy.deepcopy(self._admin.get(node))

    def _admin_put(self, node: str, data: dict, create: bool, fence: int | None) -> None:
        self._fence(fence)
        if create and node in self._admin:
            raise NodeExistsError(f"/admin/{node}")
        if not create and node not in self._admin:
            raise NoNodeError(f"/admin/{node}")
        self._write()
        self._admin[node] = copy.deepcopy(data)

    def _admin_delete(self, node: str, fence: int | None) -> None:
        self._fence(fence)
        if node not in self._admin:
            raise NoNodeError(f"/admin/{node}")
        self._write()
        del self._admin[node]

    def reassign_partitions(self) -> dict | None:
        return self._admin_get("reassign_partitions")

    def create_reassign_partitions(self, data: dict) -> None:
        self._admin_put("reassign_partitions", data, True, None)

    def set_reassign_partitions(
        self, data: dict, *, expected_controller_epoch_version: int | None = None
    ) -> None:
        self._admin_put("reassign_partitions", data, False, expected_controller_epoch_version)

    def delete_reassign_partitions(self, *, expected_controller_epoch_version: int | None = None) -> None:
        self._admin_delete("reassign_partitions", expected_controller_epoch_version)

    def preferred_replica_election(self) -> dict | None:
        return self._admin_get("preferred_replica_election")

    def create_preferred_replica_election(self, data: dict) -> None:
        self._admin_put("preferred_replica_election", data, True, None)

    def delete_preferred_replica_election(
        self, *, expected_controller_epoch_version: int | None = None
    ) -> None:
        self._admin_delete("preferred_replica_election", expected_controller_epoch_version)

    # -- persistence --

    def to_dict(self, copies: bool = True) -> dict[str, Any]:
        """JSON-native snapshot (string keys, lists), deterministic order. `copies=False`: the partition
        states are the stored ones, for a caller that only writes them out (a deep copy each: ~1 s per
        100,000 partitions)."""
        out = self._plain()
        out["partition_states"] = list(self._plain_states(copies))
        return out

    def _plain_states(self, copies: bool = True) -> Iterator[dict[str, Any]]:
        """to_dict's partition_states, made one at a time (save writes them as they come)."""
        for (t, p), (s, v) in sorted(self._states.items()):
            yield {"topic": t, "partition": p, "state": copy.deepcopy(s) if copies else s, "version": v}

    def _plain(self) -> dict[str, Any]:
        """to_dict with partition_states None (in its place: the key order is to_dict's)."""
        return {
            "zxid": self.zxid,
            "controller": self._controller,
            "controller_epoch": list(self._epoch) if self._epoch else None,
            "brokers": {str(b): e for b, e in sorted(self._brokers.items())},
            "topics": {
                t: {
                    "replicas": _json_map(a.replicas),
                    "adding": _json_map(a.adding),
                    "removing": _json_map(a.removing),
                    "version": a.version,
                }
                for t, a in sorted(self._topics.items())
            },
            "partition_states": None,
            "delete_topics": sorted(self._delete_topics),
            "isr_change_notifications": {
                n: [list(tp) for tp in tps] for n, tps in sorted(self._isr_changes.items())
            },
            "isr_change_sequence": self._isr_seq,
            "admin": copy.deepcopy(dict(sorted(self._admin.items()))),
        }

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> ZooKeeper:
        zk = cls()
        zk.zxid = int(d["zxid"])
        zk._controller = None if d["controller"] is None else int(d["controller"])
        zk._epoch = (
            None
            if d["controller_epoch"] is None
            else (int(d["controller_epoch"][0]), int(d["controller_epoch"][1]))
        )
        zk._brokers = {int(b): int(e) for b, e in d["brokers"].items()}
        zk._topics = {
            t: TopicZNode(
                _replica_map(a["replicas"]),
                _replica_map(a["adding"]),
                _replica_map(a["removing"]),
                int(a["version"]),
            )
            for t, a in d["topics"].items()
        }
        zk._states = {
            (s["topic"], int(s["partition"])): (_state(s["state"]), int(s["version"]))
            for s in d["partition_states"]
        }
        zk._delete_topics = set(d["delete_topics"])
        zk._isr_changes = {
            n: [(str(t), int(p)) for t, p in tps] for n, tps in d["isr_change_notifications"].items()
        }
        zk._isr_seq = int(d["isr_change_sequence"])
        zk._admin = copy.deepcopy(dict(d["admin"]))
        return zk

    def __eq__(self, other: object) -> bool:
        return isinstance(other, ZooKeeper) and self.to_dict() == other.to_dict()

    __hash__ = None  # type: ignore[assignment]

    @staticmethod
    def _file(path: str | os.PathLike) -> str:
        """``path`` itself, or ``<path>/zookeeper.json`` when ``path`` is a directory (the run directory)."""
        return os.path.join(path, FILE_NAME) if os.path.isdir(path) else os.fspath(path)

    def save(self, path: str | os.PathLike) -> str:
        """Atomically write the JSON snapshot (temp file in the same dir, fsync, os.replace); returns the file.
        Every change takes a zxid (`_write`), so a file this object wrote at its current zxid, still as it
        left it, is already the snapshot: not written again (at 3,000 partitions a snapshot is ~0.5 s,
        and the run loop saves after every window, most of which leave ZooKeeper as it was)."""
        target = self._file(path)
        if self._saved is not None and self._saved == (self.zxid, os.path.abspath(target), _stat(target)):
            return target
        fd, tmp = tempfile.mkstemp(prefix=".zookeeper-", suffix=".tmp", dir=os.path.dirname(target) or ".")
        try:
            with os.fdopen(fd, "w") as f:
                self._dump(f)
                f.flush()
                os.fsync(f.fileno())
            os.replace(tmp, target)
        except BaseException:
            if os.path.exists(tmp):
                os.unlink(tmp)
            raise
        self._saved = (self.zxid, os.path.abspath(target), _stat(target))
        return target

    def _dump(self, f: IO[str]) -> None:
        """``json.dump(self.to_dict(), f, indent=1, sort_keys=True)``, the same text, with the partition states
        made and written one at a time (their plain form whole is ~250 MB at 333k partitions)."""
        top = self._plain()
        for i, key in enumerate(sorted(top)):
            f.write(f'{"," if i else "{"}\n {json.dumps(key)}: ')
            if key != "partition_states":
                f.write(_nested(top[key], 1))
                continue
            sep = "["
            for s in self._plain_states(copies=False):
                f.write(f"{sep}\n  {_state_entry(s['topic'], s['partition'], s['state'], s['version'])}")
                sep = ","
            f.write("[]" if sep == "[" else "\n ]")
        f.write("\n}")

    @classmethod
    def load(cls, path: str | os.PathLike) -> ZooKeeper:
        with open(cls._file(path)) as f:
            return cls.from_dict(json.load(f))
