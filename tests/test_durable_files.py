"""Checkpoint-style file writes (storage/tables.py write_durably, durable_batch): a reader sees the old
file or the new one, and a round's batch syncs once and renames at its end. Pure file I/O: no Spark."""

import os

import pytest

from sparkkafka.storage import tables as T


def _files(root) -> list[str]:
    return sorted(os.path.relpath(os.path.join(d, n), root) for d, _, ns in os.walk(root) for n in ns)


def test_write_durably_replaces_the_file_and_leaves_no_temporary(tmp_path):
    path = tmp_path / "b0" / "d0" / "replication-offset-checkpoint"
    with pytest.raises(FileNotFoundError):
        T.write_durably(str(path), "0\n0\n")  # the folder is made only when asked
    T.write_durably(str(path), "0\n1\nt 0 5\n", make_dirs=True)
    T.write_durably(str(path), lambda f: f.writelines(["0\n", "1\n", "t 0 7\n"]))  # written as it goes
    assert path.read_text() == "0\n1\nt 0 7\n"
    assert _files(tmp_path) == ["b0/d0/replication-offset-checkpoint"]


@pytest.mark.parametrize("syncfs", [True, False], ids=["syncfs", "fsync-each"])
def test_a_batch_renames_every_file_at_its_end(tmp_path, monkeypatch, syncfs):
    if not syncfs:  # a platform without syncfs(2): each file is fsynced instead
        monkeypatch.setattr(T, "_libc", lambda: None)
    old = tmp_path / "t-0" / "leader-epoch-checkpoint"
    T.write_durably(str(old), "0\n1\n0 0\n", make_dirs=True)
    with T.durable_batch():
        T.write_durably(str(old), "0\n2\n0 0\n1 5\n")
        for i in range(1, 4):
            T.write_durably(str(tmp_path / f"t-{i}" / "leader-epoch-checkpoint"), f"0\n1\n0 {i}\n", make_dirs=True)
        # until the batch ends a reader sees the old file, and no new one
        assert old.read_text() == "0\n1\n0 0\n"
        assert not (tmp_path / "t-1" / "leader-epoch-checkpoint").exists()
    assert old.read_text() == "0\n2\n0 0\n1 5\n"
    assert [(tmp_path / f"t-{i}" / "leader-epoch-checkpoint").read_text() for i in range(1, 4)] == [
        "0\n1\n0 1\n", "0\n1\n0 2\n", "0\n1\n0 3\n"]
    assert all(not f.endswith(".tmp") for f in _files(tmp_path))


def test_an_error_inside_a_batch_renames_nothing_and_removes_its_temporaries(tmp_path):
    old = tmp_path / "hw"
    T.write_durably(str(old), "old")
    with pytest.raises(RuntimeError), T.durable_batch():
        T.write_durably(str(old), "new")
        T.write_durably(str(tmp_path / "other"), "x")
        raise RuntimeError("task killed")
    assert old.read_text() == "old" and _files(tmp_path) == ["hw"]
    T.write_durably(str(old), "after")  # the batch is over: writes are immediate again
    assert old.read_text() == "after"
