/* cmd_pull.c - `particle pull SOURCE`: downloads a model (every part of a split one) into
 * the models directory, ranged and resumable (net/download.h), refusing a wrong file as soon
 * as its header arrives, verifying the SHA-256 and the whole GGUF before the atomic rename,
 * optionally building the expert pack from the bytes as they arrive.  Also `pull --verify`. */
#include "cli/cli.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli/models.h"
#include "expert/layout.h"
#include "expert/pack.h"
#include "expert/pack_stream.h"
#include "gguf/gguf.h"
#include "model/model.h"
#include "net/download.h"
#include "net/http.h"
#include "net/ranges.h"
#include "net/source.h"
#include "util/alloc.h"
#include "util/safefile.h"

#define DEFAULT_HEAD (256u << 10)
#define HEAD_MAX (64u << 20)      /* header + metadata + tensor infos we wait for */
#define DEFAULT_CHUNK (16u << 20)
#define PLAIN_EVERY_S 5.0

static volatile sig_atomic_t g_cancel;

static void on_signal(int sig)
{
	(void)sig;
	g_cancel = 1;
}

static void help(FILE *f)
{
	fprintf(f,
		"usage: particle pull SOURCE [-o DIR] [--sha256 HEX] [--pack] [--repack]\n"
		"                     [--jobs N] [--limit-rate R] [--quiet]\n"
		"       particle pull --verify FILE.gguf [--sha256 HEX]\n\n"
		"Downloads a GGUF model into the models directory ($PARTICLE_MODELS, default\n"
		"~/.cache/particle/models).  SOURCE is an http(s) URL or\n"
		"hf:OWNER/REPO/PATH.gguf[@REVISION], fetched from\n"
		"{endpoint}/OWNER/REPO/resolve/REVISION/PATH with endpoint $PARTICLE_HF_ENDPOINT\n"
		"(default https://huggingface.co) and $HF_TOKEN sent as a bearer token when set.\n"
		"A split model (NAME-00001-of-00003.gguf) is named by any part; all parts come.\n\n"
		"The file arrives as NAME.partial with NAME.partial.state recording the byte\n"
		"ranges on disk: an interrupted pull (Ctrl-C, crash, lost network) resumes where\n"
		"its bytes end when run again.  The GGUF header is validated as soon as it\n"
		"arrives; at the end the SHA-256 is compared (--sha256, else the one the hub\n"
		"publishes: X-Linked-Etag / ETag when it is a SHA-256), the whole GGUF is\n"
		"validated, and only then is the file renamed to NAME.\n\n"
		"options:\n"
		"  -o DIR           directory to put the model in (default: the models directory)\n"
		"  --sha256 HEX     expected SHA-256 (single-file models)\n"
		"  --pack           also write the expert pack (NAME.xpack, as 'particle pack')\n"
		"                   from the bytes as they arrive\n"
		"  --repack         the expert pack interleaved, as 'particle pack --repack'\n"
		"                   writes it, for runs with --repack (implies --pack)\n"
		"  --jobs N         byte ranges in flight, each on its own connection (default 4)\n"
		"  --limit-rate R   total download rate cap in bytes/s, e.g. 20M (default: none)\n"
		"  --quiet          no progress output, only errors and the summary\n"
		"  --verify FILE    re-check a file on disk: GGUF structure and SHA-256 (with\n"
		"                   --sha256 only; an expert pack: 'particle pack FILE --verify')\n"
		"  -h, --help       this text\n\n"
		"Transient network errors (resets, timeouts, HTTP 5xx) are retried with\n"
		"exponential backoff; 404, 401/403 and 416 stop at once.  Exit codes: 0 ok,\n"
		"1 network or disk failure, 2 bad source or a file that is wrong (checksum,\n"
		"header), 130 interrupted (run the same command again to resume).\n");
}

struct opts {
	const char *source, *dir, *sha256, *verify;
	bool pack, repack, quiet;
	bool download_opt; /* -o, --jobs or --limit-rate given */
	uint32_t jobs;
	uint64_t rate;
};

