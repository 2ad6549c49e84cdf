/*
 * xlate.h: the exact offset translation map of one mirrored partition.
 *
 * mirrord keeps destination offsets equal to source offsets whenever it
 * can.  When it cannot (a compacted batch had to be re-encoded without its
 * holes, the source log start jumped past data never copied, or the
 * destination partition already had records), the relation between the two
 * changes at one point and stays 1:1 after it.  The map stores only those
 * points, as anchors (src, dst) in order, neither coordinate decreasing:
 *
 *   between anchor i and anchor i+1, src[i] + k <-> dst[i] + k for
 *   0 <= k < min(src[i+1] - src[i], dst[i+1] - dst[i]); the last anchor
 *   maps 1:1 without end.
 *
 * If src[i+1] - src[i] > dst[i+1] - dst[i], the source offsets in between
 * that have no partner are a hole (records the cleaner removed, or log that
 * retention dropped); the other way round, the destination offsets are
 * records with no source (a duplicate from a retried Produce, a foreign
 * write).  Both at one point are two anchors sharing a coordinate: after
 * (100, 50), a source hole 105..109 and three foreign records at 55..57 are
 * recorded as (110, 55) then (110, 58).
 *
 * An anchor that keeps the current delta (src - dst) adds nothing and is
 * not stored, so the map costs memory only per hole.  The map has a hard
 * cap on anchors set at creation; xlate_trim() drops anchors below a
 * source offset nobody can ask for any more (below the log start).
 *
 * The map owns its anchor array.  The metadata log persists it by iterating
 * with xlate_count()/xlate_anchor() and reloads it with xlate_add() in order.
 */
#ifndef MIRRORD_XLATE_H
#define MIRRORD_XLATE_H

#include <stddef.h>
#include <stdint.h>

struct xlate_anchor {
	int64_t src;
	int64_t dst;
};

struct xlate;

/* A map holding at most max_anchors anchors (>= 1).  NULL on ENOMEM. */
struct xlate *xlate_new(size_t max_anchors);
void xlate_free(struct xlate *m);

/*
 * Records that source offset src maps to destination offset dst from here
 * on (the offsets skipped since the last anchor on either side are holes).
 * Offsets must be >= 0 and must not go backwards: src >= last src and
 * dst >= last dst.  An anchor with the current delta is dropped; a third
 * anchor in a row on the same src (or dst) replaces the second, which then
 * says nothing more.  -1 with the reason in err if the anchor goes
 * backwards, is negative, or the map is full.
 */
int xlate_add(struct xlate *m, int64_t src, int64_t dst, char *err,
    size_t errlen);

/* Results of the lookups. */
enum {
	XLATE_UNMAPPED = -1, /* before the first anchor, map empty, or no int64 partner */
	XLATE_EXACT = 0,     /* the offset has a partner: *out is it */
	XLATE_NEXT = 1,	     /* the offset has no partner: *out is the partner of the next offset that has one */
};

/*
 * Source offset -> destination offset.  A source offset that fell in a hole
 * (its record is not at the destination) gives XLATE_NEXT and the
 * destination offset of the next source record that is there, which is
 * where a consumer that had read up to src should resume.
 */
int xlate_src_to_dst(const struct xlate *m, int64_t src, int64_t *dst);
/* Destination -> source; a destination-only record gives XLATE_NEXT likewise. */
int xlate_dst_to_src(const struct xlate *m, int64_t dst, int64_t *src);

/* 1 if the map has anchors and every mapped offset maps to itself. */
int xlate_is_identity(const struct xlate *m);

/* Iteration, in increasing order, for persistence. */
size_t xlate_count(const struct xlate *m);
const struct xlate_anchor *xlate_anchor(const struct xlate *m, size_t i);

/*
 * Forgets anchors that only map source offsets below src_min, keeping the
 * one that covers src_min.  Lookups below src_min are then unreliable.
 */
void xlate_trim(struct xlate *m, int64_t src_min);
/* Drops all anchors. */
void xlate_clear(struct xlate *m);

#endif
