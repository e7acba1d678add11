"""explain / check / compile of a deployment through the real CLI."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from tests.helpers import cli

ROOT = Path(__file__).resolve().parents[2]
KIMI = "specs/disagg/kimi-k3-dspark-pd.yaml"
LLAMA_PREFILL = "specs/disagg/llama-eagle-prefill-tp2-pp2.yaml"
LLAMA_DECODE = "specs/disagg/llama-eagle-decode-tp4-dpattn2.yaml"
ENTRY_KEYS = ["decode_rank", "prefill_dp_rank", "prefill_tp_ranks", "prefill_cp_ranks",
              "prefill_pp_ranks", "layers", "head_offset", "head_count", "responses_expected",
              "consumers_per_source"]


def test_explain_json_instances_and_handoff():
    run = cli("explain", KIMI, "--json")
    assert run.returncode == 0, run.stderr
    data = json.loads(run.stdout)
    assert set(data["instances"]) == {"prefill", "decode"}
    for role in ("prefill", "decode"):
        alone = data["instances"][role]
        assert alone["name"] == f"kimi-k3-{role}" and "round" in alone and "groups" in alone
    entries = data["kv_handoff"]
    assert [e["decode_rank"] for e in entries] == list(range(8))
    assert all(list(e) == ENTRY_KEYS for e in entries)
    # MLA: one latent on every rank; TP 8 -> 8 pushes from the same TP rank on both stages
    assert entries[5] == {"decode_rank": 5, "prefill_dp_rank": 0, "prefill_tp_ranks": [5],
                          "prefill_cp_ranks": [0], "prefill_pp_ranks": [0, 1],
                          "layers": [[0, 47], [47, 93], [93, 98]], "head_offset": 0,
                          "head_count": 1, "responses_expected": 2, "consumers_per_source": 1}


def test_instance_object_is_the_single_spec_explain(tmp_path):
    """Each instance's object equals `explain SPEC --json` of that spec written alone (with its
    role, no peer: planned alone, as `specplan import` writes an instance)."""
    data = json.loads(cli("explain", LLAMA_PREFILL, "--json").stdout)
    alone = tmp_path / "decode.yaml"
    text = (ROOT / LLAMA_DECODE).read_text().replace(
        "disaggregation: {role: decode, peer: llama-eagle-prefill-tp2-pp2.yaml, connector: mooncake}\n",
        "disaggregation: {role: decode}\n")
    alone.write_text(text)
    single = json.loads(cli("explain", str(alone), "--json").stdout)
    mine = data["instances"]["decode"]
    mine["round"].pop("fingerprint"), single["round"].pop("fingerprint")  # the spec's text differs
    assert mine == single


def test_each_instance_plans_its_role_s_rounds_only(tmp_path):
    """Prefill: the prefill round (target, and the drafter's prefill-time draft extend);
    decode: the decode rounds. The same spec without a role plans both."""
    data = json.loads(cli("explain", LLAMA_PREFILL, "--json").stdout)
    rounds = {role: [(s["site"], s["round"]) for s in data["instances"][role]["round"]["sites"]]
              for role in ("prefill", "decode")}
    assert rounds == {"prefill": [("eagle_target", "prefill"), ("eagle_draft_extend", "prefill")],
                      "decode": [("eagle_draft_extend", "decode"), ("eagle_draft", "decode"),
                                 ("eagle_accept", "decode")]}
    plain = tmp_path / "plain.yaml"
    plain.write_text("\n".join(line for line in (ROOT / LLAMA_DECODE).read_text().splitlines()
                               if not line.startswith("disaggregation:")) + "\n")
    both = json.loads(cli("explain", str(plain), "--json").stdout)["round"]["sites"]
    assert [(s["site"], s["round"]) for s in both] == [("eagle_target", "prefill")] + rounds["decode"]
    classes = data["instances"]["decode"]["round"]["per_rank_class"]
    assert all(c["rounds"]["prefill"]["collectives"] == 0 for c in classes)


def test_explain_table_groups_the_handoff():
    out = cli("explain", LLAMA_DECODE, code=0).stdout
    assert "KV handoff (decode ranks pulling the same slices, grouped)" in out
    assert "│ [0,2]        │ 0          │ [0]      │ [0]      │ [0,1]    │ [0,8) [8,16) [16,17) │ 0..3" in out


def test_compile_writes_a_plan_per_instance_and_the_handoff(tmp_path):
    run = cli("compile", LLAMA_PREFILL, "-o", str(tmp_path / "out"))
    assert run.returncode == 0, run.stderr
    handoff = json.loads((tmp_path / "out" / "kv_handoff.json").read_text())
    assert len(handoff["kv_handoff"]) == 4 and handoff["connector"] == "mooncake"
    for role in ("prefill", "decode"):
        plan = json.loads((tmp_path / "out" / role / "plan.json").read_text())
        assert handoff["fingerprints"][role] == plan["fingerprint"]
        module = next((tmp_path / "out" / role).glob("runtime_*.py"))
        assert f"wrote {module} (runtime module)" in run.stdout


def test_an_instance_without_a_peer_is_planned_alone(tmp_path):
    case = ROOT / "tests/deploy/cases/error-pull-pp"
    run = cli("compile", str(case / "decode.yaml"), "-o", str(tmp_path / "out"))
    assert run.returncode == 0, run.stderr
    assert json.loads((tmp_path / "out" / "plan.json").read_text())["name"] == "d"


def test_deployment_explain_and_check_do_not_import_torch():
    code = (
        "import sys\n"
        "from specplan.cli import main\n"
        f"for args in (['explain', {KIMI!r}, '--json'], ['explain', {KIMI!r}], ['check', {KIMI!r}],\n"
        f"             ['check', {LLAMA_PREFILL!r}, {LLAMA_DECODE!r}, '--json']):\n"
        "    try:\n"
        "        main(args, standalone_mode=False)\n"
        "    except SystemExit as e:\n"
        "        assert e.code == 0, (args, e.code)\n"
        "assert 'torch' not in sys.modules, 'a deployment command imported torch'\n"
        "assert 'triton' not in sys.modules\n"
    )
    run = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True,
                         timeout=180)
    assert run.returncode == 0, run.stderr
