"""Run in its own process: SGLang's real speculative defaults of one release, as JSON.

`python spec_defaults_probe.py VERSION ARCH...` prints {arch: (steps, topk, draft_tokens)} from
the wheel's own _auto_choose_speculative_params (its body run as written; only the
resolving_view accessor is replaced by the plain object it reads), STANDALONE's, and the NGRAM
defaults: the speculative_ngram_max_bfs_breadth field's default (arg_groups/fields/spec.py) and the draft-token count
_handle_ngram declares.
"""

from __future__ import annotations

import inspect
import json
import re
import sys
import types

sys.path.insert(0, __file__.rsplit("/", 1)[0])

from wheels import engine_root  # noqa: E402


def probe(version: str, archs: list[str]) -> dict:
    import sglang_harness

    sglang_harness.install(engine_root("sglang", version))
    from sglang.srt.arg_groups import speculative_hook as hook
    from sglang.srt.arg_groups.fields import spec as fields

    hook.resolving_view = lambda server_args: server_args
    choose = hook._auto_choose_speculative_params
    eagle = types.SimpleNamespace(speculative_algorithm="EAGLE")
    out = {arch: list(choose(eagle, arch)) for arch in archs}
    out["STANDALONE"] = list(choose(types.SimpleNamespace(speculative_algorithm="STANDALONE"), archs[0]))
    breadth = fields.Spec.__struct_defaults__[fields.Spec.__struct_fields__.index(
        "speculative_ngram_max_bfs_breadth") - len(fields.Spec.__struct_fields__)]
    found = re.search(r"speculative_num_draft_tokens=(\d+)", inspect.getsource(hook._handle_ngram))
    out["NGRAM"] = [breadth, int(found.group(1))]
    return out


if __name__ == "__main__":
    print(json.dumps(probe(sys.argv[1], sys.argv[2:])))
