/* limits.h - every bound applied to untrusted input, in one place so tests can probe each
 * at exactly N and N+1. */
#ifndef PT_LIMITS_H
#define PT_LIMITS_H

#define PT_GGUF_MAX_STRING (16u * 1024 * 1024)      /* bytes in one GGUF string */
#define PT_GGUF_MAX_ARRAY (16u * 1024 * 1024)       /* elements in one GGUF array */
#define PT_GGUF_MAX_KV (1u << 20)                   /* metadata pairs in a file */
#define PT_GGUF_MAX_TENSORS (1u << 20)              /* tensors in a file */
#define PT_GGUF_MAX_NAME 63                         /* tensor name bytes (ggml: 64 incl. NUL) */
#define PT_GGUF_MAX_DIMS 4
#define PT_JSON_MAX_DEPTH 64
#define PT_TMPL_MAX_DEPTH 64                        /* template nesting: blocks, expressions, macro calls */
#define PT_TMPL_MAX_SOURCE (1u << 20)               /* bytes of one chat template */
#define PT_TMPL_MAX_ITERATIONS 100000u              /* loop iterations in one render */
#define PT_TMPL_MAX_OUTPUT (16u * 1024 * 1024)      /* bytes of rendered text / one string */
#define PT_TMPL_MAX_MEMORY (256u * 1024 * 1024)     /* bytes allocated by one render */
#define PT_HTTP_MAX_HEADER (64u * 1024)
#define PT_TOK_MAX_VOCAB (1u << 24)                 /* tokens in a vocabulary */
#define PT_TOK_MAX_MERGES (1u << 26)                /* BPE merges */
#define PT_HF_MAX_FILE (512u * 1024 * 1024)         /* bytes in one tokenizer JSON file */

#endif
