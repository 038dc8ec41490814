# resident.sh - sourced by the in-RAM benchmark scripts (run.sh section A, full_in_ram.sh).
#
# resident FILE: FILE whole in the page cache before an in-RAM run.  A file that lost pages
# (llama-bench's repack build copies the weights out and evicts part of it; a VM's proactive
# reclaim of unmapped page cache - DAMON pageout on the development VM - does too) is read
# again, into a dropped page cache when root: pages read back into the holes of a cached file
# come in small folios, mapped 4 KiB at a time, and every engine's decode then ran 20-45 %
# slower (docs/PERFORMANCE.md, issue 21 round 5).  Sets HUGE: the page cache's bytes in 2 MiB
# folios afterwards (recorded with the run as file_huge_pages_bytes).
HUGE=0
resident() {
	if ! command -v fincore >/dev/null ||
		[ "$(fincore -b -n -o RES "$1" | tr -d ' ')" -lt "$(stat -c %s "$1")" ]; then
		if [ "$(id -u)" = 0 ]; then
			sync
			echo 3 >/proc/sys/vm/drop_caches
		fi
		cat "$1" >/dev/null
	fi
	HUGE=$(awk '/^FileHugePages/ {printf "%.0f", $2 * 1024}' /proc/meminfo)
}
