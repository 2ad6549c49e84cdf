/*
 * xlate_dump: prints the offset translation map of every partition of one
 * mirror from a metadata log directory (a copy: opening takes the lock and
 * may repair a torn tail), for test/tools/torture.py's checker.
 *
 *   xlate_dump DIR MIRROR
 *
 * One line per partition, "P <topic> <partition> <state>", followed by one
 * line per anchor, "A <topic> <partition> <src> <dst>", in map order.
 */
#include "config.h"

#include <inttypes.h>
#include <stdio.h>

#include "mlog.h"
#include "mstate.h"

int main(int argc, char **argv)
{
	struct mlog_opts o;
	struct mlog *ml;
	struct mstate *st = NULL;
	struct mirror *m;
	char err[1024];
	int rc = 1;

	if (argc != 3) {
		fprintf(stderr, "usage: xlate_dump DIR MIRROR\n");
		return 2;
	}
	mlog_opts_init(&o);
	o.dir = argv[1];
	if ((ml = mlog_file_new(&o, err, sizeof(err))) == NULL) {
		fprintf(stderr, "xlate_dump: %s\n", err);
		return 1;
	}
	st = mstate_new();
	if (st == NULL || mstate_open(st, ml, err, sizeof(err)) != 0) {
		fprintf(stderr, "xlate_dump: %s\n", st ? err : "out of memory");
		goto out;
	}
	if ((m = mstate_mirror_find(st, argv[2])) == NULL) {
		fprintf(stderr, "xlate_dump: no mirror %s\n", argv[2]);
		goto out;
	}
	for (size_t t = 0; t < m->ntopics; t++) {
		const struct mtopic *mt = m->topics[t];

		for (int32_t p = 0; p < mt->npart; p++) {
			const struct mpart *mp = mt->parts[p];

			printf("P %s %" PRId32 " %s\n", mt->name, p,
			    mpart_state_name(mp->state));
			for (size_t a = 0; a < mp->nanchors; a++)
				printf("A %s %" PRId32 " %" PRId64 " %" PRId64 "\n",
				    mt->name, p, mp->anchors[a].src,
				    mp->anchors[a].dst);
		}
	}
	rc = fflush(stdout) == 0 ? 0 : 1;
out:
	mstate_free(st);
	mlog_free(ml);
	return rc;
}
