/*
 * pipeline/fsess.h: the client side of a Fetch session (KIP-227) with one
 * source broker, for one mirror.  The broker keeps, per session, the
 * partitions it was asked for and each one's fetch position; an
 * incremental Fetch names only the partitions added or changed since the
 * request before and the ones to forget, and its answer only the
 * partitions with something new.  This is the table of what the broker
 * holds (as of the last request sent): topic and partition to the fetch
 * offset, limits and epochs it was given, O(1) a lookup.  pipeline/copy.c
 * decides what goes in a request and what an answer means.
 */
#ifndef MIRRORD_PIPE_FSESS_H
#define MIRRORD_PIPE_FSESS_H

#include <stddef.h>
#include <stdint.h>

#include "kbuf.h"

struct pfs_ent {
	char *topic;          /* NULL: free slot (see state) */
	int32_t partition;
	int32_t max_bytes;
	int32_t leader_epoch;
	int32_t last_epoch;
	int64_t offset;
	struct kuuid tid;     /* its topic's id as last sent (by_id) */
	uint32_t round;       /* the last request that wanted it */
	size_t ctx;           /* its entry in that request's context */
	int state;            /* 0 free, 1 used, 2 deleted */
};

struct pfsess {
	int32_t id;           /* the broker's session id, 0 none */
	int32_t epoch;        /* the next request's epoch; 0: a full one */
	uint32_t round;       /* bumps with every request built */
	const void *conn;     /* the connection it was last used on */
	int retry_in;         /* no session: requests until asked again */
	int by_id;            /* opened with Fetch v13+: topics by id */
	int stale;            /* a topic's id changed: start anew */
	struct pfs_ent *tab;  /* open addressing, cap a power of two */
	size_t cap, n, used;  /* used: n and the deleted slots */
};

struct pfsess *pfsess_new(void);
void pfsess_free(struct pfsess *s);
/* Forgets every partition and makes the next request a full one that
 * asks for a new session (closing id if keep_id and it is set). */
void pfsess_reset(struct pfsess *s, int keep_id);
/* The entry of topic/partition, added (*added = 1, fields to fill) when
 * absent; NULL when memory is short. */
struct pfs_ent *pfsess_get(struct pfsess *s, const char *topic,
    int32_t partition, int *added);
/* The entry of topic/partition or NULL (topic as an answer has it). */
struct pfs_ent *pfsess_find(const struct pfsess *s, struct kstr topic,
    int32_t partition);
/* Removes e (from pfsess_get/pfsess_find or the table); the topic string
 * is handed to the caller (free() it), so it can be sent as forgotten. */
char *pfsess_remove(struct pfsess *s, struct pfs_ent *e);
/* The epoch after e (wraps to 1: 0 is a full request). */
int32_t pfsess_next_epoch(int32_t e);

#endif
