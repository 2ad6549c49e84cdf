/*
 * pipeline.h: the data plane, as the daemon (daemon/mirrord.c) and the
 * admin server (daemon/admin.c) call it.
 *
 * The pipeline follows the mirror state model (lib/mstate) through its
 * change hooks: every partition in PREPARING or MIRRORING is copied from
 * its source leader to its destination leader batch by batch; PAUSING,
 * STOPPING and deleted mirrors are wound down and acknowledged through
 * mstate's setters (PAUSING -> PAUSED, STOPPING -> STOPPED with the last
 * mirrored offset and epoch).  Everything runs on the daemon's event loop.
 */
#ifndef MIRRORD_PIPELINE_H
#define MIRRORD_PIPELINE_H

#include <stdint.h>
#include <stddef.h>

struct event_base;
struct mstate;
struct mpart;
struct config;
struct metrics_std;
struct pipeline;

/* Creates the data plane; connects nothing yet.  cfg is borrowed (see
 * pipeline_set_config).  NULL with the reason in err. */
struct pipeline *pipeline_new(struct event_base *base, struct mstate *st,
    const struct config *cfg, struct metrics_std *ms, char *err,
    size_t errlen);
/* Starts work for every partition the replayed state says to mirror. */
void pipeline_start(struct pipeline *pl);
/* A reloaded configuration (only reloadable keys differ). */
void pipeline_set_config(struct pipeline *pl, const struct config *cfg);
/*
 * Graceful stop: no new fetches; in-flight produces finish; then done(arg)
 * is called once from the loop.  The daemon bounds the wait with
 * shutdown.timeout_ms.
 */
void pipeline_shutdown(struct pipeline *pl, void (*done)(void *arg),
    void *arg);
void pipeline_free(struct pipeline *pl);

/* For /readyz: 1 when the destination cluster answered recently, else 0
 * with the reason in why. */
int pipeline_destination_ready(struct pipeline *pl, char *why, size_t whylen);
/* Live numbers for DescribeMirrors: the source high watermark and the
 * destination log end offset of the partition, -1 when unknown. */
void pipeline_partition_offsets(struct pipeline *pl, const struct mpart *p,
    int64_t *source_hwm, int64_t *dest_end);

#endif
