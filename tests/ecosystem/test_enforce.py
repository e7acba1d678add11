"""`specplan enforce`: a `behaviour: engine` spec (or a launch line) to the deployment specplan
plans, its plan.json and the user's line with SPECPLAN_PLAN in front."""

from __future__ import annotations

import json

from specplan.schema import load_spec

EAGLE_TP8 = "specs/engine/llama-3.1-8b-eagle-tp8-sglang-engine.yaml"
LINE = ["python", "-m", "sglang.launch_server", "--model-path", "/m", "--tp", "2",
        "--speculative-algorithm", "EAGLE", "--speculative-num-steps", "3",
        "--speculative-eagle-topk", "1", "--speculative-num-draft-tokens", "4",
        "--speculative-draft-model-path", "/d"]


def test_an_engine_spec_is_enforced_and_its_plan_checks_clean(cli, tmp_path):
    before = cli("check", EAGLE_TP8, "--json")
    warned = {f["site"] for f in json.loads(before.stdout)["findings"] if f["severity"] == "WARN"}
    assert warned == {"eagle_target", "eagle_draft_extend", "eagle_draft", "eagle_accept"}
    out = tmp_path / "enforced"
    done = cli("enforce", EAGLE_TP8, "-o", str(out))
    assert done.exit_code == 0, done.stdout + done.stderr
    lines = done.stdout.splitlines()
    assert lines[0] == f"wrote {out}/spec.yaml (behaviour specplan, policy safe)"
    assert lines[1].startswith(f"wrote {out}/plan.json (fingerprint ") and "4 converge boundaries" in lines[1]
    assert lines[2:7] == ["the plan converges what sglang did not:",
                          "  eagle_target (next_token_ids) over replica",
                          "  eagle_draft_extend (topk_index, topk_p) over replica",
                          "  eagle_draft (draft_tokens, parent_list, top_scores_index) over replica",
                          "  eagle_accept (predict, accept_index, num_correct_drafts) over replica"]
    assert lines[-1] == f'SPECPLAN_PLAN={out}/plan.json python -m sglang.launch_server "${{args[@]}}"'
    spec = load_spec(out / "spec.yaml")
    assert (spec.behaviour, spec.sync.policy) == ("specplan", "safe")
    assert spec.topology == load_spec(EAGLE_TP8).topology  # the same deployment
    checked = cli("check", str(out / "plan.json"))
    assert checked.exit_code == 0 and "no findings" in checked.stdout


def test_a_launch_line_gets_specplan_plan_in_front_of_it_unchanged(cli, tmp_path):
    config = tmp_path / "config.json"
    config.write_text(json.dumps({"num_hidden_layers": 8, "hidden_size": 512, "vocab_size": 32000}))
    out = tmp_path / "out"
    done = cli("enforce", "--engine", "sglang", "--model-config", str(config), "-o", str(out), "--", *LINE)
    assert done.exit_code == 0, done.stdout + done.stderr
    assert done.stdout.splitlines()[-1] == f"SPECPLAN_PLAN={out}/plan.json " + " ".join(LINE)
    assert "  eagle_accept (predict, accept_index, num_correct_drafts) over replica" in done.stdout
    assert cli("check", str(out / "plan.json")).exit_code == 0
    exported = cli("export", str(out / "spec.yaml")).stdout.splitlines()[-1]
    assert exported == "SPECPLAN_PLAN=build/m/plan.json " + " ".join(LINE)


def test_a_memory_gate_agreed_by_no_one_is_an_error_the_enforced_plan_fixes(cli, tmp_path):
    # SGLang 0.5.23 DSpark, MoE draft, dp == tp: SpecTpSync on the one-rank attention-TP group
    # drops dspark-mem, so each rank decides the draft's TP-wide graph capture alone (issue 34).
    spec = tmp_path / "v4.yaml"
    spec.write_text("name: v4\nengine: sglang\nbehaviour: engine\n"
                    "topology: {tp: 8, dp: 8, dp_attention: true, dp_lm_head: true, device: cuda}\n"
                    "model: {num_layers: 8, hidden_size: 64, vocab_size: 512, moe: {num_experts: 8, top_k: 2}}\n"
                    "speculative: {method: dspark, num_steps: 3, sampling: greedy, aux_layers: [1, 3, 5]}\n")
    assert cli("check", str(spec)).exit_code == 3
    done = cli("enforce", str(spec), "-o", str(tmp_path / "out"))
    assert done.exit_code == 0, done.stdout + done.stderr
    assert cli("check", str(tmp_path / "out" / "plan.json")).exit_code == 0


def test_dflash_under_dp_attention_syncs_inside_attention_tp(cli):
    # SGLang 0.5.23 builds DFlash's SpecTpSync on get_dp_tp_group(), attention TP: no group
    # spans replicas (specplan modelled it on tp before issue 34, a false ERROR).
    assert cli("check", "specs/engine/qwen3-next-dflash-dpattn-sglang-engine.yaml").exit_code == 0


def test_errors_no_converge_answers_write_nothing(cli, tmp_path):
    # vLLM before #50514: stage-local layer and tap ids are the engine's layout, not a converge.
    done = cli("enforce", "specs/engine/llama-3.2-1b-eagle3-pp2-vllm-pre-50514.yaml", "-o",
               str(tmp_path / "out"))
    assert done.exit_code == 3
    assert "ERROR" in done.stdout and "nothing written" in done.stderr
    assert not (tmp_path / "out").exists()


def test_enforce_takes_one_spec_or_a_line(cli, tmp_path):
    done = cli("enforce", "-o", str(tmp_path / "out"))
    assert done.exit_code == 2 and "enforce takes one SPEC, or --engine E -- LINE" in done.stderr
    bad = cli("enforce", "--engine", "sglang", "-o", str(tmp_path / "out"), "--", "python")
    assert bad.exit_code == 2 and bad.stderr.startswith("specplan enforce:")


def test_the_readme_enforce_example_is_what_the_commands_print(cli, tmp_path, monkeypatch):
    from pathlib import Path

    root = Path(__file__).resolve().parents[2]
    text = (root / "README.md").read_text()
    start = text.index(f"$ specplan enforce {EAGLE_TP8} -o enforced\n")
    example = text[start:text.index("```", start)].splitlines()
    check_at = example.index("$ specplan check enforced/plan.json")
    cut = example.index("...")
    monkeypatch.chdir(tmp_path)  # `-o enforced` as the README writes it
    got = cli("enforce", str(root / EAGLE_TP8), "-o", "enforced").stdout.splitlines()
    assert got[:cut - 1] == example[1:cut]
    assert got[-(check_at - cut - 1):] == example[cut + 1:check_at]
    assert cli("check", "enforced/plan.json").stdout.splitlines() == [example[check_at + 1]]
