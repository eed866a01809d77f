"""The resident engine's message exchange (engine/exchange.py): a mesh between barrier tasks."""

import socket
import threading
import time

import numpy as np
import pandas as pd
import pyarrow as pa

from sparkkafka.bench import relay
from sparkkafka.engine.exchange import (
    Mesh,
    exchange_frames,
    exchange_parts,
    from_ipc,
    pack_frames,
    to_ipc,
    unpack_frames,
)
from sparkkafka.protocol.frames import filled


def test_ipc_round_trip_keeps_rows_and_types():
    f = pd.DataFrame({"dest": [3, 1], "topic": ["a", "b"], "offset": [5, 6]})
    back = from_ipc(to_ipc(f))
    pd.testing.assert_frame_equal(back, f)
    assert to_ipc(f.iloc[0:0]) == b"" and from_ipc(b"") is None


def test_ipc_round_trip_of_every_column_kind_the_wire_frames_hold():
    """Each wire dtype, strings of one object (a topic: frames.filled), nulls in string columns, a column
    of None only, NaN in floats, a filtered frame's index: back as they were, index reset."""
    n = 4
    f = pd.DataFrame({"kind": np.arange(n, dtype="int8"), "broker": np.arange(n, dtype="int32"),
                      "offset": np.arange(n, dtype="int64") * 10, "in_isr": [True, False, True, True],
                      "topic": filled(n, "".join(["t", "1"]), object), "isr": ["1,2", None, "", "3"],
                      "error": filled(n, None, object), "rate": [0.5, np.nan, 1.0, 2.0]})
    back = from_ipc(to_ipc(f))
    pd.testing.assert_frame_equal(back, f, check_exact=True)
    assert [str(t) for t in back.dtypes] == ["int8", "int32", "int64", "bool", "object", "object", "object", "float64"]
    part = f[f["broker"] % 2 == 1]
    pd.testing.assert_frame_equal(from_ipc(to_ipc(part)), part.reset_index(drop=True), check_exact=True)
    # what Table.from_pandas, which to_ipc replaced, gives back
    old = pa.Table.from_pandas(part, preserve_index=False).to_pandas()
    pd.testing.assert_frame_equal(from_ipc(to_ipc(part)), old, check_exact=True)


def test_mesh_frames_round_trip_with_their_dtypes_and_a_fresh_index():
    """pack_frames / unpack_frames (the mesh's bodies): every wire dtype, nulls in strings, NaN, a filtered
    frame's index reset; an empty frame is not sent, and an empty body holds no frame."""
    n = 4
    f = pd.DataFrame({"kind": np.arange(n, dtype="int8"), "broker": np.arange(n, dtype="int32"),
                      "offset": np.arange(n, dtype="int64") * 10, "in_isr": [True, False, True, True],
                      "topic": filled(n, "t1", object), "isr": ["1,2", None, "", "3"], "rate": [0.5, np.nan, 1.0, 2.0]})
    part = f[f["broker"] % 2 == 1]
    got = dict(unpack_frames(pack_frames({7: part, 3: f.iloc[0:0], 9: f})))
    assert sorted(got) == [7, 9]
    pd.testing.assert_frame_equal(got[7], part.reset_index(drop=True), check_exact=True)
    pd.testing.assert_frame_equal(got[9], f, check_exact=True)
    assert list(unpack_frames(b"")) == [] and list(unpack_frames(pack_frames({}))) == []