static bool parse_args(int argc, char **argv, struct opts *o, int *rc)
{
	for (int i = 1; i < argc; i++) {
		const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
		uint64_t x;
		if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
			help(stdout);
			*rc = PT_EXIT_OK;
			return false;
		} else if (!strcmp(a, "--pack")) {
			o->pack = true;
		} else if (!strcmp(a, "--repack")) {
			o->pack = o->repack = true;
		} else if (!strcmp(a, "--quiet") || !strcmp(a, "-q")) {
			o->quiet = true;
		} else if (!strcmp(a, "-o") || !strcmp(a, "--sha256") || !strcmp(a, "--verify") ||
			   !strcmp(a, "--jobs") || !strcmp(a, "--limit-rate")) {
			if (!v) {
				pt_cli_error("pull: %s needs a value", a);
				return false;
			}
			i++;
			o->download_opt |= !strcmp(a, "-o") || !strcmp(a, "--jobs") ||
					   !strcmp(a, "--limit-rate");
			if (!strcmp(a, "-o"))
				o->dir = v;
			else if (!strcmp(a, "--sha256"))
				o->sha256 = v;
			else if (!strcmp(a, "--verify"))
				o->verify = v;
			else if (!strcmp(a, "--jobs")) {
				if (!pt_cli_parse_u64(a, v, 1, 64, &x))
					return false;
				o->jobs = (uint32_t)x;
			} else if (!pt_cli_parse_size(a, v, &o->rate)) {
				return false;
			}
		} else if (a[0] == '-' && a[1]) {
			pt_cli_error("pull: unknown option '%s' (see 'particle pull --help')", a);
			return false;
		} else if (!o->source) {
			o->source = a;
		} else {
			pt_cli_error("pull: unexpected argument '%s'", a);
			return false;
		}
	}
	if (o->sha256) {
		size_t n = strlen(o->sha256);
		bool ok = n == 64;
		for (size_t i = 0; ok && i < n; i++)
			ok = strchr("0123456789abcdefABCDEF", o->sha256[i]) != NULL;
		if (!ok) {
			pt_cli_error("--sha256 expects 64 hex digits");
			return false;
		}
	}
	if (!o->source && !o->verify) {
		help(stderr);
		return false;
	}
	if (o->source && o->verify) {
		pt_cli_error("pull: give either SOURCE or --verify FILE");
		return false;
	}
	/* download options would be silently ignored: the expert pack has its own check */
	if (o->verify && (o->pack || o->download_opt)) {
		pt_cli_error("pull: --verify takes only --sha256 (an expert pack: 'particle pack "
			     "MODEL.gguf --verify')");
		return false;
	}
	return true;
}

static bool is_sha256(const char *s)
{
	if (strlen(s) != 64)
		return false;
	for (int i = 0; i < 64; i++)
		if (!strchr("0123456789abcdef", s[i]))
			return false;
	return true;
}

static void hex32(const unsigned char *d, char out[65])
{
	for (int i = 0; i < 32; i++)
		snprintf(out + 2 * i, 3, "%02x", d[i]);
}

static uint64_t env_u64(const char *name, uint64_t def, uint64_t min, uint64_t max)
{
	const char *v = getenv(name);
	char *end;
	if (!v || !*v)
		return def;
	unsigned long long x = strtoull(v, &end, 10);
	if (*end || x < min || x > max)
		return def;
	return x;
}

/* A pulled file's pages out of the page cache once it is checked: written (and checked)
 * pages sit there in small folios, and a model mapped from them decodes up to 2.5x slower
 * until they turn over; the first run reads it back in large folios (util/safefile.h). */
static void drop_cached(const char *path)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd >= 0) {
		pt_drop_page_cache(fd);
		close(fd);
	}
}

/* ---- split keys ----------------------------------------------------------------------- */

/* A part of a split model must say which part it is (split.no is 0-based) and of how many;
 * a single file must not claim to be a part. */
