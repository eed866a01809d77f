"""Plain data: the JSON form of the driver's values in a run directory (run_dir.py), with no pickle.

`to_plain(value)` gives a JSON-native value and `from_plain(data)` the value back, equal and of the
same types: JSON's own values stay as they are; tuples, sets, frozensets, maps whose keys are not
strings, numpy arrays and scalars, pandas frames, enums and dataclasses become tagged objects
``{"@": tag, ...}``. A class with ``to_dict``/``from_dict`` is stored through them. Only classes of
sparkkafka itself are rebuilt from a tag (a file can name no other code to run); dict order is kept.
A long list of like rows (instances of one dataclass, dicts with the same keys, tuples of one length,
every field a JSON scalar) is stored column by column (``{"@": "rows", ...}``, `_rows_of`): a new
cluster's controller queues one LeaderAndIsr entry per replica, and walking each as a tagged object
took 30 s of the setup at 300,000 replicas.
"""

from __future__ import annotations

import dataclasses
import importlib
import json
import operator
from collections.abc import Callable, Iterable, Iterator
from enum import Enum
from typing import IO, Any

import numpy as np
import pandas as pd

TAG = "@"
_PACKAGE = "sparkkafka."


def _tag(cls: type) -> str:
    return f"{cls.__module__}:{cls.__qualname__}"


def _class(tag: str) -> type:
    module, _, name = tag.partition(":")
    if not module.startswith(_PACKAGE):
        raise ValueError(f"plain data names a class outside sparkkafka: {tag!r}")
    return getattr(importlib.import_module(module), name)


def _ordered(items) -> list:
    """A set's members in a stable order (sorted when they compare, else by their plain form)."""
    try:
        return sorted(items)
    except TypeError:
        return sorted(items, key=lambda x: repr(to_plain(x)))


def to_plain(v: Any) -> Any:
    """`v` as JSON-native data (see the module docstring); TypeError for a value it cannot hold."""
    if v is None or isinstance(v, bool | str):
        return v
    if isinstance(v, int | float) and not isinstance(v, np.generic):
        return v
    if isinstance(v, np.generic):
        return v.item()
    if isinstance(v, list):
        form = _rows_of(v)
        if form is not None:
            return {**_rows_head(form), "columns": [_column(v, k, form, 0, len(v)) for k in _row_keys(form)]}
        return [to_plain(x) for x in v]
    if isinstance(v, dict):
        if all(isinstance(k, str) for k in v) and TAG not in v:
            return {k: to_plain(x) for k, x in v.items()}
        mform = _map_rows_of(v)
        if mform is not None:
            keys, values = _map_columns(v, mform)
            return {**_map_head(mform), "keys": keys, "values": values}
        return {TAG: "map", "items": [[to_plain(k), to_plain(x)] for k, x in v.items()]}
    if isinstance(v, tuple):
        return {TAG: "tuple", "items": [to_plain(x) for x in v]}
    if isinstance(v, set | frozenset):
        return {TAG: type(v).__name__, "items": [to_plain(x) for x in _ordered(v)]}
    if isinstance(v, Plain):
        return v.make()
    if isinstance(v, Fields):
        return {k: to_plain(x) for k, x in v.items()}
    if isinstance(v, pd.DataFrame):
        return _frame_to_plain(v)
    if isinstance(v, np.ndarray):
        return {TAG: "ndarray", "dtype": str(v.dtype), "items": to_plain(v.tolist())}
    cls = type(v)
    if not cls.__module__.startswith(_PACKAGE):
        raise TypeError(f"no plain form for {cls.__module__}.{cls.__qualname__}")
    if isinstance(v, Enum):
        return {TAG: _tag(cls), "name": v.name}
    if hasattr(cls, "to_dict") and hasattr(cls, "from_dict"):
        return {TAG: _tag(cls), "data": v.to_dict()}
    if dataclasses.is_dataclass(v):
        return {TAG: _tag(cls), **{f.name: to_plain(getattr(v, f.name)) for f in dataclasses.fields(v) if f.init}}
    raise TypeError(f"no plain form for {cls.__module__}.{cls.__qualname__}")


_SCALAR = frozenset({str, int, float, bool, type(None)})
ROWS = 64  # a list of more like rows than this is stored column by column


