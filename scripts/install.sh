#!/usr/bin/env bash
# Installs what Airlock needs on Debian 12 and builds its binaries into
# /usr/local/bin. Idempotent: packages already present are not reinstalled.
set -euo pipefail
cd "$(dirname "$0")/.."

if [ "$(id -u)" -ne 0 ]; then
	echo "install.sh: run as root (sandboxes need root to create namespaces, mounts and cgroups)" >&2
	exit 1
fi

export PATH="/usr/local/go/bin:$PATH"
if ! command -v go >/dev/null; then
	echo "install.sh: Go 1.26 or newer is required (expected at /usr/local/go/bin/go)" >&2
	exit 1
fi

pkgs=(runc runsc debootstrap busybox-static e2fsprogs iproute2 ca-certificates tmux nftables util-linux)
missing=()
for p in "${pkgs[@]}"; do
	dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
	echo "install.sh: installing ${missing[*]}"
	apt-get update -qq
	DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >/dev/null
fi

mkdir -p bin
CGO_ENABLED=0 go build -trimpath -o bin/airlock-agent ./cmd/airlock-agent
go build -trimpath -o bin/airlock ./cmd/airlock
install -m 0755 bin/airlock /usr/local/bin/airlock
install -m 0755 bin/airlock-agent /usr/local/bin/airlock-agent
echo "install.sh: installed /usr/local/bin/airlock and /usr/local/bin/airlock-agent"
