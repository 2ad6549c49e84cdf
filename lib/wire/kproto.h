/*
 * kproto.h: Kafka request/response headers and message framing.
 *
 * The message bodies are generated from the proto/ YAML specs into kp_gen.h (included
 * here), with the ApiKey table kp_api_table[]/kp_api_find().  This module adds
 * what the generator does not: the header versions of each ApiKey/version,
 * the headers themselves, and the 4-byte size framing of a whole message.
 *
 *   request header v0: api_key int16, api_version int16, correlation_id int32
 *   request header v1: v0 + client_id (int16-length nullable string)
 *   request header v2: v1 + a tagged-field section; client_id stays a plain
 *                      (non-compact) nullable string
 *   response header v0: correlation_id int32
 *   response header v1: v0 + a tagged-field section
 *
 * ApiVersions responses always use response header v0 (KIP-511).
 */
#ifndef MIRRORD_KPROTO_H
#define MIRRORD_KPROTO_H

#include <stddef.h>
#include <stdint.h>

#include "kbuf.h"
#include "kp_gen.h"

/* Largest frame (size prefix value) accepted by default: 100 MiB, as Kafka's socket.request.max.bytes. */
#define KP_FRAME_MAX_DEFAULT (100 * 1024 * 1024)

struct kp_request_header {
	int16_t request_api_key;
	int16_t request_api_version;
	int32_t correlation_id;
	struct kstr client_id; /* v1+, nullable */
};

struct kp_response_header {
	int32_t correlation_id;
};

/*
 * Header versions for an ApiKey at a version: 2 (flexible) or 1 for
 * requests, 1 (flexible) or 0 for responses.  Flexibility follows the API's
 * first flexible version even past its valid range (a too-new ApiVersions
 * request still has a v2 header).  -1 for an ApiKey not in the table.
 */
int kp_request_header_version(int16_t api_key, int16_t api_version);
int kp_response_header_version(int16_t api_key, int16_t api_version);

void kp_request_header_init(struct kp_request_header *h);
/* Decode/encode a request header of a known header version (0-2). */
int kp_request_header_decode(struct kr *r, int hver, struct kp_request_header *h);
int kp_request_header_encode(struct kw *w, int hver, const struct kp_request_header *h);
/*
 * Server side: decode a request header whose version follows from its own
 * ApiKey and version.  *hver is set to the header version used, or -1 when
 * the ApiKey is unknown (then only the v1 fields were read).  Returns -1
 * only when the bytes do not parse (r->why says why).
 */
int kp_request_header_read(struct kr *r, struct kp_request_header *h, int *hver);

int kp_response_header_decode(struct kr *r, int hver, struct kp_response_header *h);
int kp_response_header_encode(struct kw *w, int hver, const struct kp_response_header *h);

/*
 * The ApiVersions entries for what mirrord serves (the servedVersions of
 * each request spec), in ApiKey order: fills out[0..max) and returns how
 * many there are (which may exceed max; then only max were written).
 */
size_t kp_served_api_versions(struct kp_api_versions_response_api_version *out, size_t max);
/* 1 if mirrord serves this ApiKey at this version. */
int kp_api_served(int16_t api_key, int16_t api_version);

/* Reserve the 4-byte size prefix of a frame; returns the slot. */
size_t kp_frame_begin(struct kw *w);
/* Patch the size prefix with the bytes written since kp_frame_begin(). */
int kp_frame_end(struct kw *w, size_t slot);
/*
 * Look at the start of a stream buffer: 1 when a whole frame is present
 * (*frame_len = 4 + size), 0 when more bytes are needed, -1 when the size
 * prefix is negative or above max (*why says which).
 */
int kp_frame_peek(const uint8_t *buf, size_t len, int32_t max, size_t *frame_len,
    const char **why);

/* Fail r unless every byte was consumed ("trailing bytes after <what>"). */
int kp_expect_end(struct kr *r);

/*
 * Whole framed messages: size prefix, header and body, with the header
 * version and the body encoder taken from the ApiKey table.  body points to
 * the generated request/response struct of h->request_api_key.  Returns -1
 * with w->why set (unknown ApiKey, unsupported version, encode error).
 */
int kp_request_write(struct kw *w, const struct kp_request_header *h, const void *body);
int kp_response_write(struct kw *w, int16_t api_key, int16_t api_version,
    int32_t correlation_id, const void *body);

#endif
