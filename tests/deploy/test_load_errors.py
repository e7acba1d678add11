"""Bad deployments through the real CLI (click's runner, in process): exit 2, `file:line:col: path: message` naming the file
the mistake is in (either instance, or the deployment file), never a traceback."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.helpers import cli


BODY = "topology: {tp: 2}\nmodel: {num_layers: 12, hidden_size: 64, vocab_size: 128}\n"

FILES = {
    "missing.yaml": "name: a\ndisaggregation: {role: prefill, peer: nope.yaml}\n" + BODY,
    "dir.yaml": "name: a\ndisaggregation: {role: prefill, peer: adir}\n" + BODY,
    "self.yaml": "name: a\ndisaggregation: {role: prefill, peer: self.yaml}\n" + BODY,
    "p1.yaml": "name: a\ndisaggregation: {role: prefill, peer: p2.yaml}\n" + BODY,
    "p2.yaml": "name: b\ndisaggregation: {role: prefill}\n" + BODY,
    "d1.yaml": "name: a\ndisaggregation: {role: decode}\n" + BODY,
    "d2.yaml": "name: b\ndisaggregation: {role: decode}\n" + BODY,
    "s.yaml": "name: a\nengine: sglang\ndisaggregation: {role: prefill, peer: v.yaml}\n" + BODY,
    "v.yaml": "name: b\nengine: vllm\ndisaggregation: {role: decode}\n" + BODY,
    "s2.yaml": "name: a\nengine: sglang\ndisaggregation: {role: prefill, peer: v.yaml, "
               "connector: nixl_push}\n" + BODY,
    "c1.yaml": "name: a\ndisaggregation: {role: prefill, peer: c2.yaml, connector: mooncake}\n" + BODY,
    "c2.yaml": "name: b\ndisaggregation: {role: decode, connector: nixl}\n" + BODY,
    "dep-contra.yaml": "name: pd\nmodel: {num_layers: 12, hidden_size: 64, vocab_size: 128}\n"
                       "instances:\n  prefill: {name: p, topology: {tp: 2}}\n  decode: inst-contra.yaml\n",
    "inst-contra.yaml": "name: d\ntopology: {tp: 2}\nmodel:\n  hidden_size: 96\n",
    "dep-both.yaml": "name: pd\nmodel: {num_layers: 12, hidden_size: 64, vocab_size: 128}\n"
                     "instances:\n  prefill: {name: p, topology: {tp: 0}}\n  decode: inst-bad.yaml\n",
    "inst-bad.yaml": "name: d\ntopology: {tp: 2, tpp: 1}\n",
    "dep-keys.yaml": "name: pd\nmodle: {num_layers: 12}\ninstances:\n  prefill: gone.yaml\n"
                     "  decode: adir\n  extra: x.yaml\n",
    "dep-role.yaml": "model: {num_layers: 12, hidden_size: 64, vocab_size: 128}\ninstances:\n"
                     "  prefill: {name: p, topology: {tp: 2}, disaggregation: {role: decode}}\n"
                     "  decode: {name: d, topology: {tp: 2}}\n",
}

CASES = [
    (["check", "missing.yaml"], ["missing.yaml:2:39: disaggregation.peer: 'nope.yaml': no such file; "
                                 "expected an instance's spec"]),
    (["explain", "dir.yaml"], ["dir.yaml:2:39: disaggregation.peer: 'adir' is a directory; expected "
                               "an instance's spec file"]),
    (["compile", "self.yaml"], ["self.yaml:2:39: disaggregation.peer: 'self.yaml' points back to "
                                "this file; expected the other instance's spec"]),
    (["check", "p1.yaml"], ["p1.yaml:2:24: disaggregation.role: both instances are prefill: this "
                            "spec and p2.yaml:2:24; expected one prefill and one decode",
                            "p2.yaml:2:24: disaggregation.role: both instances are prefill: this "
                            "spec and p1.yaml:2:24"]),
    (["check", "d1.yaml", "d2.yaml"], ["d1.yaml:2:24: disaggregation.role: both instances are "
                                       "decode: this spec and d2.yaml:2:24; expected one prefill "
                                       "and one decode",
                                       "d2.yaml:2:24: disaggregation.role: both instances are "
                                       "decode: this spec and d1.yaml:2:24"]),
    (["check", "p2.yaml", "./p2.yaml"], ["./p2.yaml: is p2.yaml again; expected the other "
                                         "instance's spec"]),
    (["check", "s.yaml"], ["v.yaml:2:9: engine: the prefill instance runs sglang and the decode "
                           "instance vllm, and no connector is set: set disaggregation.connector "
                           "to one that exists for both: mooncake, nixl"]),
    (["check", "s2.yaml"], ["s2.yaml:3:58: disaggregation.connector: connector 'nixl_push' does not "
                            "exist for sglang (sglang has mooncake, nixl, ascend; vllm has mooncake, "
                            "nixl, nixl_push); connectors for both: mooncake, nixl"]),
    (["check", "c1.yaml"], ["c1.yaml:2:59: disaggregation.connector: the instances name different "
                            "connectors: mooncake (c1.yaml:2:59), nixl (c2.yaml:2:43); expected one"]),
    (["explain", "dep-contra.yaml"], ["inst-contra.yaml:4:16: model.hidden_size: integer 96 "
                                      "contradicts the deployment's shared model.hidden_size: "
                                      "integer 64 (dep-contra.yaml:2:38); an instance may repeat a "
                                      "shared key only with the same value"]),
    (["check", "dep-both.yaml"], ["inst-bad.yaml:2:19: topology.tpp: unknown key 'tpp' (did you "
                                  "mean 'tp'?)",
                                  "dep-both.yaml:4:37: topology.tp: expected a positive integer, "
                                  "found integer 0"]),
    (["check", "dep-keys.yaml"], ["dep-keys.yaml:2:1: modle: unknown deployment key 'modle' (did "
                                  "you mean 'model'?)",
                                  "dep-keys.yaml:4:12: instances.prefill: 'gone.yaml': no such "
                                  "file; expected an instance's spec",
                                  "dep-keys.yaml:5:11: instances.decode: 'adir' is a directory; "
                                  "expected an instance's spec file",
                                  "dep-keys.yaml:6:3: instances.extra: unknown instance 'extra'; "
                                  "expected prefill and decode"]),
    (["check", "dep-role.yaml"], ["dep-role.yaml:3:64: disaggregation.role: role 'decode', but the "
                                  "deployment dep-role.yaml lists this spec as its prefill instance"]),
]


@pytest.fixture(scope="module")
def workdir(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("deploy-bad")
    (root / "adir").mkdir()
    for name, text in FILES.items():
        (root / name).write_text(text)
    return root


@pytest.mark.parametrize("args,expected", CASES, ids=[" ".join(a) for a, _ in CASES])
def test_bad_deployment_exits_2(workdir, args, expected, monkeypatch):
    monkeypatch.chdir(workdir)
    run = cli(*args)  # the real CLI, in process: an exception is a failure
    assert run.exception is None or isinstance(run.exception, SystemExit), run.exception
    assert run.exit_code == 2, run.stdout + run.stderr
    assert run.stderr.splitlines() == expected
    assert not (workdir / "build").exists()


@pytest.mark.parametrize("command", ["check", "explain", "export"])
def test_disaggregation_null_is_a_plain_spec(tmp_path, command):
    """`disaggregation: null` is the key left out, as the schema reads it (None): a plain spec,
    planned alone. check and explain raised AttributeError 'NoneType' has no 'peer' (issue 37)."""
    written = tmp_path / "a.yaml"
    written.write_text("name: a\nengine: sglang\ndisaggregation: null\n" + BODY)
    absent = tmp_path / "b.yaml"
    absent.write_text("name: a\nengine: sglang\n" + BODY)
    got, want = cli(command, str(written)), cli(command, str(absent))
    assert got.exception is None or isinstance(got.exception, SystemExit), got.exception
    assert got.exit_code == want.exit_code == 0, got.output
    assert got.stdout.replace(str(written), "X") == want.stdout.replace(str(absent), "X")
