#!/bin/sh
# deps-arm64.sh - the arm64 (aarch64) cross build and its emulated tests (issue 19): Debian's
# cross compiler, qemu-user, and the arm64 multiarch -dev packages of the libraries particle
# links, installed beside the amd64 ones (dpkg --add-architecture arm64).  Called by make
# only for the aarch64 part (`make ARCH=aarch64 ...`, tools/run-tests.sh's emulated suite).
# As root: installs what is missing.  Otherwise prints the apt-get line and fails.
set -u
HOST_PKGS="gcc-aarch64-linux-gnu libc6-dev-arm64-cross qemu-user"
ARM_PKGS="libpcre2-dev:arm64 liburing-dev:arm64 libssl-dev:arm64 libcjson-dev:arm64 libedit-dev:arm64 libmicrohttpd-dev:arm64 libcurl4-openssl-dev:arm64"
missing=""
for p in $HOST_PKGS $ARM_PKGS; do
	dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing="$missing $p"
done
[ -z "$missing" ] && exit 0
if [ "$(id -u)" != 0 ]; then
	echo "particle: error: missing Debian packages for the arm64 build; run as root:" >&2
	echo "  sudo dpkg --add-architecture arm64 && sudo apt-get update && sudo apt-get install -y$missing" >&2
	exit 1
fi
echo "particle: installing missing Debian packages (arm64 build):$missing" >&2
export DEBIAN_FRONTEND=noninteractive
dpkg --print-foreign-architectures | grep -qx arm64 || dpkg --add-architecture arm64 ||
	{ echo "particle: error: dpkg --add-architecture arm64 failed" >&2; exit 1; }
apt-get update -qq >&2 || { echo "particle: error: apt-get update failed" >&2; exit 1; }
apt-get install -y -qq --no-install-recommends $missing >&2 ||
	{ echo "particle: error: apt-get install failed for:$missing" >&2; exit 1; }
