#!/bin/sh
# particle-qemu.sh - runs the cross-built aarch64 particle (or pt_test with PT_QEMU_BIN) under
# Debian's qemu-user, so CLI test scripts can take it as $PARTICLE.  QEMU_CPU picks the
# emulated CPU (default max: neon, dotprod, i8mm; cortex-a53 has neither dotprod nor i8mm).
here=$(cd "$(dirname "$0")/.." && pwd)
exec qemu-aarch64 -L /usr/aarch64-linux-gnu -cpu "${QEMU_CPU:-max}" \
	"${PT_QEMU_BIN:-$here/build/aarch64/particle}" "$@"
