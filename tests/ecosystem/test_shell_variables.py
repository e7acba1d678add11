"""Shell variables in a launch script (issue 38 item 2), through the CLI: the script's own
assignments and `export`s are expanded, `--env` and `--use-env` give the others, a variable the
plan does not read is kept as written and exported back so, and one that decides the plan is
refused, naming it."""

from __future__ import annotations

import shlex

import pytest

from specplan.ecosystem.launch_import import parse_script
from specplan.schema import load_spec
from tests.helpers import model_config


DSV3 = {"architectures": ["DeepseekV3ForCausalLM"], "num_hidden_layers": 61, "hidden_size": 7168,
        "vocab_size": 129280, "n_routed_experts": 256, "num_experts_per_tok": 8,
        "kv_lora_rank": 512}


@pytest.fixture
def config(tmp_path):
    return str(model_config(tmp_path, DSV3))


def _run(cli, tmp_path, config, text, *extra, env=None):
    script = tmp_path / "run.sh"
    script.write_text(text)
    out = tmp_path / "s.yaml"
    result = cli("import", "--engine", "sglang", "--model-config", config, *extra, "-f",
                 str(script), "-o", str(out), env=env or {})
    return result, (load_spec(out) if result.exit_code == 0 else None)


def test_the_script_s_own_assignments_are_expanded(cli, tmp_path, config):
    result, spec = _run(cli, tmp_path, config,
                        "MODEL=/models/dsv3\nexport TP=8\nDP=${TP}\n"
                        "python3 -m sglang.launch_server --model-path $MODEL --tp-size ${TP} "
                        "--dp-size $DP --enable-dp-attention --port ${PORT:-30000}\n")
    assert result.exit_code == 0, result.stderr
    assert (spec.model.path, spec.topology.tp, spec.topology.dp) == ("/models/dsv3", 8, 8)
    assert "--port 30000" in spec.engine_args


@pytest.mark.parametrize("how", ["--env", "--use-env"])
def test_a_variable_the_script_does_not_assign_comes_from_env_or_use_env(cli, tmp_path, config, how):
    extra = ("--env", "TP=4") if how == "--env" else ("--use-env",)
    result, spec = _run(cli, tmp_path, config,
                        "python3 -m sglang.launch_server --model-path m --tp-size $TP\n", *extra,
                        env={"TP": "4"} if how == "--use-env" else None)
    assert result.exit_code == 0, result.stderr
    assert spec.topology.tp == 4


def test_the_calling_environment_is_not_read_without_use_env(cli, tmp_path, config):
    result, _ = _run(cli, tmp_path, config,
                     "python3 -m sglang.launch_server --model-path m --tp-size $TP\n", env={"TP": "4"})
    assert result.exit_code == 2
    assert ("the launch line holds a shell expansion, '$TP' in --tp-size $TP: it decides the plan "
            "(topology.tp) and its value is not known; assign it in the script, or give --env "
            "TP=VALUE (or --use-env)") in result.stderr


@pytest.mark.parametrize("flag,key", [("--speculative-algorithm", "speculative.method"),
                                      ("--speculative-num-steps", "speculative.num_steps"),
                                      ("--ep-size", "topology.ep")])
def test_a_variable_that_decides_the_plan_is_refused_naming_it(cli, tmp_path, config, flag, key):
    result, _ = _run(cli, tmp_path, config,
                     f"python3 -m sglang.launch_server --model-path m --tp-size 8 {flag} ${{X}}\n")
    assert result.exit_code == 2
    assert f"'${{X}}' in {flag}" in result.stderr and f"({key})" in result.stderr


