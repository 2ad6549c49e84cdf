/*
 * groupsync_map.c: the translation of one committed source offset into the
 * destination offset the consumer-group offset sync commits (groupsync.h
 * says what each result means; groupsync.c's header comment, why).  Apart
 * from the rest of groupsync so that test/unit/test_groupsync links it alone.
 */
#include "config.h"

#include <stddef.h>
#include <stdint.h>

#include "groupsync.h"
#include "mstate.h"
#include "xlate.h"

int groupsync_translate(const struct xlate *map, int64_t src_done,
    int64_t dst_next, int64_t dst_log_start, int64_t c, int64_t *d)
{
	int kind = GS_EXACT;

	if (c >= src_done) {
		*d = dst_next;
		return c > src_done ? GS_LAGGING : GS_EXACT;
	}
	if (xlate_count(map) == 0) {
		*d = c;
	} else {
		/* Below the first anchor the relation is the one mirroring
		 * started with: source 0 is destination 0 (a start above the
		 * source log start, or a destination that had records, is
		 * itself an anchor), up to where the first anchor's skip
		 * begins; an offset in that skip resumes at the anchor. */
		struct xlate_anchor f = xlate_at(map, 0);

		if (c < f.src)
			*d = c < f.dst ? c : f.dst;
		else if (xlate_src_to_dst(map, c, d) == XLATE_UNMAPPED)
			return GS_INVALID;
	}
	if (*d > dst_next)
		*d = dst_next; /* a hole at the end: where the next record lands */
	if (dst_log_start >= 0 && *d < dst_log_start) {
		*d = dst_log_start;
		kind = GS_BEFORE_START;
	}
	return kind;
}
