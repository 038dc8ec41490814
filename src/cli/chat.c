/* chat.c - the interactive loop of `particle run` on a terminal: line editing (libedit),
 * multi-turn chat through the template with KV prefix reuse, /new, /stats, /quit, and the
 * --raw mode where each line is an independent completion on the warm cache.
 *
 * A turn cancelled with Ctrl-C is dropped as a whole: its KV rows are rewound and neither
 * its user line nor the partial reply enters the history.  When the conversation no longer
 * leaves room for a reply in the context, its oldest turns (after any leading system
 * messages) are dropped, and the user is told how many messages went. */
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

static bool is_role(const cJSON *m, const char *role)
{
	const cJSON *r = cJSON_GetObjectItemCaseSensitive(m, "role");
	return cJSON_IsString(r) && strcmp(r->valuestring, role) == 0;
}

/* Drops the oldest turn: the first message after the leading system/developer ones, and
 * what follows it up to the next user message.  Never drops the last user message (the
 * turn being answered).  Returns the number of messages dropped (0: nothing droppable). */
static int drop_oldest_turn(cJSON *msgs)
{
	int n = cJSON_GetArraySize(msgs), first = 0, last_user = -1, dropped = 0;
	for (int i = 0; i < n; i++)
		if (is_role(cJSON_GetArrayItem(msgs, i), "user"))
			last_user = i;
	while (first < n && (is_role(cJSON_GetArrayItem(msgs, first), "system") ||
			     is_role(cJSON_GetArrayItem(msgs, first), "developer")))
		first++;
	if (first >= last_user)
		return 0;
	do {
		cJSON_DeleteItemFromArray(msgs, first);
		dropped++;
		last_user--;
	} while (first < last_user && !is_role(cJSON_GetArrayItem(msgs, first), "user"));
	return dropped;
}

/* Chat prompt that leaves a quarter of the context (at most 1024 positions) for the reply,
 * dropping the oldest turns as needed. */
static enum pt_status encode_fitting(struct pt_run *r, cJSON *msgs, int32_t **ids, size_t *n,
				     struct pt_error *err)
{
	uint32_t n_ctx = pt_engine_n_ctx(r->engine);
	size_t room = n_ctx / 4 < 1024 ? n_ctx / 4 : 1024;
	int dropped = 0, d;
	enum pt_status rc;
	while ((rc = pt_run_encode_chat(r, msgs, ids, n, err)) == PT_OK && *n + room > n_ctx &&
	       (d = drop_oldest_turn(msgs)) > 0) {
		dropped += d;
		pt_free(*ids);
		*ids = NULL;
	}
	if (dropped && !r->quiet)
		fprintf(stderr, "[context full: dropped the %d oldest message%s]\n", dropped,
			dropped == 1 ? "" : "s");
	return rc;
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
		rc = encode_fitting(r, msgs, &ids, &n, &err);
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
