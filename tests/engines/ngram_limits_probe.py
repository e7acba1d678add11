"""Run in its own process: what an engine release itself accepts for an n-gram draft, as JSON.

`python ngram_limits_probe.py sglang VERSION` runs the wheel's own _handle_ngram (its body as
written; the resolution accessors replaced by the plain object they read and write) on the
default line and on --speculative-num-draft-tokens 8 and 300, and returns (num_steps, topk,
num_draft_tokens) SGLang resolves; then the wheel's _derive_tree_links (ngram_worker.py) on a
12-node BFS trie whose root has topk = 10 children, one of them a child of its own: more nodes
than 1 + topk * num_steps = 11 at SGLang's own defaults.
`python ngram_limits_probe.py sglang-lines VERSION < lines.json` parses each line (a list of
words) with the wheel's own parser (flag_tables.sglang_parser) and runs its _handle_ngram on
what the parser stored: the (num_steps, topk, num_draft_tokens) SGLang runs for that line.
`python ngram_limits_probe.py vllm VERSION` builds the wheel's SpeculativeConfig for method
ngram at num_speculative_tokens 300, 4096 and 5000 and reports what it keeps, and its error at 0.
"""

from __future__ import annotations

import json
import sys
import types

sys.path.insert(0, __file__.rsplit("/", 1)[0])

from wheels import engine_root  # noqa: E402


def _hook(version: str):
    """The wheel's speculative_hook, its resolution accessors the plain object they read and
    write (a declaration sets the field: the last writer wins, as SGLang's overlay)."""
    import sglang_harness

    sglang_harness.install(engine_root("sglang", version))
    finder = next(f for f in sys.meta_path if isinstance(f, sglang_harness._StubFinder))
    finder.names.add("sgl_kernel")  # native kernels ngram_worker imports, never called here
    from sglang.srt.arg_groups import speculative_hook as hook

    def declare(server_args, _who, **values):
        for key, value in values.items():
            setattr(server_args, key, value)

    hook.resolving_view = hook.resolved_view = lambda server_args: server_args
    hook.declare_resolution = declare
    hook.attn_dp_enabled_of = lambda view: False
    return hook


def sglang_lines(version: str, lines: list[list[str]]) -> list:
    from flag_tables import sglang_parser

    parser = sglang_parser(version)
    hook = _hook(version)
    out = []
    for words in lines:
        args = parser.parse_args(words)
        # What resolution has fixed before _handle_ngram runs, where the line leaves it unset.
        args.device, args.page_size = args.device or "cuda", args.page_size or 1
        hook._handle_ngram(args)
        out.append([args.speculative_num_steps, args.speculative_eagle_topk,
                    args.speculative_num_draft_tokens])
    return out


def sglang(version: str) -> dict:
    import numpy as np

    hook = _hook(version)
    from sglang.srt.arg_groups.fields import spec as fields

    names = fields.Spec.__struct_fields__
    defaults = dict(zip(names[len(names) - len(fields.Spec.__struct_defaults__):],
                        fields.Spec.__struct_defaults__))
    out = {}
    for draft_tokens in (None, 8, 300):
        args = types.SimpleNamespace(**defaults, device="cuda", max_running_requests=None,
                                     page_size=1, attention_backend=None,
                                     disable_overlap_schedule=False, enable_dp_attention=False)
        args.speculative_num_draft_tokens, args.speculative_num_steps = draft_tokens, None
        hook._handle_ngram(args)
        out[str(draft_tokens)] = [args.speculative_num_steps, args.speculative_eagle_topk,
                                  args.speculative_num_draft_tokens]
    from sglang.srt.speculative.ngram_worker import _derive_tree_links

    n = 12  # node 0 the root, 1..10 its children, 11 a child of node 1
    mask = np.eye(n, dtype=bool)
    mask[1:, 0] = True
    mask[11, 1] = True
    next_token, next_sibling = _derive_tree_links(mask.reshape(-1), 1, n)
    out["trie"] = {"next_token": next_token[0].tolist(), "next_sibling": next_sibling[0].tolist()}
    return out


def vllm(version: str) -> dict:
    import vllm_harness

    vllm_harness.install(engine_root("vllm", version))
    from vllm.config.speculative import SpeculativeConfig

    out = {}
    for k in (300, 4096, 5000):
        config = SpeculativeConfig(method="ngram", num_speculative_tokens=k, prompt_lookup_max=4)
        out[str(k)] = config.num_speculative_tokens
    try:
        SpeculativeConfig(method="ngram", num_speculative_tokens=0, prompt_lookup_max=4)
        out["0"] = "accepted"
    except Exception as exc:  # pydantic's ValidationError
        out["0"] = str(exc).splitlines()[2].strip()
    return out


if __name__ == "__main__":
    if sys.argv[1] == "sglang-lines":
        print(json.dumps(sglang_lines(sys.argv[2], json.loads(sys.stdin.read()))))
    else:
        print(json.dumps({"sglang": sglang, "vllm": vllm}[sys.argv[1]](sys.argv[2])))
