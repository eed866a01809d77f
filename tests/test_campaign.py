"""Fault campaigns (campaign.py, scenario/faults.py): seeded schedules, bounded enumeration, the result
rows, and a failing schedule replayed through the normal engine with the same numbers."""

from __future__ import annotations

import copy
import json
from pathlib import Path

import pandas as pd
import pytest
import yaml

from sparkkafka import Cluster
from sparkkafka import campaign as C
from sparkkafka.errors import ScenarioError
from sparkkafka.scenario import faults, parse_scenario
from sparkkafka.scenario.checker import KINDS

ROOT = Path(__file__).resolve().parents[1]


def base(name: str, **config) -> dict:
    raw = yaml.safe_load((ROOT / "conf" / "campaigns" / f"{name}.yaml").read_text())
    raw["cluster"]["config"].update(config)
    return raw


def _restarted_after_crash(sc: dict) -> bool:
    down: dict[int, int] = {}
    for e in sc["timeline"]:
        if "crash" in e:
            b = e["crash"]["broker"] if isinstance(e["crash"], dict) else e["crash"]
            down.setdefault(b, e["at"])
        elif "restart" in e and e["restart"] in down and e["at"] >= down[e["restart"]]:
            down.pop(e["restart"])
    return not down


# ------------------------------------------------------------------------------------------------ drawing
def test_schedules_are_seeded_valid_and_recover():
    b = base("safe")
    assert b["cluster"]["log_dirs"] == ["d0", "d1"]  # fail_log_dir is drawn only with a dir to spare
    plan = faults.default_plan(b, max_down_ms=1500, settle_ms=3000)
    assert plan.window_ms == (0, 1500)  # while the workload produces
    drawn = faults.draw_schedules(b, plan, seed=7, n=60)
    assert drawn == faults.draw_schedules(b, plan, seed=7, n=60)  # deterministic
    assert faults.draw_schedules(b, plan, seed=7, n=5) == drawn[:5]  # schedule i does not depend on N
    assert faults.draw_schedules(b, plan, seed=7, n=5, first=55) == drawn[55:]  # nor on where a part starts
    assert drawn != faults.draw_schedules(b, plan, seed=8, n=60)
    seen = set()
    for sc in drawn:
        s = parse_scenario(copy.deepcopy(sc), name=sc["name"])  # every schedule is a valid scenario
        added = [e for e in s.timeline if e.type != "produce"]
        seen |= {("power_loss" if e.type == "crash" and e.args["power_loss"] else e.type) for e in added}
        starts = [e.time_ms(100) for e in added if e.type not in ("restart", "heal")]
        assert all(0 <= t < 1500 for t in starts)
        assert _restarted_after_crash(sc)
        recover = max(e.time_ms(100) for e in s.timeline)
        assert s.end_ms == recover + 3000  # settles after every broker is back
    assert seen >= {"crash", "power_loss", "pause", "isolate", "controller_failover", "fail_log_dir"}
    assert len({sc["name"] for sc in drawn}) == 60


def _down_at_once(sc: dict) -> int:
    """The most brokers down at one time in a schedule's timeline (restarts at a time apply with it)."""
    down: set[int] = set()
    most = 0
    for e in sorted(sc["timeline"], key=lambda e: e.get("at", 0)):
        if "crash" in e:
            down.add(e["crash"]["broker"] if isinstance(e["crash"], dict) else e["crash"])
        elif "restart" in e:
            down.discard(e["restart"])
        most = max(most, len(down))
    return most


def test_max_crashed_leaves_out_crashes_beyond_the_tolerance(monkeypatch):
    # the draws as drawn: keep the steps that would not take effect, so both sides can be compared
    monkeypatch.setattr(faults, "_taking_effect", lambda base, added, round_ms: added)
    b = base("safe")
    kinds = ("crash", "power_loss")
    free = faults.draw_schedules(b, faults.default_plan(b, kinds=kinds, max_faults=4), seed=2, n=40)
    capped = faults.draw_schedules(b, faults.default_plan(b, kinds=kinds, max_faults=4, max_crashed=1), seed=2, n=40)
    assert max(_down_at_once(sc) for sc in free) >= 2
    assert max(_down_at_once(sc) for sc in capped) == 1
    # the same draws, less the crashes left out
    assert all(all(e in f["timeline"] for e in c["timeline"] if "run" not in e and e.get("at", 0) < 1500)
               for f, c in zip(free, capped, strict=True))


def test_one_log_dir_draws_no_log_dir_failure_and_kinds_can_be_chosen():
    b = base("safe")
    b["cluster"]["log_dirs"] = ["d0"]
    only = faults.default_plan(b, kinds=("fail_log_dir", "pause"))
    for sc in faults.draw_schedules(b, only, seed=1, n=20):
        assert not any("fail_log_dir" in e for e in sc["timeline"])
        assert any("pause" in e for e in sc["timeline"])


@pytest.mark.parametrize(("kw", "field"), [({"kinds": ("meteor",)}, "kinds"), ({"window_ms": (500, 500)}, "window"),
                                           ({"max_faults": 0}, "max_faults")])
