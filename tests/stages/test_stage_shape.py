"""One stage shape: plan units -> ``engine.map_*`` -> write each result in order.

Every module under ``corpus_audit/stages/`` is read with :mod:`ast` (nothing is imported or
run) and must not

- create a thread or process pool of its own (``ThreadPoolExecutor``,
  ``ProcessPoolExecutor``, ``multiprocessing.Pool``/``Process``, ``ThreadPool``,
  ``threading.Thread``...): parallel work goes through the engine
  (``corpus_audit.backends.engines``: the ``local`` engine is the in-process path);
- branch on the engine's name (``engine.engine``, an engine's ``.name``, or a comparison
  with ``"local"``/``"ray"``): a stage asks the engine (``map_tasks``, ``map_actors``,
  ``actor_workers``, ``worker_device``), never which engine it is;
- open the study's engine itself (``engine_from_config``): a stage asks its run for it
  (``stage_engine(section, run)``, or ``model_actors(..., run=run)``), and ``Study.stage``
  closes it when the run ends;
- open its own run or check its own inputs (``study.stage(...)``, ``require_inputs(...)``):
  the body is declared with ``@stage_body(NAME)`` (``corpus_audit/core/stage_runner.py``), and
  the runner opens the run and checks the inputs the catalogue declares, once, in one order;
- open a progress bar of its own (import ``tqdm``): a stage declares its bar
  (``backends.engines.base.Progress``) and the one bar of the package draws it
  (``progress_bar``, ``track``, or the engine's own for a map);
- load a model itself (:data:`MODEL_LOADERS`, the backends the model registries name, or
  calling what a registry's ``get`` returned): a model is a worker of the run's engine, a
  ``ModelSpec(load, args, serve)`` handed to ``model_actors`` / ``model_session``, its
  ``load`` passed, not called. Calls inside a function or class of the module that is the
  ``load`` of a ``ModelSpec`` there are the worker's own loading, so they are allowed;
- ask which backend it has: compare a model backend's registered name with a string
  (``backend == "transformers"``, ``split_spec(model)[0] == "openai"``) or probe a
  backend for a flag (``getattr(GENERATORS.get(b), "per_image", False)``): a backend
  declares what a stage needs through its protocol (``generator_traits(model).per_image``).

The checker is itself tested on snippets of the code it replaced, so it can fail.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass
from pathlib import Path

import pytest

import corpus_audit.stages
from corpus_audit.backends import (
    captioners,
    classifiers,
    embeddings,
    faces,
    feedback,
    generators,
    landmarks,
    text_generators,
)
from corpus_audit.backends.engines import engine_names

STAGES = Path(corpus_audit.stages.__file__).parent

#: classes whose construction is a pool of threads or processes
POOL_CLASSES = frozenset(
    {"ThreadPoolExecutor", "ProcessPoolExecutor", "Pool", "ThreadPool", "Thread", "Process"}
)
#: modules a stage needs none of (every parallel thing they offer is a pool)
POOL_MODULES = ("multiprocessing", "concurrent.futures")
#: progress-bar libraries: a stage declares a Progress, the package's one bar draws it
BAR_MODULES = ("tqdm",)


#: the registries of model backends: their names must not be compared in a stage, what they
#: register must not be called there (a lazy ``"module:attribute"`` by its attribute)
MODEL_REGISTRIES = {
    "CAPTIONERS": captioners.CAPTIONERS,
    "CLASSIFIERS": classifiers.CLASSIFIERS,
    "EMBEDDERS": embeddings.EMBEDDERS,
    "FACE_DETECTORS": faces.FACE_DETECTORS,
    "WRITERS": feedback.WRITERS,
    "GENERATORS": generators.GENERATORS,
    "LANDMARKERS": landmarks.LANDMARKERS,
    "TEXT_GENERATORS": text_generators.TEXT_GENERATORS,
}
#: model loaders by the last part of their name (functions, classes, methods)
MODEL_LOADERS = frozenset(
    {
        "load_embedder", "open_generator", "open_text_generator", "load_text_generator",
        "open_captioner", "load_captioner", "load_paraphraser", "transformers_completer",
        "build_classifier", "get_face_detector", "ClipClassifier", "AgeGenderClassifier",
        "SentenceTransformer", "from_pretrained", "TransformersLM", "pipeline",
    }
)  # fmt: skip
#: loaders known by their module's name (``spacy.load``, ``open_clip.create_model*``)
MODULE_LOADERS = ("spacy.load", "open_clip.create_model")
#: registered names too generic to be a loader's name (a lazy entry's ``module:factory``)
GENERIC_NAMES = frozenset({"factory", "build"})


def _entry_names(entry: object) -> set[str]:
    """The names a registry entry is called by: a lazy entry's attribute, an object's
    ``__name__``, and those of the callables it holds (a classifier's ``build``)."""
    if isinstance(entry, str):
        return {entry.rpartition(":")[2]}
    if hasattr(entry, "__name__"):  # a class or a function
        return {entry.__name__}
    names = set()
    for value in vars(entry).values():  # an object holding its loaders
        if callable(value) and getattr(value, "__name__", "<lambda>") != "<lambda>":
            names.add(value.__name__)
    return names


def registered_loaders() -> frozenset[str]:
    """:data:`MODEL_LOADERS` and every callable the model registries name."""
    names = set(MODEL_LOADERS)
    for registry in MODEL_REGISTRIES.values():
        for _, entry in registry.items():
            names |= _entry_names(entry)
    return frozenset(n for n in names if n and n not in GENERIC_NAMES)


def backend_names() -> frozenset[str]:
    """The registered names of every model backend (``transformers``, ``openai``, ...)."""
    return frozenset(n for r in MODEL_REGISTRIES.values() for n in r.names())


@dataclass(frozen=True)
class Finding:
    line: int
    what: str

    def __str__(self) -> str:
        return f"line {self.line}: {self.what}"


def _dotted(node: ast.AST) -> str:
    """``a.b.c`` for a chain of names and attributes (``?`` for anything else)."""
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        return f"{_dotted(node.value)}.{node.attr}"
    if isinstance(node, ast.Call):
        return f"{_dotted(node.func)}()"
    return "?"


def _engine_name_read(node: ast.AST) -> str | None:
    """What reads an engine's name in ``node``: ``x.engine.engine`` (the ``[engine]``
    section's name) or ``<engine>.name``; None when it reads none."""
    if isinstance(node, ast.Attribute):
        text = _dotted(node)
        if node.attr == "engine" and _dotted(node.value).endswith("engine"):
            return text
        if node.attr == "name" and "engine" in _dotted(node.value).lower():
            return text
    return None


def check_source(source: str) -> list[Finding]:
    """The pools and engine-name branches in one module's source (see the module docstring)."""
    names = set(engine_names())
    found: list[Finding] = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Call):
            callee = _dotted(node.func)
            if callee.split(".")[-1] in POOL_CLASSES:
                found.append(Finding(node.lineno, f"creates a pool: {callee}(...)"))
            if callee.split(".")[-1] == "engine_from_config":
                found.append(Finding(node.lineno, f"opens the study's engine: {callee}(...)"))
            if callee.endswith("study.stage") or callee.split(".")[-1] == "require_inputs":
                found.append(Finding(node.lineno, f"does the runner's setup itself: {callee}(...)"))
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.startswith(POOL_MODULES + BAR_MODULES):
                    found.append(Finding(node.lineno, f"imports {alias.name}"))
        elif isinstance(node, ast.ImportFrom):
            module = node.module or ""
            if module.startswith(BAR_MODULES):
                found.append(Finding(node.lineno, f"opens its own progress bar ({module})"))
            pools = [a.name for a in node.names if a.name in POOL_CLASSES]
            if module.startswith(POOL_MODULES) or pools:
                what = ", ".join(a.name for a in node.names)
                found.append(Finding(node.lineno, f"imports {what} from {module}"))
        elif isinstance(node, ast.Compare):
            operands = [node.left, *node.comparators]
            for operand in operands:
                read = _engine_name_read(operand)
                if read:
                    found.append(Finding(node.lineno, f"compares the engine's name ({read})"))
                elif isinstance(operand, ast.Constant) and operand.value in names:
                    found.append(Finding(node.lineno, f"compares with engine {operand.value!r}"))
        elif isinstance(node, ast.Attribute) and node.attr == "engine":
            read = _engine_name_read(node)
            if read:
                found.append(Finding(node.lineno, f"reads the engine's name ({read})"))
    found += check_models(source)
    return sorted(set(found), key=lambda f: (f.line, f.what))


