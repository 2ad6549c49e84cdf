/*
 * pipeline_none.c: the data plane's interface with no data plane behind it.
 *
 * Linked only until daemon/pipeline.c lands (see daemon/pipeline.am): with
 * it mirrord serves the whole control plane (every admin RPC, the metadata
 * log, metrics) but copies nothing, reports offsets as unknown, leaves
 * partitions in the state the admin RPCs put them in, and /readyz says the
 * destination is not being watched.  It is not presented as the data plane.
 */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>

#include "log.h"
#include "pipeline.h"

struct pipeline {
	int unused;
};

struct pipeline *pipeline_new(struct event_base *base, struct mstate *st,
    const struct config *cfg, struct metrics_std *ms, char *err, size_t errlen)
{
	struct pipeline *pl = calloc(1, sizeof(*pl));

	(void)base;
	(void)st;
	(void)cfg;
	(void)ms;
	if (pl == NULL)
		snprintf(err, errlen, "out of memory");
	return pl;
}

void pipeline_start(struct pipeline *pl)
{
	(void)pl;
	log_warnx("this build has no data plane: mirrors are managed but no "
	    "data is copied");
}

void pipeline_set_config(struct pipeline *pl, const struct config *cfg)
{
	(void)pl;
	(void)cfg;
}

void pipeline_shutdown(struct pipeline *pl, void (*done)(void *arg), void *arg)
{
	(void)pl;
	done(arg);
}

void pipeline_free(struct pipeline *pl)
{
	free(pl);
}

int pipeline_destination_ready(struct pipeline *pl, char *why, size_t whylen)
{
	(void)pl;
	snprintf(why, whylen, "this build has no data plane");
	return 0;
}

void pipeline_partition_offsets(struct pipeline *pl, const struct mpart *p,
    int64_t *source_hwm, int64_t *dest_end)
{
	(void)pl;
	(void)p;
	*source_hwm = -1;
	*dest_end = -1;
}
