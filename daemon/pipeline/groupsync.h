/*
 * groupsync.h: consumer-group offset sync (daemon/pipeline/groupsync.c), part of
 * the data plane: it runs on the pipeline's loop through the pipeline's
 * cluster connections and reads the partitions' positions and translation
 * anchors.  See the top of groupsync.c for what is committed and why.
 */
#ifndef MIRRORD_GROUPSYNC_H
#define MIRRORD_GROUPSYNC_H

#include <stddef.h>
#include <stdint.h>

struct pipeline;
struct groupsync;
struct xlate;
struct ppart;
struct mpart;

struct groupsync *groupsync_new(struct pipeline *pl);
/* Call groupsync_dying() before the clusters are freed (their failing
 * requests' answers are then dropped), groupsync_free() after. */
void groupsync_dying(struct groupsync *gs);
void groupsync_free(struct groupsync *gs);
/* Starts the rounds that are due (from the pipeline's tick). */
void groupsync_tick(struct groupsync *gs);
/* A sync of this mirror as soon as possible (a partition stopped: its
 * mirror marks). */
void groupsync_kick(struct groupsync *gs, const char *mirror);

/* ppart.gs_final: where a STOPPING partition's final sync is. */
enum {
	GS_FINAL_NONE = 0,   /* not asked (or STOPPED: never synced again) */
	GS_FINAL_WANT,       /* asked: the next round covers it */
	GS_FINAL_RUNNING,    /* the round covering it runs */
	GS_FINAL_DONE,       /* over (synced, or reported as missed) */
};
/*
 * For the pipeline's STOPPING partition p with nothing in flight, before
 * it is recorded STOPPED: 1 while its consumer groups' final sync is not
 * over (call again; a round is started for it), 0 once it is, or once it
 * could not be done within its time (reported then: a warning naming the
 * groups and why, mirrord_group_sync_final_missed_total, the partition's
 * warning).  Nothing syncs p again afterwards.
 */
int groupsync_final(struct groupsync *gs, struct ppart *p, int64_t now);
/* What p's final sync missed (its report without the lead sentence,
 * under GS_WARN_LEN bytes), NULL nothing: recorded with its STOPPED state
 * (mpart.failover_note) when groupsync_final() returned 0. */
const char *groupsync_final_note(struct groupsync *gs, const struct ppart *p);
/* The DescribeMirrors warning of a STOPPING or STOPPED partition mp
 * (its pipeline partition p, may be NULL) whose final sync missed groups
 * (1, in buf), else 0: this process's report, else the one recorded with
 * the stop (mpart.failover_note of a STOPPED partition). */
int groupsync_warning(struct groupsync *gs, const struct mpart *mp,
    const struct ppart *p, char *buf, size_t len);

/* groupsync_translate() results. */
enum {
	GS_EXACT = 0,        /* *d is where a consumer at c resumes */
	GS_LAGGING = 1,      /* c is past the mirrored end: *d is that end */
	GS_BEFORE_START = 2, /* c's records are not on the destination: *d is its first offset */
	GS_INVALID = -1,     /* the map has no partner for c */
};
/*
 * The destination offset to commit for the committed source offset c of a
 * partition with this translation map (NULL: none), whose source offsets below src_done are
 * on the destination below dst_next (or were skipped), and whose
 * destination log starts at dst_log_start (-1 unknown).
 */
int groupsync_translate(const struct xlate *map, int64_t src_done,
    int64_t dst_next, int64_t dst_log_start, int64_t c, int64_t *d);

#endif
