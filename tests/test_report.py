"""`sparkkafka report RUN`: each plot's series on hand-built frames (no Spark), then one short real
run (a crash and restart, an offline single-replica partition, a throttled reassignment) whose series show what
happened, whose PNGs decode and whose HTML inlines them."""

from __future__ import annotations

import base64
import json
import os
import re

import numpy as np
import pandas as pd
import pytest
from matplotlib.image import imread

from sparkkafka import Cluster, parse_scenario
from sparkkafka.cli import main
from sparkkafka.controller.control_plane import ControlPlane
from sparkkafka.protocol.config import broker_config
from sparkkafka.reporting import load_run, plots, report
from sparkkafka.reporting.run_data import default_before_ms, sort_partition_state
from sparkkafka.storage import tables as T

LINE = "Processing override for entityPath: brokers/{} with config: HashMap({})"


def ps_row(time_ms: int, topic: str, partition: int, leader: int, isr: list[int], replicas: list[int],
           version: int = 0, adding: list[int] | None = None) -> dict:
    return {"time_ms": time_ms, "topic": topic, "partition": partition, "leader": leader, "isr": isr,
            "replicas": replicas, "leader_epoch": version, "controller_epoch": 1, "version": version,
            "adding": adding or [], "removing": []}


# ------------------------------------------------------------------------------------------------ pure
def test_config_changes_leave_kafkas_dynamic_config_line():
    cp = ControlPlane([0, 1], None, broker_config({}), 0, "2.8")
    cp.set_config({"entity": "brokers", "name": 1, "config": {"leader.replication.throttled.rate": 300,
                                                               "follower.replication.throttled.rate": 200}}, 500)
    cp.set_config({"entity": "brokers", "name": 1, "config": {"leader.replication.throttled.rate": None}}, 900)
    cp.set_config({"entity": "topics", "name": "t", "config": {"unclean.leader.election.enable": True}}, 900)
    lines = [x for x in cp.take_lines() if x[5].startswith("Processing override")]
    assert [(t, b, m) for t, b, _, _, _, m in lines] == [
        (500, -1, LINE.format(1, "follower.replication.throttled.rate -> 200, leader.replication.throttled.rate -> 300")),
        (900, -1, LINE.format(1, "follower.replication.throttled.rate -> 200")),
        (900, -1, "Processing override for entityPath: topics/t with config: "
                  "HashMap(unclean.leader.election.enable -> true)")]


def test_throttle_series_per_broker_default_and_static():
    lines = pd.DataFrame({"time_ms": [200, 400, 400, 600], "message": [
        LINE.format(0, "follower.replication.throttled.rate -> 1000, leader.replication.throttled.rate -> 1000"),
        LINE.format("<default>", "follower.replication.throttled.rate -> 700"),
        "[Admin] Reassignment requested for t-0: accepted",
        LINE.format(0, ""),  # broker 0's overrides deleted: the default applies again
    ]})
    s = plots.throttle_series(lines, {"leader.replication.throttled.rate": 5000}, [0, 1], range(0, 800, 100))
    f, lead = s["follower_throttle"], s["leader_throttle"]
    assert f[0].fillna(-1).tolist() == [-1, -1, 1000, 1000, 1000, 1000, 700, 700]  # own, then the default
    assert f[1].fillna(-1).tolist() == [-1, -1, -1, -1, 700, 700, 700, 700]
    assert lead[0].tolist() == [5000, 5000, 1000, 1000, 1000, 1000, 5000, 5000]
    assert lead[1].tolist() == [5000.0] * 8
    assert plots.parse_override("[Admin] x") is None


