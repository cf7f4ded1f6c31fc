"""Corpus readers on the real LAION/COCO samples: formats, aliases, row numbers, bad input."""

from __future__ import annotations

import csv
import gzip
import json
import shutil
from pathlib import Path

import duckdb
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from corpus_audit.backends.corpus import (
    CorpusFile,
    get_reader,
    read_file,
    resolve_columns,
    resolve_corpus,
)
from corpus_audit.core.errors import CorpusError


def _read_all(path: Path | str, fmt: str | None = None, **columns: str):
    """(rows, texts, urls, counts) of one whole file through the public reader path."""
    files = resolve_corpus([str(path)], fmt or "auto")
    assert len(files) == 1
    rows, texts, urls = [], [], []
    n = null = bad = 0
    for cb in read_file(files[0], batch_rows=4096, **columns):
        rows += cb.table.column("row_in_file").to_pylist()
        texts += cb.table.column("text").to_pylist()
        urls += cb.table.column("url").to_pylist()
        n += cb.rows
        null += cb.null_text
        bad += cb.bad_text
    return rows, texts, urls, {"rows": n, "null": null, "bad": bad}


@pytest.fixture(scope="module")
def laion_rows(laion_path: Path) -> list[tuple[int, str, str]]:
    """(file_row_number, URL, TEXT) of the real LAION sample, read by DuckDB (the reference)."""
    return duckdb.sql(
        f"SELECT file_row_number, URL, TEXT FROM read_parquet('{laion_path}', file_row_number=true)"
        " ORDER BY file_row_number"
    ).fetchall()


@pytest.fixture(scope="module")
def coco_captions(coco_path: Path) -> list[str]:
    return pq.read_table(coco_path, columns=["caption"]).column("caption").to_pylist()


# -- parquet ----------------------------------------------------------------------------------
def test_laion_parquet_rows_and_text_verbatim(laion_path: Path, laion_rows) -> None:
    rows, texts, urls, counts = _read_all(laion_path)
    assert counts == {"rows": 10_000, "null": 0, "bad": 0}
    assert rows == [r[0] for r in laion_rows]  # same 0-based numbering as DuckDB
    assert texts == [r[2] for r in laion_rows]
    assert urls == [r[1] for r in laion_rows]
    # row 6 holds raw HTML; it is read verbatim (escaping is the report's job)
    assert texts[6].startswith("<a href='http://nymetroparents.com/listing/Yale-New-Haven")
    assert texts[6].endswith("</a>Ribbon Cutting Ceremony.")


def test_coco_caption_alias_without_url(coco_path: Path, coco_captions) -> None:
    rows, texts, urls, counts = _read_all(coco_path)
    assert counts["rows"] == 25_014
    assert texts == coco_captions
    assert rows == list(range(25_014))
    assert set(urls) == {None}  # COCO has coco_url/flickr_url, neither is an alias of URL


def test_lowercase_aliases_and_overrides(tmp_path: Path, laion_rows) -> None:
    path = tmp_path / "relaion.parquet"
    pq.write_table(
        pa.table(
            {
                "url": [r[1] for r in laion_rows[:50]],
                "text": [r[2] for r in laion_rows[:50]],
                "alt": ["x"] * 50,
            }
        ),
        path,
    )
    _, texts, urls, _ = _read_all(path)
    assert texts == [r[2] for r in laion_rows[:50]]
    assert urls == [r[1] for r in laion_rows[:50]]
    _, texts, urls, _ = _read_all(path, text_column="alt", url_column="text")
    assert texts == ["x"] * 50 and urls == [r[2] for r in laion_rows[:50]]
    cols = resolve_columns(path, ["URL", "TEXT", "caption", "text"])
    assert (cols.text, cols.url) == ("TEXT", "URL")  # TEXT first, as in LAION
    assert resolve_columns(path, ["Caption"]).text == "Caption"  # any letter case


def test_missing_text_column_names_file_and_columns(tmp_path: Path) -> None:
    path = tmp_path / "nocap.parquet"
    pq.write_table(pa.table({"URL": ["http://a"], "title": ["a title"]}), path)
    with pytest.raises(
        CorpusError, match=r"nocap\.parquet: no caption column .*Columns: URL, title"
    ):
        list(read_file(resolve_corpus([str(path)])[0]))
    with pytest.raises(CorpusError, match=r"nocap\.parquet: no caption column 'desc'"):
        list(read_file(resolve_corpus([str(path)])[0], text_column="desc"))