def _rows_of(items: list) -> tuple[str, list[str] | int, Callable[[Any], Callable[[Any], Any]]] | None:
    """How a list of like rows is stored column by column: (what a row is: "dict", "tuple" or a dataclass's
    tag; its keys (field names, dict keys) or a tuple's length; the getter of a key's value: itemgetter or
    attrgetter, C-level), or None for
    any other list. Every value must be a JSON scalar, a numpy one (written as its Python value) or a list
    of JSON scalars."""
    if len(items) <= ROWS:
        return None
    first = items[0]
    cls = type(first)
    if cls is dict:
        if TAG in first or not all(type(k) is str for k in first):
            return None
        form = ("dict", list(first), operator.itemgetter)
    elif cls is tuple:
        form = ("tuple", len(first), operator.itemgetter)
    elif dataclasses.is_dataclass(cls) and cls.__module__.startswith(_PACKAGE) and not hasattr(cls, "to_dict") \
            and all(f.init for f in dataclasses.fields(cls)):
        form = (_tag(cls), [f.name for f in dataclasses.fields(cls)], operator.attrgetter)
    else:
        return None
    keys = _row_keys(form)
    if not keys:  # rows of nothing: the list's length would be lost
        return None
    # checked a column at a time, by the set of types in it (map and set run in C: ~3x a loop over rows)
    if set(map(type, items)) != {cls} or (cls is tuple and set(map(len, items)) != {form[1]}) or (
            cls is dict and set(map(tuple, items)) != {tuple(form[1])}):
        return None
    for k in keys:
        values = list(map(form[2](k), items))
        for t in set(map(type, values)):
            if t not in _SCALAR and not issubclass(t, np.generic) and not (
                    t is list and all(_scalars(v) for v in values if type(v) is list)):
                return None
    return form


def _rows_head(form: tuple) -> dict:
    """The rows form's fields before its columns (to_plain and the streamed text both start with them)."""
    return {TAG: "rows", "of": form[0], "keys": form[1]}


def _scalars(v: Any) -> bool:
    """Whether `v` is a list of JSON scalars (its own plain form)."""
    return type(v) is list and all(type(y) in _SCALAR for y in v)


def _map_rows_of(v: dict) -> tuple[int, type | None] | None:
    """How a long map is stored column by column (to_plain's "map rows" form): (its keys' length: tuples of
    JSON scalars, all of one length, or 0 for int keys; the Enum class of its values, None for JSON
    scalars), or None for any other map. A controller's replica state machine maps every (topic,
    partition, replica) to a state: 60,000 entries cost 1.1 s as tagged pairs."""
    if len(v) <= ROWS:
        return None
    first_k, first_v = next(iter(v.items()))
    n = len(first_k) if type(first_k) is tuple else 0 if type(first_k) is int else -1
    if n < 0 or (n == 0 and type(first_k) is not int):
        return None
    enum = type(first_v) if isinstance(first_v, Enum) and type(first_v).__module__.startswith(_PACKAGE) else None
    for k, x in v.items():
        if n == 0:
            if type(k) is not int:
                return None
        elif type(k) is not tuple or len(k) != n or not all(type(y) in _SCALAR for y in k):
            return None
        if (type(x) is not enum) if enum is not None else (type(x) not in _SCALAR):
            return None
    return n, enum


def _map_columns(v: dict, form: tuple[int, type | None]) -> tuple[list[list], list]:
    n, enum = form
    keys = [list(v)] if n == 0 else [list(c) for c in zip(*v, strict=True)]
    values = [x.name for x in v.values()] if enum is not None else list(v.values())
    return keys, values


def _map_head(form: tuple[int, type | None]) -> dict:
    """The map rows form's fields before its keys and values (to_plain and the streamed text share them)."""
    n, enum = form
    return {TAG: "map rows", "key length": n, "enum": None if enum is None else _tag(enum)}


def _from_map_rows(d: dict) -> dict:
    values = d["values"]
    if d["enum"] is not None:
        enum = _class(d["enum"])
        values = [enum[x] for x in values]
    keys = d["keys"][0] if d["key length"] == 0 else zip(*d["keys"], strict=True)
    return dict(zip(keys, values, strict=True))


def _row_keys(form: tuple) -> Iterable:
    return range(form[1]) if isinstance(form[1], int) else form[1]


def _column(items: list, key: Any, form: tuple, lo: int, hi: int) -> list:
    """Rows lo..hi of one column (numpy scalars as their Python values)."""
    values = list(map(form[2](key), items[lo:hi]))
    if any(issubclass(t, np.generic) for t in set(map(type, values))):
        return [v.item() if isinstance(v, np.generic) else v for v in values]
    return values


def _from_rows(d: dict) -> list:
    columns = d["columns"]
    if d["of"] == "tuple":
        return list(zip(*columns, strict=True))
    keys = d["keys"]
    rows = (dict(zip(keys, vals, strict=True)) for vals in zip(*columns, strict=True))
    if d["of"] == "dict":
        return list(rows)
    cls = _class(d["of"])
    return [cls(**r) for r in rows]


