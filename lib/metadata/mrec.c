/*
 * mrec.c: payload codec of the metadata log's records (see mrec.h).  Both
 * directions walk the same per-type field spec, so they cannot disagree.
 */
#include "config.h"

#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "compat.h"
#include "kbuf.h"
#include "mrec.h"

#define MREC_VERSION 0

struct mrec_desc {
	uint16_t type;
	const char *name;
	const char *spec;
};

static const struct mrec_desc descs[] = {
#define X(e, n, s, f) { (n), (s), (f) },
	MREC_TYPES(X)
#undef X
};

static const struct mrec_desc *desc_of(uint16_t type)
{
	for (size_t i = 0; i < ARRAY_SIZE(descs); i++)
		if (descs[i].type == type)
			return &descs[i];
	return NULL;
}

const char *mrec_type_name(uint16_t type)
{
	const struct mrec_desc *d = desc_of(type);

	return d != NULL ? d->name : NULL;
}

static int name_ok(struct kstr s)
{
	return s.len > 0 && s.len <= MREC_MAX_NAME;
}

static int note_ok(struct kstr s)
{
	return s.len > 0 && s.len <= MREC_MAX_NOTE &&
	    memchr(s.p, '\0', (size_t)s.len) == NULL;
}

/* Strings become C strings in the model: a NUL inside would cut them. */
static struct kstr read_str(struct kr *rd)
{
	size_t at = kr_off(rd);
	struct kstr s = kr_cstr(rd);

	if (!rd->err && s.len > 0 && memchr(s.p, '\0', (size_t)s.len) != NULL)
		kr_fail_at(rd, at, "string with a NUL byte");
	return s;
}

static int id_ok(struct kstr s, int allow_empty, int allow_null)
{
	if (s.len < 0)
		return allow_null;
	return (s.len > 0 || allow_empty) && s.len <= MREC_MAX_ID &&
	    (s.len == 0 || memchr(s.p, '\0', (size_t)s.len) == NULL);
}

/* Why member m cannot be recorded, or NULL. */
static const char *member_bad(const struct mrec_member *m)
{
	if (!id_ok(m->instance_id, 0, 0))
		return "instance id empty, null, over 1024 bytes or with a NUL";
	if (!id_ok(m->member_id, 1, 0))
		return "member id null, over 1024 bytes or with a NUL";
	if (!id_ok(m->admin_addr, 1, 1) || !id_ok(m->http_addr, 1, 1))
		return "address over 1024 bytes or with a NUL";
	if (m->local_broker_id < -1)
		return "local broker id below -1";
	return NULL;
}

/* Unsigned 64-bit varints (7 bits a byte, low first; at most 10 bytes):
 * the distances between anchors. */
static void put_u64(struct kw *w, uint64_t v)
{
	while (v >= 0x80) {
		kw_i8(w, (int8_t)(uint8_t)(v | 0x80));
		v >>= 7;
	}
	kw_i8(w, (int8_t)(uint8_t)v);
}

static uint64_t get_u64(struct kr *rd)
{
	uint64_t v = 0;
	size_t at = kr_off(rd);

	for (int shift = 0; shift < 64 && !rd->err; shift += 7) {
		uint8_t b = (uint8_t)kr_i8(rd);

		if (rd->err)
			break;
		if (shift == 63 && b > 1) {
			kr_fail_at(rd, at, "varint over 64 bits");
			break;
		}
		v |= (uint64_t)(b & 0x7f) << shift;
		if ((b & 0x80) == 0)
			return v;
	}
	if (!rd->err)
		kr_fail_at(rd, at, "varint over 10 bytes");
	return 0;
}

/*
 * Reads n anchors (out NULL: only checks them): each offset the previous
 * one plus a distance, never above INT64_MAX.
 */
static void read_anchors(struct kr *rd, int32_t n, struct mrec_anchor *out)
{
	uint64_t src = 0, dst = 0;

	for (int32_t i = 0; i < n && !rd->err; i++) {
		size_t at = kr_off(rd);
		uint64_t ds = get_u64(rd), dd = get_u64(rd);

		if (rd->err)
			break;
		if (ds > (uint64_t)INT64_MAX - src || dd > (uint64_t)INT64_MAX - dst) {
			kr_fail_at(rd, at, "anchor offset over 2^63-1");
			break;
		}
		src += ds;
		dst += dd;
		if (out != NULL) {
			out[i].src = (int64_t)src;
			out[i].dst = (int64_t)dst;
		}
	}
}

