/*
 * xlate.c: the per-partition offset translation map (see xlate.h).
 *
 * Anchors are kept in two parts.  The newest, up to XTAIL of them, are a
 * plain array (the tail) that xlate_rule() merges into.  When the tail is
 * full its oldest XB anchors are sealed into a block: the first anchor
 * whole in the block's header, the XB - 1 after it as pairs of unsigned
 * varint deltas (neither coordinate decreases) in one byte buffer shared
 * by all blocks.  A transaction's anchor then costs two or three bytes
 * instead of sixteen.  Every sealed block holds exactly XB anchors, so an
 * index names its block by division; a trim that ends inside the first
 * block hides that block's first skip anchors instead of rewriting it, and
 * dropping anchors from the end unseals the last block back into the tail.
 *
 * A lookup bisects the block headers, decodes one block and bisects it;
 * either coordinate is a valid key (the last anchor with a given key is
 * the one that maps it).  xlate_rule() keeps at most two skips in a row,
 * so a lookup locates at most three times.
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

#define XB	128		/* anchors in a sealed block */
#define XTAIL	(2 * XB)	/* most anchors the tail holds */
#define XVARINT	10		/* longest encoding of a 64-bit delta */

struct xblock {
	struct xlate_anchor first;
	size_t off;		/* its deltas start at buf + off */
};

struct xlate {
	struct xblock *b;	/* sealed blocks, oldest first */
	size_t nb, capb;
	uint8_t *buf;		/* their deltas, block after block */
	size_t len, capbuf;
	size_t skip;		/* anchors of b[0] trimmed away */
	struct xlate_anchor *t; /* the tail, after every block */
	size_t nt, capt;
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

/* Grows *arr (of elem-sized items, capacity *cap) to hold want. */
static int grow(void *arrp, size_t *cap, size_t want, size_t elem)
{
	void **arr = arrp, *na;
	size_t ncap = *cap;

	if (want <= *cap)
		return 0;
	if (want > SIZE_MAX / 2 / elem)
		return -1;
	while (ncap < want)
		ncap = ncap != 0 ? ncap * 2 : 8;
	if ((na = realloc(*arr, ncap * elem)) == NULL)
		return -1;
	*arr = na;
	*cap = ncap;
	return 0;
}

static uint8_t *put_uv(uint8_t *p, uint64_t v)
{
	while (v >= 0x80) {
		*p++ = (uint8_t)(v | 0x80);
		v >>= 7;
	}
	*p++ = (uint8_t)v;
	return p;
}

static const uint8_t *get_uv(const uint8_t *p, uint64_t *v)
{
	uint64_t r = 0;
	unsigned shift = 0;

	while (*p & 0x80) {
		r |= (uint64_t)(*p++ & 0x7f) << shift;
		shift += 7;
	}
	*v = r | (uint64_t)*p++ << shift;
	return p;
}

/* Decodes the anchors [0, upto) of block bi into out. */
static void decode(const struct xlate *m, size_t bi, struct xlate_anchor *out,
    size_t upto)
{
	const uint8_t *p = m->buf + m->b[bi].off;
	uint64_t ds, dd;

	out[0] = m->b[bi].first;
	for (size_t j = 1; j < upto; j++) {
		p = get_uv(p, &ds);
		p = get_uv(p, &dd);
		out[j].src = out[j - 1].src + (int64_t)ds;
		out[j].dst = out[j - 1].dst + (int64_t)dd;
	}
}

/* Seals the tail's oldest XB anchors into a block. */
static int seal(struct xlate *m)
{
	uint8_t *p;

	if (grow(&m->b, &m->capb, m->nb + 1, sizeof(*m->b)) != 0 ||
	    grow(&m->buf, &m->capbuf, m->len + (XB - 1) * 2 * XVARINT, 1) != 0)
		return -1;
	m->b[m->nb].first = m->t[0];
	m->b[m->nb].off = m->len;
	p = m->buf + m->len;
	for (size_t j = 1; j < XB; j++) {
		p = put_uv(p, (uint64_t)(m->t[j].src - m->t[j - 1].src));
		p = put_uv(p, (uint64_t)(m->t[j].dst - m->t[j - 1].dst));
	}
	m->len = (size_t)(p - m->buf);
	m->nb++;
	m->nt -= XB;
	memmove(m->t, m->t + XB, m->nt * sizeof(*m->t));
	return 0;
}

/* Moves the last block back in front of the tail (the tail then holds at
 * most XB + 2 anchors when it held fewer than 3). */
static int unseal(struct xlate *m)
{
	struct xlate_anchor blk[XB];
	size_t bi = m->nb - 1, from = bi == 0 ? m->skip : 0, k = XB - from;

	if (grow(&m->t, &m->capt, m->nt + k, sizeof(*m->t)) != 0)
		return -1;
	decode(m, bi, blk, XB);
	memmove(m->t + k, m->t, m->nt * sizeof(*m->t));
	memcpy(m->t, blk + from, k * sizeof(*m->t));
	m->nt += k;
	m->len = m->b[bi].off;
	m->nb--;
	if (bi == 0)
		m->skip = 0;
	return 0;
}

struct xlate *xlate_new(size_t reserve_n)
{
	struct xlate *m;

