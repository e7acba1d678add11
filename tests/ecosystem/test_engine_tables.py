"""Every engine has its launch-line reader, writer and layout rewrite (declared at the code with
engines.base.PerEngine), and its launch table agrees with its flag table."""

from __future__ import annotations

import pytest

from specplan.ecosystem.export import WRITERS
from specplan.ecosystem.launch_read import READERS
from specplan.ecosystem.translate import REWRITES
from specplan.engines import ENGINES, convention
from specplan.engines.base import PerEngine


@pytest.mark.parametrize("engine", sorted(ENGINES))
def test_every_engine_has_its_launch_code(engine):
    conv = convention(engine)
    assert READERS[conv].__name__ == f"read_{engine}"
    assert WRITERS[conv].__name__ == f"_{engine}"
    assert REWRITES[conv].__name__ == f"_to_{engine}"


@pytest.mark.parametrize("engine", sorted(ENGINES))
def test_the_launch_table_names_flags_of_the_parser(engine):
    conv = convention(engine)
    dests = {f.dest for f in conv.flag_table().flags} | set(conv.flag_table().positional)
    assert set(conv.launch.modelled) - dests == set()
    assert conv.default_connector in conv.connectors
    assert all(name.startswith(conv.launch.env_prefix) for name in conv.launch.env)
    assert conv.launch.pp_partition_env in conv.launch.env


def test_a_missing_value_names_the_table_and_the_engine():
    table: PerEngine[int] = PerEngine("launch-line reader")
    with pytest.raises(KeyError, match="no launch-line reader for vllm"):
        table[convention("vllm")]
