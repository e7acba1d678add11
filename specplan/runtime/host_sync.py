"""Record every point where code would make the host wait for a device.

    with HostSyncRecorder() as rec:
        rt.converge(...)
    assert rec.events == []

Two kinds of escape are recorded, each with the innermost specplan frame that caused it:

- aten ops that need a device value on the host, seen by a TorchDispatchMode:
  `_local_scalar_dense` (`.item()`, `int(t)`, `bool(t)`), `nonzero`, `equal`, `is_nonzero`,
  `masked_select`, `unique`..., and copies whose source is on a device and destination on the
  host (`copy_`, `_to_copy`), and host data lifted into a tensor (`lift_fresh`: a tensor made
  from a Python list, which is an upload that a CUDA graph cannot capture);
- tensor methods that read memory without dispatching (`tolist`, `numpy`, `__array__`, `cpu`),
  patched for the duration.

On a CPU every tensor is a host tensor, so the second kind is what shows a device path reading
back; on CUDA the first catches the real device-to-host copies as well.
"""

from __future__ import annotations

import traceback

import torch
from torch.utils._python_dispatch import TorchDispatchMode

SYNC_OPS = frozenset({"_local_scalar_dense", "item", "nonzero", "equal", "is_nonzero",
                      "masked_select", "_unique2", "unique_dim", "unique_consecutive", "lift_fresh",
                      "lift_fresh_copy", "repeat_interleave"})
COPY_OPS = frozenset({"copy_", "_to_copy", "to"})
READS = ("tolist", "numpy", "__array__", "cpu")


def _where() -> str:
    frames = [f for f in traceback.extract_stack()[:-2] if "/specplan/" in f.filename
              and not f.filename.endswith("host_sync.py")]
    if not frames:
        return "?"
    f = frames[-1]
    return f"{f.filename.rsplit('/specplan/', 1)[1]}:{f.lineno} {f.name}"


def _device_to_host(name: str, args, kwargs) -> bool:
    if name == "copy_":
        dst, src = args[0], args[1]
        return src.device.type != "cpu" and dst.device.type == "cpu"
    target = kwargs.get("device")
    return args[0].device.type != "cpu" and target is not None and torch.device(target).type == "cpu"


class HostSyncRecorder(TorchDispatchMode):
    """A dispatch mode plus patched tensor reads; `events` lists (what, where) in order."""

    def __init__(self):
        super().__init__()
        self.events: list[tuple[str, str]] = []
        self._saved: dict = {}

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        name = func.overloadpacket.__name__
        if name in SYNC_OPS:
            self.events.append((f"aten.{name}", _where()))
        elif name in COPY_OPS and _device_to_host(name, args, kwargs):
            self.events.append((f"aten.{name} device-to-host", _where()))
        return func(*args, **kwargs)

    def _patch(self) -> None:
        for attr in READS:
            original = getattr(torch.Tensor, attr)
            self._saved[attr] = (original, attr in torch.Tensor.__dict__)
            setattr(torch.Tensor, attr, self._recording(attr, original))

    def _recording(self, attr: str, original):
        events = self.events

        def read(t, *args, **kwargs):
            events.append((f"Tensor.{attr}", _where()))
            return original(t, *args, **kwargs)

        return read

    def _unpatch(self) -> None:
        for attr, (original, own) in self._saved.items():
            if own:
                setattr(torch.Tensor, attr, original)
            else:
                delattr(torch.Tensor, attr)
        self._saved.clear()

    def __enter__(self):
        self._patch()
        return super().__enter__()

    def __exit__(self, *exc):
        try:
            return super().__exit__(*exc)
        finally:
            self._unpatch()
