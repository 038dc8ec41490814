/* grammar.h - exact constrained decoding: the sampler may only pick tokens whose bytes keep
 * the output a valid prefix of (a) any JSON object, (b) a JSON Schema, or (c) one of several
 * sequences of literal text and schema-constrained JSON (tool-call forcing).
 *
 * How it works.  A grammar is a small graph of nodes compiled from the schema (literal sets,
 * strings, numbers, objects, arrays, unions, sequences).  A matcher state is a set of
 * pushdown stacks of frames, advanced byte by byte (UTF-8 is validated incrementally, so a
 * token may end in the middle of a character).  A token mask walks a trie of the vocabulary's
 * token bytes, so shared prefixes are matched once and a subtree is dropped at the first byte
 * that no stack accepts; inside a free JSON string, tokens whose bytes are plain string
 * characters are decided by a per-token count and only the rest is walked.
 *
 * Guarantees (tested in tests/unit/test_grammar.c with random walks over real vocabularies):
 *   - every completed output parses as JSON and validates against the schema;
 *   - no dead ends: every stack in a state can still be completed (unsatisfiable parts are
 *     pruned at compile time, nesting is bounded by PT_GRAMMAR_MAX_DEPTH with each node's
 *     minimum completion depth checked before it is entered, whitespace between tokens is
 *     bounded by PT_GRAMMAR_MAX_WS bytes per gap so spaces cannot loop forever);
 *   - control/unknown/unused tokens are never allowed; end-of-generation tokens only when
 *     the output is complete; tokens with empty text never.
 *
 * Output shape (all of it valid JSON; documented so the server can describe it):
 *   - object keys come in the schema's `properties` order; optional ones may be skipped;
 *     extra keys (additionalProperties true or a schema) come after the declared ones and
 *     never repeat a declared name (duplicate extra keys are not prevented);
 *   - no whitespace before the first byte or after the last; at most PT_GRAMMAR_MAX_WS
 *     whitespace bytes (space, tab, LF, CR) in each gap between tokens of a container;
 *   - numbers: integer part at most 16 digits, fraction at most 16, exponent at most 2;
 *     `integer` is -?(0|[1-9][0-9]*);
 *   - strings: any valid UTF-8 except control characters, plus every JSON escape;
 *     \u0000 and unpaired surrogate escapes are refused (they break C strings and cJSON);
 *   - enum / const values are emitted exactly as cJSON prints them unformatted;
 *   - date: YYYY-MM-DD with February ending at day 28 (valid whatever the year); time:
 *     HH:MM:SS, optional .fraction (1-9 digits), then Z or +HH:MM / -HH:MM; date-time:
 *     date "T" time; uuid: 8-4-4-4-12 hex digits.
 * Limits: PT_GRAMMAR_MAX_NODES nodes, PT_GRAMMAR_MAX_ENUM values per enum, 1024 properties
 * per object, 1024 anyOf/oneOf branches, 4096 alternatives; a state keeps at most 1024
 * ambiguous readings at once (more are dropped, which keeps it sound and dead-end free).
 * Mask cost on the 151,669-token Qwen3 vocabulary: about 0.25-0.5 ms per token on average
 * (tests/unit/test_grammar.c prints it); a single-token check (the sampler's fast path) is
 * a few microseconds.  The cost grows with the number of readings alive at once: e.g. inside
 * a string that matches 100 anyOf string branches with different lengths a mask takes
 * ~250 ms; while 300 forced tools share their first bytes, ~10 ms.
 *
 * Supported JSON Schema subset (anything else is PT_E_INVALID naming the JSON-pointer path
 * of the keyword, e.g. "/properties/when/pattern"):
 *   type (a string or an array of them: null boolean integer number string object array),
 *   properties, required, additionalProperties (true / false / schema; default false when
 *   properties are given, true otherwise), items (schema, boolean, or the draft-4 array
 *   form), prefixItems, additionalItems, minItems, maxItems, minLength, maxLength (code
 *   points), format (date, time, date-time, uuid; any other format is refused),
 *   minimum, maximum, exclusiveMinimum, exclusiveMaximum (numbers, or draft-4 booleans) on
 *   "integer" (digit by digit: a digit is allowed only if some completion stays in range),
 *   integral minimum / maximum on "number" (no exponent then; at the upper edge only zero
 *   fraction digits),
 *   enum, const, anyOf, oneOf (only when no value can match two branches: each pair
 *   starts with different JSON types, or is two objects where one requires a property the
 *   other declares, with disjoint enum/const values: a discriminator), allOf with exactly one element, nullable
 *   (OpenAPI), $ref to "#" or any local JSON pointer ("#/$defs/X", "#/definitions/X", ...),
 *   boolean schemas.  Annotations are ignored: title, description, default, examples,
 *   $comment, $schema, $id, deprecated, readOnly, writeOnly, $defs, definitions.
 *   Refused: pattern, patternProperties, propertyNames, non-integral or exclusive bounds
 *   on "number",
 *   multipleOf, uniqueItems: true, contains, not, if/then/else, dependent*, unevaluated*,
 *   min/maxProperties, remote $ref, and anyOf/oneOf/$ref/enum next to other assertions.
 *   A schema without type and without type-specific keywords means any JSON value.
 *
 * Threading: a pt_grammar and a pt_grammar_vocab are immutable after creation and may be
 * shared by any number of states on any threads; a pt_grammar_state is for one thread. */
#ifndef PT_GEN_GRAMMAR_H
#define PT_GEN_GRAMMAR_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <cjson/cJSON.h>

#include "token/tok.h"
#include "util/status.h"

