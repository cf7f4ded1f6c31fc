#!/usr/bin/env bash
# One GPU-kit call: benchmarks/gpu/run.sh PART[,PART...]|all [--dry] [OUTDIR]
#
# On the accelerator machine (the calls are in docs/gpu.md): installs the wheels carried in
# .whl/<part>/ into a temporary folder (only those whose distribution the machine lacks), puts
# that folder and the project on PYTHONPATH (the project is not installed, nor its
# dependencies), prints the GPU and versions, runs the part's steps and writes <part>.json
# and run-<parts>.log under $OUT (else OUTDIR, else benchmarks/out/gpu).
# --dry: every step on this CPU at tiny sizes, in the project's venv, no wheels (the test
# tests/e2e/test_gpu_kit.py runs it); results go to $OUT, else OUTDIR, else a temporary folder.
# PY picks the interpreter (default: .venv/bin/python when there, else python3).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
REPO=$PWD

usage() { echo "usage: benchmarks/gpu/run.sh PART[,PART...]|all [--dry] [OUTDIR]" >&2; exit 2; }
[[ $# -ge 1 ]] || usage
PARTS=$1; shift
DRY=""; DIR=""
for arg in "$@"; do
  case $arg in
    --dry) DRY=--dry ;;
    -*) usage ;;
    *) DIR=$arg ;;
  esac
done
if [[ -n ${OUT:-} ]]; then DIR=$OUT
elif [[ -z $DIR && -n $DRY ]]; then DIR=$(mktemp -d -t gpukit-dry.XXXXXX)
elif [[ -z $DIR ]]; then DIR=$REPO/benchmarks/out/gpu
fi
mkdir -p "$DIR"
LOG=$DIR/run-${PARTS//,/-}${DRY:+-dry}.log
exec > >(tee -a "$LOG") 2>&1

if [[ -z ${PY:-} ]]; then
  if [[ -x .venv/bin/python ]]; then PY=.venv/bin/python; else PY=python3; fi
fi
export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 PYTHONUNBUFFERED=1 TOKENIZERS_PARALLELISM=false
echo "== gpu kit: parts=$PARTS ${DRY:-(device)} out=$DIR python=$($PY -c 'import sys; print(sys.version.split()[0])') $(date -u +%FT%TZ)"

SITE=$(mktemp -d -t gpukit-site.XXXXXX)
trap 'rm -rf "$SITE"' EXIT
if [[ -z $DRY ]]; then
  command -v nvidia-smi >/dev/null && nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader || true
  # the wheels of every named part, each distribution once, skipping what the machine has
  [[ $PARTS == all ]] && FOLDERS=(.whl/*/) || FOLDERS=()
  [[ $PARTS == all ]] || for p in ${PARTS//,/ }; do FOLDERS+=(".whl/$p/"); done
  WHEELS=()
  for w in $(ls "${FOLDERS[@]}" 2>/dev/null | grep '\.whl$' | sort -u); do
    dist=${w%%-*}
    if $PY -c "import importlib.metadata as m, sys; m.version(sys.argv[1])" "$dist" 2>/dev/null; then
      echo "keep the machine's $dist $($PY -c "import importlib.metadata as m, sys; print(m.version(sys.argv[1]))" "$dist") (carried: $w)"
    else
      for f in "${FOLDERS[@]}"; do [[ -f $f$w ]] && { WHEELS+=("$f$w"); break; }; done
    fi
  done
  if [[ ${#WHEELS[@]} -gt 0 ]]; then
    echo "install ${#WHEELS[@]} carried wheels into $SITE"
    if $PY -m pip --version >/dev/null 2>&1; then
      $PY -m pip install -q --no-index --no-deps --disable-pip-version-check --root-user-action=ignore --target "$SITE" "${WHEELS[@]}"
    else  # no pip: a wheel is a zip of its import folders, so unpacking it installs it
      for w in "${WHEELS[@]}"; do $PY -m zipfile -e "$w" "$SITE"; done
    fi
  fi
fi
export PYTHONPATH=$SITE:$REPO${PYTHONPATH:+:$PYTHONPATH}
set +e
$PY benchmarks/gpu/bench.py "$PARTS" --out "$DIR" $DRY
rc=$?
set -e
echo "== gpu kit: exit $rc; results in $DIR"
exit $rc
