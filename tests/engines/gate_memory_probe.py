"""Run in its own process: SGLang 0.5.23's real SpecTpSync.available_memory_gb (spec_tp_sync.py),
only the free-memory reading stubbed (it needs a GPU), for each case of a JSON list
[sync_size, capture_size, SGLANG_SPEC_TP_SYNC]: SpecTpSync built on a group of sync_size ranks
(the workers pass get_dp_tp_group()), the reading asked over a capture group of capture_size
ranks (DSpark passes its draft graph group). Prints, per case, the group the reading is reduced
over ("capture") or null when each rank keeps its own."""

from __future__ import annotations

import json
import os
import sys
from types import SimpleNamespace


def main(cases: list[list]) -> list[dict]:
    import sglang_harness
    from wheels import engine_root

    sglang_harness.install(engine_root("sglang"))
    from sglang.srt.speculative import spec_tp_sync as sync_module

    seen: list[tuple] = []

    def reading(device, gpu_id, distributed=False, cpu_group=None, **_):
        seen.append((distributed, cpu_group))
        return 0.5

    sync_module.get_available_gpu_memory = reading
    out = []
    for sync_size, capture_size, value in cases:
        os.environ["SGLANG_SPEC_TP_SYNC"] = value
        sync = sync_module.SpecTpSync(SimpleNamespace(world_size=sync_size, rank_in_group=1,
                                                      cpu_group="sync"))
        seen.clear()
        capture = SimpleNamespace(world_size=capture_size, cpu_group="capture")
        sync.available_memory_gb(sync_module.SpecTpSyncSite.DSPARK_MEM, "cuda", 0, group=capture)
        distributed, group = seen[0]
        out.append({"min_over": group if distributed else None})
    return out


if __name__ == "__main__":
    print(json.dumps(main(json.loads(sys.argv[1]))))