def _in_threads(n: int, fn) -> None:
    """fn(0) .. fn(n - 1) at once, one thread each (n barrier tasks)."""
    ts = [threading.Thread(target=fn, args=(r,)) for r in range(n)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()


def _mesh_of(n: int) -> list[Mesh]:
    """n meshes in threads of this process (what n barrier tasks build through allGather)."""
    servers = [socket.create_server(("127.0.0.1", 0)) for _ in range(n)]
    addrs = [s.getsockname() for s in servers]
    meshes: list[Mesh | None] = [None] * n

    def build(r: int) -> None:
        meshes[r] = Mesh.connect(r, addrs, servers[r], timeout=10)

    _in_threads(n, build)
    return meshes


def test_three_tasks_route_rows_by_destination_and_agree_on_headers():
    meshes = _mesh_of(3)
    results = [None] * 3

    def run(r: int) -> None:
        # task r sends one row to each of brokers 0..5, plus a large body to check no send blocks
        out = pd.DataFrame({"dest": range(6), "src": r, "blob": "y" * 300_000})
        results[r] = exchange_frames(meshes[r], out, "dest", {"rank": r, "stop": r == 1})

    _in_threads(3, run)
    for r, (headers, inbox) in enumerate(results):
        assert [h["rank"] for h in headers] == [0, 1, 2]
        assert any(h["stop"] for h in headers)
        # brokers r and r + 3 live in task r; rows come by source rank, then as sent
        assert inbox[["dest", "src"]].values.tolist() == [[r, 0], [r + 3, 0], [r, 1], [r + 3, 1], [r, 2], [r + 3, 2]]
    for m in meshes:
        m.close()


def test_frames_of_different_schemas_travel_in_their_own_columns():
    meshes = _mesh_of(2)
    results = [None] * 2

    def run(r: int) -> None:
        # two kinds of message, each with its own columns; kind 7 has no rows for task 1
        parts = {3: pd.DataFrame({"dest": [0, 1, 2, 3], "src": r, "offset": [10 * r + i for i in range(4)]}),
                 7: pd.DataFrame({"dest": [0, 2], "topic": [f"t{r}", f"u{r}"]}),
                 9: pd.DataFrame({"dest": pd.Series([], dtype="int64")})}
        results[r] = exchange_parts(meshes[r], parts, "dest", {"rank": r})

    _in_threads(2, run)
    for r, (headers, mine) in enumerate(results):
        assert [h["rank"] for h in headers] == [0, 1]
        assert set(mine) == ({3, 7} if r == 0 else {3})
        # by source rank, then as sent; each piece keeps its own schema
        rows = pd.concat(mine[3], ignore_index=True)
        assert rows[["dest", "src"]].values.tolist() == [[r, 0], [r + 2, 0], [r, 1], [r + 2, 1]]
        assert list(rows.columns) == ["dest", "src", "offset"] and rows["offset"].dtype == "int64"
    assert pd.concat(results[0][1][7])["topic"].tolist() == ["t0", "u0", "t1", "u1"]
    for m in meshes:
        m.close()


def test_tasks_post_their_messages_then_work_then_collect_even_past_full_socket_buffers():
    """A resident task sends its round's messages (`post`), writes its files, then receives (`collect`). A small
    body goes out at once, with no thread; a body larger than the sockets' buffers sends its rest from a
    thread, so two tasks posting 24 MB to each other before either receives still both get their peer's."""
    meshes = _mesh_of(2)
    bodies = [bytes([r + 1]) * (24 << 20) for r in range(2)]
    results: list = [None] * 2

    def run(r: int) -> None:
        small = meshes[r].post({"rank": r, "small": True}, {1 - r: b"x" * 1000})
        assert small.threads == []  # it fit in the socket's buffer
        first = meshes[r].collect(small)
        big = meshes[r].post({"rank": r}, {1 - r: bodies[r]})
        assert len(big.threads) == 1  # the rest waits for the peer to read
        time.sleep(0.2)  # the task's own work while its messages travel
        results[r] = (first, meshes[r].collect(big))

    _in_threads(2, run)
    for r, ((h1, got1), (h2, got2)) in enumerate(results):
        assert [h["rank"] for h in h1] == [0, 1] and got1[1 - r] == b"x" * 1000
        assert [h["rank"] for h in h2] == [0, 1] and got2[1 - r] == bodies[1 - r]
    for m in meshes:
        m.close()


def test_barrier_job_runs_many_rounds_with_one_spark_job(spark):
    rows = relay(spark, brokers=12, rounds=50, tasks=2).sort_values("broker")
    assert rows["rounds"].tolist() == [50] * 12
    assert rows["value"].tolist() == [100 * ((b - 50) % 12) + 50 for b in range(12)]


def test_one_task_asking_to_stop_stops_every_task_after_that_round(spark):
    rows = relay(spark, brokers=6, rounds=100, tasks=2, stop_at=7)
    assert set(rows["rounds"]) == {7}
    assert sorted(rows["value"]) == sorted(100 * ((b - 7) % 6) + 7 for b in range(6))


class _FakeBarrier:
    """What Mesh.rendezvous_files reads of a BarrierTaskContext: the rank and the tasks' addresses."""

    class _Info:
        address = "127.0.0.1:7077"

    def __init__(self, rank: int, n: int) -> None:
        self.rank, self.n = rank, n

    def partitionId(self) -> int:  # noqa: N802 - PySpark's name
        return self.rank

    def getTaskInfos(self) -> list:  # noqa: N802
        return [self._Info()] * self.n


def test_tasks_meet_through_a_folder_even_over_a_failed_attempts_file(tmp_path):
    """Three tasks starting at different times meet through their address files and exchange. Rank 0
    starts last and a failed stage attempt left its file (an address nobody listens on): the others
    read it, are refused, and read it again until the retried rank 0 has replaced it."""
    import json
    import time

    folder = tmp_path / "meet"
    folder.mkdir()
    (folder / "rank-0.json").write_text(json.dumps(["127.0.0.1", 1]))  # the failed attempt's rank 0
    got: list = [None] * 3

    def task(r: int) -> None:
        time.sleep(0.1 * (2 - r))  # rank 2 first, rank 0 last
        mesh = Mesh.rendezvous_files(_FakeBarrier(r, 3), str(folder), timeout=10)
        got[r] = exchange_frames(mesh, pd.DataFrame({"dest": [(r + 1) % 3], "v": [r]}), "dest", {"r": r})

    _in_threads(3, task)
    for r in range(3):
        headers, frame = got[r]
        assert frame["v"].tolist() == [(r - 1) % 3]
        assert [h["r"] for h in headers] == [0, 1, 2]
    assert sorted(p.name for p in folder.iterdir()) == ["rank-0.json", "rank-1.json", "rank-2.json"]


def test_a_task_whose_peers_never_come_times_out_naming_the_folder(tmp_path):
    import pytest

    with pytest.raises(TimeoutError, match="meet"):
        Mesh.rendezvous_files(_FakeBarrier(0, 2), str(tmp_path / "meet"), timeout=0.2)
