/*
 * pipeline/txn.c: the read_committed filter of one Fetch partition (see
 * pipeline/txn.h).  The aborted producers are an open-addressing hash with
 * linear probing and backward-shift deletion; it doubles at half full.
 */
#include "config.h"

#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "compat.h"
#include "txn.h"

#define PTXN_FREE (-1)          /* no producer id is negative */
#define PTXN_FIRST_CAP 16

static int fail(char *err, size_t errlen, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static int fail(char *err, size_t errlen, const char *fmt, ...)
{
	va_list ap;

	if (errlen > 0) {
		va_start(ap, fmt);
		vsnprintf(err, errlen, fmt, ap);
		va_end(ap);
	}
	return -1;
}

/* splitmix64's finalizer: producer ids are often consecutive. */
static size_t slot_of(int64_t pid, size_t cap)
{
	uint64_t x = (uint64_t)pid;

	x ^= x >> 30;
	x *= 0xbf58476d1ce4e5b9ULL;
	x ^= x >> 27;
	x *= 0x94d049bb133111ebULL;
	x ^= x >> 31;
	return (size_t)x & (cap - 1);
}

/* The slot holding pid, or the free slot where it would go. */
static size_t probe(const struct ptxn *t, int64_t pid)
{
	size_t i = slot_of(pid, t->cap);

	while (t->slot[i] != PTXN_FREE && t->slot[i] != pid)
		i = (i + 1) & (t->cap - 1);
	return i;
}

static int grow(struct ptxn *t)
{
	size_t ncap = t->cap ? t->cap * 2 : PTXN_FIRST_CAP;
	int64_t *old = t->slot, *s;
	size_t ocap = t->cap;

	if (ncap > SIZE_MAX / sizeof(*s) || ncap < t->cap)
		return -1;
	s = malloc(ncap * sizeof(*s));
	if (s == NULL)
		return -1;
	for (size_t i = 0; i < ncap; i++)
		s[i] = PTXN_FREE;
	t->slot = s;
	t->cap = ncap;
	for (size_t i = 0; i < ocap; i++)
		if (old[i] != PTXN_FREE)
			t->slot[probe(t, old[i])] = old[i];
	free(old);
	return 0;
}

static int set_add(struct ptxn *t, int64_t pid)
{
	size_t i;

	if ((t->count + 1) * 2 > t->cap && grow(t) != 0)
		return -1;
	i = probe(t, pid);
	if (t->slot[i] == PTXN_FREE) {
		t->slot[i] = pid;
		t->count++;
	}
	return 0;
}

static void set_del(struct ptxn *t, int64_t pid)
{
	size_t mask = t->cap - 1, i, j;

	if (t->count == 0)
		return;
	i = probe(t, pid);
	if (t->slot[i] == PTXN_FREE)
		return;
	/* Backward shift: move later members of the run into the hole when
	 * their home slot does not lie (cyclically) between hole and them. */
	for (j = (i + 1) & mask; t->slot[j] != PTXN_FREE; j = (j + 1) & mask) {
		size_t home = slot_of(t->slot[j], t->cap);

		if (((j - home) & mask) >= ((j - i) & mask)) {
			t->slot[i] = t->slot[j];
			i = j;
		}
	}
	t->slot[i] = PTXN_FREE;
	t->count--;
}

int ptxn_is_aborted(const struct ptxn *t, int64_t pid)
{
	return t->count > 0 && pid >= 0 && t->slot[probe(t, pid)] == pid;
}

int ptxn_init(struct ptxn *t,
    const struct kp_fetch_response_aborted_transaction *list, size_t n,
    char *err, size_t errlen)
{
	memset(t, 0, sizeof(*t));
	for (size_t i = 0; i < n; i++) {
		if (list[i].producer_id < 0)
			return fail(err, errlen, "aborted transaction %zu of %zu has "
			    "producer id %" PRId64, i + 1, n, list[i].producer_id);
		if (list[i].first_offset < 0)
			return fail(err, errlen, "aborted transaction %zu of %zu (producer "
			    "id %" PRId64 ") has first offset %" PRId64, i + 1, n,
			    list[i].producer_id, list[i].first_offset);
		if (i > 0 && list[i].first_offset < list[i - 1].first_offset)
			return fail(err, errlen, "aborted transactions are not in first "
			    "offset order at entry %zu of %zu", i + 1, n);
	}
	t->list = list;
	t->n = n;
	return 0;
}

void ptxn_fini(struct ptxn *t)
{
	free(t->slot);
	memset(t, 0, sizeof(*t));
}

/* Kafka's zigzag varint, at most maxbytes bytes; 0 if malformed or cut. */
static size_t varint(const uint8_t *p, size_t len, size_t maxbytes,
    int64_t *out)
{
	uint64_t v = 0;

	for (size_t i = 0; i < len && i < maxbytes; i++) {
		v |= (uint64_t)(p[i] & 0x7f) << (7 * i);
		if ((p[i] & 0x80) == 0) {
			*out = (int64_t)(v >> 1) ^ -(int64_t)(v & 1);
			return i + 1;
		}
	}
	return 0;
}

int ptxn_control_type(const struct batch *b, char *err, size_t errlen)
{
	const uint8_t *p = b->records;
	size_t len = b->records_len, pos = 0, n;
	int64_t body, v, keylen;
	int16_t version, type;

	if (batch_codec(b) != BATCH_CODEC_NONE)
		return fail(err, errlen, "control batch at offset %" PRId64 " is "
		    "compressed (%s)", b->base_offset, batch_codec_name(batch_codec(b)));
	if (b->record_count <= 0 || len == 0)
		return -2;
	/* length, attributes, timestampDelta, offsetDelta, key length, key */
	if ((n = varint(p, len, 5, &body)) == 0 || body < 0 ||
	    (uint64_t)body > len - n)
		goto bad;
	len = n + (size_t)body;
	pos = n;
	if (pos + 1 > len)
		goto bad;
	pos++; /* attributes */
	if ((n = varint(p + pos, len - pos, 10, &v)) == 0)
		goto bad;
	pos += n;
	if ((n = varint(p + pos, len - pos, 5, &v)) == 0)
		goto bad;
	pos += n;
	if ((n = varint(p + pos, len - pos, 5, &keylen)) == 0)
		goto bad;
	pos += n;
	if (keylen < 4 || (uint64_t)keylen > len - pos)
		return fail(err, errlen, "control batch at offset %" PRId64 " has a "
		    "%" PRId64 "-byte record key, 4 or more expected", b->base_offset,
		    keylen);
	version = (int16_t)be16_load(p + pos);
	type = (int16_t)be16_load(p + pos + 2);
	if (version < 0)
		return fail(err, errlen, "control batch at offset %" PRId64 " has "
		    "control record key version %d", b->base_offset, version);
	return type < 0 ? 0x7fff : type;
bad:
	return fail(err, errlen, "control batch at offset %" PRId64 ": its first "
	    "record is malformed or cut", b->base_offset);
}

int ptxn_batch(struct ptxn *t, const struct batch *b, char *err,
    size_t errlen)
{
	int64_t last = batch_last_offset(b);

	while (t->next < t->n && t->list[t->next].first_offset <= last) {
		if (set_add(t, t->list[t->next].producer_id) != 0)
			return fail(err, errlen, "out of memory tracking %zu aborted "
			    "producers", t->count + 1);
		t->next++;
	}
	if (batch_is_control(b)) {
		int type = ptxn_control_type(b, err, errlen);

		if (type == -1)
			return PTXN_ERROR;
		if (type == PTXN_CONTROL_ABORT)
			set_del(t, b->producer_id);
		return PTXN_MARKER;
	}
	if (batch_is_transactional(b) && ptxn_is_aborted(t, b->producer_id))
		return PTXN_ABORTED;
	return PTXN_KEEP;
}
