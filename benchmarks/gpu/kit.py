"""``make gpu-kit``: download the wheels of ``wheels.txt``, sort them per part, check sizes.

Usage::

    python benchmarks/gpu/kit.py [--whl .whl] [--no-download] [--limit-mib 60]

Every wheel is downloaded once into ``<whl>/all/`` (``pip download --no-deps
--only-binary=:all: --python-version 3.12 --implementation cp --platform
manylinux_2_28_x86_64`` + the older manylinux tags such wheels also carry), then hard-linked
into ``<whl>/<part>/`` for each part that needs it (the folder a device call carries). A call's
payload is the working tree the device tool copies (tracked files plus untracked files git
does not ignore: ``git ls-files -co --exclude-standard``) plus the part's wheel folder; a
part over ``--limit-mib`` (60 MiB; the tool's cap is 64 MiB) is refused (exit status 1).
Standard library only: runs with any Python 3.11+ that has pip.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from common import CALLS, KIT, PARTS, REPO, call_timeout  # noqa: E402

MIB = 2**20
LIMIT_MIB = 60
PLATFORM_ARGS = [
    "--only-binary=:all:",
    "--no-deps",
    "--python-version",
    "3.12",
    "--implementation",
    "cp",
    "--platform",
    "manylinux_2_28_x86_64",
    "--platform",
    "manylinux_2_17_x86_64",
    "--platform",
    "manylinux2014_x86_64",
]


@dataclass(frozen=True)
class Pin:
    """One line of wheels.txt: ``name==version`` and the parts that carry it."""

    name: str
    version: str
    parts: tuple[str, ...]

    @property
    def requirement(self) -> str:
        return f"{self.name}=={self.version}"


def normalize(name: str) -> str:
    """A distribution name as wheel file names spell it (PEP 427/503: runs of -_. -> _)."""
    return re.sub(r"[-_.]+", "_", name).lower()


def read_pins(path: Path = KIT / "wheels.txt") -> list[Pin]:
    """The pins of ``wheels.txt``; a line that is not ``name==version parts[,parts] ...`` or
    names an unknown part is an error naming the file and line."""
    pins = []
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        text = line.split("#", 1)[0].strip()
        if not text:
            continue
        fields = text.split()
        match = re.fullmatch(r"([A-Za-z0-9][A-Za-z0-9._-]*)==([A-Za-z0-9.+!-]+)", fields[0])
        parts = tuple(fields[1].split(",")) if len(fields) > 1 else ()
        if not match or not parts or any(p not in PARTS for p in parts):
            raise SystemExit(
                f"error: {path}:{number}: expected 'name==version part[,part]' with parts "
                f"from {', '.join(PARTS)}: {line.strip()!r}"
            )
        pins.append(Pin(match[1], match[2], parts))
    return pins


def wheel_file(folder: Path, pin: Pin) -> Path | None:
    """The downloaded wheel of ``pin`` in ``folder``, None when absent."""
    prefix = f"{normalize(pin.name)}-{pin.version}-"
    found = [
        p
        for p in folder.glob("*.whl")
        if normalize(p.name.split("-")[0]) + "-" + p.name.split("-")[1] + "-" == prefix
    ]
    return sorted(found)[0] if found else None


def compatible(wheel: Path) -> bool:
    """Whether a wheel installs on CPython 3.12 x86-64 Linux (pure, abi3 or cp312 manylinux)."""
    tags = wheel.name[: -len(".whl")].split("-")[-3:]
    py, abi, plat = tags
    pure = plat == "any" and abi == "none" and "py3" in py.split(".")
    binary = "x86_64" in plat and "manylinux" in plat and ("cp312" in py or abi == "abi3")
    return pure or binary


def download(pins: list[Pin], into: Path) -> None:
    """``pip download`` every pin not yet in ``into`` (one pip call)."""
    into.mkdir(parents=True, exist_ok=True)
    todo = [p.requirement for p in pins if wheel_file(into, p) is None]
    if not todo:
        return
    cmd = [sys.executable, "-m", "pip", "download", "-q", "-d", str(into), *PLATFORM_ARGS, *todo]
    print("+ pip download", " ".join(todo), flush=True)
    subprocess.run(cmd, check=True)


def tree_files(repo: Path = REPO) -> list[Path]:
    """What the device tool copies: tracked files and untracked files git does not ignore."""
    out = subprocess.run(
        ["git", "-C", str(repo), "ls-files", "-z", "-co", "--exclude-standard"],
        check=True,
        capture_output=True,
    ).stdout
    return [repo / name for name in out.decode().split("\0") if name]


def tree_bytes(repo: Path = REPO) -> int:
    return sum(p.stat().st_size for p in tree_files(repo) if p.is_file() and not p.is_symlink())


def link_parts(pins: list[Pin], whl: Path) -> dict[str, list[Path]]:
    """Fill ``<whl>/<part>/`` with hard links (copies across file systems) of its wheels; stale
    files there are removed. Returns each part's wheel files."""
    got: dict[str, list[Path]] = {name: [] for name in PARTS}
    for pin in pins:
        wheel = wheel_file(whl / "all", pin)
        if wheel is None:
            raise SystemExit(
                f"error: {whl / 'all'}: no wheel for {pin.requirement} (run without --no-download)"
            )
        if not compatible(wheel):
            raise SystemExit(f"error: {wheel.name}: not installable on CPython 3.12 x86-64 Linux")
        for part in pin.parts:
            got[part].append(wheel)
    for part, wheels in got.items():
        folder = whl / part
        folder.mkdir(parents=True, exist_ok=True)
        names = {w.name for w in wheels}
        for old in folder.iterdir():
            if old.name not in names:
                old.unlink()
        for wheel in wheels:
            target = folder / wheel.name
            if not target.exists():
                try:
                    os.link(wheel, target)
                except OSError:
                    shutil.copy2(wheel, target)
    return {part: [whl / part / w.name for w in wheels] for part, wheels in got.items()}