int mrec_anchors(const struct mrec *r, struct mrec_anchor *out, char *err,
    size_t errlen)
{
	struct kr rd;

	if (r->nanchors == 0)
		return 0;
	if (r->anchors_raw.len < 0) {
		snprintf(err, errlen, "record has no decoded anchors");
		return -1;
	}
	kr_init(&rd, r->anchors_raw.p, (size_t)r->anchors_raw.len);
	read_anchors(&rd, r->nanchors, out);
	if (rd.err) {
		snprintf(err, errlen, "part-anchors record: %s at anchor byte %zu",
		    rd.why != NULL ? rd.why : "malformed", rd.err_off);
		return -1;
	}
	return 0;
}

/* Why r's anchors cannot be recorded, or NULL. */
static const char *anchors_bad(const struct mrec *r)
{
	if (r->nanchors < 1 || r->nanchors > MREC_MAX_ANCHORS ||
	    r->anchors == NULL)
		return "no anchors, or more than 4096";
	for (int32_t i = 0; i < r->nanchors; i++) {
		const struct mrec_anchor *a = &r->anchors[i];

		if (a->src < 0 || a->dst < 0)
			return "a negative offset";
		if (i > 0 && (a->src < a[-1].src || a->dst < a[-1].dst))
			return "an anchor going back from the one before it";
	}
	return NULL;
}

int mrec_encode(const struct mrec *r, struct kw *w, char *err, size_t errlen)
{
	const struct mrec_desc *d = desc_of(r->type);

	if (d == NULL) {
		snprintf(err, errlen, "unknown record type %u", r->type);
		return -1;
	}
	kw_i8(w, MREC_VERSION);
	for (const char *f = d->spec; *f != '\0'; f++) {
		switch (*f) {
		case 'M':
		case 'T': {
			struct kstr s = *f == 'M' ? r->mirror : r->topic;
			if (!name_ok(s)) {
				snprintf(err, errlen, "%s record: %s name of %d "
				    "bytes (1-%d allowed)", d->name,
				    *f == 'M' ? "mirror" : "topic", (int)s.len,
				    MREC_MAX_NAME);
				return -1;
			}
			kw_cstr(w, s);
			break;
		}
		case 'S': kw_cstr(w, r->str); break;
		case 'N':
			if (!note_ok(r->str)) {
				snprintf(err, errlen, "%s record: a note of %d bytes "
				    "(1-%d allowed, no NUL)", d->name, (int)r->str.len,
				    MREC_MAX_NOTE);
				return -1;
			}
			kw_cstr(w, r->str);
			break;
		case 'P': kw_i32(w, r->partition); break;
		case 'k': kw_i8(w, r->kind); break;
		case 's': kw_i8(w, r->state); break;
		case 'm': kw_u16(w, r->from_mask); break;
		case 'f': kw_i8(w, r->flags); break;
		case 'c': kw_i32(w, r->count); break;
		case 'r': kw_i32(w, r->retry); break;
		case 'o': kw_i64(w, r->off); break;
		case 'O': kw_i64(w, r->off2); break;
		case 't': kw_i64(w, r->off3); break;
		case 'e': kw_i32(w, r->epoch); break;
		case 'g': kw_i32(w, r->generation); break;
		case 'L':
			if (r->nmembers < 0 || r->nmembers > MREC_MAX_MEMBERS ||
			    (r->nmembers > 0 && r->members == NULL)) {
				snprintf(err, errlen, "%s record: %d members "
				    "(at most %d)", d->name, (int)r->nmembers,
				    MREC_MAX_MEMBERS);
				return -1;
			}
			kw_carray(w, r->nmembers);
			for (int32_t i = 0; i < r->nmembers; i++) {
				const struct mrec_member *m = &r->members[i];
				const char *bad = member_bad(m);
				if (bad != NULL) {
					snprintf(err, errlen, "%s record: member "
					    "%d: %s", d->name, (int)i, bad);
					return -1;
				}
				kw_cstr(w, m->instance_id);
				kw_cstr(w, m->member_id);
				kw_i32(w, m->local_broker_id);
				kw_cstr(w, m->admin_addr);
				kw_cstr(w, m->http_addr);
			}
			break;
		case 'A': {
			const char *bad = anchors_bad(r);
			int64_t ps = 0, pd = 0;

			if (bad != NULL) {
				snprintf(err, errlen, "%s record: %s", d->name, bad);
				return -1;
			}
			kw_uvarint(w, (uint32_t)r->nanchors);
			for (int32_t i = 0; i < r->nanchors; i++) {
				put_u64(w, (uint64_t)(r->anchors[i].src - ps));
				put_u64(w, (uint64_t)(r->anchors[i].dst - pd));
				ps = r->anchors[i].src;
				pd = r->anchors[i].dst;
			}
			break;
		}
		case 'C':
			if (r->nconfigs < 0 || r->nconfigs > MREC_MAX_CONFIGS) {
				snprintf(err, errlen, "%s record: %d configs "
				    "(at most %d)", d->name, (int)r->nconfigs,
				    MREC_MAX_CONFIGS);
				return -1;
			}
			kw_carray(w, r->nconfigs);
			for (int32_t i = 0; i < r->nconfigs; i++) {
				if (r->configs[i].name.len < 0) {
					snprintf(err, errlen, "%s record: config "
					    "%d has no name", d->name, (int)i);
					return -1;
				}
				kw_cstr(w, r->configs[i].name);
				kw_cstr(w, r->configs[i].value);
			}
			break;
		default:
			snprintf(err, errlen, "%s: bad field spec '%c'", d->name,
			    *f);
			return -1;
		}
	}
	if (w->err) {
		snprintf(err, errlen, "%s record: %s", d->name,
		    w->why != NULL ? w->why : "cannot encode");
		return -1;
	}
	return 0;
}

