"""Kafka's inter.broker.protocol.version values and the emulator's version profiles (ApiVersion.scala;
docs/versions.md). rules.py builds its per-profile flags on them; config.py re-exports them."""

from __future__ import annotations

# inter.broker.protocol.version -> profile (ApiVersion.scala; docs/versions.md).
# Kafka accepts "2.8", "2.8-IV1"...
PROFILES = ("0.8", "0.10", "0.11", "2.0", "2.1", "2.7", "2.8")
_ALIASES = {
    "0.8": "0.8", "0.8.2": "0.8", "0.9": "0.8", "0.9.0": "0.8",
    "0.10": "0.10", "0.10.0": "0.10", "0.10.1": "0.10", "0.10.2": "0.10",
    "0.11": "0.11", "0.11.0": "0.11", "1.0": "0.11", "1.1": "0.11",
    "2.0": "2.0",
    "2.1": "2.1", "2.2": "2.1", "2.3": "2.1", "2.4": "2.1", "2.5": "2.1", "2.6": "2.1",
    "2.7": "2.7",
    "2.8": "2.8",
}


def profile_of(ibp: str) -> str | None:
    """Map an inter.broker.protocol.version string ("2.8", "2.7-IV2", "0.10.2") to a profile."""
    base = str(ibp).split("-")[0]
    if base in _ALIASES:
        return _ALIASES[base]
    parts = base.split(".")
    return _ALIASES.get(".".join(parts[:2]))
