"""Reading a file an untrusted process could have replaced: no links, no FIFOs, no hard links, capped."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from optiml.integrity.files import UnsafeFile, open_directory, read_tail, tail_text


@pytest.fixture
def folder(tmp_path: Path) -> tuple[Path, int]:
    fd = open_directory(tmp_path)
    yield tmp_path, fd
    os.close(fd)


def test_a_plain_file_is_read_from_its_end_capped(folder: tuple[Path, int]) -> None:
    path, fd = folder
    (path / "err").write_bytes(b"x" * 100_000 + b"\nlast line\n")
    assert read_tail(fd, "err", limit=1024).endswith(b"last line\n") and len(read_tail(fd, "err", limit=1024)) == 1024
    assert tail_text(fd, "err", 1) == "last line"


def test_a_link_a_fifo_and_a_hard_link_are_refused(folder: tuple[Path, int], tmp_path: Path) -> None:
    path, fd = folder
    secret = tmp_path.parent / f"{tmp_path.name}-secret"
    secret.write_text("OPTIML_LLM_API_KEY=do-not-read")
    (path / "link").symlink_to(secret)
    os.mkfifo(path / "fifo")
    os.link(secret, path / "hard")
    assert "not read" in tail_text(fd, "link", 3) and "do-not-read" not in tail_text(fd, "link", 3)
    with pytest.raises(UnsafeFile):
        read_tail(fd, "fifo")  # opened without blocking, refused as not a regular file
    with pytest.raises(UnsafeFile):
        read_tail(fd, "hard")
    with pytest.raises(ValueError):
        read_tail(fd, "../x")
    assert open(secret).read() == "OPTIML_LLM_API_KEY=do-not-read"  # noqa: SIM115 (the control: it is readable)


def test_a_swapped_directory_does_not_move_the_handle(folder: tuple[Path, int], tmp_path: Path) -> None:
    path, fd = folder
    (path / "err").write_text("the judge's own\n")
    moved = tmp_path.parent / f"{tmp_path.name}-moved"
    path.rename(moved)
    path.mkdir()
    (path / "err").write_text("planted\n")
    assert tail_text(fd, "err", 1) == "the judge's own"
    moved.rename(tmp_path.parent / f"{tmp_path.name}-done")
