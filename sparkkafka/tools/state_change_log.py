"""``kafka.tools.StateChangeLogMerger`` (Kafka 2.8) over a run's ``state_change_log`` table.

Each row renders as a ``state-change.log`` line (log4j ``[%d] %p %m (%c)%n``):
``[yyyy-MM-dd HH:mm:ss,SSS] TRACE <message> (state.change.logger)``, the time being `base` (UTC)
plus the row's emulated ``time_ms``. A message's continuation lines (a stack trace) carry no
timestamp, so the merger drops them: only a message's first line is kept.

``merge_text`` keeps the merger's options: ``--partitions`` needs ``--topic`` and rejects repeats,
``--start-time``/``--end-time`` are read by a lenient ``SimpleDateFormat("yyyy-MM-dd HH:mm:ss,SSS")``
(defaults ``0000-00-00 00:00:00,000`` and ``9999-12-31 23:59:59,999``, both inclusive) and lines come
out merged by timestamp (ties: broker, then row order). One deliberate divergence: Kafka keeps a line
only if it contains a ``[topic,partition]`` token, which 1.x+ loggers no longer print (they write
``topic-0``), so the real tool prints next to nothing. Here the topic/partition filter reads the row's
``topic``/``partition`` columns; rows without a topic (controller-wide lines) are kept only when no
``--topic`` is given.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta

import pandas as pd

from ..errors import ScenarioError
from .leader_election import scala_duplicates

EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
DEFAULT_START = "0000-00-00 00:00:00,000"
DEFAULT_END = "9999-12-31 23:59:59,999"
_MS_PER_DAY = 86_400_000


def _days_from_civil(year: int, month: int, day: int) -> int:
    """Days from 1970-01-01 to a proleptic Gregorian date (any year)."""
    year -= month <= 2
    era = year // 400
    yoe = year - era * 400
    doy = (153 * (month + (-3 if month > 2 else 9)) + 2) // 5 + day - 1
    return era * 146097 + yoe * 365 + yoe // 4 - yoe // 100 + doy - 719468


def _base_ms(base: datetime) -> int:
    if base.tzinfo is None:
        base = base.replace(tzinfo=UTC)
    return (base - EPOCH) // timedelta(milliseconds=1)


def format_timestamp(epoch_ms: int) -> str:
    """``yyyy-MM-dd HH:mm:ss,SSS`` (UTC) of milliseconds since the epoch."""
    t = EPOCH + timedelta(milliseconds=int(epoch_ms))
    return f"{t.year:04d}-{t.month:02d}-{t.day:02d} {t.hour:02d}:{t.minute:02d}:{t.second:02d},{epoch_ms % 1000:03d}"


def render_line(time_ms: float, message: str, base: datetime = EPOCH) -> str:
    """One ``state-change.log`` line (no newline): first line of `message` at `base` + `time_ms`."""
    first = str(message).split("\n", 1)[0].rstrip("\r")
    return f"[{format_timestamp(_base_ms(base) + math.floor(time_ms))}] TRACE {first} (state.change.logger)"


def _java_trim(text: str) -> str:
    """``String.trim``: strips every character up to U+0020 from both ends."""
    start, end = 0, len(text)
    while start < end and text[start] <= " ":
        start += 1
    while end > start and text[end - 1] <= " ":
        end -= 1
    return text[start:end]


def parse_merger_time(option: str, value: str) -> int:
    """``dateFormat.parse(value.replace('"', ' ').trim)`` as epoch ms (UTC): lenient, so out-of-range
    fields roll over (``0000-00-00`` is 30 Nov of 2 BC), and text after the milliseconds is ignored.
    Dates before 1582 use the proleptic Gregorian calendar (Java's would be Julian)."""
    text = _java_trim(str(value).replace('"', " "))
    # numeric fields skip leading blanks; literals must match exactly
    m = re.match(r"[ \t]*(\d+)-[ \t]*(\d+)-[ \t]*(\d+) [ \t]*(\d+):[ \t]*(\d+):[ \t]*(\d+),[ \t]*(\d+)", text)
    if not m:
        raise ScenarioError(option, value, f'Unparseable date: "{text}"')
    year, month, day, hour, minute, second, millis = (int(g) for g in m.groups())
    days = _days_from_civil(year + (month - 1) // 12, (month - 1) % 12 + 1, 1) + day - 1
    return days * _MS_PER_DAY + hour * 3_600_000 + minute * 60_000 + second * 1000 + millis


def _java_split(text: str) -> list[str]:
    """``String.split(",")``: trailing empty strings dropped (so ``",,"`` gives nothing)."""
    parts = text.split(",")
    if parts == [""]:
        return parts
    while parts and parts[-1] == "":
        parts.pop()
    return parts


def parse_partitions(value: str | Sequence[int]) -> list[int]:
    """``--partitions``: ``split(",").toList.map(_.toInt)``, repeats rejected (``CoreUtils.duplicates``)."""
    if isinstance(value, str):
        partitions = []
        for part in _java_split(value):
            body = part[1:] if part[:1] in "+-" else part
            if not (body and body.isascii() and body.isdigit() and -(2**31) <= int(part) < 2**31):
                raise ScenarioError("--partitions", value, f'For input string: "{part}"')
            partitions.append(int(part))
    else:
        partitions = [int(p) for p in value]
    repeated = scala_duplicates(partitions, [p & 0xFFFFFFFF for p in partitions])
    if repeated:
        listed = ",".join(str(p) for p in repeated)
        raise ScenarioError(
            "--partitions", value, f"The list of partitions contains repeated entries: {listed}"
        )
    return partitions


def _missing(value: object) -> bool:
    return value is None or (isinstance(value, float) and math.isnan(value)) or value is pd.NA


def merge_text(
    frame: pd.DataFrame,
    topic: str | None = None,
    partitions: str | Sequence[int] | None = None,
    start_time: str | None = None,
    end_time: str | None = None,
    base: datetime = EPOCH,
) -> str:
    """The merger's output over `frame` (time_ms, broker, controller_epoch, topic, partition, message):
    kept lines, one per line, by timestamp. Validation errors raise ScenarioError with the merger's
    messages, checked in its order (``--partitions`` needs ``--topic``, repeats, then the times)."""
    if partitions is not None and topic is None:
        raise ScenarioError(
            "--partitions",
            partitions,
            'The option "[topic]" needs to be provided an argument when specifying partition ids',
        )
    wanted = set(parse_partitions(partitions)) if partitions is not None else set()
    start = parse_merger_time("--start-time", DEFAULT_START if start_time is None else start_time)
    end = parse_merger_time("--end-time", DEFAULT_END if end_time is None else end_time)
    origin = _base_ms(base)

    kept: list[tuple[int, int, int, str]] = []
    for position, row in enumerate(frame.itertuples(index=False)):
        stamp = origin + math.floor(row.time_ms)
        if not start <= stamp <= end:
            continue
        if topic is not None:
            if _missing(row.topic) or str(row.topic) != topic:
                continue
            if wanted and (_missing(row.partition) or int(row.partition) not in wanted):
                continue
        kept.append((stamp, int(row.broker), position, render_line(row.time_ms, row.message, base)))
    kept.sort(key=lambda item: item[:3])
    return "".join(line + "\n" for *_, line in kept)
