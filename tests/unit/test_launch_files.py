"""A launch plan's ``files``: written into the record's session directory before the agent runs."""

from __future__ import annotations

from pathlib import Path

import pytest

from roost.actors.node.sessions import write_launch_files
from roost.wire.errors import RoostError


def test_each_file_is_written_private(tmp_path: Path) -> None:
    write_launch_files(tmp_path, {"claude-settings.json": "{}", "b": "é"})
    assert (tmp_path / "claude-settings.json").read_text() == "{}"
    assert (tmp_path / "b").read_text() == "é"
    assert (tmp_path / "b").stat().st_mode & 0o777 == 0o600
    write_launch_files(tmp_path, {"b": "again"})  # a later generation's launch rewrites it
    assert (tmp_path / "b").read_text() == "again"


@pytest.mark.parametrize("name", ["", "../x", "a/b", ".hidden", "nul\0"])
def test_a_name_that_is_not_a_plain_file_name_fails_the_launch(tmp_path: Path, name: str) -> None:
    with pytest.raises(RoostError) as err:
        write_launch_files(tmp_path / "s", {name: "x"})
    assert err.value.code == "launch-failed"
    assert not (tmp_path / "x").exists()
