/*
 * mrec.h: the record types of the metadata log and their payload codec.
 *
 * lib/mstate changes its model only by appending one of these records and
 * applying it; replay at start-up applies the same records, so the model
 * after a restart is the model before it.  Each type lists its fields once
 * (the X-macro below); the encoder and the decoder both walk that list:
 *
 *   M mirror name    compact string, not null
 *   T topic name     compact string, not null
 *   P partition      int32
 *   S string         compact nullable string (id, pattern, reason, error)
 *   k kind           int8   (MIRROR_PATTERN: MREC_INCLUDE / MREC_EXCLUDE)
 *   s state          int8   (an enum mpart_state value)
 *   m from-mask      uint16 (TOPIC_STATE: the states that move)
 *   f flags          int8
 *   c count          int32  (partitions)
 *   r retry attempt  int32
 *   o offset         int64
 *   O second offset  int64
 *   e epoch          int32
 *   t third int64    int64  (PART_FAILOVER: the lag in time, ms)
 *   C configs        compact array of (compact string name, nullable value)
 *   g generation     int32  (the group generation that decided it)
 *   L members        compact array of (instance id, member id: compact
 *                    strings, not null; local broker id int32; admin and
 *                    http addresses: compact nullable strings)
 *   N note           compact string, not null, 1..MREC_MAX_NOTE bytes
 *                    (PART_FAILOVER_NOTE: what the final consumer-group
 *                    offset sync at the stop could not sync)
 *   A anchors        uvarint count (1..MREC_MAX_ANCHORS), then per anchor
 *                    the source and the destination offset as unsigned
 *                    64-bit varints, each the distance from the anchor
 *                    before (from 0 for the first): a list that ascends in
 *                    both offsets, a few bytes an anchor
 *
 * Every payload starts with a version byte (0).  Payloads come from our own
 * disk but are decoded as hostile input all the same: every length is
 * bounded, trailing bytes are an error.  The type numbers are on disk:
 * never renumber, only add.
 */
#ifndef MIRRORD_MREC_H
#define MIRRORD_MREC_H

#include <stddef.h>
#include <stdint.h>

#include "kbuf.h"

#define MREC_TYPES(X) \
	X(CLUSTER_ID,     1, "cluster-id",     "S") \
	X(MIRROR_CREATE,  2, "mirror-create",  "MC") \
	X(MIRROR_DELETE,  3, "mirror-delete",  "M") \
	X(MIRROR_SOURCE,  4, "mirror-source",  "MS") \
	X(MIRROR_PATTERN, 5, "mirror-pattern", "MkS") \
	X(TOPIC_ADD,      6, "topic-add",      "MTcf") \
	X(TOPIC_STATE,    7, "topic-state",    "MTsmS") \
	X(PART_STATE,     8, "part-state",     "MTPsrfoeS") \
	X(PART_EPOCH,     9, "part-epoch",     "MTPeo") \
	X(PART_ANCHOR,   10, "part-anchor",    "MTPoO") \
	X(TOPIC_RESTORE, 11, "topic-restore",  "MTc") \
	X(PART_RESTORE,  12, "part-restore",   "MTPsroeS") \
	X(MIRROR_CONFIGS, 13, "mirror-configs", "MC") \
	X(PART_TRIM,     14, "part-trim",      "MTPoO") \
	X(TOPIC_IDENT,   15, "topic-ident",    "MTkS") \
	X(PART_PRODUCER, 17, "part-producer",  "MTPoeO") \
	X(PART_SENDING,  18, "part-sending",   "MTPo") \
	X(CLUSTER_MEMBERS, 19, "cluster-members", "gL") \
	X(PART_OWNER,    20, "part-owner",     "MTPSg") \
	X(PART_FAILOVER, 21, "part-failover",  "MTPoOt") \
	X(ACL_BINDING,   22, "acl-binding",    "MkfS") \
	X(PART_FAILOVER_AT, 23, "part-failover-at", "MTPoOf") \
	X(TOPIC_REALIGN, 24, "topic-realign",  "MTkS") \
	X(PART_ANCHORS,  25, "part-anchors",   "MTPoA") \
	X(PART_RETRACT,  26, "part-retract",   "MTPo") \
	X(PART_FAILOVER_NOTE, 27, "part-failover-note", "MTPN")

enum mrec_type {
#define X(e, n, s, f) MREC_##e = (n),
	MREC_TYPES(X)
#undef X
};

#define MREC_INCLUDE 0
#define MREC_EXCLUDE 1
/* MIRROR_PATTERN: the include pattern str is removed (RemoveTopicsFromMirror
 * naming a saved include pattern). */
#define MREC_INCLUDE_DEL 2
/* TOPIC_IDENT kinds: the field of the topic the string sets (null clears);
 * the values are MTOPIC_IDENT_* of mstate.h. */
