#!/bin/sh
# mkcarry.sh [C] - the folder the device runs carry (issue 16): C (default build/cuda-carry:
# under the ignored build/, so it travels only through run's carry) with build/cuda/particle
# and build/cuda/cuda_test_kern (`make CUDA=1 all cuda-test` first), the shared libraries
# particle needs that a bare device machine lacks (C/lib: everything ldd lists except the C
# runtime itself), and klcmp.py.  About 40 MB (limit 64 MiB).
set -e
C=${1:-build/cuda-carry}
B=${BUILD:-build/cuda}
[ -x "$B/particle" ] && [ -x "$B/cuda_test_kern" ] || {
	echo "mkcarry: build first: make CUDA=1 all cuda-test" >&2; exit 2; }
rm -rf "$C"
mkdir -p "$C/lib"
cp "$B/particle" "$B/cuda_test_kern" tests/cuda/klcmp.py "$C/"
ldd "$B/particle" | awk '$3 ~ /^\// { print $3 }' | while read -r lib; do
	case $(basename "$lib") in
	libc.so.*|libm.so.*|libpthread.so.*|libdl.so.*|librt.so.*|libresolv.so.*|ld-linux*) ;;
	*) cp -L "$lib" "$C/lib/" ;;
	esac
done
du -sh "$C"
