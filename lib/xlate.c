/*
 * xlate.c: the per-partition offset translation map (see xlate.h).
 * A sorted array of anchors, searched by bisection on either coordinate;
 * neither coordinate decreases, so either is a valid key (the last anchor
 * with a given key is the one that maps it).
 */
#include "config.h"

#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "compat.h"
#include "xlate.h"

struct xlate {
	struct xlate_anchor *a;
	size_t n, cap, max;
};

static int PRINTF_LIKE(3, 4) fail(char *err, size_t errlen, const char *fmt, ...)
{
	va_list ap;

	if (err != NULL && errlen > 0) {
		va_start(ap, fmt);
		vsnprintf(err, errlen, fmt, ap);
		va_end(ap);
	}
	return -1;
}

struct xlate *xlate_new(size_t max_anchors)
{
	struct xlate *m;

	if (max_anchors == 0 || max_anchors > SIZE_MAX / sizeof(struct xlate_anchor))
		return NULL;
	if ((m = calloc(1, sizeof(*m))) == NULL)
		return NULL;
	m->max = max_anchors;
	return m;
}

void xlate_free(struct xlate *m)
{
	if (m == NULL)
		return;
	free(m->a);
	free(m);
}

int xlate_add(struct xlate *m, int64_t src, int64_t dst, char *err,
    size_t errlen)
{
	struct xlate_anchor *last;

	if (src < 0 || dst < 0)
		return fail(err, errlen, "translation anchor %" PRId64 " -> %" PRId64
		    ": offsets must not be negative", src, dst);
	if (m->n > 0) {
		last = &m->a[m->n - 1];
		if (src < last->src || dst < last->dst)
			return fail(err, errlen, "translation anchor %" PRId64 " -> %" PRId64
			    " goes backwards (last anchor %" PRId64 " -> %" PRId64 ")",
			    src, dst, last->src, last->dst);
		if (src - dst == last->src - last->dst)
			return 0; /* same delta: implied by the last anchor */
		if (m->n >= 2 &&
		    ((src == last->src && m->a[m->n - 2].src == last->src) ||
			(dst == last->dst && m->a[m->n - 2].dst == last->dst))) {
			/*
			 * Three in a row on one coordinate: the middle one maps
			 * nothing and bounds nothing the new one does not.
			 */
			last->src = src;
			last->dst = dst;
			return 0;
		}
	}
	if (m->n == m->cap) {
		size_t ncap = m->cap ? m->cap * 2 : 8;
		struct xlate_anchor *na;

		if (m->n >= m->max)
			return fail(err, errlen, "translation map is full (%zu anchors); anchor %"
			    PRId64 " -> %" PRId64 " not added", m->max, src, dst);
		if (ncap > m->max)
			ncap = m->max;
		if ((na = realloc(m->a, ncap * sizeof(*na))) == NULL)
			return fail(err, errlen, "out of memory growing the translation map to %zu anchors",
			    ncap);
		m->a = na;
		m->cap = ncap;
	}
	m->a[m->n].src = src;
	m->a[m->n].dst = dst;
	m->n++;
	return 0;
}

/* Index of the last anchor whose coordinate (src if by_src) is <= v, or -1. */
static ptrdiff_t find(const struct xlate *m, int64_t v, int by_src)
{
	size_t lo = 0, hi = m->n; /* answer in [lo - 1, hi - 1] */

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		int64_t k = by_src ? m->a[mid].src : m->a[mid].dst;

		if (k <= v)
			lo = mid + 1;
		else
			hi = mid;
	}
	return (ptrdiff_t)lo - 1;
}

static int lookup(const struct xlate *m, int64_t v, int64_t *out, int by_src)
{
	int rc = XLATE_EXACT;

	/*
	 * Each pass either answers or moves v to the next anchor, whose index
	 * is larger: at most n passes (more than one only for holes on both
	 * sides at one point).
	 */
	for (;;) {
		ptrdiff_t i = find(m, v, by_src);
		const struct xlate_anchor *a, *next;
		int64_t from, to, k, span;

		if (i < 0)
			return XLATE_UNMAPPED;
		a = &m->a[i];
		from = by_src ? a->src : a->dst;
		to = by_src ? a->dst : a->src;
		k = v - from;
		if (k > INT64_MAX - to)
			return XLATE_UNMAPPED; /* no int64 partner */
		if ((size_t)i + 1 < m->n) {
			next = &m->a[i + 1];
			span = MIN(next->src - a->src, next->dst - a->dst);
			if (k >= span) {
				/* no partner: resume at the next anchor */
				v = by_src ? next->src : next->dst;
				rc = XLATE_NEXT;
				continue;
			}
		}
		*out = to + k;
		return rc;
	}
}

int xlate_src_to_dst(const struct xlate *m, int64_t src, int64_t *dst)
{
	return lookup(m, src, dst, 1);
}

int xlate_dst_to_src(const struct xlate *m, int64_t dst, int64_t *src)
{
	return lookup(m, dst, src, 0);
}

int xlate_is_identity(const struct xlate *m)
{
	/* Consecutive anchors differ in delta, so identity means one anchor. */
	return m->n == 1 && m->a[0].src == m->a[0].dst;
}

size_t xlate_count(const struct xlate *m)
{
	return m->n;
}

const struct xlate_anchor *xlate_anchor(const struct xlate *m, size_t i)
{
	return i < m->n ? &m->a[i] : NULL;
}

void xlate_trim(struct xlate *m, int64_t src_min)
{
	ptrdiff_t i = find(m, src_min, 1);

	if (i <= 0)
		return;
	memmove(m->a, m->a + i, (m->n - (size_t)i) * sizeof(*m->a));
	m->n -= (size_t)i;
}

void xlate_clear(struct xlate *m)
{
	m->n = 0;
}
