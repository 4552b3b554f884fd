#!/usr/bin/env bash
# Installs Airlock's dependencies and runs the whole test suite against real
# runc and gVisor. Templates are built once and cached in
# /var/lib/airlock-test/templates.
set -euo pipefail
cd "$(dirname "$0")/.."
"./scripts/install.sh"
export PATH="/usr/local/go/bin:$PATH"
go vet ./...
go test -count=1 -timeout 45m ./... "$@"
