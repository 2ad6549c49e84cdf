/*
 * assign.h: which instance copies which mirrored partition (multi-instance
 * mode, doc/ha.md "Partition ownership").
 *
 * A pure function: the metadata writer feeds it the group's members, the
 * partitions that are not STOPPED with their destination leader and their
 * current owner, and writes a part-owner record for every partition whose
 * owner it changes.  The rule, partition by partition:
 *
 *   1. locality: a partition whose destination leader is some member's
 *      local broker goes to that member (two members claiming one broker:
 *      the lower instance id);
 *   2. stability: otherwise it keeps its current owner if that owner is
 *      still a member;
 *   3. otherwise the least-loaded member (partitions given so far, steps 1
 *      and 2 counted first), ties broken by instance id.
 *
 * The partitions of step 3 are taken in key order (mirror, topic,
 * partition), so the output depends only on the inputs' contents, never
 * on their order.  With one member everything goes to it; with none,
 * nothing goes anywhere.  O(P log P + P * M) for P partitions, M members.
 */
#ifndef MIRRORD_ASSIGN_H
#define MIRRORD_ASSIGN_H

#include <stddef.h>
#include <stdint.h>

struct assign_member {
	const char *instance_id;   /* non-empty, unique */
	int32_t local_broker_id;   /* -1 none */
};

struct assign_part {
	const char *mirror, *topic;  /* with partition: the key, unique */
	int32_t partition;
	int32_t leader;              /* destination leader broker id, -1 unknown */
	const char *current;         /* owner now; NULL or "" = nobody */
};

/*
 * Fills owners[i] (by parts' index) with the instance id of the member
 * that copies parts[i] (a pointer into members[]), or NULL when there are
 * no members.  Returns 0, or -1 with err (an empty or repeated instance
 * id, out of memory).
 */
int assign_run(const struct assign_member *members, size_t nmembers,
    const struct assign_part *parts, size_t nparts, const char **owners,
    char *err, size_t errlen);

#endif
