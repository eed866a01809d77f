"""The run directory's format version: a run saved in another format is refused by number, not unpickled."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from sparkkafka import Cluster
from sparkkafka.errors import ScenarioError

SCENARIO = str(Path(__file__).resolve().parents[1] / "conf" / "scenarios" / "failures.yaml")


def test_reopening_a_run_of_another_format_names_the_version(spark, tmp_path):
    out = str(tmp_path / "run")
    c = Cluster.from_scenario(SCENARIO, spark=spark, out=out)
    c.run(until_ms=300)
    with open(os.path.join(out, "driver.json")) as f:
        assert json.load(f) == {"format_version": Cluster.RUN_FORMAT_VERSION, "round": 4}
    Cluster.for_path(spark, out).run(until_ms=500)  # the same format continues

    with open(os.path.join(out, "driver.json"), "w") as f:
        json.dump({"format_version": 1, "round": 6}, f)
    old = Cluster.for_path(spark, out)
    with pytest.raises(ScenarioError, match=r"driver.json format_version: .*run format 1.*continues format 3") as e:
        old.run()
    assert e.value.value == 1
    assert any("Topic: a" in line for line in old.describe())  # its tables can still be read

    os.remove(os.path.join(out, "driver.json"))  # saved before the format had a number: format 1
    with pytest.raises(ScenarioError, match="run format 1"):
        Cluster.for_path(spark, out).step()
