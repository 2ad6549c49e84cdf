/*
 * xlate_dump: prints the offset translation map of every partition of one
 * mirror from a metadata log, for test/tools/torture.py's checker: a log
 * directory (a copy: opening takes the lock and may repair a torn tail), or
 * with -k the replicated log's topic on the destination cluster, read as a
 * follower reads it (nothing claimed or appended; the instances may be
 * stopped or running).
 *
 *   xlate_dump DIR MIRROR
 *   xlate_dump -k BOOTSTRAP TOPIC MIRROR
 *
 * One line per partition, "P <topic> <partition> <state>", followed by one
 * line per anchor, "A <topic> <partition> <src> <dst>", in map order, and
 * one per entry of its source epoch history, "E <topic> <partition> <epoch>
 * <destination offset where it starts>", oldest first.
 */
#include "config.h"

#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "log.h"
#include "mlog.h"
#include "mlog_kafka.h"
#include "mstate.h"
#include "xlate.h"

int main(int argc, char **argv)
{
	struct mlog_opts o;
	struct mlog_kafka_opts ko;
	struct mlog *ml;
	struct mstate *st = NULL;
	struct mirror *m;
	const char *mirror;
	char err[1024];
	int rc = 1;

	mlog_opts_init(&o);
	if (argc == 5 && strcmp(argv[1], "-k") == 0) {
		/* The replay's own log lines (warnings included) to stderr. */
		log_init("xlate_dump", LOG_LVL_WARN, 0);
		mlog_kafka_opts_init(&ko);
		ko.bootstrap = argv[2];
		ko.topic = argv[3];
		ko.timeout_ms = 30000;
		ko.follower = 1;
		mirror = argv[4];
		ml = mlog_kafka_new(&o, &ko, err, sizeof(err));
	} else if (argc == 3 && argv[1][0] != '-') {
		o.dir = argv[1];
		mirror = argv[2];
		ml = mlog_file_new(&o, err, sizeof(err));
	} else {
		fprintf(stderr, "usage: xlate_dump DIR MIRROR\n"
		    "       xlate_dump -k BOOTSTRAP TOPIC MIRROR\n");
		return 2;
	}
	if (ml == NULL) {
		fprintf(stderr, "xlate_dump: %s\n", err);
		return 1;
	}
	st = mstate_new();
	if (st == NULL || mstate_open(st, ml, err, sizeof(err)) != 0) {
		fprintf(stderr, "xlate_dump: %s\n", st ? err : "out of memory");
		goto out;
	}
	if ((m = mstate_mirror_find(st, mirror)) == NULL) {
		fprintf(stderr, "xlate_dump: no mirror %s\n", mirror);
		goto out;
	}
	for (size_t t = 0; t < m->ntopics; t++) {
		const struct mtopic *mt = m->topics[t];

		for (int32_t p = 0; p < mt->npart; p++) {
			const struct mpart *mp = mt->parts[p];

			printf("P %s %" PRId32 " %s\n", mt->name, p,
			    mpart_state_name(mp->state));
			for (size_t a = 0, k; a < mpart_nanchors(mp); a += k) {
				struct xlate_anchor v[256];

				k = xlate_read(mp->map, a, v, 256);
				for (size_t i = 0; i < k; i++)
					printf("A %s %" PRId32 " %" PRId64 " %" PRId64
					    "\n", mt->name, p, v[i].src, v[i].dst);
			}
			for (size_t e = 0; e < mp->nepochs; e++)
				printf("E %s %" PRId32 " %" PRId32 " %" PRId64 "\n",
				    mt->name, p, mp->epochs[e].epoch,
				    mp->epochs[e].start_offset);
		}
	}
	rc = fflush(stdout) == 0 ? 0 : 1;
out:
	mstate_free(st);
	mlog_free(ml);
	return rc;
}
