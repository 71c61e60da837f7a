#!/usr/bin/env bash
# Install what is missing (see scripts/setup.sh), then run the whole test suite.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh --install
exec .venv/bin/python -m pytest -ra "$@"
