/*
 * metastore.c: the daemon's choice of metadata log backend and the
 * file-to-topic migration command (see metastore.h).
 */
#include "config.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#include "daemonconf.h"
#include "log.h"
#include "metastore.h"
#include "mlog.h"
#include "mlog_kafka.h"
#include "mstate.h"
#include "secrets.h"

static struct mlog *file_new(const struct config *cfg, const char *dir,
    char *err, size_t errlen)
{
	struct mlog_opts mo;

	mlog_opts_init(&mo);
	mo.dir = dir;
	if (cfg->storage_snapshot_every_records > 0)
		mo.compact_records = (uint64_t)cfg->storage_snapshot_every_records;
	mo.no_fsync = !cfg->storage_fsync;
	return mlog_file_new(&mo, err, errlen);
}

static struct mlog *kafka_new(const struct config *cfg, int require_empty,
    char *err, size_t errlen)
{
	struct mlog_opts mo;
	struct mlog_kafka_opts ko;
	char **values = NULL, e2[512];
	struct mlog *ml;

	mlog_opts_init(&mo);
	if (cfg->storage_snapshot_every_records > 0)
		mo.compact_records = (uint64_t)cfg->storage_snapshot_every_records;
	mo.compact_bytes = 0;
	if (secrets_resolve_map("destination.client", &cfg->destination_client,
	    &values, e2, sizeof(e2)) < 0) {
		snprintf(err, errlen, "%s", e2);
		return NULL;
	}
	mlog_kafka_opts_init(&ko);
	ko.bootstrap = cfg->destination_bootstrap_servers;
	ko.prop_names = (const char *const *)cfg->destination_client.names;
	ko.prop_values = (const char *const *)values;
	ko.nprops = cfg->destination_client.n;
	ko.topic = cfg->storage_kafka_topic;
	ko.replication_factor = (int)cfg->storage_kafka_replication_factor;
	ko.min_insync_replicas = (int)cfg->storage_kafka_min_insync_replicas;
	ko.timeout_ms = (int)cfg->storage_kafka_timeout_ms;
	ko.require_empty = require_empty;
	/* Several instances: open as a follower; the group's leader is
	 * promoted to writer (daemon/cluster/cluster.c). */
	ko.follower = !require_empty && cfg->cluster_enabled;
	ml = mlog_kafka_new(&mo, &ko, err, errlen);
	secrets_values_free(values, cfg->destination_client.n);
	return ml;
}

struct mlog *metastore_new(const struct config *cfg, char *err, size_t errlen)
{
	if (cfg->storage_backend == CONFIG_STORAGE_KAFKA) {
		/* The data plane keeps its own small files there. */
		if (mkdir(cfg->storage_data_dir, 0700) != 0 && errno != EEXIST) {
			snprintf(err, errlen, "%s: cannot create the data "
			    "directory: %s", cfg->storage_data_dir,
			    strerror(errno));
			return NULL;
		}
		return kafka_new(cfg, 0, err, errlen);
	}
	return file_new(cfg, cfg->storage_data_dir, err, errlen);
}

void metastore_describe(const struct config *cfg, char *buf, size_t len)
{
	if (cfg->storage_backend == CONFIG_STORAGE_KAFKA)
		snprintf(buf, len, "topic %s", cfg->storage_kafka_topic);
	else
		snprintf(buf, len, "%s", cfg->storage_data_dir);
}

/* The migration's target must be empty: any record refuses the open. */
static int refuse_rec(void *arg, const struct mlog_rec *rec, char *err,
    size_t errlen)
{
	(void)arg;
	snprintf(err, errlen, "a record of type 0x%04x appeared at offset %llu "
	    "while migrating; refusing to write over it", rec->type,
	    (unsigned long long)rec->off);
	return -1;
}

int metastore_migrate(const char *config_path, const char *from_dir)
{
	struct config_errors errs;
	struct config *cfg = NULL;
	struct mlog *fml = NULL, *kml = NULL;
	struct mstate *st = NULL;
	struct mlog_stats s;
	struct stat sb;
	char err[1024];
	int rc = 1;

	config_errors_init(&errs);
	if (config_load(config_path, &cfg, &errs) < 0) {
		config_errors_print(&errs, stderr);
		fprintf(stderr, "%s: configuration is not valid\n", config_path);
		config_errors_fini(&errs);
		return 1;
	}
	config_errors_fini(&errs);
	if (stat(from_dir, &sb) != 0 || !S_ISDIR(sb.st_mode)) {
		fprintf(stderr, "mirrord: --from-dir %s: not a directory\n",
		    from_dir);
		goto out;
	}
	fml = file_new(cfg, from_dir, err, sizeof(err));
	st = mstate_new();
	if (fml == NULL || st == NULL) {
		fprintf(stderr, "mirrord: metadata log %s: %s\n", from_dir,
		    fml == NULL ? err : "out of memory");
		goto out;
	}
	/* No sealer: the records are copied as they are, sealed or not. */
	if (mlog_open(fml, mstate_apply_rec, st, err, sizeof(err)) != 0) {
		fprintf(stderr, "mirrord: metadata log %s: %s\n", from_dir, err);
		goto out;
	}
	mlog_stats(fml, &s);
	if (s.records == 0) {
		fprintf(stderr, "mirrord: %s holds no metadata log; nothing to "
		    "migrate\n", from_dir);
		goto out;
	}
	kml = kafka_new(cfg, 1, err, sizeof(err));
	if (kml == NULL || mlog_open(kml, refuse_rec, NULL, err,
	    sizeof(err)) != 0) {
		fprintf(stderr, "mirrord: migration to topic %s: %s\n",
		    cfg->storage_kafka_topic, err);
		goto out;
	}
	if (mlog_compact(kml, mstate_dump_records, st, err, sizeof(err)) != 0) {
		fprintf(stderr, "mirrord: migration to topic %s: %s\n",
		    cfg->storage_kafka_topic, err);
		goto out;
	}
	mlog_stats(kml, &s);
	printf("migrated the metadata log in %s (cluster id %s, %zu mirror%s) "
	    "into topic %s as a snapshot\n", from_dir, mstate_cluster_id(st),
	    mstate_mirror_count(st), mstate_mirror_count(st) == 1 ? "" : "s",
	    cfg->storage_kafka_topic);
	if (cfg->storage_backend != CONFIG_STORAGE_KAFKA)
		printf("set storage.backend: kafka in %s to use it\n", config_path);
	rc = 0;
out:
	mlog_free(kml);
	mstate_free(st);
	mlog_free(fml);
	config_free(cfg);
	return rc;
}
