"""Plain data: the JSON form of the driver's values in a run directory (run_dir.py), with no pickle.

`to_plain(value)` gives a JSON-native value and `from_plain(data)` the value back, equal and of the
same types: JSON's own values stay as they are; tuples, sets, frozensets, maps whose keys are not
strings, numpy arrays and scalars, pandas frames, enums and dataclasses become tagged objects
``{"@": tag, ...}``. A class with ``to_dict``/``from_dict`` is stored through them. Only classes of
sparkkafka itself are rebuilt from a tag (a file can name no other code to run); dict order is kept.
"""

from __future__ import annotations

import dataclasses
import importlib
from enum import Enum
from typing import Any

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
        return [to_plain(x) for x in v]
    if isinstance(v, dict):
        if all(isinstance(k, str) for k in v) and TAG not in v:
            return {k: to_plain(x) for k, x in v.items()}
        return {TAG: "map", "items": [[to_plain(k), to_plain(x)] for k, x in v.items()]}
    if isinstance(v, tuple):
        return {TAG: "tuple", "items": [to_plain(x) for x in v]}
    if isinstance(v, set | frozenset):
        return {TAG: type(v).__name__, "items": [to_plain(x) for x in _ordered(v)]}
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