static enum pt_status check_split(const pt_gguf *g, const char *name, uint32_t no,
				  uint32_t count, struct pt_error *err)
{
	uint32_t sno = 0, scount = 0;
	bool have_no = false, have_count = false;
	enum pt_status st = pt_gguf_get_u32(g, "split.no", 0, &sno, &have_no, err);
	if (st == PT_OK)
		st = pt_gguf_get_u32(g, "split.count", 0, &scount, &have_count, err);
	if (st != PT_OK)
		return st;
	if (count == 0) {
		if (have_count && scount > 1)
			return pt_error_set(err, PT_E_FORMAT, "%s is part %u of a %u-part split "
					    "model but its name does not say so", name, sno + 1,
					    scount);
		return PT_OK;
	}
	if (!have_no || !have_count)
		return pt_error_set(err, PT_E_FORMAT, "%s: named as part %u of %u but it has no "
				    "split.no / split.count keys", name, no, count);
	if (sno + 1 != no || scount != count)
		return pt_error_set(err, PT_E_FORMAT, "%s: named as part %u of %u but its header "
				    "says part %u of %u", name, no, count, sno + 1, scount);
	return PT_OK;
}

/* ---- one file ------------------------------------------------------------------------- */

struct file_job {
	const struct opts *o;
	const char *name;
	const char *final_path;
	const char *pack_path;
	uint32_t split_no, split_count;
	pt_pack_stream *pack;
	bool tty;
	double last_plain;
	uint64_t total_before;  /* bytes of earlier parts (progress across parts) */
};

static enum pt_status check_head(void *ctx, int fd, uint64_t avail, uint64_t size, bool *more,
				 struct pt_error *err)
{
	struct file_job *j = ctx;
	uint8_t *buf = pt_malloc(avail ? avail : 1);
	pt_gguf *g = NULL;
	enum pt_status st = PT_OK;
	struct pt_error e = { 0 };
	if (!buf)
		return pt_error_set(err, PT_E_NOMEM, "out of memory (header)");
	for (uint64_t at = 0; at < avail;) {
		ssize_t got = pread(fd, buf + at, avail - at, (off_t)at);
		if (got <= 0) {
			pt_free(buf);
			return pt_error_sys(err, PT_E_IO, errno, "cannot read back the header");
		}
		at += (uint64_t)got;
	}
	st = pt_gguf_open_prefix(buf, avail, size, &g, more, &e);
	if (st != PT_OK) {
		if (!*more)
			st = pt_error_set(err, st, "%s is not a valid GGUF model (refused after %.1f "
					  "KiB): %s", j->name, avail / 1024.0, e.msg);
		else
			st = pt_error_set(err, st, "%s: GGUF header and metadata larger than %u MiB "
					  "(%s)", j->name, HEAD_MAX >> 20, e.msg);
		pt_free(buf);
		return st;
	}
	st = check_split(g, j->name, j->split_no, j->split_count, err);
	if (st == PT_OK && j->o->pack) {
		struct pt_expert_layout lay;
		st = pt_expert_layout_from_gguf_layers(g, pt_model_computed_layers(g), &lay, err);
		if (st == PT_OK) {
			st = pt_pack_stream_begin(&lay, j->pack_path, j->o->repack, &j->pack,
						  err);
			pt_expert_layout_free(&lay);
		}
	}
	pt_gguf_close(g);
	pt_free(buf);
	return st;
}

static enum pt_status on_bytes(void *ctx, uint64_t off, const void *buf, size_t n,
			       struct pt_error *err)
{
	struct file_job *j = ctx;
	return j->pack ? pt_pack_stream_feed(j->pack, off, buf, n, err) : PT_OK;
}

static void fmt_eta(double s, char *out, size_t cap)
{
	if (s < 0 || s > 99 * 3600)
		snprintf(out, cap, "--:--");
	else if (s >= 3600)
		snprintf(out, cap, "%d:%02d:%02d", (int)s / 3600, (int)s / 60 % 60, (int)s % 60);
	else
		snprintf(out, cap, "%d:%02d", (int)s / 60, (int)s % 60);
}

