"""corpus_audit: audit image-caption corpora for gender-occupation bias and its amplification."""

__version__ = "0.1.0"