#define PT_GRAMMAR_MAX_DEPTH 40      /* nesting of containers (and any-JSON values) */
#define PT_GRAMMAR_MAX_WS 32         /* whitespace bytes per gap inside containers */
#define PT_GRAMMAR_MAX_TOKEN_BYTES 512 /* longer tokens are never allowed */
#define PT_GRAMMAR_MAX_NODES 65536   /* compiled schema size limit */
#define PT_GRAMMAR_MAX_ENUM 4096     /* values in one enum */

typedef struct pt_grammar pt_grammar;             /* compiled, immutable, shareable */
typedef struct pt_grammar_vocab pt_grammar_vocab; /* per model: each token's bytes, indexed */
typedef struct pt_grammar_state pt_grammar_state; /* one generation's position */

/* OpenAI response_format {"type":"json_object"}: any JSON object (whitespace bounded). */
enum pt_status pt_grammar_json_object(pt_grammar **out, struct pt_error *err);
/* response_format json_schema: the schema (cJSON); unsupported keywords are PT_E_INVALID with
 * the JSON-pointer path of the keyword (the server answers 400 with it).  The schema is not
 * referenced after the call. */
enum pt_status pt_grammar_from_schema(const cJSON *schema, pt_grammar **out,
				      struct pt_error *err);

/* One part of a sequence: literal text (NUL-terminated, valid UTF-8, non-empty) when literal
 * is not NULL; else raw text when raw_text (any valid UTF-8, possibly empty, without '<' and
 * without control characters other than tab, LF and CR: the value of an XML-style tool-call
 * parameter, which ends where the next literal's '<' starts); else the schema when schema is
 * not NULL ("$ref": "#..." resolves inside that schema); else any JSON value (any_json is
 * accepted for clarity but implied). */
struct pt_grammar_part {
	const char *literal;
	const cJSON *schema;
	bool any_json;
	bool raw_text;
};
/* Alternatives of sequences of parts: alts[i] has n_parts[i] >= 1 parts.  Tool-call forcing:
 * `<tool_call>\n` + {"name": enum, "arguments": schema} + `\n</tool_call>`, one alternative
 * per tool.  Schema errors name the path as "/alternatives/I/parts/J/...". */
enum pt_status pt_grammar_from_alternatives(const struct pt_grammar_part *const *alts,
					    const size_t *n_parts, size_t n_alts,
					    pt_grammar **out, struct pt_error *err);
void pt_grammar_free(pt_grammar *g); /* NULL-safe */

/* Each token's decoded bytes (pt_tok_piece without special rendering), a trie over them and
 * the end-of-generation ids.  Build once per model. */
enum pt_status pt_grammar_vocab_build(const struct pt_tok *tok, pt_grammar_vocab **out,
				      struct pt_error *err);
void pt_grammar_vocab_free(pt_grammar_vocab *v); /* NULL-safe */
uint32_t pt_grammar_vocab_n(const pt_grammar_vocab *v);
/* The bytes a token stands for in the grammar (NULL for tokens never allowed as text:
 * control, unknown, unused, end-of-generation, empty). */
const char *pt_grammar_vocab_bytes(const pt_grammar_vocab *v, int32_t token, size_t *len);
bool pt_grammar_vocab_is_eog(const pt_grammar_vocab *v, int32_t token);

/* A new state at the start of the output.  g and v must outlive it. */
enum pt_status pt_grammar_state_new(const pt_grammar *g, const pt_grammar_vocab *v,
				    pt_grammar_state **out, struct pt_error *err);
void pt_grammar_state_free(pt_grammar_state *s); /* NULL-safe */
/* allowed[n_vocab]: 1 for every token whose bytes keep the output a valid prefix; the
 * end-of-generation tokens are allowed only when the output is complete; all 0 after an
 * end-of-generation token was accepted. */
void pt_grammar_state_mask(pt_grammar_state *s, uint8_t *allowed);
bool pt_grammar_state_allows(pt_grammar_state *s, int32_t token); /* fast check of one */
/* Advances by the token (PT_E_INVALID, state unchanged, if it is not allowed). */
enum pt_status pt_grammar_state_accept(pt_grammar_state *s, int32_t token,
				       struct pt_error *err);
/* Advances by raw bytes (text forced into the output, e.g. a generation-prompt tail);
 * PT_E_INVALID, state unchanged, if they do not keep the output a valid prefix. */
enum pt_status pt_grammar_state_accept_bytes(pt_grammar_state *s, const char *bytes,
					     size_t len, struct pt_error *err);
/* True when the output so far is a complete document (end-of-generation allowed). */
bool pt_grammar_state_complete(const pt_grammar_state *s);
/* True after an end-of-generation token was accepted. */
bool pt_grammar_state_finished(const pt_grammar_state *s);
/* dst takes src's position (both made for the same grammar and vocabulary): lets a caller
 * try a token and come back. */
enum pt_status pt_grammar_state_copy(pt_grammar_state *dst, const pt_grammar_state *src,
				     struct pt_error *err);
/* Open values (containers, strings, numbers, literals) around the current position in the
 * least nested reading of the output; 0 when complete.  A progress measure for tests and
 * for steering a forced completion. */
uint32_t pt_grammar_state_depth(const pt_grammar_state *s);
/* Back to the start of the output (a new reply with the same grammar). */
void pt_grammar_state_reset(pt_grammar_state *s);

/* Pure byte-level check without a vocabulary (tests, request validation): does text keep
 * the output a valid prefix (*complete: and is it a complete document)? */
bool pt_grammar_match_bytes(const pt_grammar *g, const char *text, size_t len, bool *complete);

#endif
