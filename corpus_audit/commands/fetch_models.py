"""``corpus-audit fetch-models``: MediaPipe's face-detection models into the model folder.

Current mediapipe releases (numpy 2) ship no face models and their Tasks ``FaceDetector``
takes a model path; the 0.10.21 wheel carries the two ``.tflite`` files but pins numpy<2.
So we download that wheel from the package registry *without installing it*
(``pip download --no-deps``) and copy the two model files out, each checked against its pinned
SHA-256 (:data:`MODEL_SHA256`) before it is written; a file already in the folder is kept
when its hash matches, and replaced when it does not.

The folder (default): :func:`corpus_audit.core.model_dir.model_dir` (``$CORPUS_AUDIT_MODEL_DIR``,
else the user's cache), where every stage looks. ``python -m corpus_audit.commands.fetch_models
[DEST_DIR]`` is the same (the Makefile runs it). A registry that cannot be reached, a wheel
without the files or a wrong hash is one line (:class:`FetchError`), never a traceback.
"""

from __future__ import annotations

import hashlib
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

from corpus_audit.core.errors import CorpusAuditError, printable
from corpus_audit.core.model_dir import model_dir

WHEEL_SPEC = "mediapipe==0.10.21"
MODEL_FILES = {
    "mediapipe/modules/face_detection/face_detection_full_range_sparse.tflite": "face_detection_full_range_sparse.tflite",
    "mediapipe/modules/face_detection/face_detection_short_range.tflite": "face_detection_short_range.tflite",
}
# SHA-256 of the files in the mediapipe 0.10.21 wheel (the same in every platform's wheel)
MODEL_SHA256 = {
    "face_detection_full_range_sparse.tflite": (
        "2c3728e6da56f21e21a320433396fb06d40d9088f2247c05e5635a688d45dfe1"
    ),
    "face_detection_short_range.tflite": (
        "bbff11cebd1eb27a1e004cae0b0e63ec8c551cbf34a4451148b4908b8db3eca8"
    ),
}


class FetchError(CorpusAuditError):
    """The models could not be fetched (registry, wheel content, hash, destination)."""


def sha256_file(path: Path) -> str:
    """Hex SHA-256 of ``path``'s bytes."""
    h = hashlib.sha256()
    with path.open("rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def _good(path: Path) -> bool:
    return path.is_file() and sha256_file(path) == MODEL_SHA256[path.name]


def fetch_face_models(dest: Path, *, echo=print) -> tuple[list[Path], list[Path]]:
    """Write the two face-detection models into ``dest``; returns ``(all files, those fetched
    now)``. Files already there with the pinned hash are kept. Raises :class:`FetchError`."""
    if dest.exists() and not dest.is_dir():
        raise FetchError(f"{printable(str(dest))}: not a directory (the model folder)")
    try:
        dest.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise FetchError(
            f"{printable(str(dest))}: cannot create the model folder ({exc})"
        ) from None
    wanted = {member: dest / name for member, name in MODEL_FILES.items()}
    todo = {m: p for m, p in wanted.items() if not _good(p)}
    if not todo:
        return list(wanted.values()), []
    with tempfile.TemporaryDirectory() as tmp:
        wheel = _download(Path(tmp), echo)
        try:
            zf = zipfile.ZipFile(wheel)
        except (zipfile.BadZipFile, OSError) as exc:
            raise FetchError(f"{wheel.name}: not a readable wheel ({exc})") from None
        with zf:
            for member, target in todo.items():
                try:
                    data = zf.read(member)
                except KeyError:
                    raise FetchError(
                        f"{wheel.name}: holds no {member}; the face models cannot be taken "
                        "from it (a wheel of another mediapipe build?)"
                    ) from None
                digest = hashlib.sha256(data).hexdigest()
                if digest != MODEL_SHA256[target.name]:
                    raise FetchError(
                        f"{wheel.name}: {target.name} has SHA-256 {digest}, expected "
                        f"{MODEL_SHA256[target.name]}; nothing written"
                    )
                part = target.with_name(target.name + ".part")
                part.write_bytes(data)
                part.replace(target)
    return list(wanted.values()), list(todo.values())


def _download(tmp: Path, echo) -> Path:
    """``pip download`` the mediapipe wheel into ``tmp``; its path, or :class:`FetchError`."""
    cmd = [sys.executable, "-m", "pip", "download", "-q", "--no-deps", "--only-binary=:all:"]
    cmd += ["-d", str(tmp), WHEEL_SPEC]
    echo(f"fetching MediaPipe face models: pip download {WHEEL_SPEC} (not installed)")
    try:
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise FetchError(f"pip download {WHEEL_SPEC} failed ({exc})") from None
    wheels = sorted(tmp.glob("mediapipe-*.whl"))
    if done.returncode != 0 or not wheels:
        lines = [ln.strip() for ln in (done.stderr or "").splitlines() if ln.strip()]
        errors = [ln for ln in lines if ln.startswith("ERROR")] or lines
        why = printable(errors[-1][:300]) if errors else f"exit status {done.returncode}"
        raise FetchError(
            f"pip download {WHEEL_SPEC}: {why} (is the package registry reachable? pip's "
            "index settings apply)"
        )
    return wheels[0]


def fetch_and_report(dest: Path) -> int:
    """Fetch into ``dest`` and print the folder, each file (size, hash checked) and what was
    fetched now."""
    files, fetched = fetch_face_models(dest)
    print(f"model folder: {dest}")
    for path in files:
        state = "fetched" if path in fetched else "already there"
        print(f"  {path} ({path.stat().st_size} bytes, sha256 checked, {state})")
    print(f"{len(fetched)} file(s) fetched, {len(files) - len(fetched)} already there")
    return 0


def main(argv: list[str] | None = None) -> int:
    """``python -m corpus_audit.commands.fetch_models [DEST_DIR]``; errors: one line, exit 2."""
    args = sys.argv[1:] if argv is None else argv
    dest = Path(args[0]).expanduser().absolute() if args else model_dir()
    try:
        return fetch_and_report(dest)
    except CorpusAuditError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    raise SystemExit(main())
