# Type-checker view of corpus_audit/__init__.py: the API's names, imported lazily at run time.
from corpus_audit.api import STAGES as STAGES
from corpus_audit.api import Amplification as Amplification
from corpus_audit.api import ClassifierBackend as ClassifierBackend
from corpus_audit.api import CorpusAuditError as CorpusAuditError
from corpus_audit.api import ExportResult as ExportResult
from corpus_audit.api import Plugin as Plugin
from corpus_audit.api import PluginStatus as PluginStatus
from corpus_audit.api import StageRun as StageRun
from corpus_audit.api import Study as Study
from corpus_audit.api import amplify as amplify
from corpus_audit.api import analyze_texts as analyze_texts
from corpus_audit.api import arena_leaderboard as arena_leaderboard
from corpus_audit.api import arena_votes_file as arena_votes_file
from corpus_audit.api import demo_corpus as demo_corpus
from corpus_audit.api import logger as logger
from corpus_audit.api import plugins as plugins
from corpus_audit.api import published_table3 as published_table3
from corpus_audit.api import published_tables as published_tables

__version__: str
__all__: list[str]
