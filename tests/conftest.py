"""Shared fixtures: the real data in ../shared/data and fresh study directories."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
SHARED_DATA = Path(os.environ.get("CORPUS_AUDIT_SHARED_DATA", REPO.parent / "shared" / "data"))
DEMO_DATA = REPO / "corpus_audit" / "demo_data"

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("CORPUS_AUDIT_MODEL_DIR", str(REPO / ".cache" / "models"))


@pytest.fixture(scope="session")
def shared_data() -> Path:
    """``../shared/data`` (real LAION/COCO/BAFIS files); the suite needs it."""
    if not SHARED_DATA.is_dir():
        pytest.fail(f"{SHARED_DATA}: the shared real-data folder is missing (tests need it)")
    return SHARED_DATA


@pytest.fixture(scope="session")
def laion_path(shared_data: Path) -> Path:
    return shared_data / "laion400m_sample_10k.parquet"


@pytest.fixture(scope="session")
def coco_path(shared_data: Path) -> Path:
    return shared_data / "coco_val2017_captions.parquet"


@pytest.fixture
def make_study(tmp_path: Path) -> Callable[..., object]:
    """Factory: ``make_study(corpus_paths, **section_overrides)`` -> an open Study in tmp_path.

    Overrides are ``section={key: value}``, e.g. ``select={"sample_size": 50}``.
    """
    from corpus_audit.core.pipeline import init_study

    opened = []

    def factory(corpus: list[Path | str], name: str = "study", **overrides: dict) -> object:
        study = init_study(tmp_path / name, [str(c) for c in corpus], overrides=overrides)
        opened.append(study)
        return study

    yield factory
    for study in opened:
        with contextlib.suppress(Exception):
            study.close()