def test_leadership_sums_to_the_partitions_that_exist():
    ps = sort_partition_state(pd.DataFrame([
        ps_row(-100, "a", 0, 0, [0, 1], [0, 1]), ps_row(-100, "a", 1, 1, [1, 0], [1, 0]),
        ps_row(300, "a", 0, -1, [0], [0, 1], version=1),  # no leader
        ps_row(300, "b", 0, 1, [1], [1]),  # created at 300
        ps_row(500, "a", 1, -2, [], [1, 0], version=1),  # deleted
    ]))
    s = plots.leadership_series(ps, range(0, 700, 100), [0, 1, 2])
    assert list(s.columns) == [0, 1, 2, "none"]
    assert s.sum(axis=1).tolist() == [2, 2, 2, 3, 3, 2, 2]
    assert s.loc[0.3].tolist() == [0, 2, 0, 1] and s.loc[0.6].tolist() == [0, 1, 0, 1]
    isr = plots.isr_size_series(ps, range(0, 700, 100))
    assert isr["a-0"].tolist() == [2, 2, 2, 1, 1, 1, 1] and isr["a-1"].isna().tolist() == [False] * 5 + [True] * 2
    assert default_before_ms(ps) == 300
    ps.loc[len(ps)] = ps_row(400, "a", 1, 1, [1, 0], [2, 1, 0], version=2, adding=[2])
    assert default_before_ms(ps) == 400  # a reassignment's start wins


def test_busiest_partitions_first_when_there_are_too_many():
    grid = range(0, 300, 100)
    ps = pd.DataFrame([ps_row(-100, "t", p, 0, [0, 1], [0, 1]) for p in range(5)]
                      + [ps_row(100, "t", 3, 0, [0], [0, 1], version=1)])
    rows = pd.DataFrame({"round": [1], "time_ms": [100], "broker": [0], "topic": ["t"], "partition": [4],
                         "leo": [9], "hw": [2]})
    s = plots.isr_hw_series(sort_partition_state(ps), rows, grid, limit=2)
    assert list(s["isr"].columns) == ["t-3", "t-4"] and int(s["total"]["partitions"].iloc[0]) == 5
    assert s["hw_lag"]["t-4"].tolist()[1] == 7


def test_a_run_with_no_rounds_yet_still_renders(tmp_path):
    run = tmp_path / "run"
    T.create_tables(str(run / "tables"))
    (run / "run.json").write_text(json.dumps({"scenario": "e", "brokers": [0, 1], "log_dirs": ["d0"], "round_ms": 100}))
    written = report(str(run))
    assert all(imread(p).size for p in written.pngs.values())
    disk = plots.series(load_run(str(run)))["disk"]
    assert disk.to_dict("index") == {(0, "d0"): {"before": 0, "after": 0}, (1, "d0"): {"before": 0, "after": 0}}


# ------------------------------------------------------------------------------------------------ a real run
THROTTLE = 5000
SCENARIO = {
    "cluster": {"brokers": [0, 1, 2], "log_dirs": ["d0", "d1"],
                "config": {"replica.lag.time.max.ms": 400, "zookeeper.session.timeout.ms": 600,
                           "auto.leader.rebalance.enable": False},
                "emulator": {"engine": "resident"}},
    "topics": [{"name": "t", "partitions": 3, "replication_factor": 2, "config": {"min.insync.replicas": 2}},
               {"name": "solo", "assignment": {0: [2]}}],
    "timeline": [
        {"at": 0, "produce": {"topic": "t", "partition": "all", "rate_per_sec": 20, "duration_ms": 1400,
                              "acks": "all", "value_bytes": 100}},
        {"at": 200, "crash": 2},
        {"at": 900, "restart": 2},
        {"at": 1500, "reassign": {"plan": {"version": 1, "partitions": [
            {"topic": "t", "partition": 2, "replicas": [2, 1]}]}, "throttle": THROTTLE}},
    ],
    "run": {"until_ms": 3000}}


@pytest.fixture(scope="module")
def run_dir(spark, tmp_path_factory):
    out = str(tmp_path_factory.mktemp("report") / "run")
    Cluster.from_scenario(parse_scenario(SCENARIO, name="report"), spark=spark, out=out).run()
    return out


@pytest.fixture(scope="module")
def data(run_dir):
    return load_run(run_dir)


def test_health_rises_after_the_crash_and_returns_to_zero(data):
    s = plots.series(data)["health"]
    assert (s.loc[:0.2] == 0).all().all()  # before the crash
    down = s.loc[0.3:0.9]
    assert down["under_replicated"].max() >= 1 and down["under_min_isr"].max() >= 1
    assert s["offline"].max() == 1 and (s.loc[0.9:, "offline"] == 0).all()  # solo-0 back with broker 2
    assert (s.iloc[-5:] == 0).all().all()  # all in sync again after the restart and the move


