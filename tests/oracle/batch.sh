# batch.sh - queues tools/oracle/oracle.mjs jobs and runs them in one node process
# (`oracle.mjs batch`): node's start-up and loading llama.cpp's binding cost about a second
# per process, paid once per batch instead of once per model.  Source after tests/cli/lib.sh.
#
#   ob_add ARGS...   queue one job (the arguments of one oracle.mjs command); its number is
#                    then in $OB_N
#   ob_run           run the queued jobs (and empty the queue); then, for job N:
#   ob_rc N          its exit status (0 ok, 1 failed, 2 bad usage), as `oracle.mjs CMD` alone
#   ob_out N         the path of its stdout;  ob_err N: the path of its error line
OB_ORACLE=${OB_ORACLE:-tools/oracle/oracle.mjs}
OB_Q=$TMP/ob.jobs
OB_DIR=$TMP/ob
OB_N=0
OB_RUN=0
: >"$OB_Q"

# JSON string of $1 (paths and flags: backslashes and quotes escaped; no control characters)
ob_json() { printf '"%s"' "$(printf '%s' "$1" | sed 's/\\/\\\\/g; s/"/\\"/g')"; }

ob_add() {
	ob_line="["
	ob_sep=""
	for ob_a in "$@"; do ob_line="$ob_line$ob_sep$(ob_json "$ob_a")"; ob_sep=","; done
	printf '%s]\n' "$ob_line" >>"$OB_Q"
	OB_N=$((OB_N + 1))
}

ob_run() {
	OB_RUN=$((OB_RUN + 1))
	rm -rf "$OB_DIR"
	mkdir -p "$OB_DIR"
	if [ "$OB_N" -gt 0 ] && ! node "$OB_ORACLE" batch "$OB_Q" "$OB_DIR" 2>"$OB_DIR/stderr"; then
		echo "oracle batch $OB_RUN failed: $(tail -c 300 "$OB_DIR/stderr")" >&2
	fi
	# a job the batch never reached (the process died) reads as failed
	ob_i=1
	while [ "$ob_i" -le "$OB_N" ]; do
		if [ ! -f "$OB_DIR/$ob_i.rc" ]; then
			echo 1 >"$OB_DIR/$ob_i.rc"
			{ echo "oracle: error: the batch did not run this job"; tail -c 300 "$OB_DIR/stderr"; } >"$OB_DIR/$ob_i.err"
			: >"$OB_DIR/$ob_i.out"
		fi
		ob_i=$((ob_i + 1))
	done
	: >"$OB_Q"
	OB_N=0
}

ob_rc() { cat "$OB_DIR/$1.rc"; }
ob_out() { echo "$OB_DIR/$1.out"; }
ob_err() { echo "$OB_DIR/$1.err"; }
