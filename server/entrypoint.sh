#!/usr/bin/env bash
# Start vLLM for Remora: FunctionGemma with Remora's chat template and tool-parser plugin.
#
# Every setting comes from an environment variable (defaults in brackets); arguments given to
# this script are passed on to `vllm serve` after the generated ones.
#
#   REMORA_MODEL                   model to serve [google/functiongemma-270m-it]
#   REMORA_SERVED_MODEL_NAME       name clients use in "model" [the model id]
#   REMORA_HOST / REMORA_PORT      where to listen [0.0.0.0 / 8000]
#   REMORA_MAX_MODEL_LEN           context length per sequence [8192] (FunctionGemma allows 32768;
#                                  a shorter one leaves more KV cache for concurrent jobs)
#   REMORA_MAX_NUM_SEQS            sequences batched at once [256]; keep it at or above Remora's
#                                  `concurrency` (default 64)
#   REMORA_GPU_MEMORY_UTILIZATION  share of GPU memory vLLM may take [0.90]
#   REMORA_ENABLE_PREFIX_CACHING   1 or 0 [1]; jobs of one agent share their system prompt and
#                                  tool list, so the cache serves that prefix once
#   REMORA_TOOL_STRICT_LEVEL       auto, function or parameter [parameter]: with `parameter`
#                                  every call (tool_choice auto included) is decoded under a
#                                  grammar of FunctionGemma's own syntax with the declared
#                                  argument types; `function` constrains only the call envelope
#                                  and tool name; `auto` only required/named tool choice
#   REMORA_LORA_MODULES            LoRA adapters, space separated NAME=PATH pairs, e.g.
#                                  "lint=/adapters/lint docstring=/adapters/docstring"; enables
#                                  LoRA. Select one per agent with agents.<name>.model: NAME
#   REMORA_ADAPTERS_DIR            folder of adapters made by `remora train` [/adapters]: each
#                                  ADAPTER/card.json found there is served as its card's name
#                                  (remora-AGENT) from ADAPTER/peft, which is the name agents
#                                  with that adapter ask for; enables LoRA
#   REMORA_MAX_LORAS               adapters active in one batch [4]
#   REMORA_MAX_LORA_RANK           largest adapter rank [16]
#   REMORA_API_KEY                 require this bearer token (Remora: server.api_key) [none]
#   REMORA_EXTRA_ARGS              more `vllm serve` flags, word-split [none]
#   REMORA_SERVER_DIR              folder holding the template and plugin [this script's folder]
#   REMORA_DRY_RUN                 1: print the command instead of running it [0]
#
# vLLM's own variables pass through, e.g. HF_TOKEN (FunctionGemma is a gated model) and
# VLLM_ALLOW_RUNTIME_LORA_UPDATING=True (load adapters later with POST /v1/load_lora_adapter).
set -euo pipefail

server_dir="${REMORA_SERVER_DIR:-$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)}"
model="${REMORA_MODEL:-google/functiongemma-270m-it}"

args=(
  serve "$model"
  --host "${REMORA_HOST:-0.0.0.0}"
  --port "${REMORA_PORT:-8000}"
  --served-model-name "${REMORA_SERVED_MODEL_NAME:-$model}"
  --max-model-len "${REMORA_MAX_MODEL_LEN:-8192}"
  --max-num-seqs "${REMORA_MAX_NUM_SEQS:-256}"
  --gpu-memory-utilization "${REMORA_GPU_MEMORY_UTILIZATION:-0.90}"
  --enable-auto-tool-choice
  --tool-parser-plugin "$server_dir/remora_functiongemma_parser.py"
  --tool-call-parser remora_functiongemma
  --tool-strict-level "${REMORA_TOOL_STRICT_LEVEL:-parameter}"
  --chat-template "$server_dir/functiongemma_chat_template.jinja"
  --chat-template-content-format string
)

case "${REMORA_ENABLE_PREFIX_CACHING:-1}" in
  1 | true | yes) args+=(--enable-prefix-caching) ;;
  0 | false | no) args+=(--no-enable-prefix-caching) ;;
  *) echo "REMORA_ENABLE_PREFIX_CACHING must be 1 or 0" >&2; exit 2 ;;
esac

lora_modules=()
if [[ -n "${REMORA_LORA_MODULES:-}" ]]; then
  read -r -a lora_modules <<< "$REMORA_LORA_MODULES"
  for module in "${lora_modules[@]}"; do
    if [[ "$module" != *=* ]]; then
      echo "REMORA_LORA_MODULES: '$module' is not NAME=PATH" >&2
      exit 2
    fi
  done
fi
for card in "${REMORA_ADAPTERS_DIR:-/adapters}"/*/card.json; do
  [[ -f "$card" ]] || continue
  name="$(python3 -c 'import json, sys; print(json.load(open(sys.argv[1]))["name"])' "$card")" || {
    echo "REMORA_ADAPTERS_DIR: $card is not an adapter card" >&2
    exit 2
  }
  lora_modules+=("$name=$(dirname "$card")/peft")
done
if (( ${#lora_modules[@]} )); then
  args+=(
    --enable-lora
    --lora-modules "${lora_modules[@]}"
    --max-loras "${REMORA_MAX_LORAS:-4}"
    --max-lora-rank "${REMORA_MAX_LORA_RANK:-16}"
  )
fi

if [[ -n "${REMORA_API_KEY:-}" ]]; then
  args+=(--api-key "$REMORA_API_KEY")
fi

if [[ -n "${REMORA_EXTRA_ARGS:-}" ]]; then
  read -r -a extra_args <<< "$REMORA_EXTRA_ARGS"
  args+=("${extra_args[@]}")
fi

args+=("$@")

if [[ "${REMORA_DRY_RUN:-0}" == 1 ]]; then
  printf '%q ' vllm "${args[@]}"
  printf '\n'
  exit 0
fi
exec vllm "${args[@]}"
