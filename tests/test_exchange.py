"""The resident engine's message exchange (engine/exchange.py): a mesh between barrier tasks."""

import socket
import threading

import pandas as pd

from sparkkafka.bench import relay
from sparkkafka.engine.exchange import Mesh, exchange_frames, from_ipc, to_ipc


def test_ipc_round_trip_keeps_rows_and_types():
    f = pd.DataFrame({"dest": [3, 1], "topic": ["a", "b"], "offset": [5, 6]})
    back = from_ipc(to_ipc(f))
    pd.testing.assert_frame_equal(back, f)
    assert to_ipc(f.iloc[0:0]) == b"" and from_ipc(b"") is None


def _mesh_of(n: int) -> list[Mesh]:
    """n meshes in threads of this process (what n barrier tasks build through allGather)."""
    servers = [socket.create_server(("127.0.0.1", 0)) for _ in range(n)]
    addrs = [s.getsockname() for s in servers]
    meshes: list[Mesh | None] = [None] * n

    def build(r: int) -> None:
        meshes[r] = Mesh.connect(r, addrs, servers[r], timeout=10)

    ts = [threading.Thread(target=build, args=(r,)) for r in range(n)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    return meshes


def test_three_tasks_route_rows_by_destination_and_agree_on_headers():
    meshes = _mesh_of(3)
    results = [None] * 3

    def run(r: int) -> None:
        # task r sends one row to each of brokers 0..5, plus a large body to check no send blocks
        out = pd.DataFrame({"dest": range(6), "src": r, "blob": "y" * 300_000})
        results[r] = exchange_frames(meshes[r], out, "dest", {"rank": r, "stop": r == 1})

    ts = [threading.Thread(target=run, args=(r,)) for r in range(3)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    for r, (headers, inbox) in enumerate(results):
        assert [h["rank"] for h in headers] == [0, 1, 2]
        assert any(h["stop"] for h in headers)
        # brokers r and r + 3 live in task r; rows come by source rank, then as sent
        assert inbox[["dest", "src"]].values.tolist() == [[r, 0], [r + 3, 0], [r, 1], [r + 3, 1], [r, 2], [r + 3, 2]]
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
