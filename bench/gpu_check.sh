#!/usr/bin/env bash
# GPU check for loadgen: one script, run from a fresh checkout on a machine with an NVIDIA GPU.
#
#   bash bench/gpu_check.sh              # on the GPU machine (results under $OUT, else bench/results/gpu_check-<time>)
#   bash bench/gpu_check.sh --cpu-dry-run   # the same steps on this CPU box, tiny sizes, no NVML
#
# Steps (each under its own timeout; the whole run stays under ~8 minutes):
#   1 env        nvidia-smi, python / torch / jax versions and devices          -> gpu_check.log
#   2 calibrate  loadgen calibrate (device copy bandwidth, fp32 + bf16 matmul)   -> calibration.json
#   3 kernel     loadgen kernel, fp32 + bf16, M = 128 and 1, roofline from step 2:
#                eager and jax paths                                           -> kernel.json
#                torch.compile default + reduce-overhead (own timeout)         -> kernel_compile.json
#   4 decode     loadgen kernel --model small: one decode step's GEMVs vs the bandwidth bound
#                                                                              -> kernel_decode.json
#   5 roofline   bench/decode_roofline.py (the JAX engine's decode roofline), if present
#                                                                              -> decode_roofline.json
#   6 power      NVML power read at 10 Hz during a short bf16 matmul load      -> power.json
#                (+ bench/nvml_power_check.py's result, if present)            -> nvml_power_check.json
#   everything printed goes to gpu_check.log as well (8 files at most come back from $OUT).
#
# Nothing is installed from a registry (the lent machine reaches none): the repo runs from its own
# tree via PYTHONPATH with the machine's python3 (torch, jax[cuda], numpy, rich preinstalled).
# A step that fails or times out is logged and the script goes on; the exit code is the number
# of failed steps.
set -u

DRY=0
for a in "$@"; do
  case "$a" in
    --cpu-dry-run) DRY=1 ;;
    -h|--help) sed -n 2,22p "$0"; exit 0 ;;
    *) echo "gpu_check.sh: error: unknown argument $a (use --cpu-dry-run or nothing)" >&2; exit 2 ;;
  esac
done

REPO="$(cd "$(dirname "$0")/.." && pwd)"
cd "$REPO" || exit 2
if [ -n "${OUT:-}" ]; then DEST="$OUT"; else DEST="$REPO/bench/results/gpu_check-$(date -u +%Y%m%dT%H%M%S)"; fi
mkdir -p "$DEST" || exit 2
SCRATCH="$(mktemp -d "${TMPDIR:-/tmp}/gpu_check.XXXXXX")"
LOG="$DEST/gpu_check.log"
: >"$LOG"

if [ -n "${PYTHON:-}" ]; then PY="$PYTHON"
elif [ $DRY = 1 ] && [ -x "$REPO/.venv/bin/python" ]; then PY="$REPO/.venv/bin/python"
else PY=python3; fi

export PYTHONPATH="$REPO${PYTHONPATH:+:$PYTHONPATH}"
export PYTHONUNBUFFERED=1
export XLA_PYTHON_CLIENT_PREALLOCATE=false      # JAX shares the GPU with torch in one process
export TF_CPP_MIN_LOG_LEVEL=2
export COLUMNS=200

FAILED=0
START=$(date +%s)
log() { echo "[gpu_check $(date -u +%H:%M:%S) +$(( $(date +%s) - START ))s] $*" | tee -a "$LOG"; }

# step NAME TIMEOUT_S CMD... : run with a timeout, tee into the log, count failures
step() {
  local name="$1" limit="$2"; shift 2
  log "== $name (timeout ${limit}s): $*"
  timeout -k 5 "$limit" "$@" 2>&1 | tee -a "$LOG" "$SCRATCH/$name.out"
  local rc=${PIPESTATUS[0]}
  if [ "$rc" = 124 ] || [ "$rc" = 137 ]; then log "$name: TIMED OUT after ${limit}s"; FAILED=$((FAILED + 1))
  elif [ "$rc" != 0 ]; then log "$name: failed (exit $rc)"; FAILED=$((FAILED + 1))
  else log "$name: ok"; fi
  return 0
}

if [ $DRY = 1 ]; then
  log "cpu dry run: tiny sizes, --device cpu, no NVML load"
  CAL_ARGS=(--device cpu --copy-mib 16 --matmul-n 256 --repeats 3)
  KER_ARGS=(--device cpu --warmup 2 --repeats 10)
  COMPILE_PATHS=torch-compile
  DEC_ARGS=(--device cpu --warmup 1 --repeats 5)
else
  CAL_ARGS=(--device cuda --repeats 10)
  KER_ARGS=(--warmup 50 --repeats 500)
  COMPILE_PATHS=torch-compile,torch-compile-ro
  DEC_ARGS=(--warmup 5 --repeats 100)
fi

# 1 env
{
  echo "date: $(date -u +%FT%TZ)  host: $(hostname)  python: $PY"
  command -v nvidia-smi >/dev/null && nvidia-smi --query-gpu=name,memory.total,driver_version,clocks.sm,clocks.mem,power.draw,power.limit --format=csv || echo "nvidia-smi: not found"
  timeout 30 "$PY" - <<'EOF'
import platform
from importlib.metadata import PackageNotFoundError, version
print("python", platform.python_version())
for m in ("numpy", "rich", "torch", "jax", "jaxlib", "jax-cuda13-plugin", "nvidia-ml-py", "pydantic"):
    try:
        print(m, version(m))
    except PackageNotFoundError:
        print(m, "not installed")
try:
    import torch
    print("torch.cuda", torch.cuda.is_available(), torch.version.cuda,
          torch.cuda.get_device_name(0) if torch.cuda.is_available() else "")
except Exception as e:
    print("torch.cuda: ", e)
try:
    import jax
    print("jax devices", jax.devices())
except Exception as e:
    print("jax devices: ", e)
EOF
} >"$SCRATCH/env.txt" 2>&1
tee -a "$LOG" <"$SCRATCH/env.txt"
if [ $DRY = 0 ] && ! command -v nvidia-smi >/dev/null; then
  log "no nvidia-smi: this is not a GPU machine (use --cpu-dry-run here); stopping"
  echo '{"bench": "gpu_check", "dry_run": 0, "failed_steps": 1, "reason": "no nvidia-smi"}' | tee -a "$LOG"
  rm -rf "$SCRATCH"; exit 1
