"""The device hot path on real gloo ranks (forced on a CPU): values, a desync named at the round's
check, and no host synchronisation inside a converge or a relay."""

from __future__ import annotations

import pytest
import torch

from specplan.runtime.guard import DeviceFlag, DeviceGuard, header_slot, words_header
from specplan.runtime.host_sync import HostSyncRecorder
from tests.helpers import compile_spec
from tests.ranks import launch
import specs_rt

WORLDS = [pytest.param(specs_rt.TP2_DSPARK, 2, id="tp2-dspark"),
          pytest.param(specs_rt.PP2_EAGLE3, 2, id="pp2-eagle3"),  # relays
          pytest.param(specs_rt.TP4_DPATTN_EAGLE, 4, id="tp4-dpattn-eagle"),
          pytest.param(specs_rt.TP4_PP2_DSPARK_RING, 8, id="tp4-pp2-dspark-ring",
                       marks=specs_rt.EIGHT_RANKS)]


@pytest.mark.parametrize("text, world", WORLDS)
def test_device_path_converges_and_relays_without_a_host_read(tmp_path, text, world):
    path = compile_spec(tmp_path, text)
    results = launch(world, "nosync", path, 3, module="device_workers")
    for r in results:
        assert r.returncode == 0, r.stdout + r.stderr
        assert r.result["checks"] > 0
        assert r.result["hot"] == [], r.result["hot"]  # no read inside any converge or relay
        assert [e[0] for e in r.result["check"]] == ["Tensor.tolist"]  # the round's one read


def test_device_path_names_a_desync_at_the_rounds_check(tmp_path):
    path = compile_spec(tmp_path, specs_rt.TP2_DSPARK)
    results = launch(2, "engine", path, 3, "skip:1:2:3", module="device_workers")
    err = results[1].error
    assert results[1].returncode == 3, results[1].stdout + results[1].stderr
    assert err.startswith("ERROR DesyncError: desync at site dspark_accept_greedy (boundary 4), round 2")
    assert "received from rank 0 [boundary 3 (dspark_plan_verify+dspark_plan), round 2" in err
    assert err.endswith("(compared on the device, read at check_round)")
    assert results[0].returncode == 3 and "CollectiveTimeout" in results[0].error


def test_device_path_runs_every_fused_site(tmp_path):
    path = compile_spec(tmp_path, specs_rt.PP2_EAGLE3)
    results = launch(2, "engine", path, 3, module="device_workers")
    for r in results:
        assert r.returncode == 0, r.stdout + r.stderr
        assert r.result["hot_path"] == "device" and r.result["checks"] > 0


def _guard(source=0):
    flag = DeviceFlag(torch.device("cpu"))
    return flag, DeviceGuard(7, 0x1234, source, flag, torch.device("cpu"))


def test_device_guard_keeps_the_first_mismatch_of_the_round_without_a_host_read():
    flag, guard = _guard(source=5)
    other = DeviceGuard(8, 0x1234, 5, flag, torch.device("cpu"))
    buf = torch.zeros(64, dtype=torch.uint8)
    slot = header_slot(buf, device_path=True)
    with HostSyncRecorder() as rec:
        guard.set(3, 11)
        guard.write(slot)
        guard.matches(slot)  # equal: nothing recorded
        other.set(3, 11)
        other.matches(slot)  # boundary 8 expected, 7 arrived: the first mismatch
        guard.set(4, 12)
        guard.matches(slot)  # a second mismatch (round 12): the first stays
    assert rec.events == []
    with HostSyncRecorder() as rec:
        hit = flag.read()
    assert [e[0] for e in rec.events] == ["Tensor.tolist"]
    assert hit[0] == 1 and hit[-1] == 5  # source rank
    assert words_header(hit[1:5]) == (8, 3, 11, 0x1234, 0)  # expected: boundary, live rows, round, fp
    assert words_header(hit[5:9]) == (7, 3, 11, 0x1234, 0)  # received
    assert flag.read() is None  # cleared once read


def test_recorder_sees_each_kind_of_host_read():
    t = torch.arange(4)
    with HostSyncRecorder() as rec:
        bool(t.eq(1).any())
        t.tolist()
        t.numpy()
        t.nonzero()
        torch.tensor([1, 2])
    assert [e[0] for e in rec.events] == ["aten._local_scalar_dense", "Tensor.tolist", "Tensor.numpy",
                                          "aten.nonzero", "aten.lift_fresh"]
    assert "tolist" not in torch.Tensor.__dict__  # the patches are gone
