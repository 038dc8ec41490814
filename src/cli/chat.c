/* chat.c - the interactive loop of `particle run` on a terminal: line editing (libedit),
 * multi-turn chat through the template with KV prefix reuse, /new, /stats, /quit, and the
 * --raw mode where each line is an independent completion on the warm cache.
 *
 * A turn cancelled with Ctrl-C is dropped as a whole: its KV rows are rewound and neither
 * its user line nor the partial reply enters the history. */
#include "cli/cli.h"
#include "cli/run.h"

#include <cjson/cJSON.h>
#include <editline/readline.h>
#include <stdlib.h>
#include <string.h>

#include "util/alloc.h"

static bool add_message(cJSON *msgs, const char *role, const char *content)
{
	cJSON *m = cJSON_CreateObject();
	if (!m || !cJSON_AddStringToObject(m, "role", role) ||
	    !cJSON_AddStringToObject(m, "content", content)) {
		cJSON_Delete(m);
		return false;
	}
	return cJSON_AddItemToArray(msgs, m);
}

static void drop_last(cJSON *msgs)
{
	int n = cJSON_GetArraySize(msgs);
	if (n > 0)
		cJSON_DeleteItemFromArray(msgs, n - 1);
}

/* One turn: returns false on an out-of-memory condition that ends the session. */
static bool turn(struct pt_run *r, cJSON *msgs, const char *line)
{
	struct pt_error err = { 0 };
	struct pt_gen_stats st = { 0 };
	int32_t *ids = NULL;
	size_t n = 0;
	enum pt_status rc;
	if (r->raw) {
		rc = pt_run_encode_raw(r, line, strlen(line), &ids, &n, &err);
	} else {
		if (!add_message(msgs, "user", line)) {
			pt_cli_error("out of memory for the conversation");
			return false;
		}
		rc = pt_run_encode_chat(r, msgs, &ids, &n, &err);
	}
	if (rc == PT_OK)
		rc = pt_run_generate(r, ids, n, &st, &err);
	pt_free(ids);
	if (rc != PT_OK || st.stop == PT_STOP_CANCELLED) {
		if (rc != PT_OK)
			pt_cli_fail(&err);
		else
			fprintf(stderr, "[cancelled: reply dropped]\n");
		pt_error_clear(&err);
		if (pt_session_drop_reply(r->session, &st, &err) != PT_OK)
			pt_cli_fail(&err);
		if (!r->raw)
			drop_last(msgs);
		return true;
	}
	size_t len;
	const char *text = pt_session_text(r->session, &len);
	if (!r->raw && !add_message(msgs, "assistant", text)) {
		pt_cli_error("out of memory for the conversation");
		return false;
	}
	return true;
}

int pt_run_interactive(struct pt_run *r)
{
	cJSON *msgs = cJSON_CreateArray();
	int rc = PT_EXIT_OK;
	if (!msgs) {
		pt_cli_error("out of memory for the conversation");
		return PT_EXIT_FAIL;
	}
	if (!r->quiet)
		fprintf(stderr, "particle: %s; /new fresh chat, /stats, /quit; Ctrl-C stops a "
				"reply, Ctrl-C at the prompt exits\n",
			r->raw ? "raw completion, each line on its own" : "chat");
	for (;;) {
		char *line = readline("> "); /* libedit's malloc: released with free() */
		if (!line) {
			fputc('\n', stdout);
			break;
		}
		if (*line)
			add_history(line);
		if (strcmp(line, "/quit") == 0) {
			free(line);
			break;
		}
		if (strcmp(line, "/new") == 0) {
			cJSON_Delete(msgs);
			msgs = cJSON_CreateArray();
			if (!r->quiet)
				fprintf(stderr, "[new chat; expert cache kept warm]\n");
		} else if (strcmp(line, "/stats") == 0) {
			pt_run_print_totals(r, stderr);
		} else if (*line && !turn(r, msgs, line)) {
			rc = PT_EXIT_FAIL;
		}
		free(line);
		if (!msgs) {
			pt_cli_error("out of memory for the conversation");
			rc = PT_EXIT_FAIL;
		}
		if (rc)
			break;
	}
	cJSON_Delete(msgs);
	return rc;
}
