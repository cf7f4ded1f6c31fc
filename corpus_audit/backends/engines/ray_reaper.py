"""What a local Ray cluster started by corpus_audit leaves behind when the driver is killed
(kill -9, the OOM killer), and its removal.

Ray ties the processes it starts itself (GCS server, raylet, monitors) to the driver with
``PR_SET_PDEATHSIG`` and the workers die with the raylet, but the two agents the raylet
starts (``ray::DashboardAgent``, ``ray::RuntimeEnvAgent``, Ray 2.60) outlive it: they notice
the raylet's death and then hang on their way out. And every session leaves its folder
(``/tmp/ray/session_<date>_<pid>``: logs, sockets, port files), a clean exit too.

- :func:`start_watcher` starts a small process (``python -m
  corpus_audit.backends.engines.ray_reaper DRIVER_PID``, Linux only: it reads ``/proc``) that
  notes every :data:`POLL_S` seconds which Ray processes descend from the driver; when the
  driver is gone it kills those still alive (the same pid *and* start time, so never a process that
  reused a pid) and exits. After a clean :meth:`RayEngine.close` it finds nothing to kill.
- :func:`mark_session` writes :data:`OWNER_FILE` (the driver's pid and start time) into the
  session folder of a cluster corpus_audit started; :func:`remove_stale_sessions`, run when the
  next local cluster starts, removes the session folders holding that mark whose driver is
  gone. Folders without it (a ``ray start`` cluster, another program's) are never touched.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

OWNER_FILE = "corpus_audit_owner.json"
POLL_S = 0.5  # seconds between two looks at the driver's descendants


def start_time(pid: int) -> int | None:
    """The start time of process ``pid`` (clock ticks after boot, ``/proc/PID/stat`` field
    22), or None when there is no such process, it has exited (a zombie waiting for its
    parent), or there is no ``/proc``."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text(encoding="ascii", errors="replace")
    except OSError:
        return None
    fields = text[text.rindex(")") + 2 :].split()  # after "pid (comm) "
    return None if fields[0] in ("Z", "X") else int(fields[19])


def descendants(root: int) -> dict[int, int]:
    """``{pid: start time}`` of every process descending from ``root`` (not ``root``)."""
    children: dict[int, list[int]] = {}
    started: dict[int, int] = {}
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            text = Path(entry.path, "stat").read_text(encoding="ascii", errors="replace")
        except OSError:
            continue  # gone meanwhile
        fields = text[text.rindex(")") + 2 :].split()
        pid = int(entry.name)
        children.setdefault(int(fields[1]), []).append(pid)
        started[pid] = int(fields[19])
    out: dict[int, int] = {}
    todo = list(children.get(root, []))
    while todo:
        pid = todo.pop()
        if pid not in out and pid in started:
            out[pid] = started[pid]
            todo += children.get(pid, [])
    return out


def is_ray(pid: int) -> bool:
    """Whether process ``pid``'s command line names Ray (``ray::DashboardAgent``, the
    ``gcs_server`` and ``raylet`` binaries under ``.../ray/core/``, ``ray/_private`` scripts):
    the watcher kills only those, never another child of the driver (a notebook's own server,
    a user's subprocess)."""
    try:
        return b"ray" in Path(f"/proc/{pid}/cmdline").read_bytes().lower()
    except OSError:
        return False


def _alive(pid: int, started: int | None) -> bool:
    """Whether ``pid`` still runs as the process that started at ``started``."""
    now = start_time(pid)
    return now is not None and now == started


def watch(driver: int, poll_s: float = POLL_S) -> list[int]:
    """Follow ``driver``'s descendants until it is gone, then kill the Ray ones left
    (:func:`is_ray`); returns the pids killed. The watcher's own pid is never among them."""
    me = os.getpid()
    driver_started = start_time(driver)
    seen: dict[int, int] = {}
    while _alive(driver, driver_started):
        now = descendants(driver)
        now.pop(me, None)
        seen.update({pid: st for pid, st in now.items() if pid not in seen and is_ray(pid)})
        seen = {pid: st for pid, st in seen.items() if _alive(pid, st)}
        time.sleep(poll_s)
    killed = []
    for pid, started in seen.items():
        if _alive(pid, started):
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGKILL)
                killed.append(pid)
    return killed


def start_watcher() -> subprocess.Popen | None:
    """Start the watcher of this process (see the module docstring); None off Linux."""
    if not sys.platform.startswith("linux") or start_time(os.getpid()) is None:
        return None
    return subprocess.Popen(
        [sys.executable, "-m", __name__, str(os.getpid())],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        close_fds=True,
    )


def stop_watcher(proc: subprocess.Popen | None) -> None:
    """Stop a watcher after a clean shutdown (nothing is left to kill)."""
    if proc is not None and proc.poll() is None:
        proc.terminate()
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(timeout=5)


def mark_session(session_dir: Path) -> None:
    """Mark ``session_dir`` as a session this process started (its pid and start time)."""
    owner = {"pid": os.getpid(), "start_time": start_time(os.getpid())}
    with contextlib.suppress(OSError):
        (session_dir / OWNER_FILE).write_text(json.dumps(owner), encoding="utf-8")


def remove_stale_sessions(temp_root: Path, keep: Path | None = None) -> list[Path]:
    """Remove the session folders under ``temp_root`` (``/tmp/ray``) that a corpus_audit
    driver started (:data:`OWNER_FILE`) and whose driver is gone; returns those removed."""
    removed = []
    with contextlib.suppress(OSError):
        for folder in sorted(temp_root.glob("session_*")):
            if folder.is_symlink() or not folder.is_dir() or folder == keep:
                continue
            try:
                owner = json.loads((folder / OWNER_FILE).read_text(encoding="utf-8"))
                pid, started = int(owner["pid"]), owner["start_time"]
            except (OSError, ValueError, KeyError, TypeError):
                continue  # not ours, or not readable: leave it
            if _alive(pid, started):
                continue
            shutil.rmtree(folder, ignore_errors=True)
            removed.append(folder)
    return removed


if __name__ == "__main__":  # the watcher process
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the driver's to handle
    watch(int(sys.argv[1]))