def test_bad_plans_name_the_field(kw, field):
    with pytest.raises(ScenarioError) as e:
        faults.Plan(**{"window_ms": (0, 1000), **kw})
    assert e.value.field == field


# ------------------------------------------------------------------------------------------------ enumeration
def test_enumeration_is_every_effective_sequence_up_to_the_depth():
    b = base("explore")
    steps = faults.alphabet([1, 2])
    got = list(faults.enumerate_schedules(b, steps, 2, [3000, 3100], 1000))
    # depth 1: crash or power-lose either broker (a restart of a running one changes nothing);
    # depth 2: those 4, then a crash/power loss of the other broker (2) or the restart of the same (1)
    assert len(got) == 4 + 4 * 3
    words = [w for w, _ in got]
    assert len(set(words)) == len(words) and "power1-restart1" in words and "crash1-crash1" not in words
    w, sc = got[words.index("power2-crash1")]
    assert [e for e in sc["timeline"] if "at" in e][:2] == [
        {"at": 3000, "crash": {"broker": 2, "power_loss": True}}, {"at": 3100, "crash": 1}]
    for _, sc in got:
        parse_scenario(copy.deepcopy(sc), name=sc["name"])
        assert _restarted_after_crash(sc)
    with pytest.raises(ScenarioError, match="depth"):
        list(faults.enumerate_schedules(b, steps, 3, [3000, 3100], 1000))


# ------------------------------------------------------------------------------------------------ result rows
def test_unavailable_ms_counts_offline_or_under_min_isr_spans():
    m = pd.DataFrame({"round": [0, 1, 2, 5, 6], "time_ms": [0, 100, 200, 500, 600],
                      "offline": [0, 1, 0, 0, 0], "under_min_isr": [0, 0, 1, 0, 1]})
    # round 1 offline (100 ms); round 2 under min ISR until round 5 (an idle jump's gap: 300 ms); round 6
    # until the end at 700 ms (101 ms: the end round itself counts)
    assert C.unavailable_ms(m, 700) == 100 + 300 + 101
    assert C.unavailable_ms(m.iloc[0:0], 700) == 0


def test_a_schedule_that_cannot_run_is_a_row_with_its_error():
    sc = base("safe")
    sc["timeline"].append({"at": 100, "crash": 9})
    row = C.run_schedule("bad", sc)
    assert row["error"].startswith("ScenarioError") and "9" in row["error"]
    assert C.failing(pd.DataFrame([row])).tolist() == [True]


KIP101 = [{"crash": {"broker": 2, "power_loss": True}}, {"crash": {"broker": 1, "power_loss": True}}, {"restart": 2}]


@pytest.mark.slow
@pytest.mark.parametrize(("ibp", "divergent"), [("0.10", 1), ("2.8", 0)])
def test_kip101_power_loss_sequence_diverges_only_before_leader_epochs(ibp, divergent):
    """The exploration's KIP-101 scenario 2 sequence, in process: both lose power before m2 is written
    back on B, B comes back first and takes m3; under 0.10 A keeps m2 where B has m3."""
    b = base("explore", **{"inter.broker.protocol.version": ibp})
    sc = faults.with_faults(b, [{"at": t, **s} for t, s in zip([3000, 3100, 3500], KIP101, strict=True)], 2000, "k")
    row = C.run_schedule("k", sc)
    assert row["error"] is None
    assert (row["divergent"], row["lost"]) == (divergent, 1)  # m2 was lost by both replicas either way


@pytest.mark.slow
def test_safe_configuration_loses_nothing(tmp_path):
    """acks=all, min.insync.replicas=2, RF 3, unclean election off, IBP 2.8: the same run_schedule as a
    Spark task runs, here in process (a 1,000-schedule run is in docs/campaigns.md)."""
    b = base("safe")
    plan = faults.default_plan(b, kinds=("crash", "pause", "isolate", "controller_failover"), settle_ms=3000)
    s = C.campaign(None, b, str(tmp_path / "safe"), n=2, seed=3, plan=plan)
    assert s["schedules"] == 2 and s["errors"] == 0
    assert s["violations"]["lost"] == s["violations"]["divergent"] == 0 and s["failing"] == 0
    assert not (tmp_path / "safe" / "failing").exists()