class Plain:
    """A value whose plain form `make()` gives, made only when written (plain_fields, dump_fields)."""

    __slots__ = ("make",)

    def __init__(self, make: Callable[[], Any]) -> None:
        self.make = make


class Text:
    """A value's plain form already written as JSON text (`dumps`), which dump_fields writes as it is: a large
    value that does not change between writes (a run's scenario) is made plain once."""

    __slots__ = ("text",)

    def __init__(self, text: str) -> None:
        self.text = text


def dumps(v: Any) -> str:
    """`json.dumps(to_plain(v))`, made as dump_fields makes it."""
    return "".join(_chunks(v))


class Fields:
    """An object's plain form as an untagged dict of its `items()` (a plain_fields method), made as written."""

    __slots__ = ("items",)

    def __init__(self, items: Callable[[], Iterable[tuple[str, Any]]]) -> None:
        self.items = items


#: list items written per json.dumps call by dump_fields (their plain forms exist together, the list's never)
BATCH = 4096
_SMALL = 64  # a container item with at most this many members is made plain with its batch, not walked


def dump_fields(items: Iterable[tuple[str, Any]], f: IO[str]) -> None:
    """Write `json.dumps({k: to_plain(v) for k, v in items})` to `f` piece by piece, the same text: lists,
    tuples, string-keyed dicts, dataclasses and classes with `plain_fields()` (their to_dict's items, Plain
    where made whole) are walked and written as they go, small items in batches, so the plain form of a
    large value (the driver's state at 1M replicas: GBs) never exists whole in memory."""
    for chunk in _mapping(items):
        f.write(chunk)


def _walked(cls: type) -> bool:
    """Whether dump_fields walks an instance of `cls` rather than making it plain whole (as to_plain would)."""
    if not cls.__module__.startswith(_PACKAGE) or issubclass(cls, Enum):
        return False
    if hasattr(cls, "to_dict") and hasattr(cls, "from_dict"):
        return hasattr(cls, "plain_fields")
    return dataclasses.is_dataclass(cls)


def _chunks(v: Any) -> Iterator[str]:
    if isinstance(v, Text):
        yield v.text
    elif isinstance(v, Plain):
        yield json.dumps(v.make())
    elif isinstance(v, list):
        form = _rows_of(v)
        yield from _seq(v) if form is None else _row_chunks(v, form)
    elif isinstance(v, tuple):
        yield f'{{"{TAG}": "tuple", "items": '
        yield from _seq(v)
        yield "}"
    elif isinstance(v, Fields):
        yield from _mapping(v.items())
    elif isinstance(v, dict) and all(isinstance(k, str) for k in v) and TAG not in v:
        yield from _mapping(v.items())
    elif isinstance(v, dict) and (mform := _map_rows_of(v)) is not None:
        keys, values = _map_columns(v, mform)
        yield json.dumps(_map_head(mform))[:-1] + ', "keys": ['
        for i, col in enumerate(keys):
            yield ", " if i else ""
            yield from _batched(col)
        yield '], "values": '
        yield from _batched(values)
        yield "}"
    elif isinstance(v, dict):
        yield f'{{"{TAG}": "map", "items": '
        yield from _seq([_Pair(k, x) for k, x in v.items()])
        yield "}"
    elif _walked(type(v)):
        yield f'{{"{TAG}": {json.dumps(_tag(type(v)))}'
        if hasattr(v, "plain_fields"):
            yield ', "data": '
            yield from _mapping(v.plain_fields())
        else:
            for fl in dataclasses.fields(v):
                if fl.init:
                    yield f", {json.dumps(fl.name)}: "
                    yield from _chunks(getattr(v, fl.name))
        yield "}"
    else:
        yield json.dumps(to_plain(v))


def _batched(values: list) -> Iterator[str]:
    """json.dumps(values), BATCH values at a time."""
    yield "["
    for lo in range(0, len(values), BATCH):
        yield (", " if lo else "") + json.dumps(values[lo:lo + BATCH])[1:-1]
    yield "]"


def _row_chunks(items: list, form: tuple) -> Iterator[str]:
    """to_plain's rows form of `items` as text, each column in batches of BATCH values."""
    yield json.dumps(_rows_head(form))[:-1] + ', "columns": ['
    for i, k in enumerate(_row_keys(form)):
        yield ", [" if i else "["
        for lo in range(0, len(items), BATCH):
            yield (", " if lo else "") + json.dumps(_column(items, k, form, lo, lo + BATCH))[1:-1]
        yield "]"
    yield "]}"