fi

# 2 calibrate
step calibrate 60 "$PY" -m loadgen.commands.calibrate "${CAL_ARGS[@]}" --out "$DEST/calibration.json"
CAL=()
[ -f "$DEST/calibration.json" ] && CAL=(--calibration "$DEST/calibration.json")

# 3 kernel: every path, both dtypes, M = 128 and 1, the seed's rows beside them; the compiled
#   paths separately, so a slow inductor/triton compile cannot cost the other rows
step kernel 60 "$PY" -m loadgen.commands.kernel "${KER_ARGS[@]}" "${CAL[@]}" --compare-seed \
  --paths torch-eager,jax-eager,jax-jit --json "$DEST/kernel.json"
step kernel-compile 140 "$PY" -m loadgen.commands.kernel "${KER_ARGS[@]}" "${CAL[@]}" \
  --paths "$COMPILE_PATHS" --json "$DEST/kernel_compile.json"

# 4 one decode step's GEMVs (small preset) vs the bandwidth bound
step kernel-decode 45 "$PY" -m loadgen.commands.kernel --model small --dtype bf16 --batch 1 \
  "${DEC_ARGS[@]}" "${CAL[@]}" --json "$DEST/kernel_decode.json"

# 5 the JAX server's decode roofline benchmark (written by the engine helper)
if [ -f bench/decode_roofline.py ]; then
  EXTRA=()
  if [ $DRY = 1 ] && "$PY" -m bench.decode_roofline --help 2>/dev/null | grep -q -- "--quick"; then EXTRA=(--quick); fi
  # shellcheck disable=SC2086
  OUT="$SCRATCH/decode" step decode-roofline 100 "$PY" -m bench.decode_roofline "${EXTRA[@]}" ${DECODE_ROOFLINE_ARGS:-}
  # its one-JSON-line summary is the last line starting with "{" in its output
  grep -E '^\{' "$SCRATCH/decode-roofline.out" | tail -n 1 >"$DEST/decode_roofline.json" || true
  [ -s "$DEST/decode_roofline.json" ] || rm -f "$DEST/decode_roofline.json"
else
  log "decode-roofline: bench/decode_roofline.py not in this checkout (skipped)"
fi

# 6 power: NVML during a short bf16 matmul load
if [ $DRY = 0 ]; then
  step power 25 "$PY" - "$DEST/power.json" <<'EOF'
import json, statistics, sys, threading, time
import pynvml as nv
import torch
nv.nvmlInit()
h = nv.nvmlDeviceGetHandleByIndex(0)
name = nv.nvmlDeviceGetName(h)
name = name.decode() if isinstance(name, bytes) else name
samples, stop = [], threading.Event()
def sample():
    while not stop.is_set():
        samples.append((time.perf_counter_ns(), nv.nvmlDeviceGetPowerUsage(h) / 1e3))  # mW -> W
        time.sleep(0.1)
t = threading.Thread(target=sample, daemon=True); t.start()
time.sleep(2.0); idle_n = len(samples)
a = torch.randn(8192, 8192, device="cuda", dtype=torch.bfloat16); b = torch.randn_like(a)
t_end, n = time.perf_counter() + 8.0, 0
while time.perf_counter() < t_end:
    for _ in range(10):
        a @ b
    torch.cuda.synchronize(); n += 10
stop.set(); t.join()
idle = [w for _, w in samples[:idle_n]]; load = [w for _, w in samples[idle_n:]]
res = {"device": name, "evidence": "measured", "method": "nvmlDeviceGetPowerUsage at 10 Hz; 2 s idle, "
       "8 s of 8192^3 bf16 matmuls", "idle_w_median": statistics.median(idle) if idle else None,
       "load_w_median": statistics.median(load) if load else None, "load_w_max": max(load) if load else None,
       "matmuls": n, "load_tflops": 2 * 8192**3 * n / 8.0 / 1e12, "samples": samples}
json.dump(res, open(sys.argv[1], "w"))
print({k: v for k, v in res.items() if k != "samples"})
EOF
  if [ -f bench/nvml_power_check.py ]; then
    OUT="$SCRATCH/nvml" step nvml-power-check 30 "$PY" -m bench.nvml_power_check --idle 2 --load 6
    f=$(find "$SCRATCH/nvml" -name result.json 2>/dev/null | head -n 1)
    [ -n "$f" ] && cp "$f" "$DEST/nvml_power_check.json"
  fi
else
  log "power: skipped in the cpu dry run (no NVML load on a CPU box)"
fi

rm -rf "$SCRATCH"
log "done in $(( $(date +%s) - START ))s: $FAILED failed step(s); files in $DEST:"
ls -la "$DEST" | tee -a "$LOG"
echo "{\"bench\": \"gpu_check\", \"dry_run\": $DRY, \"failed_steps\": $FAILED, \"seconds\": $(( $(date +%s) - START )), \"out\": \"$DEST\"}" | tee -a "$LOG"
exit "$FAILED"
