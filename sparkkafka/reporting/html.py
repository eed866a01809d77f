"""``sparkkafka report RUN``: the run's plots as PNG files and one self-contained HTML page (the same PNGs
inlined as base64 ``data:`` URIs, so the page can be mailed or attached to a ticket on its own)."""

from __future__ import annotations

import base64
import html
import io
import os
from dataclasses import dataclass

from matplotlib.figure import Figure

from . import plots
from .run_data import RunData, load_run

CAPTIONS = {
    "health": "Per round, from the metrics table: partitions whose ISR is smaller than their replica set "
              "(UnderReplicatedPartitions), with no live leader (OfflinePartitionsCount) and with fewer in-sync "
              "replicas than min.insync.replicas (UnderMinIsrPartitionCount).",
    "isr_hw": "Top: the ISR size ZooKeeper holds for each partition. Bottom: the leader's log end offset minus "
              "its high watermark, i.e. records appended but not yet committed, as the leader reported it.",
    "leadership": "Partitions whose ZooKeeper leader is each broker, per round; 'no leader' counts leader -1. "
                  "Each round sums to the partition count.",
    "throughput": "Bytes per second appended by each broker as a follower (replica fetchers' copies still in "
                  "the log): each round faint, their one-second mean bold, with the broker's "
                  "follower.replication.throttled.rate in effect (dashed; KIP-73).",
    "disk": "Bytes of the log table per broker and log dir (record sizes, as sparkkafka log-dirs reports "
            "them) just before the time shown and at the end of the run.",
}


@dataclass(frozen=True)
class Report:
    """Where the report was written: the HTML page and each plot's PNG, by plot name."""

    html: str
    pngs: dict[str, str]

    def paths(self) -> list[str]:
        return [self.html, *self.pngs.values()]


def png_bytes(fig: Figure) -> bytes:
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=100)
    return buf.getvalue()


def _header(data: RunData) -> str:
    m, s = data.meta, data.summary
    facts = [("scenario", m.get("scenario")), ("rounds", m.get("round")),
             ("emulated time", f"{int(m.get('time_ms') or 0) / 1000:g} s"),
             ("brokers", ", ".join(str(b) for b in m.get("brokers", []))),
             ("log dirs", ", ".join(str(d) for d in m.get("log_dirs", [])))]
    facts += [(k.replace("_", " "), s[k]) for k in ("produced", "acked", "lost_acked", "divergent_replicas",
                                                     "offline_partitions", "under_replicated_partitions") if k in s]
    items = "".join(f"<li><b>{html.escape(str(k))}</b>: {html.escape(str(v))}</li>" for k, v in facts)
    return f"<p>{html.escape(os.path.abspath(data.run_dir))}</p><ul>{items}</ul>"


def render_html(data: RunData, pngs: dict[str, bytes]) -> str:
    sections = []
    for name, png in pngs.items():
        title = html.escape(plots.TITLES[name])
        b64 = base64.b64encode(png).decode("ascii")
        sections.append(f'<section id="{name}"><h2>{title}</h2><p>{html.escape(CAPTIONS[name])}</p>'
                        f'<img src="data:image/png;base64,{b64}" alt="{title}"></section>')
    name = html.escape(str(data.meta.get("scenario", "")))
    return ("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
            f"<title>sparkkafka report: {name}</title><style>body{{font-family:sans-serif;max-width:1100px;"
            "margin:2em auto;color:#222}}img{{max-width:100%;border:1px solid #ddd}}section{{margin:2em 0}}"
            f"</style></head><body><h1>sparkkafka report: {name}</h1>{_header(data)}"
            + "".join(sections) + "</body></html>\n")


def write_report(run_dir: str, out: str | None = None, before_ms: int | None = None) -> Report:
    """Write OUT/<plot>.png for each plot and OUT/index.html (default OUT: RUN/report)."""
    data = load_run(run_dir, before_ms)
    out = out or os.path.join(run_dir, "report")
    os.makedirs(out, exist_ok=True)
    pngs = {name: png_bytes(fig) for name, fig in plots.figures(data).items()}
    paths = {}
    for name, png in pngs.items():
        paths[name] = os.path.join(out, f"{name}.png")
        with open(paths[name], "wb") as f:
            f.write(png)
    page = os.path.join(out, "index.html")
    with open(page, "w", encoding="utf-8") as f:
        f.write(render_html(data, pngs))
    return Report(html=page, pngs=paths)
