"""The report's plots: for each, a pure ``*_series`` function (pandas frames in, the plotted data out, indexed
by emulated seconds at each round) and a ``*_figure`` function drawing it as a matplotlib ``Figure``.

Figures are made with ``matplotlib.figure.Figure`` (no pyplot, no global state, no display needed);
Databricks' ``display(fig)`` and Jupyter show them as they are.

* health: UnderReplicatedPartitions, OfflinePartitionsCount and UnderMinIsrPartitionCount per round (the
  ``metrics`` table: the brokers' and the controller's gauges);
* isr_hw: per partition, the ISR size in ZooKeeper and the leader's LEO minus its high watermark (records
  appended but not yet committed) as the leader reports it each round;
* leadership: partitions led by each broker per round (ZooKeeper's leader; "none" for leader -1), summing
  to the partition count;
* throughput: bytes per second appended by follower replicas on each broker against that broker's
  ``follower.replication.throttled.rate`` (and ``leader.replication.throttled.rate``) in effect (KIP-73),
  rebuilt from the dynamic-config lines of ``state_change_log``;
* disk: bytes per broker and log dir before (see ``run_data.default_before_ms``) and now.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence

import numpy as np
import pandas as pd
from matplotlib.figure import Figure
from matplotlib.ticker import MaxNLocator

from ..protocol.config import LONG_MAX, dynamic_broker_value

TITLES = {
    "health": "Under-replicated, offline and under-min-ISR partitions",
    "isr_hw": "ISR size and high-watermark lag per partition",
    "leadership": "Partition leadership per broker",
    "throughput": "Bytes moved by replica fetchers vs replication throttle",
    "disk": "Disk usage per broker and log dir, before and after",
}
HEALTH_COLUMNS = ["under_replicated", "offline", "under_min_isr"]
THROTTLE_KEYS = {"leader_throttle": "leader.replication.throttled.rate",
                 "follower_throttle": "follower.replication.throttled.rate"}
_OVERRIDE = re.compile(r"^Processing override for entityPath: brokers/(\S+) with config: HashMap\((.*)\)$")
_ENTRY = re.compile(r", (?=[A-Za-z0-9._-]+ -> )")
SIZE = (10.0, 4.0)


def _seconds(grid_ms: Iterable[int]) -> pd.Index:
    return pd.Index(np.asarray(list(grid_ms), dtype="float64") / 1000.0, name="time_s")


def _label(topic: str, partition: int) -> str:
    return f"{topic}-{int(partition)}"


def _as_of(ps: pd.DataFrame, values: pd.Series, grid_ms: Sequence[int]) -> pd.DataFrame:
    """`values` (one per partition_state row, rows in write order) per partition as of each grid time:
    the last row written at or before it (NaN before the partition's first row)."""
    grid = pd.Index(np.asarray(grid_ms, dtype="int64"))
    if ps.empty:
        return pd.DataFrame(index=_seconds(grid))
    f = pd.DataFrame({"time_ms": ps["time_ms"].astype("int64").to_numpy(),
                      "tp": [_label(t, p) for t, p in zip(ps["topic"], ps["partition"], strict=True)],
                      "v": np.nan_to_num(values.to_numpy(dtype="float64"), nan=-np.inf)})  # a NaN value stays
    wide = f.drop_duplicates(["time_ms", "tp"], keep="last").pivot(index="time_ms", columns="tp", values="v")
    wide = wide.reindex(wide.index.union(grid)).sort_index().ffill().reindex(grid).replace(-np.inf, np.nan)
    wide.index = _seconds(grid)
    wide.columns.name = "partition"
    return wide


# ---------------------------------------------------------------------------------------------- health
def health_series(metrics: pd.DataFrame) -> pd.DataFrame:
    """under_replicated, offline, under_min_isr per round (the metrics table's gauges)."""
    out = metrics[HEALTH_COLUMNS].astype("int64").reset_index(drop=True)
    out.index = _seconds(metrics["time_ms"])
    return out


def health_figure(s: pd.DataFrame) -> Figure:
    """One panel per gauge, sharing the time axis (the three often coincide and would hide each other)."""
    fig = Figure(figsize=(SIZE[0], 5.0), layout="constrained")
    axes = fig.subplots(len(HEALTH_COLUMNS), 1, sharex=True)
    fig.suptitle(TITLES["health"])
    labels = {"under_replicated": "under-replicated", "offline": "offline", "under_min_isr": "under min ISR"}
    for i, (ax, col) in enumerate(zip(axes, HEALTH_COLUMNS, strict=True)):
        ax.step(s.index, s[col], where="post", color=f"C{(3, 7, 1)[i]}", linewidth=2)
        ax.fill_between(s.index, s[col], step="post", color=f"C{(3, 7, 1)[i]}", alpha=0.2)
        ax.set_ylabel(labels[col])
        ax.set_ylim(bottom=0, top=max(1, int(s[col].max()) if len(s) else 1) * 1.15)
        ax.yaxis.set_major_locator(MaxNLocator(integer=True))
        ax.grid(True, alpha=0.3)
    axes[-1].set_xlabel("emulated time (s)")
    if not len(s):
        axes[0].text(0.5, 0.5, "no rounds yet", transform=axes[0].transAxes, ha="center")
    return fig


# ---------------------------------------------------------------------------------------------- ISR, HW lag
def isr_size_series(ps: pd.DataFrame, grid_ms: Sequence[int]) -> pd.DataFrame:
    """ISR size per partition (columns topic-partition) as of each round; NaN before it exists and after
    it is deleted (leader -2)."""
    size = ps["isr"].map(len).astype("float64").where(ps["leader"] != -2) if len(ps) else pd.Series(dtype="float64")
    return _as_of(ps, size, grid_ms)


def hw_lag_series(leader_rows: pd.DataFrame, grid_ms: Sequence[int]) -> pd.DataFrame:
    """LEO minus high watermark of each partition's leader per round (NaN: no leader reported)."""
    grid = pd.Index(np.asarray(grid_ms, dtype="int64"))
    if leader_rows.empty:
        return pd.DataFrame(index=_seconds(grid))
    f = leader_rows.assign(tp=[_label(t, p) for t, p in zip(leader_rows["topic"], leader_rows["partition"],
                                                            strict=True)],
                           lag=(leader_rows["leo"] - leader_rows["hw"]).astype("float64"))
    wide = f.pivot_table(index="time_ms", columns="tp", values="lag", aggfunc="max").reindex(grid)
    wide.index = _seconds(grid)
    wide.columns.name = "partition"
    return wide


def busiest_partitions(isr: pd.DataFrame, lag: pd.DataFrame, replicas: pd.DataFrame, limit: int) -> list[str]:
    """The partitions worth a line when there are more than `limit`: most rounds with the ISR below the
    replica count, then the largest HW lag, then by name."""
    names = sorted(set(isr.columns) | set(lag.columns))
    if len(names) <= limit:
        return names
    short = (isr.reindex(columns=names) < replicas.reindex(columns=names)).sum()
    worst = lag.reindex(columns=names).max().fillna(0)
    return sorted(names, key=lambda n: (-int(short[n]), -float(worst[n]), n))[:limit]


def isr_hw_series(ps: pd.DataFrame, leader_rows: pd.DataFrame, grid_ms: Sequence[int],
                  limit: int = 12) -> dict[str, pd.DataFrame]:
    """{"isr": ISR size, "hw_lag": leader LEO - HW, "replicas": replica count}, for at most `limit` partitions."""
    isr, lag = isr_size_series(ps, grid_ms), hw_lag_series(leader_rows, grid_ms)
    reps = _as_of(ps, ps["replicas"].map(len).astype("float64"), grid_ms) if len(ps) else isr
    keep = busiest_partitions(isr, lag, reps, limit)
    return {"isr": isr.reindex(columns=keep), "hw_lag": lag.reindex(columns=keep),
            "replicas": reps.reindex(columns=keep), "total": pd.DataFrame({"partitions": [len(set(isr.columns)
                                                                                              | set(lag.columns))]})}


def _edges(index: pd.Index) -> np.ndarray:
    """Cell edges for a heatmap whose columns start at `index` (each lasting until the next)."""
    x = index.to_numpy(dtype="float64")
    step = float(np.diff(x).min()) if len(x) > 1 else 0.1
    return np.append(x, x[-1] + step) if len(x) else np.array([0.0, step])


def _heatmap(fig: Figure, ax, wide: pd.DataFrame, label: str, cmap: str, integer: bool) -> None:
    data = np.ma.masked_invalid(wide.to_numpy(dtype="float64").T)
    top = float(np.nanmax(wide.to_numpy(dtype="float64"))) if wide.notna().any().any() else 1.0
    mesh = ax.pcolormesh(_edges(wide.index), np.arange(wide.shape[1] + 1), data, cmap=cmap, vmin=0,
                         vmax=max(top, 1.0), shading="flat")
    ax.set_yticks(np.arange(wide.shape[1]) + 0.5, list(wide.columns), fontsize="small")
    ax.invert_yaxis()
    ax.set_facecolor("#eeeeee")  # masked cells (no value): light grey
    bar = fig.colorbar(mesh, ax=ax, label=label)
    if integer:
        bar.locator = MaxNLocator(integer=True)
        bar.update_ticks()


def isr_hw_figure(s: dict[str, pd.DataFrame]) -> Figure:
    """Two heatmaps, a row per partition: ISR size, and the leader's LEO - HW (grey: no value)."""
    shown, total = s["isr"].shape[1], int(s["total"]["partitions"].iloc[0])
    fig = Figure(figsize=(SIZE[0], 2.0 + 0.5 * max(shown, 2)), layout="constrained")
    top, bottom = fig.subplots(2, 1, sharex=True)
    note = "" if shown == total else f" ({shown} of {total} partitions: the longest under-replicated)"
    fig.suptitle(TITLES["isr_hw"] + note)
    if shown and len(s["isr"]):
        _heatmap(fig, top, s["isr"], "ISR size", "viridis", True)
        _heatmap(fig, bottom, s["hw_lag"], "LEO - HW (records)", "magma_r", True)
    else:
        top.text(0.5, 0.5, "no partitions", transform=top.transAxes, ha="center")
    top.set_title("ISR size (ZooKeeper)", fontsize="medium")
    bottom.set_title("leader's LEO - high watermark", fontsize="medium")
    bottom.set_xlabel("emulated time (s)")
    return fig


# ---------------------------------------------------------------------------------------------- leadership
def leadership_series(ps: pd.DataFrame, grid_ms: Sequence[int], brokers: Sequence[int] = ()) -> pd.DataFrame:
    """Partitions led by each broker (int columns) and with no leader ("none") per round; a row sums to the
    number of partitions that exist then (deleted ones, leader -2, are left out)."""
    leaders = _as_of(ps, ps["leader"] if len(ps) else pd.Series(dtype="float64"), grid_ms)
    seen = sorted({int(b) for b in brokers} | {int(x) for x in np.unique(leaders.to_numpy()) if x >= 0})
    out = pd.DataFrame({b: (leaders == b).sum(axis=1) for b in seen}, index=leaders.index)
    out["none"] = (leaders == -1).sum(axis=1)
    return out.astype("int64")


def leadership_figure(s: pd.DataFrame) -> Figure:
    """Stacked: each broker's share of the partitions (no leader on top, grey); the stack is the partition count."""
    fig, ax = _figure("leadership")
    cols = [c for c in s.columns if c != "none"] + (["none"] if "none" in s and s["none"].any() else [])
    if len(s) and cols:
        palette = series_colors([c for c in cols if c != "none"])
        colors = [("grey" if c == "none" else palette[c]) for c in cols]
        ax.stackplot(s.index, [s[c].to_numpy() for c in cols], step="post", colors=colors, alpha=0.85,
                     labels=["no leader" if c == "none" else f"broker {c}" for c in cols])
    ax.set_ylabel("partitions led")
    ax.yaxis.set_major_locator(MaxNLocator(integer=True))
    _finish(ax, s)
    return fig


# ---------------------------------------------------------------------------------------------- throughput
def parse_override(message: str) -> tuple[str, dict[str, str]] | None:
    """(broker entity: an id or "<default>", its config) of a DynamicConfigManager line, None for another."""
    m = _OVERRIDE.match(message)
    if m is None:
        return None
    body = m.group(2)
    entries = [e.split(" -> ", 1) for e in _ENTRY.split(body)] if body else []
    return m.group(1), {k: v for k, v in entries}


def _rate(value: object) -> float:
    r = float(value)
    return np.nan if r >= LONG_MAX else r


def throttle_series(config_lines: pd.DataFrame, static: dict, brokers: Sequence[int],
                    grid_ms: Sequence[int]) -> pd.DataFrame:
    """Each broker's leader/follower throttled rate (B/s; NaN: none) in effect at each round: its own
    dynamic config, else the cluster-wide dynamic default, else the static config (KIP-73;
    config.dynamic_broker_value)."""
    brokers = [int(b) for b in brokers]
    per: dict[int, dict[str, str]] = {b: {} for b in brokers}
    default: dict[str, str] = {}

    def state(t: int) -> dict:
        row: dict = {"time_ms": t}
        for kind, key in THROTTLE_KEYS.items():
            for b in brokers:
                row[(kind, b)] = _rate(dynamic_broker_value(key, per[b], default, static, LONG_MAX))
        return row

    rows = [state(np.iinfo("int64").min)]
    for t, msg in zip(config_lines["time_ms"], config_lines["message"], strict=True):
        parsed = parse_override(msg)
        if parsed is None:
            continue
        entity, cfg = parsed
        if entity == "<default>":
            default.update(cfg)
        elif int(entity) in per:
            per[int(entity)] = cfg
        rows.append(state(int(t)))
    f = pd.DataFrame(rows).drop_duplicates("time_ms", keep="last").set_index("time_ms")
    grid = pd.Index(np.asarray(grid_ms, dtype="int64"))
    out = f.reindex(f.index.union(grid)).sort_index().ffill().reindex(grid)
    out.index = _seconds(grid)
    out.columns = pd.MultiIndex.from_tuples(out.columns, names=["series", "broker"])
    return out


def moved_series(copied: pd.DataFrame, brokers: Sequence[int], grid_ms: Sequence[int], round_ms: int) -> pd.DataFrame:
    """Bytes per second appended by each broker as a follower (the copies its replica fetchers made), per round
    that ran. A copy takes a fetch request and its response, so nothing fetched is appended in the run's first
    round: follower rows stamped before its end are logs the run started with (an imported cluster's, written
    at 0 ms, scenario/initial_logs.py), not fetched, and are left out."""
    grid = pd.Index(np.asarray(grid_ms, dtype="int64"))
    cols = sorted({int(b) for b in brokers} | {int(b) for b in copied["broker"].unique()})
    if len(grid):
        copied = copied[copied["append_ms"].astype("int64") >= int(grid[0]) + round_ms]
    if copied.empty:
        out = pd.DataFrame(0.0, index=grid, columns=cols)
    else:
        at = (copied["append_ms"].astype("int64") // round_ms) * round_ms
        out = (copied.assign(t=at).groupby(["t", "broker"])["bytes"].sum().unstack("broker")
               .reindex(index=grid, columns=cols).fillna(0.0) * (1000.0 / round_ms))
    out.index = _seconds(grid)
    out.columns = pd.Index(cols, name="broker")
    return out


def trailing_mean(moved: pd.DataFrame, round_ms: int, window_ms: int = 1000) -> pd.DataFrame:
    """Each round's trailing `window_ms` mean of `moved` (B/s per round), by time, not by row: rounds the idle
    jump skipped moved nothing, so a window spanning one counts them as 0 instead of reaching back over rounds
    before it; a window before the run's start covers only the rounds since."""
    if moved.empty:
        return moved.copy()
    t = np.round(moved.index.to_numpy(dtype="float64") * 1000).astype("int64")
    moved_bytes = moved.to_numpy(dtype="float64") * (round_ms / 1000.0)
    cum = np.vstack([np.zeros((1, moved.shape[1])), np.cumsum(moved_bytes, axis=0)])
    start = np.searchsorted(t, t - window_ms, side="right")  # the first round inside (T - window, T]
    covered_s = np.minimum(window_ms, t - t[0] + round_ms) / 1000.0
    out = (cum[np.arange(len(t)) + 1] - cum[start]) / covered_s[:, None]
    return pd.DataFrame(out, index=moved.index, columns=moved.columns)


def throughput_series(copied: pd.DataFrame, config_lines: pd.DataFrame, static: dict, brokers: Sequence[int],
                      grid_ms: Sequence[int], round_ms: int) -> pd.DataFrame:
    """Columns (series, broker): "moved" (B/s fetched as a follower in each round), "moved_1s" (its trailing
    one-second mean: a follower fetches every other round, so single rounds alternate), "follower_throttle",
    "leader_throttle"."""
    moved = moved_series(copied, brokers, grid_ms, round_ms)
    mean = trailing_mean(moved, round_ms)
    rates = throttle_series(config_lines, static, list(moved.columns), grid_ms)
    out = pd.concat({"moved": moved, "moved_1s": mean}, axis=1, names=["series", "broker"])
    return pd.concat([out, rates], axis=1)


def break_gaps(s: pd.DataFrame | pd.Series, round_ms: int) -> pd.DataFrame | pd.Series:
    """`s` (indexed by emulated seconds at each round that ran) with a NaN row one round after each round
    followed by an idle jump, so a plotted line stops there instead of sloping across rounds that did not run."""
    if len(s) < 2:
        return s
    t = s.index.to_numpy(dtype="float64")
    step = round_ms / 1000.0
    ends = t[:-1][np.diff(t) > step * 1.5]
    if not len(ends):
        return s
    gaps = pd.DataFrame(np.nan, index=pd.Index(ends + step, name=s.index.name),
                        columns=s.columns) if isinstance(s, pd.DataFrame) else pd.Series(
        np.nan, index=pd.Index(ends + step, name=s.index.name), name=s.name)
    return pd.concat([s, gaps]).sort_index(kind="stable")


def series_colors(keys: Sequence[object]) -> dict[object, tuple]:
    """A distinct colour per key, in order: matplotlib's ten-colour cycle up to 10, tab20 up to 20, then
    evenly spaced hues (no two keys share a colour, as brokers 1 and 11 did on the ten-colour cycle)."""
    from matplotlib import colormaps
    from matplotlib.colors import to_rgba

    n = len(keys)
    if n <= 10:
        colors = [to_rgba(f"C{i}") for i in range(n)]
    elif n <= 20:
        cmap = colormaps["tab20"]
        colors = [cmap(i) for i in range(n)]
    else:
        cmap = colormaps["hsv"]
        colors = [cmap(i / n) for i in range(n)]
    return dict(zip(keys, colors, strict=True))


def throughput_figure(s: pd.DataFrame, round_ms: int = 100) -> Figure:
    """Per broker (one colour each): the B/s it fetched per round (thin steps), their 1 s mean (thick steps) and
    its follower throttle (dashed). Lines stop at idle jumps. The legend, outside the axes, has one entry per
    broker and one per line style, in as many columns as it needs to fit the figure's height."""
    from matplotlib.lines import Line2D

    fig, ax = _figure("throughput")
    moved, follower = s["moved"], s["follower_throttle"]
    active = [b for b in moved.columns if moved[b].any() or follower[b].notna().any()]
    colors = series_colors(list(moved.columns))
    cut = break_gaps(s, round_ms)
    for b in active:
        ax.step(cut.index, cut["moved"][b], where="post", color=colors[b], linewidth=0.8, alpha=0.35)
        ax.step(cut.index, cut["moved_1s"][b], where="post", color=colors[b], linewidth=2,
                label=f"broker {b} fetched (1 s mean)")
        if follower[b].notna().any():
            ax.step(cut.index, cut["follower_throttle"][b], where="post", color=colors[b], linestyle="--",
                    label=f"broker {b} follower throttle")
    if not active:
        ax.text(0.5, 0.5, "no follower appends in the log", transform=ax.transAxes, ha="center")
    values = moved.to_numpy()[moved.to_numpy() > 0]
    if len(values) and values.max() > 20 * np.median(values):  # a catch-up burst would flatten the rest
        ax.set_yscale("symlog", linthresh=100)
        ax.set_ylabel("bytes / s (log scale)")
    else:
        ax.set_ylabel("bytes / s")
    ax.set_xlabel("emulated time (s)")
    ax.grid(True, alpha=0.3)
    if active:
        handles = [Line2D([], [], color=colors[b], linewidth=2, label=f"broker {b}") for b in active]
        handles.append(Line2D([], [], color="grey", linewidth=2, label="fetched, 1 s mean"))
        handles.append(Line2D([], [], color="grey", linewidth=0.8, alpha=0.5, label="fetched, per round"))
        if any(follower[b].notna().any() for b in active):
            handles.append(Line2D([], [], color="grey", linestyle="--", label="follower throttle"))
        _outside_legend(fig, handles)
    return fig


def _outside_legend(fig: Figure, handles: list) -> None:
    """A legend right of the axes (constrained layout makes room for it), in columns of at most LEGEND_ROWS."""
    fig.legend(handles=handles, loc="outside right upper", fontsize="small",
               ncols=max(1, -(-len(handles) // LEGEND_ROWS)))


LEGEND_ROWS = 14  # entries per legend column that fit a SIZE-high figure at fontsize "small"


# ---------------------------------------------------------------------------------------------- disk
def disk_series(before: pd.DataFrame, after: pd.DataFrame) -> pd.DataFrame:
    """Bytes per (broker, log_dir): columns before, after (0 where a dir held nothing)."""
    b = before.set_index(["broker", "log_dir"])["bytes"].rename("before")
    a = after.set_index(["broker", "log_dir"])["bytes"].rename("after")
    return pd.concat([b, a], axis=1).fillna(0).astype("int64").sort_index()


def disk_figure(s: pd.DataFrame, before_ms: int) -> Figure:
    fig, ax = _figure("disk")
    x = np.arange(len(s))
    ax.bar(x - 0.2, s["before"], width=0.4, label=f"before ({before_ms / 1000:g} s)")
    ax.bar(x + 0.2, s["after"], width=0.4, label="after (end of run)")
    ax.set_xticks(x, [f"{b}:{d}" for b, d in s.index], rotation=45 if len(s) > 8 else 0, ha="right"
                  if len(s) > 8 else "center")
    ax.set_xlabel("broker:log dir")
    ax.set_ylabel("bytes")
    ax.grid(True, axis="y", alpha=0.3)
    ax.legend(loc="upper left", bbox_to_anchor=(1.0, 1.0), fontsize="small")
    return fig


# ---------------------------------------------------------------------------------------------- shared
def _figure(name: str):
    fig = Figure(figsize=SIZE, layout="constrained")
    ax = fig.subplots()
    ax.set_title(TITLES[name])
    return fig, ax


def _finish(ax, s: pd.DataFrame | None) -> None:
    ax.set_xlabel("emulated time (s)")
    ax.grid(True, alpha=0.3)
    if s is not None and len(s):
        _outside_legend(ax.figure, ax.get_legend_handles_labels()[0])
    elif s is not None:
        ax.text(0.5, 0.5, "no rounds yet", transform=ax.transAxes, ha="center")


# ---------------------------------------------------------------------------------------------- a run's plots
def series(data) -> dict[str, object]:
    """Every plot's data for a loaded run (``run_data.RunData``), by plot name (TITLES' keys)."""
    grid = data.metrics["time_ms"].astype("int64").to_numpy()
    brokers = [int(b) for b in data.meta.get("brokers", [])]
    return {
        "health": health_series(data.metrics),
        "isr_hw": isr_hw_series(data.partition_state, data.leader_rows, grid),
        "leadership": leadership_series(data.partition_state, grid, brokers),
        "throughput": throughput_series(data.copied, data.config_lines, dict(data.meta.get("broker_config") or {}),
                                        brokers, grid, data.round_ms),
        "disk": disk_series(data.disk_before, data.disk_after),
    }


def figures(data) -> dict[str, Figure]:
    """Every plot of a loaded run as a matplotlib Figure, by plot name, in the report's order."""
    s = series(data)
    figs = {"health": health_figure(s["health"]), "isr_hw": isr_hw_figure(s["isr_hw"]),
            "leadership": leadership_figure(s["leadership"]),
            "throughput": throughput_figure(s["throughput"], data.round_ms),
            "disk": disk_figure(s["disk"], data.before_ms)}
    for name, fig in figs.items():
        fig.set_label(name)
    return figs
