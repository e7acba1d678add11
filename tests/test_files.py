"""The one atomic writer: whole files with the user's umask, nothing left behind on failure."""

from __future__ import annotations

import os

import pytest

from specplan.io.files import write_atomic


@pytest.fixture
def umask_022():
    old = os.umask(0o022)
    yield
    os.umask(old)


def test_writes_whole_file_with_the_umask(tmp_path, umask_022):
    path = write_atomic(tmp_path / "deep" / "plan.json", "{}\n")
    assert path.read_text() == "{}\n"
    assert path.stat().st_mode & 0o777 == 0o644
    assert sorted(p.name for p in path.parent.iterdir()) == ["plan.json"]


def test_a_failed_write_leaves_the_old_file_and_no_temporary(tmp_path):
    path = tmp_path / "x.yaml"
    path.write_text("old\n")
    with pytest.raises(AttributeError):  # None.encode, after the temporary file is open
        write_atomic(path, None)  # type: ignore[arg-type]
    assert path.read_text() == "old\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["x.yaml"]
