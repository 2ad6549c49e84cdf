/*
 * pipeline/lend.c: a batch's buffer and its loans.  A batch lies in a Fetch
 * answer's buffer (struct pbuf_pin) or in one of its own; a Produce
 * request sends it by reference (kconn_send_lent()) with a loan (struct
 * ploan) that holds the pin until the connection has written the bytes.
 * A batch whose bytes are lent is never rewritten in place:
 * pbatch_rewrite() gives it a copy of its own first, so a request queued
 * before and not written yet carries the bytes it was sent with.
 * Reached from pipeline/copy.c and tested alone (test/unit/test_pipe_lend.c).
 */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "massert.h"
#include "pipe_int.h"

void pbuf_pin_drop(struct pbuf_pin *pin, size_t len)
{
	MR_ASSERT_MSG(pin->refs > 0, "refs %d", pin->refs);
	*pin->extra += len;
	if (--pin->refs > 0)
		return;
	/* No batch covers any of it now: all of it is counted in *extra. */
	MR_ASSERT_MSG(*pin->extra >= pin->size, "%zu < %zu", *pin->extra,
	    pin->size);
	*pin->extra -= pin->size;
	free(pin->buf);
	free(pin);
}

void pbatch_free(struct pbatch *b)
{
	if (b == NULL)
		return;
	if (b->loan != NULL) {
		MR_ASSERT(b->loan->b == b);
		b->loan->b = NULL; /* the loan keeps the pin */
	}
	/* A lent batch lies in a pin (pl_lend_batch()), which the loan
	 * holds: its bytes are not freed under the request. */
	MR_ASSERT(b->loan == NULL || b->pin != NULL);
	if (b->pin != NULL)
		pbuf_pin_drop(b->pin, b->len);
	else
		free(b->buf);
	free(b->anchors);
	free(b);
}

static void ploan_release(struct kconn_loan *kl)
{
	struct ploan *l = (struct ploan *)kl;

	if (l->b != NULL) {
		MR_ASSERT(l->b->loan == l);
		l->b->loan = NULL;
	}
	if (l->pl != NULL) {
		MR_ASSERT_MSG(l->pl->lent >= l->n, "%zu < %zu", l->pl->lent,
		    l->n);
		l->pl->lent -= l->n;
		TAILQ_REMOVE(&l->pl->loans, l, link);
	}
	pbuf_pin_drop(l->pin, 0);
	free(l);
}

void pl_loans_orphan(struct pipeline *pl)
{
	struct ploan *l;

	while ((l = TAILQ_FIRST(&pl->loans)) != NULL) {
		TAILQ_REMOVE(&pl->loans, l, link);
		if (l->b != NULL)
			l->b->loan = NULL;
		l->b = NULL;
		l->pl = NULL;
		/* Its batches are freed: what stays is the loans', the
		 * whole buffer (pbuf_pin_drop() takes it off at the last). */
		l->pin->extra = &l->pin->own;
		l->pin->own = l->pin->size;
	}
	pl->lent = 0;
}

struct kconn_loan *pl_lend_batch(struct pipeline *pl, struct pbatch *b,
    const uint8_t *p, size_t n)
{
	struct ploan *l;

	if (b == NULL || b->buf != p || b->len != n || b->loan != NULL)
		return NULL;
	if (b->pin == NULL) {
		/* Its own buffer: a pin of its own, freed with the last of
		 * the batch and its loan. */
		struct pbuf_pin *pin = calloc(1, sizeof(*pin));

		if (pin == NULL)
			return NULL;
		pin->buf = b->buf;
		pin->size = b->len;
		pin->refs = 1;
		pin->extra = &pl->pin_extra;
		b->pin = pin;
	}
	if ((l = calloc(1, sizeof(*l))) == NULL)
		return NULL;
	/* The loan holds the pin the lent bytes lie in. */
	MR_ASSERT(p >= b->pin->buf && n <= b->pin->size -
	    (size_t)(p - b->pin->buf));
	l->base.release = ploan_release;
	l->pl = pl;
	l->pin = b->pin;
	l->b = b;
	l->n = n;
	b->pin->refs++;
	b->loan = l;
	pl->lent += n;
	TAILQ_INSERT_TAIL(&pl->loans, l, link);
	return &l->base;
}

int pbatch_unlend(struct pbatch *q)
{
	uint8_t *nb;

	if (q->loan == NULL)
		return 0;
	if ((nb = malloc(q->len)) == NULL)
		return -1;
	memcpy(nb, q->buf, q->len);
	MR_ASSERT(q->loan->b == q && q->pin != NULL);
	q->loan->b = NULL;
	q->loan = NULL;
	pbuf_pin_drop(q->pin, q->len); /* the loan still holds it */
	q->pin = NULL;
	q->buf = nb;
	return 0;
}

int pbatch_rewrite(struct pbatch *q, struct batch *b,
    const struct batch_rewrite *rw, char *err, size_t errlen)
{
	if (q->loan != NULL) {
		if (pbatch_unlend(q) != 0) {
			snprintf(err, errlen, "out of memory copying its %zu bytes "
			    "(its last send is not written yet)", q->len);
			return -1;
		}
		/* b described the lent bytes: the same, in the copy now. */
		if (batch_parse(q->buf, q->len, b, err, errlen) != BATCH_OK)
			return -1;
	}
	/* Never in place under a request not written yet. */
	MR_ASSERT(q->loan == NULL && b->p == q->buf);
	return batch_rewrite_header(b, rw, q->buf, q->len, err, errlen);
}