def test_leadership_sums_to_the_partition_count_each_round(data):
    s = plots.series(data)["leadership"]
    assert (s.sum(axis=1) == 4).all()
    expired = s.loc[0.8]  # broker 2's session expired (crash at 0.2 s + 0.6 s)
    assert expired[2] == 0 and expired["none"] == 1  # solo-0 has no other replica
    assert s.iloc[-1][2] >= 1


def test_isr_and_hw_lag_per_partition(data):
    s = plots.series(data)["isr_hw"]
    assert sorted(s["isr"].columns) == ["solo-0", "t-0", "t-1", "t-2"]
    t0 = s["isr"]["t-0"]
    assert t0.iloc[0] == 2 and t0.min() == 1 and t0.iloc[-1] == 2  # shrunk on broker 2's crash, expanded later
    lag = s["hw_lag"].stack()
    assert (lag >= 0).all() and lag.max() > 0 and (s["hw_lag"].iloc[-1].dropna() == 0).all()


def test_bytes_moved_stay_under_the_throttle_once_it_is_set(data):
    s = plots.series(data)["throughput"]
    follower, moved = s["follower_throttle"], s["moved"]
    assert follower.loc[:1.4].isna().all().all() and (follower.loc[1.5:] == THROTTLE).all().all()
    into2 = moved[2].loc[1.5:]
    assert into2.sum() > 0  # the reassignment's copies into broker 2
    # produce ended at 1.4 s: only throttled bytes move, never ahead of the throttle since it was set (KIP-73's
    # windowed rate: one fetch every two rounds carries two rounds' worth, so a single round may show more)
    elapsed = into2.index.to_numpy() - 1.5 + 0.1
    assert ((into2 * 0.1).cumsum().to_numpy() <= follower[2].loc[1.5:].to_numpy() * elapsed).all()
    assert moved[2].loc[:1.4].max() > THROTTLE  # catching up after the restart was not throttled
    mean = s["moved_1s"][2]
    assert mean.loc[1.5:].max() <= THROTTLE and mean.iloc[9] == pytest.approx(moved[2].iloc[:10].mean())


def test_disk_before_and_after_the_move(data):
    assert data.before_ms == 1500  # the reassignment's start
    s = plots.series(data)["disk"]
    assert list(s.index.names) == ["broker", "log_dir"] and len(s) == 6
    delta = (s["after"] - s["before"]).groupby(level="broker").sum()
    assert delta[0] < 0 and delta[2] == -delta[0] and delta[1] == 0  # t-2 left broker 0 for broker 2
    assert s.loc[0, "after"].sum() < s.loc[0, "before"].sum()


def test_report_writes_pngs_and_a_self_contained_page(run_dir, tmp_path, capsys):
    written = report(run_dir)
    assert written.html == os.path.join(run_dir, "report", "index.html")
    page = open(written.html, encoding="utf-8").read()
    inlined = re.findall(r'<img src="data:image/png;base64,([A-Za-z0-9+/=]+)"', page)
    assert list(written.pngs) == list(plots.TITLES) and len(inlined) == len(plots.TITLES)
    for (name, path), b64 in zip(written.pngs.items(), inlined, strict=True):
        assert plots.TITLES[name] in page
        raw = open(path, "rb").read()
        assert raw == base64.b64decode(b64)  # the page carries the same PNGs
        img = imread(path)
        assert img.shape[0] >= 300 and img.shape[1] >= 800 and img[..., :3].std() > 0.05

    out = str(tmp_path / "elsewhere")
    assert main(["report", run_dir, "--out", out, "--before-ms", "0"]) == 0
    printed = capsys.readouterr().out.split()
    assert printed == [os.path.join(out, "index.html")] + [os.path.join(out, f"{n}.png") for n in plots.TITLES]


def test_figures_carry_the_series_they_plot(data):
    figs = plots.figures(data)
    assert list(figs) == list(plots.TITLES)
    labels = figs["throughput"].axes[0].get_legend_handles_labels()[1]
    assert "broker 2 fetched (1 s mean)" in labels and "broker 2 follower throttle" in labels
    assert figs["leadership"].axes[0].get_legend_handles_labels()[1] == ["broker 0", "broker 1", "broker 2",
                                                                          "no leader"]
    assert [t.get_text() for t in figs["isr_hw"].axes[0].get_yticklabels()] == ["solo-0", "t-0", "t-1", "t-2"]


