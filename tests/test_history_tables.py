"""The engine's history rows as Arrow tables (engine/broker_round._history_table, expand_results) against
Table.from_pandas + cast, which they replaced: the same table, metadata included. No Spark."""

import numpy as np
import pandas as pd
import pyarrow as pa

from sparkkafka.engine import broker_round as BR
from sparkkafka.protocol import broker as B
from sparkkafka.storage.tables import SCHEMAS


class _P:
    round_no, now = 7, 1234


def _from_pandas(f: pd.DataFrame, schema: pa.Schema) -> pa.Table:
    return pa.Table.from_pandas(f[schema.names], preserve_index=False).cast(schema)


def test_history_tables_are_what_from_pandas_and_cast_give():
    rep = pd.DataFrame({"broker": np.array([2, 1], "int32"), "topic": ["t", None], "partition": np.array([0, 1], "int32"),
                        "log_dir": ["d0", "d1"], "leader": np.array([2, -1], "int32"), "leo": [5, 0], "hw": [4, 0],
                        "log_start_offset": [0, 0], "leader_epoch": np.array([3, -1], "int32"), "isr": ["2", ""]})
    rep = rep.assign(role=np.where(rep["leader"] == rep["broker"], "leader", "none"))
    got = BR._history_table(_P, B.HistoryRows("replica_state", rep))
    want = _from_pandas(rep.assign(round=7, time_ms=1234), SCHEMAS["replica_state"])
    assert got.equals(want, check_metadata=True) and got.schema.metadata == want.schema.metadata
    lines = pd.DataFrame({"broker": np.array([1], "int32"), "controller_epoch": np.array([2], "int32"),
                          "topic": ["t"], "partition": np.array([0], "int32"), "message": [None]})
    got = BR._history_table(_P, B.HistoryRows("state_change_log", lines))
    assert got.equals(_from_pandas(lines.assign(time_ms=1234), SCHEMAS["state_change_log"]), check_metadata=True)


def test_expand_results_gives_one_row_per_record_and_no_offset_for_a_failed_batch():
    res = pd.DataFrame({"broker": np.array([1, 2, 3], "int32"), "topic": ["a", "b", None],
                        "partition": np.array([0, 1, 2], "int32"), "record_id": [10, 20, 30],
                        "count": np.array([2, 0, 3], "int32"), "acks": np.array([-1, 1, 0], "int32"),
                        "base_offset": [5, -1, -1], "error": [None, "X", np.nan], "time_ms": [7, 7, 7],
                        "acked": [True, False, False]})
    rep = res.loc[res.index.repeat(res["count"])].reset_index(drop=True)
    within = np.array([0, 1, 0, 1, 2])
    off = pd.array(np.where(rep["base_offset"] >= 0, rep["base_offset"] + within, 0), dtype="Int64")
    off[rep["base_offset"].to_numpy() < 0] = pd.NA
    want = _from_pandas(pd.DataFrame({
        "time_ms": rep["time_ms"], "topic": rep["topic"], "partition": rep["partition"],
        "record_id": rep["record_id"] + within, "acks": rep["acks"], "offset": off, "error": rep["error"],
        "acked": rep["acked"]}), SCHEMAS["produce_results"])
    got = BR.expand_results(res)
    assert got.equals(want, check_metadata=True)
    assert got["offset"].to_pylist() == [5, 6, None, None, None]
    assert BR.expand_results(res.iloc[:0]).equals(want.slice(0, 0), check_metadata=True)


def test_a_column_arrow_converts_only_through_another_type_takes_the_from_pandas_path():
    lines = pd.DataFrame({"broker": np.array(["1", "2"], dtype=object), "controller_epoch": [2.0, np.nan],
                          "topic": ["t", "u"], "partition": np.array([0, 1], "int32"), "message": ["m", None]})
    got = BR._history_table(_P, B.HistoryRows("state_change_log", lines))
    want = _from_pandas(lines.assign(time_ms=1234), SCHEMAS["state_change_log"])
    assert got.equals(want, check_metadata=True) and got["broker"].to_pylist() == [1, 2]  # digits: by a cast


def test_string_columns_of_one_object_give_the_same_table():
    """A round's history columns often hold one object in every row (its topic, the error None of every
    answered batch): repeated, not converted row by row, to the same table."""
    from sparkkafka.protocol.frames import filled

    n = 5
    res = pd.DataFrame({"broker": np.full(n, 1, "int32"), "topic": filled(n, "".join(["o", "ne"]), object),
                        "partition": np.arange(n, dtype="int32"), "record_id": np.arange(n) * 10,
                        "count": np.ones(n, "int32"), "acks": np.full(n, -1, "int32"), "base_offset": np.arange(n),
                        "error": filled(n, None, object), "time_ms": np.full(n, 7), "acked": np.ones(n, bool)})
    got = BR.expand_results(res)
    assert got["topic"].to_pylist() == ["one"] * n and got["error"].null_count == n
    want = _from_pandas(res.assign(offset=res["base_offset"]), SCHEMAS["produce_results"])
    assert got.equals(want, check_metadata=True)
    rep = pd.DataFrame({"broker": np.full(n, 2, "int32"), "topic": filled(n, "t", object),
                        "partition": np.arange(n, dtype="int32"), "log_dir": filled(n, "d0", object),
                        "leader": np.full(n, 2, "int32"), "leo": np.arange(n), "hw": np.arange(n),
                        "log_start_offset": np.zeros(n, "int64"), "leader_epoch": np.zeros(n, "int32"),
                        "isr": filled(n, "2", object), "role": filled(n, "leader", object)})
    got = BR._history_table(_P, B.HistoryRows("replica_state", rep))
    assert got.equals(_from_pandas(rep.assign(round=7, time_ms=1234), SCHEMAS["replica_state"]), check_metadata=True)