def _spec_loads(tree: ast.AST) -> set[str]:
    """Names passed as the ``load`` of a ``ModelSpec`` (first argument or ``load=``)."""
    loads = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and _dotted(node.func).split(".")[-1] == "ModelSpec":
            args = node.args[:1] + [k.value for k in node.keywords if k.arg == "load"]
            loads |= {_dotted(a).split(".")[-1] for a in args}
    return loads


def _load_bodies(tree: ast.AST, loads: set[str]) -> set[int]:
    """The ids of every node inside a module-level function or class that is a load."""
    inside: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.ClassDef)) and node.name in loads:
            inside |= {id(n) for n in ast.walk(node)}
    return inside


def _registry_lookup(node: ast.AST) -> bool:
    """``REGISTRY.get(...)`` of a model registry."""
    return (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and node.func.attr == "get"
        and _dotted(node.func.value).split(".")[-1] in MODEL_REGISTRIES
    )


def _looked_up(tree: ast.AST) -> set[str]:
    """Names bound to a registry lookup (``factory = GENERATORS.get(backend)``)."""
    return {
        t.id
        for node in ast.walk(tree)
        if isinstance(node, ast.Assign) and _registry_lookup(node.value)
        for t in node.targets
        if isinstance(t, ast.Name)
    }


def _loader_call(node: ast.Call, loaders: frozenset[str], looked_up: set[str]) -> str | None:
    """What model ``node`` loads (its callee), or None."""
    callee = _dotted(node.func)
    if callee.split(".")[-1] in loaders or callee.startswith(MODULE_LOADERS):
        return callee
    if _registry_lookup(node.func) or callee in looked_up:
        return f"{callee} (a registry's backend)"
    return None