def test_report_of_a_missing_or_non_run_directory_is_bad_input(tmp_path, capsys):
    missing = str(tmp_path / "nope")
    assert main(["report", missing]) == 2
    assert missing in capsys.readouterr().err
    assert main(["report", str(tmp_path)]) == 2
    assert "not a sparkkafka run directory" in capsys.readouterr().err


# ------------------------------------------------------------------------------------------------ bytes-moved plot
def _twelve_broker_throughput():
    """12 brokers, each fetching 1,000 B a round in rounds 1-9 and 30-39 (rounds 10-29 skipped by an idle jump),
    all on a follower throttle, plus 10^12 B of logs the run started with (follower rows stamped at 0 ms)."""
    round_ms, brokers = 100, list(range(1, 13))
    grid = [*range(0, 1000, 100), *range(3000, 4000, 100)]
    rows = [{"broker": b, "topic": "t", "partition": 0, "append_ms": t, "bytes": 1000}
            for b in brokers for t in grid if t > 0]
    rows += [{"broker": b, "topic": "t", "partition": 0, "append_ms": 0, "bytes": 10**12} for b in brokers]
    lines = pd.DataFrame({"time_ms": [0] * 12, "message": [
        LINE.format(b, "follower.replication.throttled.rate -> 20000") for b in brokers]})
    s = plots.throughput_series(pd.DataFrame(rows), lines, {}, brokers, grid, round_ms)
    return s, grid, round_ms


def test_bytes_moved_leave_out_the_logs_the_run_started_with_and_mean_over_time():
    s, grid, _ = _twelve_broker_throughput()
    moved, mean = s["moved"], s["moved_1s"]
    assert moved.loc[0.0].max() == 0 and moved.to_numpy().max() == 10_000  # 1,000 B per 0.1 s round
    # 3.0 s is the first round after the jump: its window (2.0, 3.0] holds one round of 1,000 B, not ten
    assert mean.loc[3.0, 1] == pytest.approx(1000.0) and mean.loc[0.9, 1] == pytest.approx(9000.0)


def test_bytes_moved_figure_fits_its_legend_has_distinct_colours_and_no_line_over_idle_gaps():
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    s, grid, round_ms = _twelve_broker_throughput()
    fig = plots.throughput_figure(s, round_ms)
    FigureCanvasAgg(fig).draw()
    ax = fig.axes[0]
    (legend,) = fig.legends
    box, inside = legend.get_window_extent(), fig.bbox
    assert box.x0 >= inside.x0 and box.y0 >= inside.y0 and box.x1 <= inside.x1 and box.y1 <= inside.y1
    assert not box.overlaps(ax.get_window_extent())  # outside the axes
    entries = [t.get_text() for t in legend.get_texts()]
    assert [e for e in entries if e.startswith("broker")] == [f"broker {b}" for b in range(1, 13)]
    means = {ln.get_label(): ln.get_color() for ln in ax.get_lines() if ln.get_label().endswith("(1 s mean)")}
    assert len(means) == 12 and len({tuple(map(float, c)) for c in means.values()}) == 12
    # plausible: no plotted rate above what the table's copies give (10,000 B/s), none from the 10^12 B seed
    tops = [float(np.nanmax(ln.get_ydata())) for ln in ax.get_lines() if "throttle" not in ln.get_label()]
    assert max(tops) <= 10_000
    # every line stops at the idle jump: no two consecutive finite points farther apart than one round
    for ln in ax.get_lines():
        x, y = np.asarray(ln.get_xdata(), dtype=float), np.asarray(ln.get_ydata(), dtype=float)
        finite = np.isfinite(y)
        joined = finite[1:] & finite[:-1]
        assert (np.diff(x)[joined] <= round_ms / 1000 + 1e-9).all(), ln.get_label()


def test_leadership_colours_are_distinct_for_twelve_brokers():
    ps = pd.DataFrame([ps_row(0, "t", p, p % 12 + 1, [p % 12 + 1], [p % 12 + 1]) for p in range(12)])
    fig = plots.leadership_figure(plots.leadership_series(ps, [0, 100], list(range(1, 13))))
    colours = [tuple(map(float, c.get_facecolor()[0][:3])) for c in fig.axes[0].collections]
    assert len(colours) == 12 and len(set(colours)) == 12
