/* srv_int.h - what the server's own files share: the server object, a generation job and
 * the scheduler calls.  Not for other modules (they use server.h / state.h / routes.h).
 *
 * Threads: connection threads (one per connection) decode requests, build prompts, queue a
 * job and then wait on it or stream from it; one scheduler thread owns the engine and runs
 * the jobs (the slots).  s->mu guards the queue, every job's output and the published
 * state; s->engine_mu is held by the scheduler for each engine call. */
#ifndef PT_SERVER_SRV_INT_H
#define PT_SERVER_SRV_INT_H

#include <pthread.h>
#include <stdatomic.h>

#include "gen/grammar.h"
#include "gen/sample.h"
#include "gen/slot.h"
#include "server/chatparse.h"
#include "server/server.h"
#include "token/tmpl.h"

struct pt_tok;

/* One generated token's log-probabilities (raw logits' softmax, as llama.cpp reports). */
struct pt_job_lp {
	int32_t id;
	float logprob;
	uint32_t n_top;
	int32_t top_id[PT_REQ_MAX_TOP_LOGPROBS];
	float top_lp[PT_REQ_MAX_TOP_LOGPROBS];
	size_t text_end;             /* job text length once this token's text was emitted */
};

enum pt_job_state { PT_JOB_QUEUED, PT_JOB_RUNNING, PT_JOB_DONE };

struct pt_job {
	/* the request, immutable once queued */
	uint64_t id;
	int32_t *prompt;
	size_t n_prompt;
	struct pt_sampler_opts sampler;
	float presence_penalty, frequency_penalty;
	uint32_t max_new;            /* 0: until end of generation / context */
	char **stops;
	size_t n_stops;
	bool want_logprobs;
	uint32_t top_logprobs;
	bool no_reuse;               /* cache_prompt false: evaluate the whole prompt */
	int64_t *ckpt_marks;         /* recurrent state: message boundaries (pt_srv_chat_marks) */
	uint32_t n_ckpt_marks;
	pt_grammar *grammar;         /* constrained decoding (owned; NULL: none) */
	pt_grammar_state *gstate;    /* its state, used by the scheduler thread only */
	/* under s->mu */
	enum pt_job_state state;
	char *text;                  /* reply text emitted so far (stop strings removed) */
	size_t len, cap;
	struct pt_job_lp *lps;
	size_t n_lps, cap_lps;
	struct pt_gen_stats st;      /* final once DONE */
	enum pt_status rc;
	struct pt_error err;
	pthread_cond_t cv;           /* signalled on new text and on DONE */
	int refs;                    /* the connection and the scheduler */
	struct pt_job *next;         /* queue link */
	atomic_int cancel;           /* the client went away / the server stops */
	double t_queued;
};

/* One engine sequence with its step-wise generation slot and the job it runs (NULL: free;
 * its KV rows then stay as the cache of the last conversation on it). */
struct srv_slot {
	pt_server *s;
	pt_gen_slot *gs;
	uint32_t seq;
	uint32_t view;               /* index in the snapshot's slot table while busy */
	uint32_t n_vocab;
	struct pt_job *j;
	float *work;                 /* penalised logits */
	uint16_t *counts;            /* occurrences in the penalty window */
	int32_t *window;             /* ring of the last repeat_last_n ids */
	uint32_t wlen, wpos, wcap;
	double t0;
	uint64_t last_used;          /* LRU among free sequences */
};

