/*
 * xlate.c: the per-partition offset translation map (see xlate.h).
 * A sorted growable array of anchors (each with its successor one range),
 * searched by bisection on either coordinate; neither coordinate
 * decreases, so either is a valid key (the last anchor with a given key is
 * the one that maps it).  xlate_rule() keeps at most two skips in a row,
 * so a lookup bisects at most three times.
 */
#include "config.h"

#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "compat.h"
#include "massert.h"
#include "xlate.h"

struct xlate {
	struct xlate_anchor *a;
	size_t n, cap;
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

static int reserve(struct xlate *m, size_t want)
{
	struct xlate_anchor *na;
	size_t ncap = m->cap;

	if (want <= m->cap)
		return 0;
	if (want > SIZE_MAX / 2 / sizeof(*na))
		return -1;
	while (ncap < want)
		ncap = ncap != 0 ? ncap * 2 : 8;
	if ((na = realloc(m->a, ncap * sizeof(*na))) == NULL)
		return -1;
	m->a = na;
	m->cap = ncap;
	return 0;
}

struct xlate *xlate_new(size_t reserve_n)
{
	struct xlate *m;

	if ((m = calloc(1, sizeof(*m))) == NULL)
		return NULL;
	if (reserve_n > 0 && reserve(m, reserve_n) != 0) {
		free(m);
		return NULL;
	}
	return m;
}

void xlate_free(struct xlate *m)
{
	if (m == NULL)
		return;
	free(m->a);
	free(m);
}

int xlate_rule(const struct xlate_anchor *tail, size_t k, int64_t src,
    int64_t dst, struct xlate_anchor *fold)
{
	const struct xlate_anchor *l, *p, *q;

	if (k == 0)
		return XLATE_R_APPEND;
	l = &tail[k - 1];
	if (src - dst == l->src - l->dst)
		return XLATE_R_NOOP; /* implied by the last anchor */
	if ((src != l->src && dst != l->dst) || k < 2)
		return XLATE_R_APPEND; /* maps offsets, or nothing to merge with */
	/*
	 * l -> (src, dst) is a skip on one side only: records with no
	 * partner on the side that moves.  When the range p -> l has no hole
	 * on the side that stays, its run of mapped offsets is the same
	 * without l and its own skip on the moving side just grows.
	 */
	p = &tail[k - 2];
	if (src == l->src ? l->src - p->src <= l->dst - p->dst :
	    l->dst - p->dst <= l->src - p->src)
		return XLATE_R_REPLACE;
	/*
	 * Otherwise, if p -> l maps nothing (a skip on the other side), look
	 * one further: when q -> p has no hole on the side that stays, its
	 * skip takes the new one and p -> (src, dst) keeps p's skip, so two
	 * skips in a row is the most ever stored (a hole on both sides at one
	 * point).
	 */
	if (k < 3)
		return XLATE_R_APPEND;
	q = &tail[k - 3];
	if (src == l->src && p->dst == l->dst &&
	    p->src - q->src <= p->dst - q->dst) {
		fold->src = p->src;
		fold->dst = dst;
		return XLATE_R_FOLD;
	}
	if (dst == l->dst && p->src == l->src &&
	    p->dst - q->dst <= p->src - q->src) {
		fold->src = src;
		fold->dst = p->dst;
		return XLATE_R_FOLD;
	}
	return XLATE_R_APPEND;
}

/* 1 when anchor i follows the one before it in both offsets. */
static int ascends(const struct xlate *m, size_t i)
{
	return i == 0 || (m->a[i].src >= m->a[i - 1].src &&
	    m->a[i].dst >= m->a[i - 1].dst);
}

int xlate_add(struct xlate *m, int64_t src, int64_t dst, char *err,
    size_t errlen)
{
	struct xlate_anchor *last, fold;
	size_t k = MIN(m->n, (size_t)3);
	int rule;

	if (src < 0 || dst < 0)
		return fail(err, errlen, "translation anchor %" PRId64 " -> %" PRId64
		    ": offsets must not be negative", src, dst);
	if (m->n > 0) {
		last = &m->a[m->n - 1];
		if (src < last->src || dst < last->dst)
			return fail(err, errlen, "translation anchor %" PRId64 " -> %" PRId64
			    " goes backwards (last anchor %" PRId64 " -> %" PRId64 ")",
			    src, dst, last->src, last->dst);
	}
	rule = xlate_rule(k > 0 ? m->a + m->n - k : NULL, k, src, dst, &fold);
	if (rule == XLATE_R_NOOP)
		return 0;
	if (rule == XLATE_R_FOLD)
		m->a[m->n - 2] = fold;
	if (rule == XLATE_R_REPLACE || rule == XLATE_R_FOLD) {
		m->a[m->n - 1].src = src;
		m->a[m->n - 1].dst = dst;
		/* A merge keeps the anchors ascending (xlate_rule()). */
		MR_ASSERT(ascends(m, m->n - 1) && ascends(m, m->n - 2));
		return 0;
	}
	if (reserve(m, m->n + 1) != 0)
		return fail(err, errlen, "out of memory growing the translation map past "
		    "%zu anchors", m->n);
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
	 * is larger; more than one pass only across skips, and xlate_rule()
	 * never stores three in a row (a trimmed map starts with at most two).
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

/* Index of the first anchor xlate_trim_both() keeps (0: none go). */
static size_t trim_point(const struct xlate_anchor *a, size_t n,
    int64_t src_min, int64_t dst_min)
{
	size_t lo = 0, hi = n; /* anchors at or below both: a prefix [0, lo) */

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;

		if (a[mid].src <= src_min && a[mid].dst <= dst_min)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo > 0 ? lo - 1 : 0;
}

size_t xlate_trim_both(struct xlate *m, int64_t src_min, int64_t dst_min)
{
	size_t i = trim_point(m->a, m->n, src_min, dst_min);

	if (i == 0)
		return 0;
	memmove(m->a, m->a + i, (m->n - i) * sizeof(*m->a));
	m->n -= i;
	if (m->cap > 64 && m->n < m->cap / 4) {
		/* give memory back after a large trim */
		size_t ncap = MAX(m->n * 2, (size_t)8);
		struct xlate_anchor *na = realloc(m->a, ncap * sizeof(*na));

		if (na != NULL) {
			m->a = na;
			m->cap = ncap;
		}
	}
	return i;
}

void xlate_trim(struct xlate *m, int64_t src_min)
{
	(void)xlate_trim_both(m, src_min, INT64_MAX);
}

size_t xlate_bytes(const struct xlate *m)
{
	return sizeof(*m) + m->cap * sizeof(*m->a);
}

void xlate_clear(struct xlate *m)
{
	m->n = 0;
}
