/* source.h - what `particle pull` fetches: a URL, or hf:OWNER/REPO/PATH.gguf[@REVISION]
 * resolved against a Hugging Face endpoint as {endpoint}/{owner}/{repo}/resolve/{rev}/{path}
 * (rev defaults to main; a '/' in rev is sent as %2F).  The file name (last path segment)
 * must be a plain name ending in .gguf.  A name NAME-0000K-of-0000N.gguf (llama.cpp's
 * gguf-split convention, five digits each) is part K of a split model of N parts; any part
 * names the whole model. */
#ifndef PT_NET_SOURCE_H
#define PT_NET_SOURCE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "util/status.h"

#define PT_SOURCE_MAX 4096u
#define PT_SPLIT_MAX_PARTS 9999u

struct pt_source {
	char *prefix;         /* URL up to the file name */
	char *name;           /* the file name as given */
	char *suffix;         /* query string after the name ("" if none) */
	char *stem;           /* split: the name before -0000K-of-0000N.gguf */
	uint32_t split_no;    /* 1-based part named; 0 when not split */
	uint32_t split_count; /* parts; 0 when not split */
};

/* PT_E_INVALID with a one-line reason for anything else. */
enum pt_status pt_source_parse(const char *src, const char *hf_endpoint, struct pt_source *out,
			       struct pt_error *err);
/* Number of files: split_count, or 1. */
uint32_t pt_source_files(const struct pt_source *s);
/* URL and file name of file k (0-based) into url[cap] and name[cap]. */
enum pt_status pt_source_file(const struct pt_source *s, uint32_t k, char *url, char *name,
			      size_t cap, struct pt_error *err);
void pt_source_free(struct pt_source *s);

/* Split part name check on a bare file name: true and *no, *count (1-based) when it follows
 * the NAME-0000K-of-0000N.gguf convention. */
bool pt_source_split_name(const char *name, size_t *stem_len, uint32_t *no, uint32_t *count);

#endif
