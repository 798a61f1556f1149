#!/usr/bin/env bash
# The GPU check, in one go (a few minutes on one GPU):
#   1. the CUDA tests (tests/estimators/test_cuda.py),
#   2. bench_scale.py --device cuda (time to r* against GridSearchCV and the full
#      batched grid, scaling curves, memory at n = 50,000),
#   3. bench_sweep.py --device cuda (the batched sweep against one fit per rank at
#      equal work; target >= 5x on a GPU).
#   4. the training dtype under CUDA (tests/estimators/test_compute_dtype.py);
#   5. only with HEAD_RANKS=1: the map of r*_attn over all 270 heads of SmolLM2-135M-Instruct
#      on the four corpora with 768 training windows, and the ranks imposed on the model
#      (bench_head_ranks.py; hours on one CPU thread);
#   6. only with MODEL_RANK=1: r*_model of SmolLM2-135M-Instruct on code and prose with 768
#      training windows, healing included (bench_model_rank.py; its stages timed);
#   7. only with REACH_SMOLLM2=1: the reachability paper's protocol on SmolLM2-135M-Instruct
#      (the reach command: m = 1..5, 20 random targets per length, AdamW 3000 steps,
#      patience 500, lengths until two zero-accessibility points), its JSON in
#      $OUT/reach_smollm2/reach.json. About an hour on one GPU (a cramming step of
#      20 targets is about 1.2 s x 5 on one CPU thread), hence opt-in:
#        REACH_SMOLLM2=1 bash benchmarks/gpu_check.sh [out_dir]
# Every number goes to one folder (default gpu_check_out/, or $1): the test log,
# each benchmark's stdout and bench_scale's JSON, plus nvidia-smi's device line.
#
#   bash benchmarks/gpu_check.sh [out_dir]
set -u
OUT="${1:-gpu_check_out}"
mkdir -p "$OUT"
HERE="$(cd "$(dirname "$0")" && pwd)"
ROOT="$(dirname "$HERE")"
cd "$ROOT"
export OMP_NUM_THREADS="${OMP_NUM_THREADS:-4}"
{
  date -u
  nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader || true
  python -c "import torch; print('torch', torch.__version__, 'cuda', torch.version.cuda, torch.cuda.get_device_name(0))"
} > "$OUT/device.txt" 2>&1
status=0
timeout 180 python -m pytest -q -p no:cacheprovider tests/estimators/test_cuda.py > "$OUT/test_cuda.txt" 2>&1 || status=1
# the scale benchmark, every section at its default size
timeout 420 python benchmarks/bench_scale.py --device cuda --threads "$OMP_NUM_THREADS" \
  --out "$OUT/bench_scale_cuda.json" > "$OUT/bench_scale_cuda.txt" 2>&1 || status=1
timeout 240 python benchmarks/bench_sweep.py --device cuda > "$OUT/bench_sweep_cuda.txt" 2>&1 || status=1
timeout 300 python benchmarks/bench_roofline.py --device cuda --threads "$OMP_NUM_THREADS" > "$OUT/bench_roofline_cuda.txt" 2>&1 || status=1
# the training dtype: bfloat16 where the device supports it, by capability, never by a timing
INTRINSIC_RANK_TEST_DEVICE=cuda timeout 300 python -m pytest -q -p no:cacheprovider \
  tests/estimators/test_compute_dtype.py > "$OUT/test_compute_dtype_cuda.txt" 2>&1 || status=1
if [ "${HEAD_RANKS:-0}" = "1" ]; then
  timeout 10800 python benchmarks/bench_head_ranks.py --device cuda --jobs 1 --impose \
    --corpora random,repeated,prose,code --n-fit 768 --skip-baseline \
    > "$OUT/bench_head_ranks_cuda.txt" 2>&1 || status=1
fi
if [ "${MODEL_RANK:-0}" = "1" ]; then
  timeout 10800 python benchmarks/bench_model_rank.py --device cuda --jobs 1 --n-fit 768 \
    --corpora code,prose > "$OUT/bench_model_rank_cuda.txt" 2>&1 || status=1
fi
if [ "${REACH_SMOLLM2:-0}" = "1" ]; then
  timeout 10800 python -c "from intrinsic_rank.cli import main; raise SystemExit(main())" \
    reach smollm2-135m --n-memory 1-5 --n-targets 20 --device cuda \
    --out "$OUT/reach_smollm2" > "$OUT/reach_smollm2.txt" 2>&1 || status=1
fi
grep -hE '^[A-Za-z_]+: ' "$OUT"/bench_*_cuda.txt > "$OUT/metrics.txt" || true
tail -n 3 "$OUT/test_cuda.txt" >> "$OUT/metrics.txt" || true
tail -n 1 "$OUT/test_compute_dtype_cuda.txt" >> "$OUT/metrics.txt" || true
cat "$OUT/metrics.txt"
exit $status
