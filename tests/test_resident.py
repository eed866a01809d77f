"""The resident engine (engine/resident.py): many rounds per Spark job, the same tables as one job per round."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from test_determinism import assert_same, tables

from sparkkafka import Cluster
from sparkkafka.scenario import parse_scenario

ROOT = Path(__file__).resolve().parents[1]


def _scenario(name: str, engine: str, **emulator):
    raw = yaml.safe_load((ROOT / "conf" / "scenarios" / f"{name}.yaml").read_text())
    raw.setdefault("cluster", {}).setdefault("emulator", {}).update({"engine": engine, **emulator})
    return parse_scenario(raw, name=name)


@pytest.mark.parametrize(("name", "emulator"), [
    ("failures", {}),
    ("quickstart", {}),
    # one task hosting every broker, and windows cut short by resident.rounds as well as by the controller
    pytest.param("quickstart", {"spark.partitions": 1, "resident.rounds": 7}, marks=pytest.mark.slow),
])
def test_resident_engine_gives_the_round_engines_tables(spark, tmp_path, name, emulator):
    runs = {}
    for engine in ("rounds", "resident"):
        out = str(tmp_path / engine)
        c = Cluster.from_scenario(_scenario(name, engine, **(emulator if engine == "resident" else {})),
                                  spark=spark, out=out)
        c.run()
        runs[engine] = (tables(out), c.summary())
    assert_same(runs["resident"][0], runs["rounds"][0])
    assert runs["resident"][1] == runs["rounds"][1]


def test_unknown_engine_is_a_scenario_error():
    from sparkkafka.errors import ScenarioError

    with pytest.raises(ScenarioError, match=r"cluster\.emulator\.engine.*warp"):
        _scenario("quickstart", "warp")
