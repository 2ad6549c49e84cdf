/*
 * mirrormark.h: the mark mirrord leaves on its destination cluster for
 * every topic it mirrors there, so that a mirrord reading that cluster as
 * a source can tell a mirror loop.
 *
 * The marks are committed offsets of one consumer group on the
 * destination, MIRRORMARK_GROUP, with no members (a "simple" commit, as an
 * admin tool makes): every partition of each topic of a mirror (the loop
 * checks read partition 0), offset 0, and
 * the committed metadata string
 *
 *   mirrord-mirror v1 state=<active|stopped> source=<cluster id|?> mirror=<name>
 *
 * and, once every partition of the topic is STOPPED, each mark also says
 * where its partition stopped (for a failback, pipeline/prove.c):
 *
 *   ... mirror=<name> last=<last mirrored source offset> epoch=<its leader
 *   epoch> ident=<1 if source and destination offsets were identical>
 *   dst=<the destination offset after the record of offset last>
 *
 * dst= is where the destination's own records begin after the stop: with
 * ident=0 (transaction markers, aborted records or holes were left out of
 * the copy) it is the only way back from the source's offsets to the
 * destination's.  Marks of earlier versions end at ident=.
 *
 * groupsync.c writes them with every sync round (a topic is active while
 * one of its partitions is not STOPPED) and never syncs that group itself;
 * srclookup.c reads them from a source (OffsetFetch of the group for the
 * source's topics) and admin.c refuses AddTopicsToMirror of a topic marked
 * active unless mirror.allow.loops is true.
 */
#ifndef MIRRORD_MIRRORMARK_H
#define MIRRORD_MIRRORMARK_H

#include <stdio.h>
#include <string.h>

#define MIRRORMARK_GROUP "__mirrord_mirrors"
#define MIRRORMARK_PREFIX "mirrord-mirror v1 "

static inline int mirrormark_format(char *buf, size_t len, int active,
    const char *source_cluster_id, const char *mirror)
{
	return snprintf(buf, len, MIRRORMARK_PREFIX "state=%s source=%s "
	    "mirror=%s", active ? "active" : "stopped",
	    source_cluster_id != NULL && source_cluster_id[0] != '\0' ?
	    source_cluster_id : "?", mirror);
}

/* Parses a mark; 0 with its fields (NUL-terminated, truncated to their
 * buffers), -1 when s is not one. */
static inline int mirrormark_parse(const char *s, int *active, char *source,
    size_t slen, char *mirror, size_t mlen)
{
	const char *st, *so, *mi, *sp;
	size_t plen = strlen(MIRRORMARK_PREFIX);

	if (strncmp(s, MIRRORMARK_PREFIX, plen) != 0)
		return -1;
	st = s + plen;
	if (strncmp(st, "state=active ", 13) == 0)
		*active = 1, so = st + 13;
	else if (strncmp(st, "state=stopped ", 14) == 0)
		*active = 0, so = st + 14;
	else
		return -1;
	if (strncmp(so, "source=", 7) != 0 || (sp = strchr(so + 7, ' ')) == NULL ||
	    strncmp(sp + 1, "mirror=", 7) != 0)
		return -1;
	snprintf(source, slen, "%.*s", (int)(sp - (so + 7)), so + 7);
	mi = sp + 8;
	snprintf(mirror, mlen, "%.*s", (int)strcspn(mi, " "), mi);
	return 0;
}

/* A stopped partition's mark: 0 with where it stopped (*dst -1 when the
 * mark does not say), -1 when s does not say (an active mark). */
static inline int mirrormark_stop(const char *s, long long *last, int *epoch,
    int *ident, long long *dst)
{
	const char *p = strstr(s, " last=");

	*dst = -1;
	if (p == NULL || sscanf(p, " last=%lld epoch=%d ident=%d", last, epoch,
	    ident) != 3)
		return -1;
	if ((p = strstr(p, " dst=")) != NULL && (sscanf(p, " dst=%lld", dst) !=
	    1 || *dst < 0))
		*dst = -1;
	return 0;
}

#endif
