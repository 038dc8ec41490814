#!/bin/sh
# oracle.sh - tools/oracle/oracle.mjs (the same script as the x86-64 oracle, through the
# symlink oracle.mjs) on the arm64 node under qemu-user, with node-llama-cpp's prebuilt
# linux-arm64 llama.cpp (`make oracle-arm64` installs both here).  Arguments as oracle.mjs.
here=$(cd "$(dirname "$0")" && pwd)
exec sh "$here/node.sh" --preserve-symlinks-main --import "$here/qemu-exec.mjs" "$here/oracle.mjs" "$@"