	if ((m = calloc(1, sizeof(*m))) == NULL)
		return NULL;
	if (reserve_n > 0 && grow(&m->t, &m->capt, MIN(reserve_n, (size_t)XTAIL),
	    sizeof(*m->t)) != 0) {
		free(m);
		return NULL;
	}
	return m;
}

void xlate_free(struct xlate *m)
{
	if (m == NULL)
		return;
	free(m->b);
	free(m->buf);
	free(m->t);
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

/* 1 when tail anchor i follows the one before it in both offsets. */
static int ascends(const struct xlate *m, size_t i)
{
	return i == 0 || (m->t[i].src >= m->t[i - 1].src &&
	    m->t[i].dst >= m->t[i - 1].dst);
}

size_t xlate_count(const struct xlate *m)
{
	return m == NULL ? 0 : m->nb * XB - m->skip + m->nt;
}

struct xlate_anchor xlate_at(const struct xlate *m, size_t i)
{
	struct xlate_anchor blk[XB];
	size_t ph = i + m->skip;

	MR_ASSERT(i < xlate_count(m));
	if (ph >= m->nb * XB)
		return m->t[ph - m->nb * XB];
	decode(m, ph / XB, blk, ph % XB + 1);
	return blk[ph % XB];
}

size_t xlate_read(const struct xlate *m, size_t from, struct xlate_anchor *out,
    size_t max)
{
	struct xlate_anchor blk[XB];
	size_t n = xlate_count(m), k = 0;

	while (k < max && from + k < n) {
		size_t ph = from + k + m->skip, j, take;

		if (ph >= m->nb * XB) {
			j = ph - m->nb * XB;
			take = MIN(max - k, m->nt - j);
			memcpy(out + k, m->t + j, take * sizeof(*out));
		} else {
			j = ph % XB;
			take = MIN(max - k, XB - j);
			decode(m, ph / XB, blk, j + take);
			memcpy(out + k, blk + j, take * sizeof(*out));
		}
		k += take;
	}
	return k;
}

int xlate_add(struct xlate *m, int64_t src, int64_t dst, char *err,
    size_t errlen)
{
	struct xlate_anchor fold;
	size_t k;
	int rule;

	if (src < 0 || dst < 0)
		return fail(err, errlen, "translation anchor %" PRId64 " -> %" PRId64
		    ": offsets must not be negative", src, dst);
	/* the rule looks at the last three: they must be in the tail */
	if (m->nt < 3 && m->nb > 0 && unseal(m) != 0)
		return fail(err, errlen, "out of memory growing the translation map "
		    "past %zu anchors", xlate_count(m));
	if (m->nt > 0) {
		const struct xlate_anchor *last = &m->t[m->nt - 1];

		if (src < last->src || dst < last->dst)
			return fail(err, errlen, "translation anchor %" PRId64 " -> %" PRId64
			    " goes backwards (last anchor %" PRId64 " -> %" PRId64 ")",
			    src, dst, last->src, last->dst);
	}
	k = MIN(m->nt, (size_t)3);
	rule = xlate_rule(k > 0 ? m->t + m->nt - k : NULL, k, src, dst, &fold);
	if (rule == XLATE_R_NOOP)
		return 0;
	if (rule == XLATE_R_FOLD)
		m->t[m->nt - 2] = fold;
	if (rule == XLATE_R_REPLACE || rule == XLATE_R_FOLD) {
		m->t[m->nt - 1].src = src;
		m->t[m->nt - 1].dst = dst;
		/* A merge keeps the anchors ascending (xlate_rule()). */
		MR_ASSERT(ascends(m, m->nt - 1) && ascends(m, m->nt - 2));
		return 0;
	}
	if ((m->nt == XTAIL && seal(m) != 0) ||
	    grow(&m->t, &m->capt, m->nt + 1, sizeof(*m->t)) != 0)
		return fail(err, errlen, "out of memory growing the translation map past "
		    "%zu anchors", xlate_count(m));
	m->t[m->nt].src = src;
	m->t[m->nt].dst = dst;
	m->nt++;
	return 0;
}

static int64_t key(const struct xlate_anchor *a, int by_src)
{
	return by_src ? a->src : a->dst;
}

/*
 * The last anchor whose coordinate (src if by_src) is <= v into *a, its
 * index into *idx, and the anchor after it into *next (*has_next 0: a is
 * the last).  0 when no anchor is <= v.  A block is decoded once, only up
 * to the answer.
 */
static int locate(const struct xlate *m, int64_t v, int by_src, size_t *idx,
    struct xlate_anchor *a, struct xlate_anchor *next, int *has_next)
{
	struct xlate_anchor cur, nx;
	const uint8_t *p;
	size_t lo, hi, bi, j;
	uint64_t ds, dd;

	if (m == NULL)
		return 0;
	if (m->nt > 0 && key(&m->t[0], by_src) <= v) {
		lo = 1;
		hi = m->nt;	/* the tail's anchors <= v: [0, lo) */
		while (lo < hi) {
			size_t mid = lo + (hi - lo) / 2;

			if (key(&m->t[mid], by_src) <= v)
				lo = mid + 1;
			else
				hi = mid;
		}
		*idx = m->nb * XB - m->skip + lo - 1;
		*a = m->t[lo - 1];
		if ((*has_next = lo < m->nt))
			*next = m->t[lo];
		return 1;
	}
	lo = 0;
	hi = m->nb;	/* blocks whose first anchor is <= v: [0, lo) */
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;

		if (key(&m->b[mid].first, by_src) <= v)
			lo = mid + 1;
		else
			hi = mid;
	}
	if (lo == 0)
		return 0;
	bi = lo - 1;
	cur = m->b[bi].first;
	p = m->buf + m->b[bi].off;
	for (j = 1; j < XB; j++) {
		p = get_uv(p, &ds);
		p = get_uv(p, &dd);
		nx.src = cur.src + (int64_t)ds;
		nx.dst = cur.dst + (int64_t)dd;
		if (key(&nx, by_src) > v)
			break;
		cur = nx;
	}
	if (bi == 0 && j - 1 < m->skip)
		return 0;	/* trimmed away */
	*idx = bi * XB + j - 1 - m->skip;
	*a = cur;
	*has_next = 1;
	if (j < XB)
		*next = nx;
	else if (bi + 1 < m->nb)
		*next = m->b[bi + 1].first;
	else if (m->nt > 0)
		*next = m->t[0];
	else
		*has_next = 0;
	return 1;
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
		struct xlate_anchor a, next;
		int64_t from, to, k, span;
		size_t i;
		int has_next;

		if (!locate(m, v, by_src, &i, &a, &next, &has_next))
			return XLATE_UNMAPPED;
		from = key(&a, by_src);
		to = key(&a, !by_src);
		k = v - from;
		if (k > INT64_MAX - to)
			return XLATE_UNMAPPED; /* no int64 partner */
		if (has_next) {
			span = MIN(next.src - a.src, next.dst - a.dst);
			if (k >= span) {
				/* no partner: resume at the next anchor */
				v = key(&next, by_src);
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
	struct xlate_anchor a;

	/* Consecutive anchors differ in delta, so identity means one anchor. */
	if (xlate_count(m) != 1)
		return 0;
	a = xlate_at(m, 0);
	return a.src == a.dst;
}

size_t xlate_trim_point(const struct xlate *m, int64_t src_min, int64_t dst_min)
{
	size_t lo = 0, hi = xlate_count(m); /* at or below both: [0, lo) */

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		struct xlate_anchor a = xlate_at(m, mid);

		if (a.src <= src_min && a.dst <= dst_min)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo > 0 ? lo - 1 : 0;
}

void xlate_drop_first(struct xlate *m, size_t k)
{
	size_t whole, cut;

	MR_ASSERT(k <= xlate_count(m));
	m->skip += k;
	whole = MIN(m->skip / XB, m->nb);
	if (whole > 0) {
		cut = whole < m->nb ? m->b[whole].off : m->len;
		memmove(m->b, m->b + whole, (m->nb - whole) * sizeof(*m->b));
		m->nb -= whole;
		for (size_t i = 0; i < m->nb; i++)
			m->b[i].off -= cut;
		memmove(m->buf, m->buf + cut, m->len - cut);
		m->len -= cut;
		m->skip -= whole * XB;
	}
	if (m->nb == 0 && m->skip > 0) {
		memmove(m->t, m->t + m->skip, (m->nt - m->skip) * sizeof(*m->t));
		m->nt -= m->skip;
		m->skip = 0;
	}
	/* give memory back after a large trim */
	if (m->capbuf > 4096 && m->len < m->capbuf / 4) {
		size_t ncap = MAX(m->len * 2, (size_t)1024);
		uint8_t *nbuf = realloc(m->buf, ncap);

		if (nbuf != NULL) {
			m->buf = nbuf;
			m->capbuf = ncap;
		}
	}
	if (m->capb > 64 && m->nb < m->capb / 4) {
		size_t ncap = MAX(m->nb * 2, (size_t)8);
		struct xblock *nblk = realloc(m->b, ncap * sizeof(*nblk));

		if (nblk != NULL) {
			m->b = nblk;
			m->capb = ncap;
		}
	}
}

int xlate_drop_last(struct xlate *m, size_t k)
{
	MR_ASSERT(k <= xlate_count(m));
	while (k > 0) {
		size_t take;

		if (m->nt == 0 && unseal(m) != 0)
			return -1;
		take = MIN(k, m->nt);
		m->nt -= take;
		k -= take;
	}
	return 0;
}

size_t xlate_count_above_dst(const struct xlate *m, int64_t dst)
{
	struct xlate_anchor a, next;
	size_t i;
	int has_next;

	if (!locate(m, dst, 0, &i, &a, &next, &has_next))
		return xlate_count(m);
	return xlate_count(m) - i - 1;
}

size_t xlate_trim_both(struct xlate *m, int64_t src_min, int64_t dst_min)
{
	size_t i = xlate_trim_point(m, src_min, dst_min);

	xlate_drop_first(m, i);
	return i;
}

void xlate_trim(struct xlate *m, int64_t src_min)
{
	(void)xlate_trim_both(m, src_min, INT64_MAX);
}

size_t xlate_bytes(const struct xlate *m)
{
	return sizeof(*m) + m->capb * sizeof(*m->b) + m->capbuf +
	    m->capt * sizeof(*m->t);
}

void xlate_clear(struct xlate *m)
{
	m->nb = m->len = m->skip = m->nt = 0;
}
