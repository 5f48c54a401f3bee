#!/usr/bin/env bash
# The one command: set up a fresh machine, then start the whole platform on
# its embedded defaults (Ctrl-C stops everything).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
exec node --import tsx packages/platform/src/main.ts "$@"
