"""How YAML values are read: YAML 1.2 core scalars, locations, refused constructs."""

from __future__ import annotations

import os
import textwrap
from pathlib import Path

import pytest

from specplan.errors import SpecError
from specplan.schema import load_spec
from specplan.schema.yaml_source import read_source

BASE = """\
name: values
topology:
  tp: 2
model: {num_layers: 32, hidden_size: 64, vocab_size: 100}
"""


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "spec.yaml"
    path.write_text(textwrap.dedent(text))
    return path


def test_policy_off_is_the_string_off(tmp_path):
    spec = load_spec(write(tmp_path, BASE + "sync: {policy: off}\n"))
    assert spec.sync.policy == "off"


@pytest.mark.parametrize("text, value", [
    ("on", "on"), ("yes", "yes"), ("no", "no"), ("off", "off"), ("True", "True"),
    ("true", True), ("false", False), ("010", 10), ("0x10", 16), ("0o10", 8), ("-3", -3),
    ("1.5", 1.5), ("1e3", 1000.0), ("~", None), ("null", None), ("'5'", "5"), ("!!str 5", "5"),
    ("!!float 2", 2.0), ("2019-01-01", "2019-01-01"), ("0b11", "0b11"),
])
def test_yaml_12_core_scalars(tmp_path, text, value):
    data = read_source(write(tmp_path, f"x: {text}\n")).data
    assert data == {"x": value} and type(data["x"]) is type(value)


def test_special_floats(tmp_path):
    data = read_source(write(tmp_path, "a: .inf\nb: -.Inf\nc: .nan\n")).data
    assert data["a"] == float("inf") and data["b"] == float("-inf") and data["c"] != data["c"]


def test_values_remember_their_line(tmp_path):
    spec = load_spec(write(tmp_path, BASE))
    assert spec.line_of("topology", "tp") == (str(tmp_path / "spec.yaml"), 3)
    assert spec.line_of("model", "num_layers")[1] == 4


def test_anchors_and_aliases_are_plain_values(tmp_path):
    spec = load_spec(write(tmp_path, BASE + "speculative: {method: eagle3, num_steps: &n 3, topk: *n}\n"))
    assert spec.speculative.num_steps == spec.speculative.topk == 3


def test_alias_expansion_is_capped(tmp_path):
    lines = ["a0: &a0 [1, 2, 3, 4, 5, 6, 7, 8, 9, 10]"]
    lines += [f"a{i}: &a{i} [{', '.join([f'*a{i - 1}'] * 10)}]" for i in range(1, 7)]
    with pytest.raises(SpecError, match="expands to more than 100000 values"):
        read_source(write(tmp_path, "\n".join(lines) + "\n"))


def test_python_tags_are_refused_without_being_built(tmp_path, monkeypatch):
    calls = []
    monkeypatch.setattr(os, "system", lambda cmd: calls.append(cmd))
    text = BASE + "runtime: {max_batch: !!python/object/apply:os.system ['echo hi']}\n"
    with pytest.raises(SpecError) as info:
        load_spec(write(tmp_path, text))
    assert calls == []
    assert [d.path for d in info.value.diagnostics] == ["runtime.max_batch"]


def test_every_error_of_a_file_at_once(tmp_path):
    text = "name: x\ntopology: {tp: 0, pp: true, dp: 1.0, cp: '2'}\nmodel: {num_layers: 2}\n"
    with pytest.raises(SpecError) as info:
        load_spec(write(tmp_path, text))
    paths = [d.path for d in info.value.diagnostics]
    assert paths == ["topology.tp", "topology.pp", "topology.dp", "topology.cp", "model", "model"]
