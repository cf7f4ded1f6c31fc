"""Credentials never enter a study (issue 44, H3): a URL with a user name or password (a
corpus on an HTTP server, an S3 key pair, an endpoint, an API base) is refused by `init`,
`config set`, `Study.create` and `Study.set` with one line that does not quote it, before any
request is sent; then a study on the same server (without the password) is selected,
reported and exported, and no byte of either secret is anywhere in the study directory, the
export or the commands' output."""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "backends"))
from http_range_server import RangeServer  # noqa: E402

from corpus_audit import CorpusAuditError, Study  # noqa: E402
from corpus_audit.cli import main  # noqa: E402

HTTP_SECRET = "Hunter2Secret"
S3_SECRET = "wJalrXUtnFEMIK7MDENGbPxRfiCYzEXAMPLEKEY"
SECRETS = (HTTP_SECRET, S3_SECRET, "bob:", "AKIAIOSFODNN7EXAMPLE")
CORPUS = (
    Path(__file__).resolve().parents[2] / "corpus_audit/demo_data/coco_val2017_captions.parquet"
)


def _cli(capfd, *argv: str) -> tuple[int, str]:
    code = main(list(argv))
    out, err = capfd.readouterr()
    return code, out + err


def _clean(text: str) -> None:
    for secret in SECRETS:
        assert secret not in text


def _no_secret_under(folder: Path) -> int:
    """Every file under ``folder`` read as bytes: none holds a secret; returns the count."""
    files = [p for p in folder.rglob("*") if p.is_file()]
    for path in files:
        data = path.read_bytes()
        for secret in SECRETS:
            assert secret.encode() not in data, f"{secret} in {path}"
    return len(files)


@pytest.fixture
def served(tmp_path):
    folder = tmp_path / "served"
    folder.mkdir()
    shutil.copy(CORPUS, folder / "x.parquet")
    with RangeServer(folder) as server:
        yield server


def test_credentials_in_urls_are_refused_and_never_reach_the_study(tmp_path, served, capfd):
    host = served.url.split("://", 1)[1]
    with_password = f"http://bob:{HTTP_SECRET}@{host}/x.parquet"
    s3_keys = f"s3://AKIAIOSFODNN7EXAMPLE:{S3_SECRET}@bucket/x.parquet"
    s3_slash = f"s3://AKIAIOSFODNN7EXAMPLE:{S3_SECRET[:8]}/{S3_SECRET[8:]}@bucket/x.parquet"
    for n, url in enumerate((with_password, s3_keys, s3_slash)):
        code, said = _cli(capfd, "init", str(tmp_path / f"refused{n}"), "--corpus", url)
        assert code == 2 and said.count("\n") == 1
        assert "corpus.paths[0]: a URL with a user name or password is refused" in said
        assert "AWS_ACCESS_KEY_ID" in said  # where credentials go instead
        _clean(said)
        assert not (tmp_path / f"refused{n}").exists()
    assert served.served.requests == []  # refused before any request

    root = tmp_path / "study"
    code, said = _cli(capfd, "init", str(root), "--corpus", f"{served.url}/x.parquet")
    assert code == 0, said
    before = (root / "study.toml").read_bytes()
    for assignment in (
        f'corpus.paths=["{with_password}"]',
        f"storage.endpoint_url=http://AKIAIOSFODNN7EXAMPLE:{S3_SECRET}@127.0.0.1:9000",
        f"llm.api_base=https://bob:{HTTP_SECRET}@127.0.0.1:8000/v1",
        f"generate.api_base=https://bob:{HTTP_SECRET}@127.0.0.1:8000/v1",
    ):
        code, said = _cli(capfd, "config", "set", str(root), assignment)
        assert code == 2 and said.count("\n") == 1 and "is refused" in said, said
        _clean(said)
    for argv in (
        ("import-images", str(root), s3_keys.rsplit("/", 1)[0] + "/"),
        ("texts", with_password, "--out", str(tmp_path / "texts")),
    ):
        code, said = _cli(capfd, *argv)
        assert code == 2 and said.count("\n") == 1 and "is refused" in said, said
        _clean(said)
    assert not (tmp_path / "texts").exists()
    assert (root / "study.toml").read_bytes() == before

    with Study.open(root) as study:  # the API: Study.set
        for key, value in (("corpus.paths", [s3_keys]), ("storage.endpoint_url", with_password)):
            with pytest.raises(CorpusAuditError) as info:
                study.set({key: value})
            _clean(str(info.value))
    with pytest.raises(CorpusAuditError) as info:  # Study.create
        Study.create(tmp_path / "api", [with_password])
    _clean(str(info.value))
    assert not (tmp_path / "api").exists()

    for argv in (
        ("-q", "select", str(root)),
        ("-q", "report", str(root)),
        ("-q", "export", str(root), "--out", str(tmp_path / "export"), "--format", "csv"),
    ):
        code, said = _cli(capfd, *argv)
        assert code == 0, said
        _clean(said)
    assert served.served.requests  # the study read the corpus from the server
    assert (root / "report").is_dir() and (tmp_path / "export" / "manifest.json").is_file()
    assert (root / "study.duckdb").is_file() and list((root / "report").glob("*.html"))
    assert _no_secret_under(root) >= 3
    assert _no_secret_under(tmp_path / "export") > 2


@pytest.mark.parametrize(
    ("text", "secret"),
    [
        ("http://bob:pw@host/x", True),
        ("http://bob@host/x", True),
        ("s3://KEY:SECRET@bucket/x", True),
        ("s3://KEY:SE/CRET@bucket/x", True),
        ("openai:http://u:p@127.0.0.1:8000/v1", True),
        ("http://127.0.0.1:8000/v1", False),
        ("http://[::1]:8000/x", False),
        ("hf://datasets/org/name@main/x.parquet", False),
        ("memory://bucket/x", False),
        ("a photo of a man", False),
        ("/data/with@sign/x.parquet", False),
    ],
)
def test_has_credentials(text, secret):
    from corpus_audit.core.urls import has_credentials

    assert has_credentials(text) is secret
