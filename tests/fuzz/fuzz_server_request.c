/* fuzz_server_request.c - the server's request decoder (src/server/request.c) on arbitrary
 * bytes.  Byte 0 picks the request kind and a few defaults; the rest is the body.  Must not
 * crash, leak or trip the sanitizers; a decoded request must satisfy the documented bounds
 * and a refused one must carry a 400/413/503 status and a message. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "server/request.h"

int LLVMFuzzerTestOneInput(const unsigned char *data, size_t size);

int LLVMFuzzerTestOneInput(const unsigned char *data, size_t size)
{
	if (size < 1)
		return 0;
	struct pt_req_defaults d;
	memset(&d, 0, sizeof d);
	pt_sampler_opts_default(&d.sampler);
	d.max_tokens = (data[0] & 0x10) ? 64 : -1;
	d.seed_given = (data[0] & 0x20) != 0;
	d.max_body = (data[0] & 0x40) ? 64 : 1 << 20;
	enum pt_req_kind kind = (enum pt_req_kind)((data[0] & 0x0F) % 5);
	struct pt_req r;
	struct pt_req_error e;
	bool ok = pt_req_decode(kind, (const char *)data + 1, size - 1, &d, &r, &e);
	if (ok) {
		if (r.n_stops > PT_REQ_MAX_STOPS || r.top_logprobs > PT_REQ_MAX_TOP_LOGPROBS ||
		    !r.root || r.max_tokens == 0 || r.max_tokens < -1)
			abort();
		for (size_t i = 0; i < r.n_stops; i++)
			if (!r.stops[i][0] || strlen(r.stops[i]) > PT_REQ_MAX_STOP_LEN)
				abort();
		if ((kind == PT_REQ_CHAT || kind == PT_REQ_APPLY_TEMPLATE) &&
		    (!cJSON_IsArray(r.messages) || !r.messages->child))
			abort();
		/* every message content is a string or null after normalisation */
		for (const cJSON *m = r.messages ? r.messages->child : NULL; m; m = m->next) {
			const cJSON *c = cJSON_GetObjectItemCaseSensitive(m, "content");
			if (c && !cJSON_IsString(c) && !cJSON_IsNull(c))
				abort();
		}
		if (kind == PT_REQ_COMPLETION && !r.prompt && !r.n_ids)
			abort();
	} else if ((e.status != 400 && e.status != 413 && e.status != 503) || !e.message[0]) {
		abort();
	}
	pt_req_free(&r);
	return 0;
}
