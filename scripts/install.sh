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

pkgs=(runc debootstrap busybox-static e2fsprogs iproute2 ca-certificates tmux nftables util-linux)
missing=()
for p in "${pkgs[@]}"; do
	dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
	echo "install.sh: installing ${missing[*]}"
	apt-get update -qq
	DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >/dev/null
fi

# gVisor: Debian 12's runsc (20221219) breaks coreutils (statx with
# AT_NO_AUTOMOUNT fails with EINVAL, so `ls` and `stat` fail), resolves
# symlinks to "/" wrongly and has only the slow ptrace platform. A pinned,
# current runsc is built from its Go module instead (about a minute, once).
RUNSC_MODULE=gvisor.dev/gvisor/runsc
RUNSC_VERSION=v0.0.0-20260905035102-160fafc42237
stamp=/usr/local/lib/airlock/runsc.version
if [ ! -x /usr/local/bin/runsc ] || [ "$(cat "$stamp" 2>/dev/null)" != "$RUNSC_VERSION" ]; then
	echo "install.sh: building runsc $RUNSC_VERSION (gVisor) from its Go module"
	GOBIN=/usr/local/bin CGO_ENABLED=0 go install "$RUNSC_MODULE@$RUNSC_VERSION"
	mkdir -p "$(dirname "$stamp")"
	echo "$RUNSC_VERSION" > "$stamp"
fi

mkdir -p bin
CGO_ENABLED=0 go build -trimpath -o bin/airlock-agent ./cmd/airlock-agent
go build -trimpath -o bin/airlock ./cmd/airlock
install -m 0755 bin/airlock /usr/local/bin/airlock
install -m 0755 bin/airlock-agent /usr/local/bin/airlock-agent
echo "install.sh: installed /usr/local/bin/airlock and /usr/local/bin/airlock-agent"