# ------------------------------------------------------------------------------------------------ on Spark
@pytest.mark.slow
def test_campaign_on_spark_finds_a_loss_under_0_10_and_its_file_replays_it(spark, tmp_path):
    b = base("explore", **{"inter.broker.protocol.version": "0.10"})
    plan = faults.Plan(window_ms=(3000, 3200), kinds=("power_loss",), max_down_ms=2500, settle_ms=2000)
    out = tmp_path / "campaign"
    s = C.campaign(spark, b, str(out), n=2, seed=SEED, plan=plan)
    from deltalake import DeltaTable

    rows = DeltaTable(str(out / "tables" / "campaign")).to_pandas().sort_values("schedule")
    assert len(rows) == 2 and rows["error"].isna().all()
    assert s["violations"]["lost"] == int(rows["lost"].sum()) >= 1
    bad = rows[C.failing(rows)]
    assert sorted(bad["schedule"]) == s["failing_schedules"]
    r = bad[bad["lost"] > 0].iloc[0]
    path = out / "failing" / f"{r['schedule']}.yaml"
    c = Cluster.from_scenario(str(path), spark=spark, out=str(tmp_path / "replay")).run()
    assert c.scenario.emulator["engine"] == "resident"  # the default Spark engine, not the campaign's local one
    got = c.summary()
    assert {k: got["violations"][k] for k in KINDS} == {k: int(r[k]) for k in KINDS}
    assert json.loads(r["faults"]) == [e for e in yaml.safe_load(path.read_text())["timeline"]
                                       if "produce" not in e]


SEED = 40  # schedule 0: both lose power at 3.0 and 3.1 s, 2 restarts first, 1 only after m3 (KIP-101 scenario 2)


@pytest.mark.parametrize(("argv", "message"), [
    (["campaign", "{safe}", "--set", "min.insync.replicas"], "--set"),
    (["campaign", "{safe}", "--set", "min.insync.replicas=0"], "min.insync.replicas"),
    (["campaign", "{safe}", "--kinds", "crash,meteor"], "kinds"),
    (["campaign", "{safe}", "--window", "900:100"], "window"),
    (["campaign", "nowhere.yaml"], "nowhere.yaml"),
    (["explore", "{explore}", "--versions", "0.10,9.9"], "inter.broker.protocol.version"),
    (["explore", "{explore}", "--depth", "4", "--slots", "3000,3100"], "depth"),
])
def test_cli_refuses_bad_input_before_running_anything(tmp_path, capsys, argv, message):
    from sparkkafka.cli import main

    paths = {k: str(ROOT / "conf" / "campaigns" / f"{k}.yaml") for k in ("safe", "explore")}
    argv = [a.format(**paths) for a in argv] + ["--in-process", "--out", str(tmp_path / "out")]
    assert main(argv) == 2
    assert message in capsys.readouterr().err
    assert not (tmp_path / "out").exists()


def test_a_broker_crashed_at_time_0_does_not_start_with_the_others():
    """Found by a campaign (safe-s1-00144, its faults below): the brokers' first START reached broker 1
    although the timeline crashed it at 0 ms; restarted at 100 ms it started a second time (two
    broker rows: ValueError, duplicate labels, a few rounds later)."""
    found = [{"at": 0, "crash": 1}, {"at": 100, "restart": 1}, {"at": 200, "isolate": {"brokers": [3], "from": [1, 2]}},
             {"at": 600, "crash": {"broker": 3, "power_loss": True}}, {"at": 1400, "restart": 3},
             {"at": 1500, "heal": {}}]
    row = C.run_schedule("s1-00144", faults.with_faults(base("safe"), found, 1000, "s1-00144"))
    assert row["error"] is None and row["lost"] == row["divergent"] == 0 and row["acked"] > 0


def test_a_broker_paused_while_waiting_to_register_registers_once():
    """Found by the 1,000-schedule campaign (safe-s1-00688, its faults below): broker 3 lost power at 0.1 s
    and restarted at 1.0 s inside its old ZooKeeper session (expiring at 1.1 s), so it waited to register;
    a 100 ms pause at 1.1 s ended at 1.2 s, and both the resumed broker and the waiting registration
    created /brokers/ids/3 (NodeExistsError). The broker registers once; the schedule runs to its end."""
    found = [{"at": 100, "crash": {"broker": 3, "power_loss": True}}, {"at": 1000, "restart": 3},
             {"at": 1100, "pause": {"broker": 3, "duration_ms": 100}},
             {"at": 1200, "isolate": {"brokers": [1], "from": "controller"}}, {"at": 1600, "heal": {}}]
    sc = faults.with_faults(base("safe", **{"log.flush.interval.messages": 1}), found, 3000, "s1-00688")
    row = C.run_schedule("s1-00688", sc)
    assert row["error"] is None and row["lost"] == row["divergent"] == 0 and row["acked"] > 0


def test_cli_set_keeps_a_version_as_typed(monkeypatch):
    """`--set inter.broker.protocol.version=0.10` (docs/campaigns.md) is the version 0.10, not the number 0.1
    YAML makes of it; other values are YAML (numbers, booleans)."""
    import argparse

    from sparkkafka.cli import _campaign_base

    args = argparse.Namespace(scenario=str(ROOT / "conf" / "campaigns" / "safe.yaml"), set=[
        "inter.broker.protocol.version=0.10", "unclean.leader.election.enable=true", "log.flush.interval.messages=1"])
    cfg = _campaign_base(args)["cluster"]["config"]
    assert (cfg["inter.broker.protocol.version"], cfg["unclean.leader.election.enable"],
            cfg["log.flush.interval.messages"]) == ("0.10", True, 1)
