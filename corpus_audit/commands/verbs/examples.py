"""One example per command of ``corpus-audit`` (shown at the end of its ``--help``), and the
groups of the top-level help. Keys are the command path with hyphens (``config set``); a
stage verb without an entry gets ``corpus-audit STAGE my_study``."""

from __future__ import annotations

EXAMPLES: dict[str, str] = {
    "init": "corpus-audit init my_study --corpus 'laion/part-*.parquet' --preset paper --seed 0",
    "run": "corpus-audit run my_study --until neighbors",
    "status": "corpus-audit status my_study",
    "config": "corpus-audit config set my_study label.classifier=clip label.threshold=0.8",
    "config show": "corpus-audit config show my_study",
    "config set": "corpus-audit config set my_study label.classifier=clip label.threshold=0.8",
    "validate": "corpus-audit validate export my_study --n 200",
    "validate export": "corpus-audit validate export my_study --n 200",
    "validate import": "corpus-audit validate import my_study sheet_alice.csv sheet_bob.csv",
    "battles": "corpus-audit battles export my_study --aspect bias --n 200",
    "battles export": "corpus-audit battles export my_study --aspect bias --n 200",
    "battles import": "corpus-audit battles import my_study votes_alice.csv arena_votes.json",
    "amplify": "corpus-audit amplify --table sd14=percent_female_sd14.tsv --training-n 500 --report",
    "regenerate": "corpus-audit regenerate my_study gen:sd14:direct:1:nurse:0",
    "import-images": "corpus-audit import-images my_study dalle3/manifest.csv --model dall-e-3",
    "texts": "corpus-audit texts bios.jsonl --out bios_study --occupation-column occupation",
    "demo": "corpus-audit demo my_demo",
    "export": "corpus-audit export my_study --format csv --out my_export",
    "plugins": "corpus-audit plugins",
    "fetch-models": "corpus-audit fetch-models",
    "recaption": "corpus-audit recaption my_study --model /models/blip-image-captioning-base",
    "generate": "corpus-audit generate my_study   # generate.models in study.toml",
    "llm-texts": "corpus-audit llm-texts my_llm_study   # after init --kind llm --model ...",
}

# The top-level help: (title, commands); stages are listed by study kind, in run order.
GROUPS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("study", ("init", "run", "status", "config", "demo")),
    ("import and export", ("import-images", "export", "validate", "battles")),
    ("tools", ("amplify", "texts", "regenerate", "plugins", "fetch-models")),
)


def example(path: str) -> str:
    """The example of command ``path`` (hyphenated, ``config set``)."""
    return EXAMPLES.get(path) or f"corpus-audit {path} my_study"
