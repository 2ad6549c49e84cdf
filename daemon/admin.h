/*
 * admin.h: mirrord's admin RPCs (mirror-protocol.md) on top of the
 * Kafka-protocol listener (adminsrv): ApiVersions, Metadata, and the eight
 * mirror RPCs.  Validation and durable state changes are mstate's; live
 * offsets come from the pipeline; source lookups from srclookup.  This
 * module decodes, calls them, and encodes the answers.
 */
#ifndef MIRRORD_ADMIN_H
#define MIRRORD_ADMIN_H

#include <stddef.h>

struct event_base;
struct mstate;
struct config;
struct pipeline;
struct metrics_std;
struct admin;

/* Binds server.listen; NULL with the reason (naming the address) in err.
 * cfg is borrowed; admin_set_config() replaces it on reload. */
struct admin *admin_new(struct event_base *base, struct mstate *st,
    const struct config *cfg, struct pipeline *pl, struct metrics_std *ms,
    char *err, size_t errlen);
void admin_set_config(struct admin *adm, const struct config *cfg);
void admin_stop_accepting(struct admin *adm);
int admin_port(const struct admin *adm);
void admin_free(struct admin *adm);

#endif