def test_paths_hosts_and_ports_are_kept_as_written_and_exported_back(cli, tmp_path, config):
    text = ("python3 -m sglang.launch_server --model-path ${HOST_MODEL_PATH}/${MODEL_NAME} "
            "--tp-size 8 --host $HOST_IP --port ${PORT} --export-metrics-to-file-dir \"$LOGS/x\"\n")
    result, spec = _run(cli, tmp_path, config, text)
    assert result.exit_code == 0, result.stderr
    for var in ("${HOST_MODEL_PATH}", "$HOST_IP", "${PORT}", "$LOGS"):
        assert f"kept {var} as written" in result.stderr
    assert spec.model.path == "${HOST_MODEL_PATH}/${MODEL_NAME}"
    exported = cli("export", str(tmp_path / "s.yaml"))
    assert exported.exit_code == 0, exported.stderr
    line = [s for s in exported.stdout.splitlines() if s.startswith("python3")][0]
    assert shlex.split(line) == parse_script(text)[1]  # the shell sees the same words
    assert '--model-path "${HOST_MODEL_PATH}/${MODEL_NAME}"' in line


def test_an_env_value_that_is_not_a_pair_is_bad_input(cli, tmp_path, config):
    result, _ = _run(cli, tmp_path, config, "python3 -m sglang.launch_server --tp 8\n", "--env", "TP")
    assert result.exit_code == 2 and "--env TP: expected NAME=VALUE" in result.stderr


def test_a_command_substitution_is_one_word_never_run_kept_where_the_plan_does_not_read_it(
        cli, tmp_path, config):
    text = ("python3 -m sglang.launch_server --model-path m --tp-size 8 "
            "--cuda-graph-bs-decode $(seq -s ' ' 1 $((2 * 32))) --port 30000\n")
    result, spec = _run(cli, tmp_path, config, text)
    assert result.exit_code == 0, result.stderr
    assert "kept $(seq -s ' ' 1 $((2 * 32))) as written (never run)" in result.stderr
    assert "--cuda-graph-bs-decode $(seq -s ' ' 1 $((2 * 32)))" in spec.engine_args
    exported = cli("export", str(tmp_path / "s.yaml"))
    assert exported.exit_code == 0, exported.stderr
    line = [s for s in exported.stdout.splitlines() if s.startswith("python3")][0]
    assert " --cuda-graph-bs-decode $(seq -s ' ' 1 $((2 * 32))) " in line  # the shell runs it


def test_a_command_substitution_that_decides_the_plan_is_refused_naming_it(cli, tmp_path, config):
    result, _ = _run(cli, tmp_path, config,
                     "python3 -m sglang.launch_server --model-path m --tp-size $(nvidia-smi -L | wc -l)\n")
    assert result.exit_code == 2
    assert ("the launch line holds a shell expansion, '$(nvidia-smi -L | wc -l)' in --tp-size: it "
            "decides the plan (topology.tp) and specplan runs no command or arithmetic of the "
            "shell; give its value on the line") in result.stderr


@pytest.mark.parametrize("tail", ["> decode.log 2>&1 &", ">decode.log 2>/dev/null", "&> run.log &",
                                  ">> decode.log 2>&1;"])
def test_redirections_and_a_trailing_ampersand_are_the_shell_s_not_arguments(cli, tmp_path, config, tail):
    """bash takes `> log`, `2>&1`, `&>log` and a trailing `&` itself: the command never sees them
    (public/s16's `nohup ... > decode.log 2>&1 &`)."""
    text = ("nohup python -m sglang.launch_server --model-path /models/dsv3 --tp 8 --port 50000 "
            f"{tail}\n")
    assert parse_script(text)[1][-2:] == ["--port", "50000"]
    result, spec = _run(cli, tmp_path, config, text)
    assert result.exit_code == 0, result.stderr
    assert spec.topology.tp == 8


def test_a_redirection_sign_inside_a_json_value_stays(cli, tmp_path, config):
    words = parse_script("vllm serve m --hf-overrides '{\"a\": \"x>y\"}' > log\n")[1]
    assert words == ["vllm", "serve", "m", "--hf-overrides", '{"a": "x>y"}']
