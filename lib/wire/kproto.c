/* kproto.c: request/response headers and framing (see kproto.h). */
#include "config.h"

#include <string.h>

#include "compat.h"
#include "kproto.h"

int kp_request_header_version(int16_t api_key, int16_t api_version)
{
	const struct kp_api *api = kp_api_find(api_key);

	if (api == NULL)
		return -1;
	/* ControlledShutdown v0 is the one API that used header v0. */
	if (api_key == 7 && api_version == 0)
		return 0;
	return api->first_flexible >= 0 && api_version >= api->first_flexible ? 2 : 1;
}

int kp_response_header_version(int16_t api_key, int16_t api_version)
{
	const struct kp_api *api = kp_api_find(api_key);

	if (api == NULL)
		return -1;
	if (api_key == KP_API_API_VERSIONS)
		return 0; /* KIP-511: always v0, so any client can read the error */
	return api->first_flexible >= 0 && api_version >= api->first_flexible ? 1 : 0;
}

size_t kp_served_api_versions(struct kp_api_versions_response_api_version *out, size_t max)
{
	size_t n = 0;

	for (size_t i = 0; i < kp_api_count; i++) {
		const struct kp_api *api = &kp_api_table[i];

		if (api->served_min < 0)
			continue;
		if (n < max) {
			kp_api_versions_response_api_version_init(&out[n]);
			out[n].api_key = api->api_key;
			out[n].min_version = api->served_min;
			out[n].max_version = api->served_max;
		}
		n++;
	}
	return n;
}

int kp_api_served(int16_t api_key, int16_t api_version)
{
	const struct kp_api *api = kp_api_find(api_key);

	return api != NULL && api->served_min >= 0 && api_version >= api->served_min &&
	    api_version <= api->served_max;
}

void kp_request_header_init(struct kp_request_header *h)
{
	memset(h, 0, sizeof(*h));
	h->client_id = KSTR_NULL;
}

int kp_request_header_decode(struct kr *r, int hver, struct kp_request_header *h)
{
	kp_request_header_init(h);
	if (hver < 0 || hver > 2) {
		kr_fail(r, "unknown request header version");
		return -1;
	}
	h->request_api_key = kr_i16(r);
	h->request_api_version = kr_i16(r);
	h->correlation_id = kr_i32(r);
	if (hver >= 1)
		h->client_id = kr_str(r); /* never compact, even in v2 */
	if (hver >= 2)
		kr_skip_tagged(r);
	return r->err ? -1 : 0;
}

int kp_request_header_read(struct kr *r, struct kp_request_header *h, int *hver)
{
	kp_request_header_init(h);
	*hver = -1;
	h->request_api_key = kr_i16(r);
	h->request_api_version = kr_i16(r);
	h->correlation_id = kr_i32(r);
	if (r->err)
		return -1;
	*hver = kp_request_header_version(h->request_api_key, h->request_api_version);
	if (*hver != 0)
		h->client_id = kr_str(r);
	if (*hver == 2)
		kr_skip_tagged(r);
	return r->err ? -1 : 0;
}

int kp_request_header_encode(struct kw *w, int hver, const struct kp_request_header *h)
{
	if (hver < 0 || hver > 2) {
		kw_fail(w, "unknown request header version");
		return -1;
	}
	kw_i16(w, h->request_api_key);
	kw_i16(w, h->request_api_version);
	kw_i32(w, h->correlation_id);
	if (hver >= 1)
		kw_str(w, h->client_id);
	if (hver >= 2)
		kw_tags_empty(w);
	return w->err ? -1 : 0;
}

int kp_response_header_decode(struct kr *r, int hver, struct kp_response_header *h)
{
	if (hver < 0 || hver > 1) {
		kr_fail(r, "unknown response header version");
		return -1;
	}
	h->correlation_id = kr_i32(r);
	if (hver == 1)
		kr_skip_tagged(r);
	return r->err ? -1 : 0;
}

int kp_response_header_encode(struct kw *w, int hver, const struct kp_response_header *h)
{
	if (hver < 0 || hver > 1) {
		kw_fail(w, "unknown response header version");
		return -1;
	}
	kw_i32(w, h->correlation_id);
	if (hver == 1)
		kw_tags_empty(w);
	return w->err ? -1 : 0;
}

size_t kp_frame_begin(struct kw *w)
{
	return kw_slot32(w);
}

int kp_frame_end(struct kw *w, size_t slot)
{
	size_t n;

	if (w->err)
		return -1;
	n = w->len - slot - 4;
	if (n > INT32_MAX) {
		kw_fail(w, "frame larger than 2 GiB");
		return -1;
	}
	kw_put32(w, slot, (int32_t)n);
	return w->err ? -1 : 0;
}

int kp_frame_peek(const uint8_t *buf, size_t len, int32_t max, size_t *frame_len,
    const char **why)
{
	int32_t size;

	*frame_len = 0;
	if (len < 4)
		return 0;
	size = (int32_t)be32_load(buf);
	if (size < 0) {
		*why = "negative frame size";
		return -1;
	}
	if (size > max) {
		*why = "frame size above the limit";
		return -1;
	}
	if (len - 4 < (size_t)size)
		return 0;
	*frame_len = 4 + (size_t)size;
	return 1;
}

int kp_expect_end(struct kr *r)
{
	if (!r->err && kr_left(r) != 0)
		kr_fail(r, "trailing bytes after the message body");
	return r->err ? -1 : 0;
}

int kp_request_write(struct kw *w, const struct kp_request_header *h, const void *body)
{
	const struct kp_api *api = kp_api_find(h->request_api_key);
	size_t slot;

	if (api == NULL) {
		kw_fail(w, "request for an ApiKey the codec does not know");
		return -1;
	}
	slot = kp_frame_begin(w);
	if (kp_request_header_encode(w, kp_request_header_version(h->request_api_key,
	    h->request_api_version), h) != 0)
		return -1;
	if (api->request_encode(w, h->request_api_version, body) != 0)
		return -1;
	return kp_frame_end(w, slot);
}

int kp_response_write(struct kw *w, int16_t api_key, int16_t api_version,
    int32_t correlation_id, const void *body)
{
	const struct kp_api *api = kp_api_find(api_key);
	struct kp_response_header h = { correlation_id };
	size_t slot;

	if (api == NULL) {
		kw_fail(w, "response for an ApiKey the codec does not know");
		return -1;
	}
	slot = kp_frame_begin(w);
	if (kp_response_header_encode(w, kp_response_header_version(api_key, api_version), &h) != 0)
		return -1;
	if (api->response_encode(w, api_version, body) != 0)
		return -1;
	return kp_frame_end(w, slot);
}