static void progress(void *ctx, const struct pt_dl_progress *p)
{
	struct file_job *j = ctx;
	double pct = p->size ? 100.0 * (double)p->have / (double)p->size : 100.0;
	double rate = p->seconds > 0.05 ? (double)p->net / p->seconds : 0;
	char eta[32];
	if (j->o->quiet)
		return;
	fmt_eta(rate > 0 ? (double)(p->size - p->have) / rate : -1, eta, sizeof eta);
	if (j->tty) {
		char bar[31];
		int fill = (int)(pct * 30 / 100);
		for (int i = 0; i < 30; i++)
			bar[i] = i < fill ? '#' : '-';
		bar[30] = '\0';
		fprintf(stderr, "\r\033[K%-28.28s [%s] %5.1f%% %8.1f/%.1f MiB %7.1f MiB/s ETA %s",
			j->name, bar, pct, p->have / 1048576.0, p->size / 1048576.0,
			rate / 1048576.0, eta);
		if (p->done)
			fputc('\n', stderr);
	} else if (p->done || p->seconds - j->last_plain >= PLAIN_EVERY_S) {
		j->last_plain = p->seconds;
		fprintf(stderr, "pull: %s %.1f%% %.1f/%.1f MiB %.1f MiB/s ETA %s\n", j->name, pct,
			p->have / 1048576.0, p->size / 1048576.0, rate / 1048576.0, eta);
	}
	fflush(stderr);
}

static bool exists(const char *p)
{
	struct stat st;
	return lstat(p, &st) == 0;
}

static enum pt_status sync_dir(const char *dir, struct pt_error *err)
{
	FILE *f = fopen(dir, "r");
	if (!f)
		return pt_error_sys(err, PT_E_IO, errno, "cannot open %s", dir);
	int rc = fsync(fileno(f));
	fclose(f);
	return rc == 0 || errno == EINVAL ? PT_OK
					  : pt_error_sys(err, PT_E_IO, errno, "cannot sync %s", dir);
}

