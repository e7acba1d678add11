"""The engines' disaggregation launch flags, both ways: one small object per engine.

Read from the newest wheels: SGLang `--disaggregation-mode prefill|decode` and
`--disaggregation-transfer-backend` (sglang/srt/arg_groups/fields/disagg.py, default mooncake);
vLLM `--kv-transfer-config` (vllm/engine/arg_utils.py) holding KVTransferConfig's
`kv_connector` (a registered class name, kv_connector/factory.py) and `kv_role`
(kv_producer | kv_consumer | kv_both, vllm/config/kv_transfer.py).
"""

from __future__ import annotations

import json


class LaunchProblem(ValueError):
    """A launch line's disaggregation flags that no spec states."""


class SGLangFlags:
    mode, backend = "--disaggregation-mode", "--disaggregation-transfer-backend"

    def write(self, role: str, connector: str) -> list[tuple[str, str, str]]:
        return [(self.mode, role, "this instance's role (disaggregation.role)"),
                (self.backend, connector, "KV transfer (disaggregation.connector)")]

    def read(self, flags: dict) -> dict | None:
        role = flags.get(self.mode)
        if role in (None, "null"):
            if self.backend in flags:
                raise LaunchProblem(f"{self.backend} without {self.mode} prefill|decode")
            return None
        if role not in ("prefill", "decode"):
            raise LaunchProblem(f"{self.mode} {role}: expected prefill or decode")
        connector = flags.get(self.backend) or "mooncake"
        if connector not in ("mooncake", "nixl"):
            raise LaunchProblem(f"{self.backend} {connector}: specplan plans mooncake | nixl")
        return {"role": role, "connector": connector}


class VllmFlags:
    flag = "--kv-transfer-config"
    connectors = {"NixlConnector": "nixl", "NixlPullConnector": "nixl",
                  "NixlPushConnector": "nixl_push", "MooncakeConnector": "mooncake"}
    roles = {"kv_producer": "prefill", "kv_consumer": "decode"}

    def write(self, role: str, connector: str) -> list[tuple[str, str, str]]:
        name = next(k for k, v in self.connectors.items() if v == connector)
        kv_role = next(k for k, v in self.roles.items() if v == role)
        value = json.dumps({"kv_connector": name, "kv_role": kv_role}, separators=(",", ":"))
        return [(self.flag, value, "KV connector and role (disaggregation.connector, .role)")]

    def read(self, flags: dict) -> dict | None:
        text = flags.get(self.flag)
        if text is None:
            return None
        try:
            config = json.loads(text)
        except json.JSONDecodeError as exc:
            raise LaunchProblem(f"{self.flag} is not JSON: {exc}") from None
        name, kv_role = config.get("kv_connector"), config.get("kv_role")
        if kv_role == "kv_both":  # either side: the deployment says which this instance is
            return {"connector": self.connectors[name]} if name in self.connectors else {}
        if name not in self.connectors:
            raise LaunchProblem(f"{self.flag} kv_connector {name!r}: specplan plans "
                                f"{', '.join(self.connectors)}")
        if kv_role not in self.roles:
            raise LaunchProblem(f"{self.flag} kv_role {kv_role!r}: expected kv_producer (prefill) "
                                "or kv_consumer (decode)")
        return {"role": self.roles[kv_role], "connector": self.connectors[name]}


FLAGS = {"sglang": SGLangFlags(), "vllm": VllmFlags()}
