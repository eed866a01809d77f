"""docs/tables.md explains every error name the emulator's producer can put in the summary's `errors`."""

from __future__ import annotations

import re
from pathlib import Path

from sparkkafka.protocol.errors import CODES

ROOT = Path(__file__).resolve().parent.parent
# where produce results get their error: the broker's produce path and purgatory, and the driver's routing
PRODUCE_SOURCES = ["sparkkafka/protocol/produce.py", "sparkkafka/driver/round_loop.py"]


def _produce_error_names() -> set[str]:
    names = set()
    for rel in PRODUCE_SOURCES:
        text = (ROOT / rel).read_text()
        names |= {m for m in re.findall(r"\b(?:errors|kerr)\.([A-Z_]+)\b", text)}
        names |= {m for m in re.findall(r'"([A-Z_]+)"', text)}
    return names & set(CODES)


def test_every_produce_error_name_is_explained_in_the_tables_doc():
    doc = (ROOT / "docs" / "tables.md").read_text()
    section = doc.split("### Produce errors", 1)[1].split("\n## ", 1)[0]
    explained = set(re.findall(r"^\| `([A-Z_]+)` \|", section, flags=re.M))
    names = _produce_error_names()
    assert {"NETWORK_EXCEPTION", "NOT_ENOUGH_REPLICAS", "NOT_LEADER_OR_FOLLOWER", "REQUEST_TIMED_OUT"} <= names
    assert names - explained == set()