static int pull_file(const struct opts *o, const char *dir, const char *url, const char *name,
		     uint32_t split_no, uint32_t split_count, pt_http_client *head)
{
	char final[4400], partial[4500], state[4600], pack[4600], got[65];
	char expect[65] = "", validator[PT_PULL_VALIDATOR_MAX + 1] = "-";
	const char *expect_from = NULL;
	struct pt_http_info info;
	struct pt_error err = { 0 };
	struct pt_dl_result res;
	struct file_job j = { .o = o, .name = name, .final_path = final, .pack_path = pack,
			      .split_no = split_no, .split_count = split_count,
			      .tty = isatty(2) };
	enum pt_status st;
	snprintf(final, sizeof final, "%.4000s/%.255s", dir, name);
	snprintf(partial, sizeof partial, "%.4400s.partial", final);
	snprintf(state, sizeof state, "%.4500s.state", partial);
	pt_pack_default_path(final, pack, sizeof pack);
	if (exists(final)) {
		if (!o->quiet)
			fprintf(stderr, "pull: %s is already there (check it with 'particle pull "
				"--verify %s')\n", final, final);
		return PT_EXIT_OK;
	}
	st = pt_http_head(head, url, &info, &err);
	if (st != PT_OK)
		return pt_cli_fail(&err);
	if (!info.size_known && info.linked_size) { /* the hub's own figure */
		info.size = info.linked_size;
		info.size_known = true;
	}
	if (!info.size_known) {
		pt_cli_error("%s: the server did not say how large the file is", url);
		return PT_EXIT_FAIL;
	}
	/* the hub's LFS object id (X-Linked-Etag) is the file's SHA-256; a plain ETag is used
	 * only when it has that form too */
	if (o->sha256) {
		for (int i = 0; i < 64; i++)
			expect[i] = (char)(o->sha256[i] | 0x20);
		expect[64] = '\0';
		expect_from = "--sha256";
	} else if (is_sha256(info.linked_etag)) {
		snprintf(expect, sizeof expect, "%s", info.linked_etag);
		expect_from = "the hub (X-Linked-Etag)";
	} else if (is_sha256(info.etag)) {
		snprintf(expect, sizeof expect, "%s", info.etag);
		expect_from = "the server's ETag";
	}
	const char *v = info.linked_etag[0] ? info.linked_etag : info.etag;
	if (v[0]) {
		size_t k = 0;
		for (; v[k] && k < PT_PULL_VALIDATOR_MAX; k++)
			validator[k] = v[k] > ' ' && v[k] <= '~' ? v[k] : '_';
		validator[k] = '\0';
	}
	struct pt_dl_opts d = {
		.url = url, .partial_path = partial, .state_path = state, .size = info.size,
		.validator = validator, .jobs = o->jobs,
		.chunk = env_u64("PARTICLE_PULL_CHUNK", DEFAULT_CHUNK, 4096, 1ull << 32),
		.head_bytes = env_u64("PARTICLE_PULL_HEAD", DEFAULT_HEAD, 64, HEAD_MAX),
		.head_max = HEAD_MAX,
		/* the pack is at most about the file (interleaved Q4_K: 2368 bytes for 2304) */
		.extra_space = o->pack ? info.size + (o->repack ? info.size / 32 : 0) : 0,
		.http = pt_http_default_opts(),
	};
	d.http.bearer = getenv("HF_TOKEN");
	d.http.cancel = &g_cancel;
	d.http.max_recv_bps = o->rate ? (o->rate + o->jobs - 1) / o->jobs : 0;
	d.http.backoff_ms = (uint32_t)env_u64("PARTICLE_PULL_BACKOFF_MS", 500, 1, 60000);
	d.http.stall_s = (uint32_t)env_u64("PARTICLE_PULL_STALL_S", 30, 1, 3600);
	struct pt_dl_hooks h = { &j, check_head, on_bytes, progress };
	st = pt_download(&d, &h, &res, &err);
	if (st != PT_OK) {
		pt_pack_stream_abort(j.pack);
		if (st == PT_E_CANCELLED) {
			pt_cli_error("interrupted: %s kept; run the same command again to resume",
				     partial);
			return PT_EXIT_CANCELLED;
		}
		return pt_cli_fail(&err);
	}
	hex32(res.sha256, got);
	if (expect_from && strcmp(got, expect) != 0) {
		pt_pack_stream_abort(j.pack);
		pt_cli_error("%s: SHA-256 mismatch: expected %s (from %s), got %s; the download "
			     "is kept as %s for inspection", name, expect, expect_from, got,
			     partial);
		return PT_EXIT_USAGE;
	}
	pt_gguf *g = NULL;
	st = pt_gguf_open_one(partial, &g, &err); /* the other parts land on their own */
	if (st == PT_OK)
		st = check_split(g, name, split_no, split_count, &err);
	pt_gguf_close(g);
	if (st != PT_OK) {
		pt_pack_stream_abort(j.pack);
		pt_cli_error("%s is not a valid GGUF (kept as %s): %s", name, partial, err.msg);
		return pt_status_exit_code(st);
	}
	drop_cached(partial); /* the first run reads it back in large folios (safefile.h) */
	if (rename(partial, final) != 0 || sync_dir(dir, &err) != PT_OK) {
		pt_pack_stream_abort(j.pack);
		pt_cli_error("cannot rename %s to %s", partial, final);
		return PT_EXIT_FAIL;
	}
	if (j.pack && (st = pt_pack_stream_finish(j.pack, final, &err)) != PT_OK)
		return pt_cli_fail(&err);
	printf("pulled %s: %.1f MiB in %.1f s (%.1f MiB/s%s%s), %.1f MiB over the network, "
	       "sha256 %s (%s)%s\n", final, info.size / 1048576.0, res.seconds,
	       res.seconds > 0 ? res.net / 1048576.0 / res.seconds : 0.0,
	       res.resumed ? ", resumed" : "", res.ranged ? "" : ", server without Range",
	       res.net / 1048576.0, got, expect_from ? expect_from : "no published checksum: "
	       "computed", o->repack ? ", interleaved expert pack written"
	       : o->pack ? ", expert pack written" : "");
	fflush(stdout);
	return PT_EXIT_OK;
}

/* ---- --verify ---------------------------------------------------------------------- */