def payloads(wheels: dict[str, list[Path]], tree: int) -> dict[str, dict[str, float]]:
    """Per part and per call of :data:`CALLS` (its parts' wheels, each file once): the
    number of wheels, tree, wheels and total payload in MiB, the folders to carry."""
    out = {}
    for name in [*PARTS, *(c for c in CALLS if "," in c)]:
        parts = name.split(",")
        files = {f.name: f for p in parts for f in wheels[p]}
        carried = sum(f.stat().st_size for f in files.values())
        out[name] = {
            "wheels": len(files),
            "tree_mib": tree / MIB,
            "wheels_mib": carried / MIB,
            "total_mib": (tree + carried) / MIB,
            "carry": [f".whl/{p}" for p in parts if wheels[p]],
        }
    return out


def report(sizes: dict[str, dict], limit_mib: float) -> list[str]:
    """Print the payload table; return the parts (calls) over ``limit_mib``."""
    print(
        f"{'part/call':<12}{'wheels':>7}{'tree MiB':>10}{'wheels MiB':>12}{'payload MiB':>13}"
        f"{'timeout_s':>11}  carry"
    )
    over = []
    for name, s in sizes.items():
        flag = "" if s["total_mib"] <= limit_mib else f"  OVER {limit_mib:g} MiB"
        print(
            f"{name:<12}{s['wheels']:>7}{s['tree_mib']:>10.1f}{s['wheels_mib']:>12.1f}"
            f"{s['total_mib']:>13.1f}{call_timeout(name):>11}  {json.dumps(s['carry'])}{flag}"
        )
        if flag:
            over.append(name)
    return over


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--whl", type=Path, default=REPO / ".whl", help="wheel folder (git-ignored)")
    ap.add_argument("--no-download", action="store_true", help="use the wheels already there")
    ap.add_argument("--limit-mib", type=float, default=LIMIT_MIB)
    args = ap.parse_args(argv)
    pins = read_pins()
    if not args.no_download:
        download(pins, args.whl / "all")
    wheels = link_parts(pins, args.whl)
    over = report(payloads(wheels, tree_bytes()), args.limit_mib)
    if over:
        print(
            f"error: {', '.join(over)}: payload over {args.limit_mib:g} MiB (the device tool "
            "carries at most 64 MiB a call); drop wheels from wheels.txt or split the part",
            file=sys.stderr,
        )
        return 1
    print(f"ok: every part fits {args.limit_mib:g} MiB; the calls are in docs/gpu.md")
    return 0


if __name__ == "__main__":
    sys.exit(main())
