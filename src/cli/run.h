/* run.h - what `particle run` (cmd_run.c) shares with its interactive loop (chat.c): the
 * loaded engine and session, the chat template, prompt building and the stats footer. */
#ifndef PT_CLI_RUN_H
#define PT_CLI_RUN_H

#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "gen/engine.h"
#include "gen/session.h"
#include "token/tmpl.h"

struct cJSON;

struct pt_run {
	pt_engine *engine;
	pt_session *session;
	pt_tmpl *tmpl;            /* NULL in raw mode */
	const char *bos_text, *eos_text; /* NULL when the vocab has none */
	char bos_buf[256], eos_buf[256];
	bool quiet, verbose, raw, interactive;
	/* chat with a harmony template (gpt-oss): the reply goes through the server's harmony
	 * parser per reply (chat): final/plain text to stdout, analysis to stderr as reasoning */
	bool harmony;
	struct pt_chat_parser *chat;
	bool reasoning_open;      /* reasoning text was written to stderr since the last line */
	const char *stats_json;   /* --stats-json FILE (NULL: none) */
	volatile sig_atomic_t *cancel;
	volatile sig_atomic_t *generating;
	/* Totals over the process (interactive /stats). */
	uint32_t turns;
	uint64_t prompt_tokens, reused_tokens, gen_tokens;
	double prefill_s, decode_s;
};

/* Raw text -> ids: BOS per the tokenizer's add_bos rule, special-token text not parsed. */
enum pt_status pt_run_encode_raw(struct pt_run *r, const char *text, size_t len, int32_t **ids,
				 size_t *n, struct pt_error *err);
/* messages (a cJSON array, checked) -> the template with the generation prompt -> ids. */
enum pt_status pt_run_encode_chat(struct pt_run *r, const struct cJSON *messages, int32_t **ids,
				  size_t *n, struct pt_error *err);

/* Generates a reply to ids, streaming to stdout; prints the footer (unless quiet) and writes
 * --stats-json.  Returns the session's status. */
enum pt_status pt_run_generate(struct pt_run *r, const int32_t *ids, size_t n,
			       struct pt_gen_stats *st, struct pt_error *err);
/* The stats footer of one reply (f: stderr). */
void pt_run_print_stats(struct pt_run *r, const struct pt_gen_stats *st, FILE *f);
/* The totals of the session (interactive /stats). */
void pt_run_print_totals(struct pt_run *r, FILE *f);

/* The interactive loop (chat.c).  Returns an exit code. */
int pt_run_interactive(struct pt_run *r);

#endif
