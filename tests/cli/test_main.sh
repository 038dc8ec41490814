#!/bin/sh
# test_main.sh - top-level CLI behaviour: help, version, unknown commands.
. "$(dirname "$0")/lib.sh"
expect_exit 0 "help" -- "$PARTICLE" --help
expect_grep "$TMP/out" "usage: particle" "help text"
expect_exit 0 "version" -- "$PARTICLE" --version
expect_grep "$TMP/out" "^particle " "version text"
expect_exit 2 "no command" -- "$PARTICLE"
expect_exit 2 "unknown command" -- "$PARTICLE" frobnicate
expect_one_error_line "unknown command"
expect_grep "$TMP/err" "frobnicate" "unknown command named"
finish