/* Reads n members from rd (out may be NULL: check only). */
static void read_members(struct kr *rd, int32_t n, struct mrec_member *out)
{
	for (int32_t i = 0; i < n && !rd->err; i++) {
		size_t at = kr_off(rd);
		struct mrec_member m;
		const char *bad;

		m.instance_id = read_str(rd);
		m.member_id = read_str(rd);
		m.local_broker_id = kr_i32(rd);
		m.admin_addr = read_str(rd);
		m.http_addr = read_str(rd);
		if (rd->err)
			break;
		if ((bad = member_bad(&m)) != NULL) {
			kr_fail_at(rd, at, bad);
			break;
		}
		if (out != NULL)
			out[i] = m;
	}
}

int mrec_members(const struct mrec *r, struct mrec_member *out, char *err,
    size_t errlen)
{
	struct kr rd;

	if (r->nmembers == 0)
		return 0;
	if (r->members_raw.len < 0) {
		snprintf(err, errlen, "record has no decoded members");
		return -1;
	}
	kr_init(&rd, r->members_raw.p, (size_t)r->members_raw.len);
	read_members(&rd, r->nmembers, out);
	if (rd.err) {
		snprintf(err, errlen, "cluster-members record: %s at member byte "
		    "%zu", rd.why != NULL ? rd.why : "malformed", rd.err_off);
		return -1;
	}
	return 0;
}

int mrec_decode(uint16_t type, const uint8_t *p, size_t len, struct mrec *r,
    struct mrec_config *cfg_buf, int32_t cfg_max, char *err, size_t errlen)
{
	const struct mrec_desc *d = desc_of(type);
	struct kr rd;
	int8_t version;

