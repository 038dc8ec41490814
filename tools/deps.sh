#!/bin/sh
# deps.sh - make sure the Debian packages particle builds and tests with are installed.
# As root: installs what is missing (apt-get).  Otherwise: prints the exact apt-get line and
# fails, so `make demo` / `make test` never half-work on a machine that lacks them.
set -u
PKGS="build-essential clang libclang-rt-14-dev pkg-config libpcre2-dev liburing-dev libssl-dev libcjson-dev libedit-dev libmicrohttpd-dev libcurl4-openssl-dev nginx chromium python3-jinja2 gcc-aarch64-linux-gnu qemu-user"
# `make demo-model` (tools/train/): torch (Debian's, with OpenBLAS: the generic BLAS is 5x slower)
# and the packages the training text comes from (tools/train/DATA.md).
[ "${1:-}" = train ] && PKGS="$PKGS python3-torch python3-numpy libopenblas0-openmp fortunes fortunes-min wordnet-base"
missing=""
for p in $PKGS; do
	dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing="$missing $p"
done
[ -z "$missing" ] && exit 0
if [ "$(id -u)" = 0 ]; then
	echo "particle: installing missing Debian packages:$missing" >&2
	export DEBIAN_FRONTEND=noninteractive
	apt-get update -qq >&2 || { echo "particle: error: apt-get update failed" >&2; exit 1; }
	apt-get install -y -qq --no-install-recommends $missing >&2 ||
		{ echo "particle: error: apt-get install failed for:$missing" >&2; exit 1; }
	exit 0
fi
echo "particle: error: missing Debian packages; run as root:" >&2
echo "  sudo apt-get install -y$missing" >&2
exit 1