def test_truncated_parquet_is_a_clear_error(tmp_path: Path, laion_path: Path) -> None:
    path = tmp_path / "broken.parquet"
    data = laion_path.read_bytes()
    path.write_bytes(data[: len(data) // 2])
    with pytest.raises(CorpusError, match=r"broken\.parquet: not a readable parquet file"):
        list(read_file(resolve_corpus([str(path)])[0]))


def test_corrupt_parquet_pages_are_a_clear_error(tmp_path: Path, laion_path: Path) -> None:
    path = tmp_path / "pages.parquet"
    data = bytearray(laion_path.read_bytes())
    data[1000:200_000] = bytes(199_000)  # footer intact, column data zeroed
    path.write_bytes(bytes(data))
    with pytest.raises(CorpusError, match=r"pages\.parquet"):
        list(read_file(resolve_corpus([str(path)])[0]))


def test_null_empty_and_invalid_utf8_are_counted(tmp_path: Path, coco_captions) -> None:
    path = tmp_path / "mixed.parquet"
    texts = [
        coco_captions[0].encode(),
        None,
        b"",
        b"a teacher \xff\xfe here",
        coco_captions[1].encode(),
    ]
    pq.write_table(pa.table({"TEXT": pa.array(texts, pa.binary())}), path)
    rows, out, _, counts = _read_all(path)
    assert counts == {"rows": 5, "null": 2, "bad": 1}
    assert rows == [0, 1, 2, 3, 4]
    assert out == [coco_captions[0], None, "", None, coco_captions[1]]


def test_long_caption_is_read_whole(tmp_path: Path, coco_captions) -> None:
    long = " ".join(coco_captions[:200])[:10_240]
    assert len(long) == 10_240
    path = tmp_path / "long.parquet"
    pq.write_table(pa.table({"TEXT": [coco_captions[0], long]}), path)
    _, texts, _, _ = _read_all(path)
    assert texts[1] == long


def test_empty_files_are_empty_not_errors(tmp_path: Path) -> None:
    schema_only = tmp_path / "empty.parquet"
    pq.write_table(pa.table({"TEXT": pa.array([], pa.string())}), schema_only)
    zero_bytes = tmp_path / "zero.csv"
    zero_bytes.write_bytes(b"")
    header_only = tmp_path / "header.csv"
    header_only.write_text("TEXT,URL\n")
    blank = tmp_path / "blank.jsonl"
    blank.write_text("\n\n")
    for path in (schema_only, zero_bytes, header_only, blank):
        assert _read_all(path)[3]["rows"] == 0, path


# -- CSV / JSONL / HF ---------------------------------------------------------------------------
def test_csv_with_quotes_newlines_and_bad_bytes(tmp_path: Path, laion_rows) -> None:
    path = tmp_path / "captions.csv"
    rows = laion_rows[:300]
    with path.open("w", newline="", encoding="utf-8") as fh:
        w = csv.writer(fh)
        w.writerow(["URL", "TEXT", "other"])
        for _, url, text in rows:
            w.writerow([url, text, "x"])
        w.writerow(["http://n", 'two lines, "quoted"\nsecond line', "x"])
        w.writerow(["http://e", "", "x"])
    raw = (
        path.read_bytes()
        + b'http://bad,"caf\xe9 teacher (latin-1)",x\nhttp://z,after the bad row,\xff\n'
    )
    path.write_bytes(raw)
    numbers, texts, urls, counts = _read_all(path)
    assert counts == {"rows": 304, "null": 1, "bad": 1}
    assert numbers == list(range(304))
    assert texts[:300] == [r[2] for r in rows]
    assert urls[:300] == [r[1] for r in rows]
    assert texts[300] == 'two lines, "quoted"\nsecond line'
    assert texts[302] is None  # invalid UTF-8: counted, not fatal
    assert texts[303] == "after the bad row"  # a bad byte in another column does not matter


def test_tsv_and_gzip_csv(tmp_path: Path, coco_captions) -> None:
    tsv = tmp_path / "c.tsv"
    tsv.write_text(
        "caption\tid\n" + "".join(f"{c}\t{i}\n" for i, c in enumerate(coco_captions[:20]))
    )
    assert _read_all(tsv)[1] == coco_captions[:20]
    gz = tmp_path / "c.csv.gz"
    with gzip.open(gz, "wt", newline="", encoding="utf-8") as fh:
        w = csv.writer(fh)
        w.writerow(["caption"])
        w.writerows([c] for c in coco_captions[:20])
    assert _read_all(gz)[1] == coco_captions[:20]


def test_jsonl_line_numbers_bad_bytes_and_malformed(tmp_path: Path, laion_rows) -> None:
    path = tmp_path / "c.jsonl"
    lines = [json.dumps({"url": u, "caption": t, "n": i}).encode() for i, u, t in laion_rows[:100]]
    lines.insert(10, b"")  # blank line: skipped, line numbers keep counting
    lines.insert(20, b'{"caption": "bad \xff teacher", "url": "http://x"}')
    lines.insert(30, b'{"caption": null, "url": "http://y"}')
    lines.insert(40, b'{"caption": 12345}')  # not a string: its text form
    path.write_bytes(b"\n".join(lines) + b"\n")
    numbers, texts, urls, counts = _read_all(path)
    assert counts == {"rows": 103, "null": 1, "bad": 1}
    assert 10 not in numbers and numbers[:10] == list(range(10)) and numbers[-1] == 103
    by_line = dict(zip(numbers, texts, strict=True))
    assert by_line[20] is None and by_line[30] is None and by_line[40] == "12345"
    assert by_line[0] == laion_rows[0][2] and by_line[103] == laion_rows[99][2]
    broken = tmp_path / "broken.jsonl"
    broken.write_bytes(lines[0] + b"\n" + b'{"caption": "unterminated\n')
    with pytest.raises(CorpusError, match=r"broken\.jsonl:2: not valid JSON"):
        _read_all(broken)


def test_hf_save_to_disk_dataset_and_dict(tmp_path: Path, coco_captions) -> None:
    datasets = pytest.importorskip("datasets")
    data = {"caption": coco_captions[:2500], "image_id": list(range(2500))}
    ds = datasets.Dataset.from_dict(data)
    ds.save_to_disk(str(tmp_path / "ds"), num_shards=3)
    numbers, texts, _, counts = _read_all(tmp_path / "ds")
    assert counts["rows"] == 2500
    assert numbers == list(range(2500)) and texts == coco_captions[:2500]  # shard order kept
    datasets.DatasetDict(
        {"train": ds.select(range(2000)), "test": ds.select(range(2000, 2500))}
    ).save_to_disk(str(tmp_path / "dd"))
    files = resolve_corpus([str(tmp_path / "dd")])
    assert [(Path(f.path).name, f.format) for f in files] == [("test", "hf"), ("train", "hf")]
    got = [cb.table.column("text").to_pylist() for cb in read_file(files[0])]
    assert sum(got, []) == coco_captions[2000:2500]


# -- resolving paths --------------------------------------------------------------------------
def test_file_ids_follow_sorted_paths_not_argument_order(tmp_path: Path, laion_path: Path) -> None:
    for name in ("b.parquet", "a.parquet", "c.parquet"):
        shutil.copy(laion_path, tmp_path / name)
    one = resolve_corpus(
        [str(tmp_path / "c.parquet"), str(tmp_path / "a.parquet"), str(tmp_path / "b.parquet")]
    )
    two = resolve_corpus([str(tmp_path / "*.parquet")])
    three = resolve_corpus([str(tmp_path), str(tmp_path / "a.parquet")])  # de-duplicated
    assert one == two == three
    assert [(f.file_id, Path(f.path).name) for f in one] == [
        (0, "a.parquet"),
        (1, "b.parquet"),
        (2, "c.parquet"),
    ]


def test_directory_expansion_skips_hidden_and_foreign_files(
    tmp_path: Path, laion_path: Path
) -> None:
    (tmp_path / "sub").mkdir()
    (tmp_path / ".cache").mkdir()
    shutil.copy(laion_path, tmp_path / "sub" / "00000.parquet")
    shutil.copy(laion_path, tmp_path / ".cache" / "x.parquet")
    shutil.copy(laion_path, tmp_path / "_tmp.parquet")
    (tmp_path / "00000_stats.json").write_text("{}")
    (tmp_path / "README.txt").write_text("hello")
    (tmp_path / "extra.jsonl").write_text('{"text": "a nurse"}\n')
    files = resolve_corpus([str(tmp_path)])
    assert [(Path(f.path).name, f.format) for f in files] == [
        ("extra.jsonl", "jsonl"),
        ("00000.parquet", "parquet"),
    ]


def test_unknown_format_and_missing_paths(tmp_path: Path) -> None:
    odd = tmp_path / "captions.xml"
    odd.write_text("<x/>")
    with pytest.raises(CorpusError, match=r"captions\.xml: cannot tell the corpus format"):
        resolve_corpus([str(odd)])
    with pytest.raises(CorpusError, match=r"unknown corpus format 'xml'"):
        resolve_corpus([str(odd)], "xml")
    with pytest.raises(CorpusError, match=r"unknown corpus format 'webdataset'"):
        get_reader("webdataset")
    with pytest.raises(CorpusError, match=r"nothere\.parquet: no such corpus file"):
        resolve_corpus([str(tmp_path / "nothere.parquet")])
    with pytest.raises(CorpusError, match=r"the glob matches no file"):
        resolve_corpus([str(tmp_path / "*.parquet")])
    # an explicit format reads any name
    as_csv = tmp_path / "captions.txt"
    as_csv.write_text("caption\na nurse\n")
    (f,) = resolve_corpus([str(as_csv)], "csv")
    assert f == CorpusFile(0, str(as_csv.resolve()), "csv")
    assert [cb.table.column("text").to_pylist() for cb in read_file(f)] == [["a nurse"]]