	memset(r, 0, sizeof(*r));
	r->type = type;
	r->mirror = r->topic = r->str = KSTR_NULL;
	r->members_raw.p = NULL;
	r->members_raw.len = -1;
	r->anchors_raw.p = NULL;
	r->anchors_raw.len = -1;
	if (d == NULL) {
		snprintf(err, errlen, "unknown record type %u (%zu bytes)",
		    type, len);
		return -1;
	}
	kr_init(&rd, p, len);
	rd.max_array = MREC_MAX_CONFIGS;
	version = kr_i8(&rd);
	if (!rd.err && version != MREC_VERSION) {
		snprintf(err, errlen, "%s record: version %d is not known "
		    "(this build reads %d)", d->name, version, MREC_VERSION);
		return -1;
	}
	for (const char *f = d->spec; *f != '\0' && !rd.err; f++) {
		switch (*f) {
		case 'M':
		case 'T': {
			size_t at = kr_off(&rd);
			struct kstr s = read_str(&rd);
			if (!rd.err && !name_ok(s))
				kr_fail_at(&rd, at, *f == 'M' ?
				    "mirror name empty, null or over 249 bytes" :
				    "topic name empty, null or over 249 bytes");
			if (*f == 'M')
				r->mirror = s;
			else
				r->topic = s;
			break;
		}
		case 'S': r->str = read_str(&rd); break;
		case 'N': {
			size_t at = kr_off(&rd);
			r->str = read_str(&rd);
			if (!rd.err && !note_ok(r->str))
				kr_fail_at(&rd, at, "note empty, null or over 1024 "
				    "bytes");
			break;
		}
		case 'P': r->partition = kr_i32(&rd); break;
		case 'k': r->kind = kr_i8(&rd); break;
		case 's': r->state = kr_i8(&rd); break;
		case 'm': r->from_mask = kr_u16(&rd); break;
		case 'f': r->flags = kr_i8(&rd); break;
		case 'c': r->count = kr_i32(&rd); break;
		case 'r': r->retry = kr_i32(&rd); break;
		case 'o': r->off = kr_i64(&rd); break;
		case 'O': r->off2 = kr_i64(&rd); break;
		case 't': r->off3 = kr_i64(&rd); break;
		case 'e': r->epoch = kr_i32(&rd); break;
		case 'g': r->generation = kr_i32(&rd); break;
		case 'L': {
			size_t at = kr_off(&rd), start;
			int32_t n = kr_carray(&rd);
			if (rd.err)
				break;
			if (n < 0 || n > MREC_MAX_MEMBERS) {
				kr_fail_at(&rd, at, n < 0 ? "null member array" :
				    "more members than this build accepts");
				break;
			}
			start = kr_off(&rd);
			read_members(&rd, n, NULL);
			if (rd.err)
				break;
			r->nmembers = n;
			r->members_raw.p = p + start;
			r->members_raw.len = (int32_t)(kr_off(&rd) - start);
			break;
		}
		case 'A': {
			size_t at = kr_off(&rd), start;
			uint32_t n = kr_uvarint(&rd);
			if (rd.err)
				break;
			if (n < 1 || n > MREC_MAX_ANCHORS) {
				kr_fail_at(&rd, at, n < 1 ? "no anchors" :
				    "more anchors than this build accepts");
				break;
			}
			start = kr_off(&rd);
			read_anchors(&rd, (int32_t)n, NULL);
			if (rd.err)
				break;
			r->nanchors = (int32_t)n;
			r->anchors_raw.p = p + start;
			r->anchors_raw.len = (int32_t)(kr_off(&rd) - start);
			break;
		}
		case 'C': {
			size_t at = kr_off(&rd);
			int32_t n = kr_carray(&rd);
			if (rd.err)
				break;
			if (n < 0 || n > cfg_max) {
				kr_fail_at(&rd, at, n < 0 ? "null config array" :
				    "more configs than this build accepts");
				break;
			}
			for (int32_t i = 0; i < n && !rd.err; i++) {
				at = kr_off(&rd);
				cfg_buf[i].name = read_str(&rd);
				cfg_buf[i].value = read_str(&rd);
				if (!rd.err && cfg_buf[i].name.len <= 0)
					kr_fail_at(&rd, at, "config without a name");
			}
			r->nconfigs = n;
			r->configs = cfg_buf;
			break;
		}
		default:
			kr_fail(&rd, "bad field spec");
			break;
		}
	}
	if (!rd.err && kr_left(&rd) != 0)
		kr_fail(&rd, "trailing bytes after the last field");
	if (rd.err) {
		snprintf(err, errlen, "%s record: %s at payload byte %zu of %zu",
		    d->name, rd.why != NULL ? rd.why : "malformed",
		    rd.err_off, len);
		return -1;
	}
	return 0;
}
