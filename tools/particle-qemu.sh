#!/bin/sh
# particle-qemu.sh - runs the cross-built aarch64 particle (or pt_test with PT_QEMU_BIN) under
# Debian's qemu-user, so CLI test scripts can take it as $PARTICLE.  QEMU_CPU picks the
# emulated CPU (default max: neon, dotprod, i8mm; cortex-a53 has neither dotprod nor i8mm).
#
# No -L: the binary loads the multiarch arm64 glibc (libc6:arm64, /lib/ld-linux-aarch64.so.1,
# installed with the arm64 -dev packages of tools/deps-arm64.sh).  `-L /usr/aarch64-linux-gnu`
# would pair the cross package's ld.so (2.36-8cross1) with the multiarch libc.so.6 (a newer
# Debian revision, found through qemu's fallback to host paths): their private interfaces
# differ and the first pthread_create spun for ever (the "emulated eval never finishes").
here=$(cd "$(dirname "$0")/.." && pwd)
unset QEMU_LD_PREFIX
exec qemu-aarch64 -cpu "${QEMU_CPU:-max}" "${PT_QEMU_BIN:-$here/build/aarch64/particle}" "$@"