class _Pair:
    """A map's (key, value) item: plain form [to_plain(key), to_plain(value)]."""

    __slots__ = ("key", "value")

    def __init__(self, key: Any, value: Any) -> None:
        self.key, self.value = key, value


def _large(v: Any) -> bool:
    """Whether dump_fields walks `v` on its own rather than making it plain in a batch of list items: a Plain, a
    container of more than _SMALL members or holding a large one, a walked class with plain_fields or with a
    large field."""
    if isinstance(v, Plain | Fields | Text):
        return True
    if isinstance(v, _Pair):
        return _large(v.value)
    if isinstance(v, list | tuple | dict):
        return len(v) > _SMALL or any(_large(x) for x in (v.values() if isinstance(v, dict) else v))
    cls = type(v)
    if not _walked(cls):
        return False
    return hasattr(cls, "plain_fields") or any(_large(getattr(v, f.name)) for f in dataclasses.fields(v) if f.init)


def _small(x: Any) -> Any:
    """The plain form of a batched item (a map's pair as its [key, value] list)."""
    return [to_plain(x.key), to_plain(x.value)] if isinstance(x, _Pair) else to_plain(x)


def _seq(items: list | tuple) -> Iterator[str]:
    yield "["
    sep, batch = "", []
    for x in items:
        if _large(x):
            if batch:
                yield sep + json.dumps([_small(b) for b in batch])[1:-1]
                sep, batch = ", ", []
            yield sep
            if isinstance(x, _Pair):
                yield f"[{json.dumps(to_plain(x.key))}, "
                yield from _chunks(x.value)
                yield "]"
            else:
                yield from _chunks(x)
            sep = ", "
        else:
            batch.append(x)
            if len(batch) == BATCH:
                yield sep + json.dumps([_small(b) for b in batch])[1:-1]
                sep, batch = ", ", []
    if batch:
        yield sep + json.dumps([_small(b) for b in batch])[1:-1]
    yield "]"


def _mapping(items: Iterable[tuple[str, Any]]) -> Iterator[str]:
    yield "{"
    for i, (k, x) in enumerate(items):
        yield f"{', ' if i else ''}{json.dumps(k)}: "
        yield from _chunks(x)
    yield "}"


def from_plain(d: Any) -> Any:
    """The value `to_plain` was given."""
    if isinstance(d, list):
        return [from_plain(x) for x in d]
    if not isinstance(d, dict):
        return d
    tag = d.get(TAG)
    if tag is None:
        return {k: from_plain(x) for k, x in d.items()}
    if tag == "map":
        return {from_plain(k): from_plain(x) for k, x in d["items"]}
    if tag == "rows":
        return _from_rows(d)
    if tag == "map rows":
        return _from_map_rows(d)
    if tag == "tuple":
        return tuple(from_plain(x) for x in d["items"])
    if tag == "set":
        return {from_plain(x) for x in d["items"]}
    if tag == "frozenset":
        return frozenset(from_plain(x) for x in d["items"])
    if tag == "frame":
        return _frame_from_plain(d)
    if tag == "ndarray":
        return np.array(d["items"], dtype=d["dtype"])
    cls = _class(tag)
    if isinstance(cls, type) and issubclass(cls, Enum):
        return cls[d["name"]]
    if hasattr(cls, "from_dict"):
        return cls.from_dict(d["data"])
    return cls(**{k: from_plain(x) for k, x in d.items() if k != TAG})


def _frame_to_plain(df: pd.DataFrame) -> dict:
    """A frame column by column with each column's dtype (the index too when it is not 0..n-1)."""
    out = {TAG: "frame", "dtypes": {str(c): str(t) for c, t in df.dtypes.items()},
           "columns": {str(c): to_plain(df[c].tolist()) for c in df.columns}}
    if not df.index.equals(pd.RangeIndex(len(df))):
        out["index"] = to_plain(df.index.tolist())
    return out


def _frame_from_plain(d: dict) -> pd.DataFrame:
    cols = {c: pd.Series(from_plain(v), dtype=d["dtypes"][c]) for c, v in d["columns"].items()}
    df = pd.DataFrame(cols, columns=list(d["dtypes"]))
    for c, t in d["dtypes"].items():  # a column with no rows takes the dtype too
        if str(df[c].dtype) != t:
            df[c] = df[c].astype(t)
    if "index" in d:
        df.index = pd.Index(from_plain(d["index"]))
    return df