def _backend_probe(node: ast.AST, names: frozenset[str], looked_up: set[str]) -> str | None:
    """A backend-name comparison or a flag probe in ``node``, or None."""
    if isinstance(node, ast.Compare):
        for operand in [node.left, *node.comparators]:
            if isinstance(operand, ast.Constant) and operand.value in names:
                return f"compares a backend's name with {operand.value!r}"
    if isinstance(node, ast.Call) and _dotted(node.func) == "getattr" and len(node.args) >= 2:
        probed = node.args[0]
        if _registry_lookup(probed) or _dotted(probed) in looked_up:
            return f"probes a backend for a flag: getattr({_dotted(probed)}, ...)"
    return None


def check_models(source: str) -> list[Finding]:
    """Model loads outside a ModelSpec's load, backend-name checks and flag probes."""
    tree = ast.parse(source)
    allowed = _load_bodies(tree, _spec_loads(tree))
    loaders, names, looked_up = registered_loaders(), backend_names(), _looked_up(tree)
    found: list[Finding] = []
    for node in ast.walk(tree):
        probe = _backend_probe(node, names, looked_up)
        if probe:
            found.append(Finding(node.lineno, probe))  # type: ignore[attr-defined]
        if isinstance(node, ast.Call) and id(node) not in allowed:
            loaded = _loader_call(node, loaders, looked_up)
            if loaded:
                found.append(Finding(node.lineno, f"loads a model itself: {loaded}(...)"))
    return found


def _relative(path: Path) -> str:
    return path.relative_to(STAGES).as_posix()


MODULES = sorted(STAGES.rglob("*.py"))


def test_every_heavy_stage_module_is_checked():
    rels = {_relative(p) for p in MODULES}
    heavy = {"select/scan.py", "indicators/__init__.py", "indicators/tagging.py", "neighbors.py"}
    heavy |= {"label/__init__.py", "generate.py", "recaption/__init__.py", "recaption/driver.py"}
    heavy |= {"llm_texts.py"}
    assert heavy <= rels, sorted(heavy - rels)


@pytest.mark.parametrize("path", MODULES, ids=_relative)
def test_stage_module_has_no_pool_and_no_engine_branch(path: Path):
    findings = check_source(path.read_text(encoding="utf-8"))
    waived = WAIVED.get(_relative(path), ())
    findings = [f for f in findings if not any(w in f.what for w in waived)]
    assert not findings, f"{path}: " + "; ".join(str(f) for f in findings)


#: module -> findings (by a part of their text) still waived, each with why; every waiver is
#: a model call that does not yet go through the engine (issue 45 item 2), to be removed
WAIVED: dict[str, tuple[str, ...]] = {}


def test_every_waiver_is_still_needed():
    """A waiver whose finding is gone must be removed (so the list only shrinks)."""
    for rel, parts in WAIVED.items():
        findings = check_source((STAGES / rel).read_text(encoding="utf-8"))
        for part in parts:
            assert any(part in f.what for f in findings), f"{rel}: {part!r} is no longer found"


