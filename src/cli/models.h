/* models.h - the models directory ($PARTICLE_MODELS, default ~/.cache/particle/models) and
 * the one place a -m NAME becomes a file path, for every command that opens a model. */
#ifndef PT_CLI_MODELS_H
#define PT_CLI_MODELS_H

#include <stdbool.h>
#include <stddef.h>

#include "util/status.h"

/* The directory into out[cap]; with create, made (0700) when absent and checked. */
enum pt_status pt_cli_models_dir(char *out, size_t cap, bool create, struct pt_error *err);

/* -m NAME: an existing path as given; else NAME, then NAME.gguf, in the models directory;
 * else NAME unchanged (the open then reports it missing).  Returns name or buf. */
const char *pt_cli_resolve_model(const char *name, char *buf, size_t cap);
/* The same into a static buffer (valid until the next call): what run, eval, bench (and
 * serve) apply to -m / $PARTICLE_MODEL. */
const char *pt_cli_model_path(const char *name);

#endif
