#!/usr/bin/env bash
# The one command: set up a fresh machine, then start the whole platform on
# its embedded defaults (Ctrl-C stops everything).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
# The default sandbox image (python3, Node.js, git on Debian) is built in the
# background on the first start; set COMPUTE_DEFAULT_IMAGE_PACKAGES= (empty) to
# keep sandboxes on the host's /usr.
export COMPUTE_DEFAULT_IMAGE_PACKAGES="${COMPUTE_DEFAULT_IMAGE_PACKAGES-python3,nodejs,git}"
exec node packages/platform/bin/start.mjs "$@"