#define MREC_F_RESTART 0x01  /* TOPIC_ADD: STOPPED partitions restart */
#define MREC_F_LAST 0x02     /* PART_STATE: o/e are the last mirrored offset/epoch */
#define MREC_F_ADD 0x01      /* ACL_BINDING: created (else: forgotten) */
#define MREC_F_ASKED 0x01    /* PART_FAILOVER_AT: the source was asked for
                              * its high watermark at the stop and answered */
/* TOPIC_REALIGN kinds (mstate.h, "Realigning"):
 *   RESET    the destination topic found after the topic was added again is
 *            not the one its partitions' write history was recorded in
 *            (str: that one's id): the history is dropped;
 *   DELETE   the operator's realign (str: the destination topic id recorded,
 *            may be null): every partition PREPARING with no write history,
 *            the destination topic to be deleted first;
 *   DELETED  mirrord deleted it (str: the id deleted, may be null);
 *   PENDING  snapshots only: a realign whose deletion is still to come
 *            (str as DELETE). */
#define MREC_REALIGN_RESET 0
#define MREC_REALIGN_DELETE 1
#define MREC_REALIGN_DELETED 2
#define MREC_REALIGN_PENDING 3

#define MREC_MAX_NAME 249    /* mirror and topic names */
#define MREC_MAX_CONFIGS 1024
#define MREC_MAX_MEMBERS 1024   /* cluster-members: instances in the group */
#define MREC_MAX_ID 1024        /* instance/member ids, addresses */
#define MREC_MAX_ANCHORS 4096   /* part-anchors: anchors in one record */
#define MREC_MAX_NOTE 1024      /* part-failover-note: bytes of its text */

/* One translation anchor of a part-anchors record. */
struct mrec_anchor {
	int64_t src, dst;
};

struct mrec_config {
	struct kstr name;
	struct kstr value;   /* may be null */
};

/* One member of a cluster-members record (doc/ha.md): the instance
 * id names it in part-owner records; the rest is what the group said. */
struct mrec_member {
	struct kstr instance_id;   /* 1..MREC_MAX_ID bytes */
	struct kstr member_id;     /* 0..MREC_MAX_ID bytes, not null */
	int32_t local_broker_id;   /* -1 none */
	struct kstr admin_addr;    /* "host:port", may be null */
	struct kstr http_addr;     /* may be null or empty */
};

/* One decoded record.  Strings point into the payload. */
struct mrec {
	uint16_t type;
	struct kstr mirror, topic, str;   /* str: also N's note */
	int32_t partition;
	int8_t kind, state, flags;
	uint16_t from_mask;
	int32_t count, retry, epoch;
	int64_t off, off2, off3;
	int32_t nconfigs;
	struct mrec_config *configs;  /* encode: caller's; decode: see below */
	int32_t generation;
	/* Members (L): encode takes members[0..nmembers); decode checks them
	 * and leaves members NULL, members_raw the array's bytes in the
	 * payload: read them with mrec_members(). */
	int32_t nmembers;
	const struct mrec_member *members;
	struct kbytes members_raw;
	/* Anchors (A): encode takes anchors[0..nanchors), ascending and not
	 * negative; decode checks them and leaves anchors NULL, anchors_raw
	 * the list's bytes in the payload: read them with mrec_anchors(). */
	int32_t nanchors;
	const struct mrec_anchor *anchors;
	struct kbytes anchors_raw;
};

/* "part-state"; NULL for an unknown type. */
const char *mrec_type_name(uint16_t type);

/*
 * Encodes r (fields named by its type's spec) as a payload into w, which
 * should be capped at the log's max record size.  Returns 0, or -1 with the
 * reason in err (unknown type, a string too long, w over its cap).
 */
int mrec_encode(const struct mrec *r, struct kw *w, char *err, size_t errlen);

/*
 * Decodes payload p[0..len) of the given type into r.  Configs are written
 * to cfg_buf (room for cfg_max entries); a record with more fails.  Returns
 * 0, or -1 with the reason and byte offset in err.
 */
int mrec_decode(uint16_t type, const uint8_t *p, size_t len, struct mrec *r,
    struct mrec_config *cfg_buf, int32_t cfg_max, char *err, size_t errlen);

/*
 * The members of a decoded cluster-members record into out (room for
 * r->nmembers entries; strings point into the payload).  0, or -1 with
 * err (it was checked by mrec_decode(), so only on misuse).
 */
int mrec_members(const struct mrec *r, struct mrec_member *out, char *err,
    size_t errlen);

/*
 * The anchors of a decoded part-anchors record into out (room for
 * r->nanchors entries).  0, or -1 with err (mrec_decode() checked them, so
 * only on misuse).
 */
int mrec_anchors(const struct mrec *r, struct mrec_anchor *out, char *err,
    size_t errlen);

#endif
