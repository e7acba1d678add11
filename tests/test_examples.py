"""examples/vllm-cpu/ is the recipe docs/engines.md prints (issue 38 item 6): the script in the
docs is run.sh byte for byte, its spec checks clean, and the launch line specplan prints for it
starts vLLM's CPU build (the server's module, not `vllm serve`). The lane runs the script itself
(tests/real_engine/test_example.py)."""

from __future__ import annotations

from tests.helpers import ROOT, cli

EXAMPLE = ROOT / "examples" / "vllm-cpu"
TINY = "examples/vllm-cpu/tiny.yaml"
CPU_SERVER = 'python -m vllm.entrypoints.openai.api_server "${args[@]}"'


def test_the_docs_recipe_is_run_sh_verbatim():
    docs = (ROOT / "docs" / "engines.md").read_text()
    assert "```bash\n" + (EXAMPLE / "run.sh").read_text() + "```" in docs
    for name in ("tiny.yaml", "tiny_models.py", "generate.py", "site/sitecustomize.py"):
        assert (EXAMPLE / name).is_file(), name  # every file the script uses ships beside it


def test_the_example_spec_checks_clean():
    run = cli("check", TINY, code=0)
    assert run.stdout.startswith("tiny-tp2-draft: no findings")


def test_export_and_enforce_start_vllms_cpu_build_by_its_server_module(tmp_path):
    exported = cli("export", TINY, code=0).stdout
    assert exported.splitlines()[-1] == "SPECPLAN_PLAN=build/tiny-tp2-draft/plan.json " + CPU_SERVER
    assert "vLLM's CPU build (vllm-cpu) cannot start `vllm serve`" in exported
    enforced = cli("enforce", TINY, "-o", tmp_path / "out", code=0).stdout
    assert enforced.splitlines()[-1] == f"SPECPLAN_PLAN={tmp_path}/out/plan.json " + CPU_SERVER
    gpu = cli("export", "specs/llama-3.2-1b-eagle3-pp2.yaml", code=0).stdout  # device cuda
    assert gpu.splitlines()[-1].endswith('vllm serve "${args[@]}"')