struct pt_server {
	pt_engine *e;
	const struct pt_tok *tok;
	pt_tmpl *tmpl;               /* NULL: no chat template (chat answers 400) */
	char bos_buf[256], eos_buf[256];
	const char *bos_text, *eos_text;
	const char *template_src;    /* the chat template's text (NULL: none) */
	enum pt_chat_format chat_format; /* tool-call / reasoning syntax of the template */
	pthread_mutex_t gvocab_mu;
	pt_grammar_vocab *gvocab;    /* built on first use of constrained decoding */
	struct pt_server_opts o;
	char model_id[256];
	struct pt_routes routes;
	pt_http *http;
	double t_start;              /* monotonic */
	double t_start_wall;         /* time(NULL) at start */
	/* scheduler */
	pthread_mutex_t mu;
	pthread_mutex_t engine_mu;
	pthread_cond_t queue_cv;
	struct pt_job *q_head, *q_tail;
	uint32_t q_len;
	struct srv_slot slots[PT_ENGINE_MAX_SEQ];
	uint32_t n_slots;            /* engine sequences: --parallel + --cache-prompts */
	uint32_t n_active;           /* slots generating (<= --parallel) */
	uint64_t use_clock;
	double last_publish;
	pthread_t worker;
	bool worker_running;
	atomic_bool stopping;
	uint64_t next_id;
	uint64_t seed_state;
	/* published state (under mu) */
	struct pt_server_snapshot snap;
	uint64_t (*layer)[3];        /* per MoE layer hits, misses, bytes (n_moe_layers) */
	uint32_t n_layers;
};

/* Queues a job (refs: the caller's + the scheduler's).  PT_E_BUSY when the queue is full,
 * PT_E_CANCELLED when the server is stopping. */
enum pt_status pt_srv_submit(pt_server *s, struct pt_job *j, struct pt_error *err);
/* Drops the caller's reference; a job still queued or running is cancelled first. */
void pt_srv_release(pt_server *s, struct pt_job *j);
struct pt_job *pt_srv_job_new(void);
enum pt_status pt_srv_start_worker(pt_server *s, struct pt_error *err);
void pt_srv_stop_worker(pt_server *s);
/* A fresh random seed for requests without one. */
uint64_t pt_srv_random_seed(pt_server *s);

/* Prompt building (prompt.c). */
enum pt_status pt_srv_render_chat(pt_server *s, const struct pt_req *r, bool add_gen,
				  char **text, size_t *len, struct pt_error *err);
/* text (may be NULL): receives the rendered prompt (pt_malloc'd) for the reply parser. */
enum pt_status pt_srv_encode_chat(pt_server *s, const struct pt_req *r, int32_t **ids,
				  size_t *n, char **text, size_t *text_len, struct pt_error *err);
/* Models with recurrent state: the prompt positions of the last PT_SRV_CHAT_MARKS message
 * boundaries of r's conversation (ids: its encoded prompt), checkpoint marks for the slot
 * (pt_gen_slot_opts.ckpt_marks); *marks NULL and *n 0 without recurrent state. */
#define PT_SRV_CHAT_MARKS 16
enum pt_status pt_srv_chat_marks(pt_server *s, const struct pt_req *r, const int32_t *ids,
				 size_t n_ids, int64_t **marks, uint32_t *n, struct pt_error *err);
enum pt_status pt_srv_encode_text(pt_server *s, const char *text, size_t len, bool add_special,
				  bool parse_special, int32_t **ids, size_t *n,
				  struct pt_error *err);

/* Shared by the endpoints (api.c). */
struct cJSON;
struct cJSON *pt_srv_add_clean_string(struct cJSON *obj, const char *key, const char *s, size_t n);
void pt_srv_status_error(struct pt_http_resp *resp, enum pt_status st, const struct pt_error *err,
			 const char *what);
bool pt_srv_decode(pt_server *s, enum pt_req_kind kind, const struct pt_http_req *req,
		   struct pt_req *r, struct pt_http_resp *resp);
void pt_srv_random_id(pt_server *s, const char *prefix, char *out, size_t cap);

/* Routes (api.c, completions.c, metrics.c). */
enum pt_status pt_srv_register_api(pt_server *s, struct pt_error *err);
enum pt_status pt_srv_register_completions(pt_server *s, struct pt_error *err);
enum pt_status pt_srv_register_metrics(pt_server *s, struct pt_error *err);

#endif
