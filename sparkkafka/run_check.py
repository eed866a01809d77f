"""Is a run directory whole? The check every tool runs before it reads or writes one (docs/run-directory.md,
"A damaged run is refused").

A run directory damaged by hand or by the disk (a data file deleted, a `_delta_log` line cut, `state/` removed,
a truncated `zookeeper.json`, an empty `run.json`) used to be read until something broke (a stack trace, exit 1)
or, worse, written to: a tool rewrote the driver state over the damage. `check_run` reads what the tools rely
on, without Spark and without delta-rs, and raises `DamagedRunError` (a ScenarioError: exit 2) naming the
first damaged file and how to recover; it writes nothing. What it reads:

* `run.json`, `driver.json`, `driver-state.json`, `zookeeper.json`: each parses as a whole JSON object (a
  cut file does not);
* each Delta table's `_delta_log`, as a reader loads it: `_last_checkpoint`, the newest checkpoint at or
  before the version (its add actions) and every JSON line of every commit after it, for the table's
  current version and the version the driver state records (a killed run's later commits are undone
  on its next write, but read until then);
* every data file those versions list: it exists with the size its add action records;
* a writer also needs the brokers' saved rows (`driver-state.json`'s `state_folder`): the folder exists and
  each of its Parquet files ends with Parquet's footer magic.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable
from typing import Any
from urllib.parse import unquote, urlparse

from .errors import DamagedRunError
from .run_dir import DRIVER_STATE, MANIFEST, RUN_FORMAT_VERSION, RUN_JSON, STATE_DIR
from .storage import tables as T

ZOOKEEPER = "zookeeper.json"


def _json(run: str, name: str, what: str = "object") -> Any:
    path = os.path.join(run, name)
    try:
        with open(path, encoding="utf-8") as f:
            data = json.load(f)
    except FileNotFoundError:
        raise DamagedRunError(run, path, "is missing") from None
    except (OSError, ValueError) as e:
        raise DamagedRunError(run, path, f"is not complete JSON ({_reason(e)})") from None
    if not isinstance(data, dict):
        raise DamagedRunError(run, path, f"is not a JSON {what}")
    return data


def _reason(e: Exception) -> str:
    return e.strerror if isinstance(e, OSError) and e.strerror else str(e)


def check_run(path: str | os.PathLike, writes: bool = False, tables: bool = True) -> None:
    """Refuse a damaged run directory (DamagedRunError, exit 2) before a tool reads (`writes` False) or
    writes it. `path` must already hold run.json (RunDir.require_run's clear error otherwise). `tables`
    False: the writer checked the Delta tables when it opened the run, and its lock's save stamp
    (run_lock.writing `seen`) says no one saved since; the files the tables need are not read again."""
    run = os.path.abspath(path)
    meta = _json(run, RUN_JSON)
    if not meta:
        raise DamagedRunError(run, os.path.join(run, RUN_JSON), "is an empty JSON object")
    # no driver.json: a run saved before it had one (format 1, refused by number when continued)
    manifest = _json(run, MANIFEST) if os.path.exists(os.path.join(run, MANIFEST)) else None
    state = None
    if manifest is not None and manifest.get("format_version") == RUN_FORMAT_VERSION:
        state = _json(run, DRIVER_STATE)
        _json(run, ZOOKEEPER)
    recorded = (state or {}).get("table_versions")
    for name in T.SCHEMAS if tables else ():
        check_table(run, name, None if not isinstance(recorded, dict) else recorded.get(name))
    if writes and state is not None:
        _check_state_folder(run, state.get("state_folder"))


def _check_state_folder(run: str, folder: Any) -> None:
    """The brokers' rows a continued run starts from (None: a run saved before any round had them)."""
    if folder is None:
        return
    path = os.path.join(run, str(folder))
    if not os.path.isdir(path):
        gone = os.path.join(run, STATE_DIR if not os.path.isdir(os.path.join(run, STATE_DIR)) else path, "")
        raise DamagedRunError(run, gone, f"(the brokers' saved rows, driver-state.json's state_folder {folder}) "
                                         "is missing")
    parts = [n for n in sorted(os.listdir(path)) if n.endswith(".parquet")]
    if not parts:
        raise DamagedRunError(run, path, "(the brokers' saved rows) holds no Parquet file")
    for n in parts:
        _check_parquet(run, os.path.join(path, n))


def _check_parquet(run: str, path: str) -> None:
    """A whole Parquet file ends with its footer's magic `PAR1` (a cut one does not)."""
    try:
        with open(path, "rb") as f:
            f.seek(0, os.SEEK_END)
            if f.tell() < 8:
                raise DamagedRunError(run, path, "is not a complete Parquet file")
            f.seek(-4, os.SEEK_END)
            if f.read(4) != b"PAR1":
                raise DamagedRunError(run, path, "is not a complete Parquet file (no footer)")
    except OSError as e:
        raise DamagedRunError(run, path, f"cannot be read ({_reason(e)})") from None


def check_table(run: str, name: str, recorded: int | None = None) -> None:
    """One table's `_delta_log` and data files, at its current version and at `recorded` (the driver state's)."""
    root = T.table_path(os.path.join(run, "tables"), name)
    log = os.path.join(root, "_delta_log")
    if not os.path.isdir(log):
        raise DamagedRunError(run, log, f"(the {name} table's Delta log) is missing")
    entries = T._log_entries(log)
    commits = {v: e for v, cp, e in entries if not cp}
    points: dict[int, list[str]] = {}
    for v, cp, e in entries:
        if cp:
            points.setdefault(v, []).append(e)
    if not commits and not points:
        raise DamagedRunError(run, log, f"(the {name} table's Delta log) holds no commit")
    hint = os.path.join(log, "_last_checkpoint")
    if os.path.exists(hint):
        _json(run, os.path.relpath(hint, run))
    latest = max([*commits, *points])
    versions = {latest} | ({int(recorded)} if isinstance(recorded, int) and 0 <= recorded < latest else set())
    read: dict[str, list[dict]] = {}  # log file -> its actions, each read once
    for version in sorted(versions):
        live = _snapshot(run, log, name, version, commits, points, read)
        _check_files(run, root, name, version, live)


def _snapshot(run: str, log: str, name: str, version: int, commits: dict[int, str], points: dict[int, list[str]],
              read: dict[str, list[dict]]) -> dict[str, int | None]:
    """The live data files (path -> size) of `version`, replayed as a reader loads it."""
    base = max((v for v in points if v <= version), default=None)
    live: dict[str, int | None] = {}
    if base is not None:
        for entry in points[base]:
            live.update(_checkpoint_adds(run, os.path.join(log, entry), read))
    first = 0 if base is None else base + 1
    for v in range(first, version + 1):
        if v not in commits:
            raise DamagedRunError(run, os.path.join(log, f"{v:020d}.json"),
                                  f"(commit {v} of the {name} table, needed to load version {version}) is missing")
        path = os.path.join(log, commits[v])
        if path not in read:
            read[path] = _commit_actions(run, path)
        for a in read[path]:
            if isinstance(a.get("add"), dict):
                live[a["add"].get("path")] = a["add"].get("size")
            elif isinstance(a.get("remove"), dict):
                live.pop(a["remove"].get("path"), None)
    return live


def _commit_actions(run: str, path: str) -> list[dict]:
    """Every line of a commit file as a JSON object (DamagedRunError naming the file and line otherwise)."""
    out = []
    try:
        with open(path, encoding="utf-8") as f:
            for no, line in enumerate(f, 1):
                if not line.strip():
                    continue
                try:
                    action = json.loads(line)
                except ValueError as e:
                    raise DamagedRunError(run, path, f"line {no} is not a JSON action ({e})") from None
                if not isinstance(action, dict):
                    raise DamagedRunError(run, path, f"line {no} is not a JSON action")
                out.append(action)
    except (OSError, UnicodeDecodeError) as e:
        raise DamagedRunError(run, path, f"cannot be read ({_reason(e)})") from None
    if not out:
        raise DamagedRunError(run, path, "is empty (a Delta commit holds at least one action)")
    return out


def _checkpoint_adds(run: str, path: str, read: dict[str, list[dict]]) -> Iterable[tuple[str, int | None]]:
    """The add actions (path, size) a checkpoint holds."""
    if path not in read:
        import pyarrow.parquet as pq

        try:
            t = pq.read_table(path, columns=["add"]).column("add").combine_chunks()
            t = t.filter(t.is_valid())  # a checkpoint row is one action: the others' add is null
        except Exception as e:  # noqa: BLE001 - pyarrow's errors for a cut or foreign file vary
            raise DamagedRunError(run, path, f"is not a readable Delta checkpoint ({e})") from None
        paths, sizes = t.field("path").to_pylist(), t.field("size").to_pylist()
        read[path] = [{"add": {"path": p, "size": s}} for p, s in zip(paths, sizes, strict=True) if p is not None]
    return ((a["add"]["path"], a["add"]["size"]) for a in read[path])


def _check_files(run: str, root: str, name: str, version: int, live: dict[str, int | None]) -> None:
    for rel, size in live.items():
        if not isinstance(rel, str) or not rel:
            raise DamagedRunError(run, os.path.join(root, "_delta_log"),
                                  f"(the {name} table) lists an add action without a path at version {version}")
        url = urlparse(rel)
        path = unquote(url.path) if url.scheme == "file" else os.path.join(root, unquote(rel))
        try:
            found = os.stat(path).st_size
        except OSError:
            raise DamagedRunError(run, path, f"(a data file of the {name} table's version {version}) is missing") \
                from None
        if isinstance(size, int) and found != size:
            raise DamagedRunError(run, path, f"(a data file of the {name} table's version {version}) has {found} "
                                             f"bytes, its Delta log records {size}")
