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
 * Each anchor with its successor is one range: a run of mapped offsets,
 * then the skip (holes on either side) up to the next anchor.  Anchors
 * merge as they come (xlate_rule()), with no loss: one that keeps the
 * current delta (src - dst) adds nothing and is not stored; one that only
 * extends a skip on the side where the range has no holes replaces the
 * last anchor; and a run of skips with no mapped offset in between folds
 * into at most two.  So the map costs memory per distinct shift (one
 * anchor per hole, at most), has no count cap, and answers lookups by
 * bisection, O(log n).  xlate_trim_both() drops the anchors that only map
 * offsets below both logs' start offsets, which nobody can ask for any more.
 *
 * All but the newest few hundred anchors are stored delta-encoded in
 * blocks (xlate.c), two to three bytes each for a transactional
 * partition's anchors (one per transaction), so a map of millions of
 * anchors stays a few tens of MiB.
 *
 * The metadata log's model keeps each partition's map as one of these
 * (lib/metadata/mstate.h), persists it by reading it in order
 * (xlate_read()) and reloads it with xlate_add().  The read-only calls
 * take NULL as the empty map.
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

/* An empty map with room for reserve anchors (0: none yet); it grows
 * without a cap.  NULL on ENOMEM. */
struct xlate *xlate_new(size_t reserve);
void xlate_free(struct xlate *m);

/*
 * Records that source offset src maps to destination offset dst from here
 * on (the offsets skipped since the last anchor on either side are holes).
 * Offsets must be >= 0 and must not go backwards: src >= last src and
 * dst >= last dst.  Merges as xlate_rule() says.  -1 with the reason in
 * err if the anchor goes backwards or is negative, or on ENOMEM.
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

/* How many anchors the map holds. */
size_t xlate_count(const struct xlate *m);
/* Anchor i, 0 <= i < xlate_count(m) (the last ones in O(1), the others by
 * decoding part of a block). */
struct xlate_anchor xlate_at(const struct xlate *m, size_t i);
/* Copies up to max anchors from index from on into out, in increasing
 * order; returns how many. */
size_t xlate_read(const struct xlate *m, size_t from, struct xlate_anchor *out,
    size_t max);

/*
 * Forgets the anchors that only map source offsets below src_min and
 * destination offsets below dst_min (both logs start above them), keeping
 * the last anchor at or below both.  Every lookup of a source offset >=
 * src_min or a destination offset >= dst_min answers as before; lookups
 * below are then unreliable.  Returns how many anchors went.
 */
size_t xlate_trim_both(struct xlate *m, int64_t src_min, int64_t dst_min);
/* xlate_trim_both(m, src_min, INT64_MAX). */
void xlate_trim(struct xlate *m, int64_t src_min);
/* How many anchors xlate_trim_both() would drop, without dropping them. */
size_t xlate_trim_point(const struct xlate *m, int64_t src_min,
    int64_t dst_min);
/* Drops the first k anchors (k <= xlate_count(m)). */
void xlate_drop_first(struct xlate *m, size_t k);
/* Drops the last k anchors (k <= xlate_count(m)); -1 on ENOMEM (a block
 * is decoded back into the plain tail), the map then unchanged past what
 * was already dropped. */
int xlate_drop_last(struct xlate *m, size_t k);
/* How many anchors, at the end, have a destination offset above dst. */
size_t xlate_count_above_dst(const struct xlate *m, int64_t dst);

/*
 * The merge rule, shared with the metadata log's copy of the map (lib/mstate):
 * what adding (src, dst) does to a map whose last anchors are tail[0..k)
 * (k <= 3, oldest first; (src, dst) already checked not to go backwards).
 *   XLATE_R_NOOP     same delta as the last: nothing to store
 *   XLATE_R_APPEND   a new anchor
 *   XLATE_R_REPLACE  (src, dst) replaces the last anchor
 *   XLATE_R_FOLD     *fold replaces the second last and (src, dst) the last
 * Each result maps every offset exactly as the anchors before the merge.
 */
enum { XLATE_R_NOOP, XLATE_R_APPEND, XLATE_R_REPLACE, XLATE_R_FOLD };
int xlate_rule(const struct xlate_anchor *tail, size_t k, int64_t src,
    int64_t dst, struct xlate_anchor *fold);

/* Bytes the map holds (structure, blocks, tail). */
size_t xlate_bytes(const struct xlate *m);
/* Drops all anchors. */
void xlate_clear(struct xlate *m);

#endif