static int verify_file(const struct opts *o)
{
	struct pt_error err = { 0 };
	pt_gguf *g = NULL;
	char sha[65];
	size_t stem;
	uint32_t no = 0, count = 0;
	const char *base = strrchr(o->verify, '/');
	base = base ? base + 1 : o->verify;
	enum pt_status st = pt_gguf_open_one(o->verify, &g, &err);
	if (st == PT_OK && !pt_source_split_name(base, &stem, &no, &count))
		no = count = 0;
	if (st == PT_OK)
		st = check_split(g, base, no, count, &err);
	if (st == PT_OK)
		st = pt_pack_sha256_file(o->verify, pt_gguf_file_size(g), sha, &err);
	if (st != PT_OK) {
		pt_gguf_close(g);
		return pt_cli_fail(&err);
	}
	if (o->sha256 && strncasecmp(sha, o->sha256, 64) != 0) {
		pt_cli_error("%s: SHA-256 mismatch: expected %s, got %s", o->verify, o->sha256, sha);
		pt_gguf_close(g);
		return PT_EXIT_USAGE;
	}
	printf("%s: OK (GGUF v%u, %llu tensors, every tensor inside the %llu-byte file), "
	       "sha256 %s%s\n", o->verify, pt_gguf_version(g),
	       (unsigned long long)pt_gguf_tensor_count(g),
	       (unsigned long long)pt_gguf_file_size(g), sha,
	       o->sha256 ? " (matches --sha256)" : "");
	pt_gguf_close(g);
	return PT_EXIT_OK;
}

int pt_cmd_pull(int argc, char **argv)
{
	struct opts o = { .jobs = 4 };
	struct pt_source src;
	struct pt_error err = { 0 };
	char dir[4096], url[PT_SOURCE_MAX + 512], name[PT_SOURCE_MAX + 512];
	int rc = PT_EXIT_USAGE;
	if (!parse_args(argc, argv, &o, &rc))
		return rc;
	if (o.verify)
		return verify_file(&o);
	const char *ep = getenv("PARTICLE_HF_ENDPOINT");
	if (pt_source_parse(o.source, ep && ep[0] ? ep : "https://huggingface.co", &src, &err)
	    != PT_OK)
		return pt_cli_fail(&err);
	if (o.sha256 && src.split_count > 1) {
		pt_source_free(&src);
		pt_cli_error("--sha256 names one file; %s is one of %u parts", src.name,
			     src.split_count);
		return PT_EXIT_USAGE;
	}
	if (o.dir) {
		struct stat st;
		if (stat(o.dir, &st) != 0 || !S_ISDIR(st.st_mode)) {
			pt_source_free(&src);
			pt_cli_error("-o %s: not a directory", o.dir);
			return PT_EXIT_USAGE;
		}
		snprintf(dir, sizeof dir, "%s", o.dir);
	} else if (pt_cli_models_dir(dir, sizeof dir, true, &err) != PT_OK) {
		pt_source_free(&src);
		return pt_cli_fail(&err);
	}
	struct sigaction sa = { 0 };
	sa.sa_handler = on_signal;
	sigemptyset(&sa.sa_mask);
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
	signal(SIGPIPE, SIG_IGN);
	pt_http_client *head = NULL;
	struct pt_http_opts ho = pt_http_default_opts();
	ho.bearer = getenv("HF_TOKEN");
	ho.cancel = &g_cancel;
	ho.backoff_ms = (uint32_t)env_u64("PARTICLE_PULL_BACKOFF_MS", 500, 1, 60000);
	ho.stall_s = (uint32_t)env_u64("PARTICLE_PULL_STALL_S", 30, 1, 3600);
	if (pt_http_global_init(&err) != PT_OK || pt_http_client_new(&ho, &head, &err) != PT_OK) {
		pt_source_free(&src);
		return pt_cli_fail(&err);
	}
	rc = PT_EXIT_OK;
	uint32_t n = pt_source_files(&src);
	if (n > 1 && !o.quiet)
		fprintf(stderr, "pull: %s is part %u of a %u-part split model: fetching all parts\n",
			src.name, src.split_no, n);
	for (uint32_t k = 0; k < n && rc == PT_EXIT_OK; k++) {
		if (pt_source_file(&src, k, url, name, sizeof url, &err) != PT_OK) {
			rc = pt_cli_fail(&err);
			break;
		}
		rc = pull_file(&o, dir, url, name, src.split_count ? k + 1 : 0, src.split_count,
			       head);
	}
	pt_http_client_free(head);
	pt_source_free(&src);
	return rc;
}
