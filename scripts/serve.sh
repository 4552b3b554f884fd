#!/usr/bin/env bash
# Installs Airlock and serves the API on embedded defaults. The first start
# builds the base template from Debian packages (about a minute), cached
# afterwards. Extra arguments go to `airlock serve`.
set -euo pipefail
"$(dirname "$0")/install.sh"
exec /usr/local/bin/airlock serve "$@"
