/*
 * metastore.h: which metadata log the daemon opens (storage.backend: the
 * file backend in storage.data_dir, or the replicated one in a topic of the
 * destination cluster, lib/mlog_kafka) and `mirrord --migrate-metadata
 * --from-dir DIR`, which copies a file log into the replicated one.
 */
#ifndef MIRRORD_METASTORE_H
#define MIRRORD_METASTORE_H

#include <stddef.h>

struct config;
struct mlog;

/* The metadata log cfg names, not yet opened.  NULL with err. */
struct mlog *metastore_new(const struct config *cfg, char *err, size_t errlen);
/* "storage.data_dir /var/lib/mirrord" or "topic __mirrord_metadata". */
void metastore_describe(const struct config *cfg, char *buf, size_t len);

/*
 * Reads the file log in from_dir (taking its lock: the daemon that owns it
 * must be stopped) and writes its state as a snapshot into the topic of
 * storage.kafka.*, which must not hold a log yet.  Returns the exit status
 * (0 done, 1 failed) after printing what happened.
 */
int metastore_migrate(const char *config_path, const char *from_dir);

#endif
