"""LogManager.nextLogDirs / getOrCreateLog dir choice (Kafka 2.8) in sparkkafka.protocol.log_manager."""

from __future__ import annotations

import pytest

from sparkkafka.protocol.log_manager import KafkaStorageError, assign_log_dirs, next_log_dirs

DIRS = ["/d0", "/d1", "/d2"]


def test_fewest_logs_first() -> None:
    assert next_log_dirs({"/d0": 5, "/d1": 1, "/d2": 3}, DIRS) == ["/d1", "/d2", "/d0"]


def test_missing_dir_counts_as_empty_and_ties_follow_log_dirs_order() -> None:
    assert next_log_dirs({"/d0": 2}, DIRS) == ["/d1", "/d2", "/d0"]
    assert next_log_dirs({}, ["/b", "/a", "/c"]) == ["/b", "/a", "/c"]
    assert next_log_dirs({"/d0": 1, "/d1": 0, "/d2": 1}, DIRS) == ["/d1", "/d0", "/d2"]


def test_offline_dirs_are_ignored() -> None:
    # Logs of an offline dir are dropped from LogManager, and the dir is not live: neither appears.
    assert next_log_dirs({"/gone": 0, "/d0": 3, "/d1": 4}, ["/d0", "/d1"]) == ["/d0", "/d1"]
    assert next_log_dirs({"/d0": 7}, ["/d0"]) == ["/d0"]
    assert next_log_dirs({"/d0": 7}, []) == []


def test_assign_places_one_after_another() -> None:
    # Each creation updates the counts the next choice sees.
    assert assign_log_dirs({"/d0": 2, "/d1": 0, "/d2": 1}, DIRS, 5) == ["/d1", "/d1", "/d2", "/d0", "/d1"]
    assert assign_log_dirs({}, DIRS, 4) == ["/d0", "/d1", "/d2", "/d0"]
    assert assign_log_dirs({}, DIRS, 0) == []


def test_preferred_dir_wins_and_counts() -> None:
    placed = assign_log_dirs({"/d0": 0, "/d1": 0, "/d2": 0}, DIRS, 4, ["/d2", None, "/d2", None])
    # /d2 (preferred), then /d0 (fewest, first), /d2 again (preferred), then /d1 (only dir still at 0)
    assert placed == ["/d2", "/d0", "/d2", "/d1"]
    assert assign_log_dirs({}, DIRS, 3, ["/d1"]) == ["/d1", "/d0", "/d2"]  # short list: the rest free


def test_existing_is_not_mutated() -> None:
    existing = {"/d0": 1}
    assign_log_dirs(existing, DIRS, 3)
    assert existing == {"/d0": 1}


def test_errors() -> None:
    with pytest.raises(KafkaStorageError, match=r"^No log directories available\. Tried /d9$"):
        assign_log_dirs({}, DIRS, 1, ["/d9"])
    with pytest.raises(KafkaStorageError, match=r"^No log directories available\. Tried $"):
        assign_log_dirs({}, [], 1)
    with pytest.raises(ValueError):
        assign_log_dirs({}, DIRS, 1, ["/d0", "/d1"])


def test_k04_twenty_partitions_one_by_one_stay_balanced() -> None:
    """Golden K-04 (LogManagerTest.testLeastLoadedAssignment): 3 dirs, 20 new partitions created one at a
    time; after each creation max(logs per dir) <= min + 1."""
    counts: dict[str, int] = {}
    for _ in range(20):
        (d,) = assign_log_dirs(counts, DIRS, 1)
        counts[d] = counts.get(d, 0) + 1
        per_dir = [counts.get(x, 0) for x in DIRS]
        assert max(per_dir) <= min(per_dir) + 1, counts
    assert sum(counts.values()) == 20


def test_k04_offline_dir_falls_back_to_a_live_one() -> None:
    """Golden K-04 (testCreateLogWithLogDirFallback / testCreateLogWithInvalidLogDir): a dir that cannot take
    logs is skipped; the log goes to a good dir. Here an offline dir is not among the live dirs."""
    assert assign_log_dirs({"/bad": 0, "/d1": 3}, ["/d1"], 1) == ["/d1"]


def test_many_new_logs_at_once_land_where_one_by_one_would() -> None:
    """A broker told about thousands of partitions at once (a new cluster's first LeaderAndIsr) places
    them in one vectorised pass; each must land where LogManager's one-by-one choice puts it."""
    import random

    from sparkkafka.protocol.log_manager import choose_log_dir, fewest_first

    rng = random.Random(7)
    for _ in range(200):
        dirs = [f"/d{i}" for i in range(rng.randint(1, 4))]
        logs = [rng.randint(0, 6) for _ in dirs]
        n = rng.randint(1, 40)
        counts = dict(zip(dirs, logs, strict=True))
        expected = []
        for _ in range(n):
            d = choose_log_dir(counts, dirs)
            counts[d] += 1
            expected.append(d)
        assert [dirs[i] for i in fewest_first(logs, n)] == expected
