"""Issue 28, point 8: a pure-tagged wheel carrying native libraries fails `platform-tag` (a
wheel that failed its check is kept out of the wheel directory's top level: that real build is
shared with the build-tree test, tests/test_build_tree.py).

Seen on a real project: the failed wheel landed in dist/ under its final name, beside the good
ones, so `twine upload dist/*` would publish it; and a `py3-none-any` wheel carrying x86_64
libraries passed `platform-tag`."""

from __future__ import annotations

import struct
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from buildrows.check.tags import native_kind
from tests.conftest import Result
from tests.cuda_tools import make_elf, make_wheel
from tests.test_build_tree import CPU, torch_shaped

PYT = f"{sys.version_info.major}{sys.version_info.minor}"


def test_a_pure_wheel_carrying_a_native_library_fails_platform_tag(cli: Callable[..., Result], tmp_path: Path) -> None:
    pol = torch_shaped(tmp_path)
    pure = make_wheel(tmp_path / "tiny-0.1.0-py3-none-any.whl",
                      {"tiny/__init__.py": b"", "tiny/_native.so": make_elf(needed=["libc.so.6"])})
    r = cli("--config", str(pol), "check", str(pure), "--row", CPU)
    assert r.code == 5, r.out + r.err
    assert ("tiny-0.1.0-py3-none-any.whl is tagged py3-none-any, a pure wheel pip installs on every platform and "
            "Python, but it carries native libraries that load on one only: tiny/_native.so (ELF x86_64)") in r.out
    assert "fix: build it as a platform wheel: setuptools tags a wheel by its ext_modules" in r.out
    # the same wheel without the library passes the tag check
    (tmp_path / "plain").mkdir()
    plain = make_wheel(tmp_path / "plain" / "tiny-0.1.0-py3-none-any.whl", {"tiny/__init__.py": b""})
    r = cli("--config", str(pol), "check", str(plain), "--row", CPU)
    assert "[PASS] platform-tag" in r.out, r.out + r.err


def _pe(characteristics: int, machine: int = 0x8664) -> bytes:
    head = bytearray(256)
    head[:2] = b"MZ"
    struct.pack_into("<I", head, 0x3C, 0x80)
    head[0x80:0x84] = b"PE\0\0"
    struct.pack_into("<H", head, 0x84, machine)
    struct.pack_into("<H", head, 0x80 + 22, characteristics)
    return bytes(head)


@pytest.mark.parametrize(("head", "kind"), [
    (make_elf(), "ELF x86_64"),
    (_pe(0x2022), "PE DLL amd64"),
    (_pe(0x0022), None),  # an .exe (pip's own pure wheel carries Windows launchers as data)
    (b"\xcf\xfa\xed\xfe" + struct.pack("<IiI", 0x0100000C, 0, 6) + bytes(16), "Mach-O arm64"),  # MH_DYLIB
    (b"\xcf\xfa\xed\xfe" + struct.pack("<IiI", 0x0100000C, 0, 2) + bytes(16), None),  # MH_EXECUTE
    (b"\xca\xfe\xba\xbe\x00\x00\x00\x02" + bytes(16), "Mach-O universal"),
    (b"\xca\xfe\xba\xbe\x00\x00\x00\x37" + bytes(16), None),  # a Java class (version 55)
    (b"import os\n", None),
])
def test_native_libraries_are_known_by_their_first_bytes(head: bytes, kind: str | None) -> None:
    assert native_kind(head) == kind
