/*
 * mlog_seed: writes a metadata log the way mirrord wrote it before secrets
 * were encrypted at rest: the real mlog and mstate code with no sealer, so
 * config values go to the files exactly as given.  test_secrets.py starts
 * mirrord on such a directory to check the start-up migration.
 *
 *   mlog_seed DIR MIRROR name=value... [--compact] [MIRROR name=value...]...
 *
 * Each MIRROR word starts a CreateMirror with the name=value pairs after it;
 * --compact writes a snapshot at that point (so earlier mirrors are in a
 * snapshot, later ones in the segment after it).
 */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mlog.h"
#include "mstate.h"

static int create(struct mstate *st, const char *name, char **pairs, int n)
{
	struct mcfg *c = calloc((size_t)n + 1, sizeof(*c));
	char msg[1024];
	int code;

	if (c == NULL)
		return -1;
	for (int i = 0; i < n; i++) {
		char *eq = strchr(pairs[i], '=');

		if (eq == NULL) {
			fprintf(stderr, "mlog_seed: '%s' is not name=value\n",
			    pairs[i]);
			free(c);
			return -1;
		}
		*eq = '\0';
		c[i].name = pairs[i];
		c[i].value = eq + 1;
	}
	code = mstate_create_mirror(st, name, c, (size_t)n, msg, sizeof(msg));
	free(c);
	if (code != 0) {
		fprintf(stderr, "mlog_seed: mirror %s: %s\n", name, msg);
		return -1;
	}
	return 0;
}

int main(int argc, char **argv)
{
	struct mlog_opts o;
	struct mlog *ml;
	struct mstate *st;
	char err[1024];
	int i, rc = 1;

	if (argc < 3) {
		fprintf(stderr, "usage: mlog_seed DIR MIRROR name=value... "
		    "[--compact] [MIRROR name=value...]...\n");
		return 2;
	}
	mlog_opts_init(&o);
	o.dir = argv[1];
	if ((ml = mlog_file_new(&o, err, sizeof(err))) == NULL) {
		fprintf(stderr, "mlog_seed: %s\n", err);
		return 1;
	}
	st = mstate_new();
	if (st == NULL || mstate_open(st, ml, err, sizeof(err)) != 0) {
		fprintf(stderr, "mlog_seed: %s\n", st ? err : "out of memory");
		goto out;
	}
	for (i = 2; i < argc;) {
		int j;

		if (strcmp(argv[i], "--compact") == 0) {
			if (mstate_compact(st, err, sizeof(err)) != 0) {
				fprintf(stderr, "mlog_seed: %s\n", err);
				goto out;
			}
			i++;
			continue;
		}
		for (j = i + 1; j < argc && strchr(argv[j], '=') != NULL; j++)
			;
		if (create(st, argv[i], argv + i + 1, j - i - 1) != 0)
			goto out;
		i = j;
	}
	rc = 0;
out:
	mstate_free(st);
	mlog_free(ml);
	return rc;
}
