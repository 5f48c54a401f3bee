#!/usr/bin/env bash
# Everything a fresh machine of this kind needs before the platform runs or
# its tests do: pnpm 10, system packages (bubblewrap for the sandbox driver,
# a C compiler and libseccomp for its exec helper and the sandboxes' seccomp
# filter, python3-grpcio as an independent gRPC
# peer in tests, zsh to test the CLI's zsh completion, chromium for the
# browser CORS test), the workspace's node modules. Idempotent and quiet when there is nothing to do.
set -euo pipefail
cd "$(dirname "$0")/.."

if ! command -v pnpm >/dev/null 2>&1 || [[ "$(pnpm --version 2>/dev/null)" != 10.* ]]; then
  echo "setup: installing pnpm 10"
  npm install -g pnpm@10 >/dev/null 2>&1 || npm install -g pnpm@10
fi

need=()
command -v bwrap >/dev/null 2>&1 || need+=(bubblewrap)
command -v cc >/dev/null 2>&1 && [[ -e /usr/include/stdio.h ]] || need+=(gcc libc6-dev)
[[ -e /usr/include/seccomp.h ]] || need+=(libseccomp-dev)
# socat: Anthropic's sandbox-runtime, a peer in pnpm bench, bridges its proxies with it.
[[ -x /usr/bin/socat ]] || need+=(socat)
# ripgrep: Anthropic's sandbox-runtime, a peer in pnpm bench, scans a command's workspace with it.
command -v rg >/dev/null 2>&1 || need+=(ripgrep)
# Sandbox images built from Debian packages (`platform images build`, issue 22).
[[ -x /usr/bin/mmdebstrap ]] || need+=(mmdebstrap)
command -v curl >/dev/null 2>&1 || need+=(curl)
command -v openssl >/dev/null 2>&1 || need+=(openssl)
python3 -c 'import grpc' >/dev/null 2>&1 || /usr/bin/python3 -c 'import grpc' >/dev/null 2>&1 || need+=(python3-grpcio)
command -v zsh >/dev/null 2>&1 || need+=(zsh)
# The CORS test drives Debian's Chromium with playwright-core (no browser download).
[[ -x /usr/bin/chromium ]] || need+=(chromium)
if ((${#need[@]})); then
  echo "setup: installing ${need[*]} from Debian"
  if [[ $(id -u) -eq 0 ]]; then
    apt-get update -qq >/dev/null && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${need[@]}" >/dev/null
  else
    sudo apt-get update -qq >/dev/null && sudo DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${need[@]}" >/dev/null
  fi
fi

pnpm install --frozen-lockfile --reporter=silent

# Opt-in (issue 22): the default sandbox image built from Debian packages into the launcher's data directory, so
# sandboxes stop seeing the host's /usr. E.g. PLATFORM_SANDBOX_IMAGE_PACKAGES=python3,nodejs,git,curl (minutes).
if [[ -n "${PLATFORM_SANDBOX_IMAGE_PACKAGES:-}" ]]; then
  image="${SANDBOX_IMAGE:-debian:bookworm-slim}"
  data="${COMPUTE_DATA_DIR:-.data/compute}"
  if node --import tsx packages/compute/src/images-command.ts list --data-dir "$data" | grep -q "^${image}  "; then
    echo "setup: sandbox image ${image} is there"
  else
    echo "setup: building the default sandbox image ${image} (${PLATFORM_SANDBOX_IMAGE_PACKAGES})"
    node --import tsx packages/compute/src/images-command.ts build --name "$image" --packages "$PLATFORM_SANDBOX_IMAGE_PACKAGES" --data-dir "$data"
  fi
fi

# The web console (packages/console), served by the router at /: built by Vite into its dist/ (not
# committed) when missing or older than its sources or the SDK's.
console_dist=packages/console/dist/index.html
if [[ ! -f $console_dist ]] || [[ -n "$(find packages/console/app packages/console/index.html packages/console/vite.config.ts packages/client/src packages/rpc/src/transcode/http-rule.ts -newer "$console_dist" -print -quit 2>/dev/null)" ]]; then
  started=$(date +%s%N)
  (cd packages/console && node node_modules/vite/bin/vite.js build >/dev/null)
  echo "setup: built the web console in $(( ($(date +%s%N) - started) / 1000000 )) ms"
fi
