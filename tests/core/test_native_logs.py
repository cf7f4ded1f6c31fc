"""quiet_native_logs: the C++ runtimes' INFO/WARNING lines on fd 2 are dropped, everything
else written to fd 2 in the block (errors, Python's own stderr) comes back."""

from __future__ import annotations

import os
import sys

from corpus_audit.core.native_logs import is_native_log, quiet_native_logs

# Lines MediaPipe 0.10 printed while `label` ran on real photos (before this filter).
REAL_LINES = [
    "INFO: [environment.cc:36] Creating LiteRT environment with options",
    "INFO: [accelerator_registry.cc:54] RegisterAccelerator: ptr=0x7f8618004530, name=Cpu",
    "INFO: Created TensorFlow Lite XNNPACK delegate for CPU.",
    "WARNING: Logging before InitGoogle() is written to STDERR",
    "W0000 00:00:1795882814.993664    4042 inference_runner_litert.cc:1433] Input tensor "
    "memory is not aligned according to LiteRt's memory alignment requirements.",
    "WARNING: [model_load.cc:402] Sparsity tensors may not yet be fully supported.",
    "INFO: [accelerator_registry.cc:43] DestroyAccelerator: ptr=0x7f8618004530, name=Cpu",
]


def test_the_runtime_log_lines_are_recognised_and_others_are_not():
    assert all(is_native_log(line) for line in REAL_LINES)
    for line in (
        "E0000 00:00:1795882814.993664    4042 face_detector.cc:12] cannot open model",
        "ERROR: [model_load.cc:12] Failed to load model",
        "error: study.toml: unknown key",
        "INFO: the caption was empty",
        "label: 100%|##########| 3/3 [00:01<00:00, 2.1batch/s]",
    ):
        assert not is_native_log(line), line


def test_only_the_runtime_lines_are_dropped(capfd):
    with quiet_native_logs():
        for line in REAL_LINES:
            os.write(2, (line + "\n").encode())
        os.write(2, b"E0000 00:00:1.5    1 x.cc:3] a real error\n")
        print("python's own stderr", file=sys.stderr)
        with quiet_native_logs():  # reentrant
            os.write(2, b"INFO: [x.cc:1] nested\n")
    err = capfd.readouterr().err
    # (pytest's capfd takes Python's sys.stderr apart from fd 2: the order may differ)
    assert sorted(err.splitlines()) == [
        "E0000 00:00:1.5    1 x.cc:3] a real error",
        "python's own stderr",
    ]
    os.write(2, b"INFO: [x.cc:1] after the block\n")  # outside the block fd 2 is untouched
    assert capfd.readouterr().err == "INFO: [x.cc:1] after the block\n"
