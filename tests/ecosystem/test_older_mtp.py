"""vLLM's MTP detection on lines written for older releases (issue 38 item 3): vLLM 0.7.3 to
0.10.2, given num_speculative_tokens and no draft model, took the target itself as its MTP draft
when its model_type was one they knew (engines/vllm/methods.py OLDER_MTP); the supported
releases need `method: mtp`. Any other target or release keeps the supported refusal."""

from __future__ import annotations

from pathlib import Path

import pytest
from tests.helpers import corpus_hf_home

from specplan.engines.vllm.methods import older_mtp

OLDER = Path(__file__).resolve().parent / "older"
hf_home = corpus_hf_home(OLDER)
REFUSED = "--speculative-config has neither method nor model"


@pytest.mark.parametrize("release,model_type,detected", [
    ("0.7.3", "deepseek_v3", True), ("0.7.3", "mimo", False), ("0.9.2", "mimo", True),
    ("0.10.2", "qwen3_next", True), ("0.8.5", "qwen3_next", False),
    ("0.6.6", "deepseek_v3", False), ("0.15.0", "deepseek_v3", False), (None, "deepseek_v3", False),
])
def test_older_mtp_only_where_that_release_detected_the_target(release, model_type, detected):
    found = older_mtp(release, {"model_type": model_type})
    assert (found is not None) == detected
    if found is not None:
        name, why = found
        assert name == "mtp"
        assert f"vLLM {release}'s SpeculativeConfig." in why and repr(model_type) in why


def test_older_mtp_reads_the_text_config_and_needs_the_target():
    assert older_mtp("0.7.3", {"model_type": "x", "text_config": {"model_type": "deepseek_v3"}})
    assert older_mtp("0.7.3", None) is None


def _line(tmp_path: Path, model: str) -> Path:
    path = tmp_path / "line.sh"
    path.write_text(f"vllm serve {model} --tensor-parallel-size 8 --num-speculative-tokens 1\n")
    return path


def test_a_deepseek_target_read_as_0_7_3_imports_as_mtp(cli, tmp_path, hf_home):
    spec = tmp_path / "spec.yaml"
    said = cli("import", "--engine", "vllm", "-f", str(_line(tmp_path, "deepseek-ai/DeepSeek-R1")),
               "-o", str(spec), env={"HF_HOME": hf_home})
    assert said.exit_code == 0, said.stderr
    assert "vLLM 0.7.3's SpeculativeConfig.maybe_create_spec_config took the target" in said.stderr
    exported = cli("export", str(spec))
    assert exported.exit_code == 0, exported.stderr
    assert """'{"method": "mtp", "num_speculative_tokens": 1}'""" in exported.stdout


def test_a_non_deepseek_target_read_as_0_7_3_stays_refused(cli, tmp_path, hf_home):
    said = cli("import", "--engine", "vllm", "-f", str(_line(tmp_path, "Qwen/Qwen3-4B")),
               env={"HF_HOME": hf_home})
    assert said.exit_code == 2, said.stderr
    assert REFUSED in said.stderr and "Traceback" not in said.stderr
    assert "maybe_create_spec_config" not in said.stderr