# -- the checker finds what it must (snippets of the code the stages had) ---------------------
OFFENDING = {
    "its own run (every stage before the runner)": """
def neighbors(study, *, progress=True):
    with study.stage("neighbors") as run:
        require_inputs(study, "neighbors")
        return run
""",
    "thread pool (select's _parallel)": """
import threading
pool = [threading.Thread(target=worker, daemon=True) for i in range(threads)]
""",
    "futures pool": """
from concurrent.futures import ThreadPoolExecutor
with ThreadPoolExecutor(2) as pool:
    pass
""",
    "process pool": """
import multiprocessing
pool = multiprocessing.get_context("spawn").Pool(2)
""",
    "engine name in a branch (select)": """
if cfg.engine.engine == "local":
    run()
""",
    "engine name through a local name (recaption)": """
on_engine = eng.engine != "local"
""",
    "engine name held apart": """
name = study.config.engine.engine
""",
    "an engine's own name": """
if engine.name == "ray":
    pass
""",
    "the study's engine opened in the stage (neighbors)": """
with engine_from_config(study.config.engine) as engine, study.stage("neighbors") as run:
    pass
""",
    "a progress bar of its own (who_how)": """
from tqdm.auto import tqdm
for model in tqdm(names, desc="who_how tables", unit="model", disable=not progress):
    pass
""",
    "a backend probed for a flag (generate)": """
if missing and getattr(GENERATORS.get(split_spec(model)[0]), "per_image", False):
    made = _generate_per_image(study, run, model, missing, settings, progress=progress)
""",
    "a generator opened in the stage (faircritic)": """
loop = FairCritic(
    from_generator(open_generator(study.config, model, settings, progress=False)),
    critic, writer, store=TableRoundStore(study, model),
)
""",
    "a classifier built in the stage (faircritic)": """
classifier = build_classifier(label, device=study.config.engine.device, seed=seed)
""",
    "a writer factory from a registry, called (faircritic)": """
make_writer = WRITERS.get(cfg.faircritic_writer.partition(":")[0])
writer = make_writer(cfg.faircritic_writer, templates, roles, study)
""",
    "an embedder loaded in a lambda (who_how)": """
return lambda words: embed_words(words, load_embedder(model, device=device))
""",
    "an embedder loaded in the stage (variants)": """
embedder = load_embedder(n.model, backend=n.embedder, device=study.config.engine.device)
""",
    "CLIP built in the stage (image_similarity)": """
model = ClipClassifier(label.clip_model, label.clip_pretrained, label.texts, device=device)
""",
    "a classifier's name compared (image_similarity)": """
return mode == "on" or (mode == "auto" and study.config.label.classifier == "clip")
""",
    "a captioner probed on the driver (recaption)": """
captioner = captioners.load_captioner(cfg.model, caption_settings)
""",
    "a captioner's kind probed (recaption)": """
if settings.dtype != "auto" or getattr(CAPTIONERS.get(backend), "kind", "") != "image":
    return settings
""",
    "a backend's name compared (llm_texts)": """
backend, name = split_spec(model)
if backend == "transformers":
    pass
""",
    "a backend's name compared through split_spec": """
local = split_spec(model)[0] != "openai"
""",
    "a registry's backend called at once": """
generator = GENERATORS.get(backend)(name, settings)
""",
    "a loader wrapped in a function that is no ModelSpec's load": """
def _load(name):
    return load_embedder(name)
""",
    "libraries' loaders": """
nlp = spacy.load("en_core_web_sm")
model = SentenceTransformer(name)
lm = AutoModelForCausalLM.from_pretrained(path)
clip = open_clip.create_model_and_transforms(name)
""",
}


@pytest.mark.parametrize("source", OFFENDING.values(), ids=OFFENDING.keys())
def test_the_checker_finds_pools_and_engine_branches(source: str):
    assert check_source(source)


def test_the_checker_accepts_model_workers():
    """A loader passed as a ModelSpec's load, and calls inside a load of the module."""
    clean = """
spec = ModelSpec(load_embedder, (model,), encode_texts, {"device": device}, shared=True)
with model_session(study.config.engine, STAGE, spec, run=run) as session:
    vectors = SessionEncoder(session).encode(words)

def load_loop(config, model):
    make_writer = WRITERS.get(config.pst.faircritic_writer)
    writer = make_writer(config.pst.faircritic_writer)
    return FairCritic(from_generator(open_generator(config, model, settings)), writer)

class Drawer:
    def __init__(self, backend, model, settings):
        self.generator = GENERATORS.get(backend)(model, settings)

looped = ModelSpec(load_loop, (config, model), play_round)
drawn = ModelSpec(Drawer, (backend, model, settings))
if generator_traits(model).per_image and kind == "image":
    pass
"""
    assert check_source(clean) == []


def test_the_checker_accepts_the_one_stage_shape():
    clean = """
import threading
from corpus_audit.backends.engines import stage_engine
from corpus_audit.backends.engines.base import Progress, track

for name in track(names, Progress("who_how tables", "model", enabled=progress)):
    pass

lock = threading.Lock()
engine = stage_engine(study.config.engine, run)
for key, result in engine.map_tasks(fn, units):
    write(result)
device = engine.worker_device(study.config.engine.device)
if path.name == "local.parquet" or kind == "flat":
    pass
"""
    assert check_source(clean) == []
