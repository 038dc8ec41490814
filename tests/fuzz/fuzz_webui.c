/* fuzz_webui.c - libFuzzer target for the web UI's request-header parsing: the input, split
 * at its first NUL into a path and a header value, goes through pt_webui_respond as both
 * If-None-Match and Accept-Encoding, and through the two parsers alone.  Checks the reply is
 * consistent: 200 carries a body of the representation it names, 304 none. */
#include <stdint.h>
#include <string.h>

#include "server/webui.h"
#include "util/alloc.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t n)
{
	if (n > 8192)
		return 0;
	char *buf = pt_malloc(n + 2);
	if (!buf)
		return 0;
	memcpy(buf, data, n);
	buf[n] = buf[n + 1] = 0;
	char *path = buf, *hdr = (char *)memchr(buf, 0, n + 1) + 1; /* "" when no NUL */
	if (hdr > buf + n)
		hdr = buf + n + 1;
	(void)pt_webui_accepts_gzip(hdr);
	(void)pt_webui_etag_matches(hdr, "\"0123456789abcdef\"");
	(void)pt_webui_owns(path);
	struct pt_webui_reply r;
	pt_webui_respond("GET", path[0] ? path : "/", hdr, hdr, &r);
	if (r.status == 200 && (!r.body || !r.len || !r.etag || !r.content_type))
		__builtin_trap();
	if (r.status == 304 && (r.body || !pt_webui_etag_matches(hdr, r.etag)))
		__builtin_trap();
	if (r.status != 200 && r.status != 304 && r.status != 404)
		__builtin_trap();
	pt_free(buf);
	return 0;
}
