/*
 * srclookup.h: one asynchronous look at a mirror's source cluster: its
 * cluster id and every topic with its partition count.
 *
 * The admin server needs this for AddTopicsToMirror (does the topic exist,
 * how many partitions) and to resolve a new mirror's source cluster id.  A
 * lookup opens its own connections with the mirror's client settings, asks
 * Metadata for *all* topics (never by name, so nothing is auto-created on
 * the source, even on old brokers and the librdkafka mock), then the
 * mirror marks of those topics (FindCoordinator and OffsetFetch of the
 * group MIRRORMARK_GROUP, mirrormark.h; at most SRCLOOKUP_MARK_TIMEOUT_MS,
 * and a failure there only leaves the marks out), answers once through
 * the callback, and is then freed by the caller.
 */
#ifndef MIRRORD_SRCLOOKUP_H
#define MIRRORD_SRCLOOKUP_H

#include <stddef.h>
#include <stdint.h>

struct event_base;
struct mirror;
struct srclookup;

struct srctopic {
	const char *name;
	int32_t partitions;
	int internal;
	/* The mirror mark of the topic on the source (mirrormark.h): the
	 * committed metadata of partition 0 in the group MIRRORMARK_GROUP
	 * when it is one, else NULL (also when the source refused or did not
	 * answer that look: marks are best effort). */
	const char *mark;
};

/*
 * Called exactly once, never from inside srclookup_start().  On failure
 * errstr names the cluster and what went wrong and topics is NULL.  The
 * arrays are valid only during the call.
 */
typedef void (*srclookup_cb)(void *arg, int ok, const char *errstr,
    const char *cluster_id, const struct srctopic *topics, size_t ntopics);

/* Starts a lookup for mirror m, bounded by timeout_ms.  The files its
 * configs name are read off the loop first, inside allowed_dirs
 * (mirrors.allowed_file_dirs); a refused file fails the lookup naming the
 * key, the path and why.  NULL on bad settings, with the reason in err. */
struct srclookup *srclookup_start(struct event_base *base,
    const struct mirror *m, const char *const *allowed_dirs, int timeout_ms,
    srclookup_cb cb, void *arg, char *err, size_t errlen);
/* Cancels a pending lookup (its callback will not run) or frees a finished
 * one.  NULL is a no-op. */
void srclookup_free(struct srclookup *l);

/* The topic of that name in a lookup result, or NULL. */
const struct srctopic *srclookup_find(const struct srctopic *topics,
    size_t n, const char *name);

#endif
