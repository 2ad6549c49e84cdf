/*
 * mirrord: the daemon.  main() loads the configuration, opens the metadata
 * log and rebuilds the mirror state from it, binds the admin listener and
 * the metrics endpoint, starts the data plane, tells systemd it is ready,
 * and runs the event loop until SIGTERM/SIGINT.
 *
 * Signals (handled on the loop through libevent, never in signal context):
 *   SIGTERM, SIGINT  stop accepting admin connections, let in-flight
 *                    produces finish (bounded by shutdown.timeout_ms),
 *                    snapshot the metadata log, exit 0
 *   SIGHUP           reload: build a new config from the file and swap it
 *                    in only if it validates; keys that need a restart are
 *                    reported and keep their running values
 */
#include "config.h"

#include <getopt.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <event2/event.h>

#include "admin.h"
#include "adminsrv.h"
#include "cluster.h"
#include "daemonconf.h"
#include "httpd.h"
#include "log.h"
#include "metrics.h"
#include "metastore.h"
#include "metrics_std.h"
#include "mirrorstatus.h"
#include "mlog.h"
#include "mstate.h"
#include "pipeline.h"
#include "sdnotify.h"
#include "secrets.h"
#include "usercmd.h"

#define DEFAULT_CONFIG MIRRORD_SYSCONFDIR "/mirrord/mirrord.yaml"

/* Exit status asking the service manager for a restart (EX_TEMPFAIL):
 * the replicated metadata log became unusable in a way a fresh start
 * resolves. */
#define MIRRORD_EXIT_RESTART 75

struct daemon {
	struct event_base *base;
	const char *config_path;
	struct config *cfg;
	struct mlog *ml;
	struct mstate *st;
	struct metrics *reg;
	struct metrics_std ms;
	struct httpd *http;
	struct admin *adm;
	struct pipeline *pl;
	struct cluster *cl;      /* cluster.enabled, else NULL */
	struct event *ev_term, *ev_int, *ev_hup, *ev_watchdog, *ev_housekeep;
	struct event *ev_deadline;
	struct mlog_stats mlog_seen; /* as of the last sync, for the metrics */
	struct mstate_async_stats as_seen; /* likewise, of mstate's writes */
	bool log_loaded;
	bool listening;
	int stopping;
	bool plane_stopped, plane_drained; /* after the metadata log broke */
	int exit_code;
};

static void usage(FILE *f)
{
	fprintf(f,
"usage: mirrord [-f] [-c FILE] [-l LEVEL]\n"
"       mirrord --check-config FILE\n"
"       mirrord --add-user NAME [--mechanism MECH] [--iterations N]\n"
"               [--credentials-file FILE]   (password on stdin or prompted)\n"
"       mirrord --delete-user NAME [--mechanism MECH] [--credentials-file FILE]\n"
"       mirrord --list-users [--credentials-file FILE]\n"
"       mirrord [-c FILE] --migrate-metadata --from-dir DIR\n"
"       mirrord -V | -h\n"
"\n"
"  -c, --config FILE        configuration file (default %s)\n"
"      --check-config FILE  validate FILE, print the effective configuration,\n"
"                           and exit 0 if it is valid, 1 if not\n"
"      --add-user NAME      store SCRAM keys (never the password) of NAME in\n"
"                           the admin listener's credentials file\n"
"      --delete-user NAME   remove NAME's credentials (of --mechanism, or all)\n"
"      --list-users         list users, mechanisms and iteration counts\n"
"      --mechanism MECH     SCRAM-SHA-512 (default) or SCRAM-SHA-256\n"
"      --iterations N       PBKDF2 iterations, 4096..16384 (default 4096)\n"
"      --credentials-file FILE  the file (default: server.sasl.credentials_file\n"
"                           of the configuration file)\n"
"      --migrate-metadata   copy the file metadata log in --from-dir DIR (its\n"
"                           daemon stopped) into the topic storage.kafka.topic\n"
"                           of the destination cluster, which must hold no log\n"
"  -f, --foreground         accepted for compatibility; mirrord never forks\n"
"                           (systemd supervises it with Type=notify)\n"
"  -l, --log-level LEVEL    error, warn, info or debug (overrides log.level)\n"
"  -V, --version            print the version and exit\n"
"  -h, --help               this text\n", DEFAULT_CONFIG);
}

/* ---- configuration -------------------------------------------------- */

static struct config *load_config(const char *path)
{
	struct config_errors errs;
	struct config *cfg = NULL;

	config_errors_init(&errs);
	if (config_load(path, &cfg, &errs) < 0) {
		for (size_t i = 0; i < errs.n; i++)
			log_errorx("%s", errs.v[i].text);
		if (errs.dropped > 0)
			log_errorx("%s: %zu more errors not shown", path, errs.dropped);
		cfg = NULL;
	}
	config_errors_fini(&errs);
	return cfg;
}

static int check_config(const char *path)
{
	struct config_errors errs;
	struct config *cfg = NULL;

	config_errors_init(&errs);
	if (config_load(path, &cfg, &errs) < 0) {
		config_errors_print(&errs, stderr);
		fprintf(stderr, "%s: configuration is not valid (%zu error%s)\n",
		    path, errs.n + errs.dropped, errs.n + errs.dropped == 1 ? "" : "s");
		config_errors_fini(&errs);
		return 1;
	}
	config_errors_fini(&errs);
	config_dump(cfg, stdout);
	fprintf(stderr, "%s: configuration is valid\n", path);
	config_free(cfg);
	return 0;
}

static void apply_log_settings(const struct config *cfg, int level_override)
{
	int flags = 0;

	if (cfg->log_target == CONFIG_LOG_JOURNAL)
		flags = LOG_F_JOURNAL;
	else if (cfg->log_target == CONFIG_LOG_AUTO)
		flags = LOG_F_AUTO;
	log_init("mirrord", level_override >= 0 ? level_override : cfg->log_level,
	    flags);
}

static int level_override = -1;

static void reload(struct daemon *d)
{
	struct config *nw;
	const char *keys[32];
	size_t nkeys;

	sdnotify_reloading();
	log_info("SIGHUP: reloading %s", d->config_path);
	nw = load_config(d->config_path);
	if (nw == NULL) {
		log_warnx("reload failed: %s has errors (listed above); the running "
		    "configuration stays in force", d->config_path);
		metrics_counter_inc(metrics_series(MSTD(&d->ms, CONFIG_RELOADS), 1,
		    (const char *[]){ "failure" }));
		sdnotify_ready();
		return;
	}
	nkeys = config_reload_diff(d->cfg, nw, keys, ARRAY_SIZE(keys));
	for (size_t i = 0; i < MIN(nkeys, ARRAY_SIZE(keys)); i++)
		log_warnx("reload: %s changed but needs a restart; keeping the "
		    "running value", keys[i]);
	if (config_reload_keep(nw, d->cfg) < 0) {
		log_warnx("reload: out of memory; keeping the running configuration");
		config_free(nw);
		sdnotify_ready();
		return;
	}
	apply_log_settings(nw, level_override);
	metrics_std_set_per_partition(&d->ms, nw->metrics_per_partition);
	admin_set_config(d->adm, nw);
	pipeline_set_config(d->pl, nw);
	secrets_set_config(nw);
	config_free(d->cfg);
	d->cfg = nw;
	metrics_counter_inc(metrics_series(MSTD(&d->ms, CONFIG_RELOADS), 1,
	    (const char *[]){ "success" }));
	log_info("reload complete (%zu key%s need a restart)", nkeys,
	    nkeys == 1 ? "" : "s");
	sdnotify_ready();
}

/* ---- shutdown ------------------------------------------------------ */

static void left_group(void *arg)
{
	struct daemon *d = arg;

	log_info("shutdown: left the group");
	event_base_loopexit(d->base, NULL);
}

static void finish(struct daemon *d)
{
	char err[512];

	if (d->stopping == 2)
		return;
	d->stopping = 2;
	if (mstate_compact(d->st, err, sizeof(err)) < 0)
		log_warnx("shutdown: metadata snapshot failed: %s (the log itself "
		    "is intact; the next start replays it)", err);
	if (d->cl != NULL) {
		/* LeaveGroup: the others rebalance now, not after the
		 * session timeout. */
		cluster_leave(d->cl, left_group, d);
		return;
	}
	event_base_loopexit(d->base, NULL);
}

static void pipeline_drained(void *arg)
{
	struct daemon *d = arg;

	log_info("shutdown: data plane drained");
	finish(d);
}

static void deadline_cb(evutil_socket_t fd, short what, void *arg)
{
	struct daemon *d = arg;

	(void)fd;
	(void)what;
	log_warnx("shutdown: in-flight requests did not finish within "
	    "shutdown.timeout_ms (%lld ms); stopping anyway (the destination's "
	    "log end is re-read at the next start, so nothing is lost or "
	    "duplicated)", (long long)d->cfg->shutdown_timeout_ms);
	finish(d);
}

/* The data plane of an instance whose replicated metadata log broke
 * (fenced by a newer writer) has drained. */
static void plane_stopped_cb(void *arg)
{
	struct daemon *d = arg;

	d->plane_drained = true;
	log_warnx("data plane stopped: the metadata log is read-only");
	if (d->stopping)
		finish(d);
}

static void begin_shutdown(struct daemon *d, const char *signame)
{
	struct timeval tv;

	if (d->stopping) {
		log_info("%s: already stopping", signame);
		return;
	}
	d->stopping = 1;
	log_info("%s: shutting down", signame);
	sdnotify_stopping();
	admin_stop_accepting(d->adm);
	d->listening = false;
	tv.tv_sec = d->cfg->shutdown_timeout_ms / 1000;
	tv.tv_usec = (d->cfg->shutdown_timeout_ms % 1000) * 1000;
	d->ev_deadline = evtimer_new(d->base, deadline_cb, d);
	evtimer_add(d->ev_deadline, &tv);
	if (!d->plane_stopped)
		pipeline_shutdown(d->pl, pipeline_drained, d);
	else if (d->plane_drained)
		finish(d);
}

static void signal_cb(evutil_socket_t sig, short what, void *arg)
{
	struct daemon *d = arg;

	(void)what;
	switch (sig) {
	case SIGHUP:
		if (!d->stopping)
			reload(d);
		break;
	case SIGTERM:
		begin_shutdown(d, "SIGTERM");
		break;
	case SIGINT:
		begin_shutdown(d, "SIGINT");
		break;
	}
}

static void watchdog_cb(evutil_socket_t fd, short what, void *arg)
{
	(void)fd;
	(void)what;
	(void)arg;
	/* The loop is turning: that is what the watchdog wants to know. */
	sdnotify_watchdog();
}

static void housekeep_cb(evutil_socket_t fd, short what, void *arg)
{
	struct daemon *d = arg;
	struct mlog_stats s;

	(void)fd;
	(void)what;
	mstate_maybe_compact(d->st);
	mlog_stats(d->ml, &s);
	if (s.broken && d->cfg->storage_backend == CONFIG_STORAGE_KAFKA &&
	    s.fenced && !d->plane_stopped && !d->stopping) {
		/* Another instance writes the metadata now: this one must not
		 * go on copying as if it still owned the partitions, nor take
		 * the log back by restarting. */
		log_errorx("metadata log is read-only (fenced by a newer "
		    "writer): stopping the data plane of this instance; restart "
		    "it to follow the metadata log");
		d->plane_stopped = true;
		pipeline_shutdown(d->pl, plane_stopped_cb, d);
	} else if (s.broken && d->cfg->storage_backend == CONFIG_STORAGE_KAFKA &&
	    !s.fenced && !d->stopping) {
		/* A write whose outcome is unknown (or a follower behind the
		 * log start that cannot rebuild): only a fresh start knows
		 * what the log holds.  Shut down as on SIGTERM (the copies in
		 * flight finish, the group is left, so another instance can
		 * write the metadata meanwhile) and exit EX_TEMPFAIL: the
		 * service manager starts it again (Restart=on-failure). */
		log_errorx("metadata log is read-only (a write's outcome is "
		    "unknown, see above): shutting down to start again, which "
		    "re-reads the log (exit status %d)", MIRRORD_EXIT_RESTART);
		d->exit_code = MIRRORD_EXIT_RESTART;
		begin_shutdown(d, "metadata log unusable");
	}
	if (s.snapshot_wall_ms >= 0)
		metrics_gauge_set(metrics_series(MSTD(&d->ms,
		    METADATA_LOG_SNAPSHOT_AGE), 0, NULL),
		    (double)(clock_wall_ms() - s.snapshot_wall_ms) / 1000.0);
}

/* After each metadata-log sync: the records and bytes it appended and how
 * long its fsync took (a compaction starts a fresh segment: its bytes are
 * then counted from 0). */
static void on_mlog_sync(void *arg, const struct mlog_stats *st)
{
	struct daemon *d = arg;
	struct mlog_stats *seen = &d->mlog_seen;

	if (st->records > seen->records)
		metrics_counter_add(METRICS_SERIES(MSTD(&d->ms,
		    METADATA_LOG_RECORDS)), (double)(st->records - seen->records));
	metrics_counter_add(METRICS_SERIES(MSTD(&d->ms, METADATA_LOG_BYTES)),
	    (double)(st->bytes >= seen->bytes ? st->bytes - seen->bytes :
	    st->bytes));
	if (st->groups > seen->groups)
		metrics_counter_add(METRICS_SERIES(MSTD(&d->ms,
		    METADATA_LOG_GROUPS)), (double)(st->groups - seen->groups));
	if (st->syncs > seen->syncs && st->last_fsync_us >= 0)
		metrics_histogram_observe(METRICS_SERIES(MSTD(&d->ms,
		    METADATA_LOG_FSYNC_DURATION)), (double)st->last_fsync_us / 1e6);
	*seen = *st;
	if (d->st != NULL) {
		struct mstate_async_stats as;

		mstate_async_stats(d->st, &as);
		if (as.held > d->as_seen.held)
			metrics_counter_add(METRICS_SERIES(MSTD(&d->ms,
			    METADATA_LOG_HELD)), (double)(as.held -
			    d->as_seen.held));
		if (as.held_refused > d->as_seen.held_refused)
			metrics_counter_add(METRICS_SERIES(MSTD(&d->ms,
			    METADATA_LOG_HELD_REFUSED)), (double)(as.held_refused -
			    d->as_seen.held_refused));
		if (as.sync_writes > d->as_seen.sync_writes)
			metrics_counter_add(METRICS_SERIES(MSTD(&d->ms,
			    METADATA_LOG_LOOP_WRITES)), (double)(as.sync_writes -
			    d->as_seen.sync_writes));
		if (as.split_groups > d->as_seen.split_groups)
			metrics_counter_add(METRICS_SERIES(MSTD(&d->ms,
			    METADATA_LOG_SPLIT_GROUPS)), (double)(as.split_groups -
			    d->as_seen.split_groups));
		d->as_seen = as;
	}
}

/* Scrape time: mirrord_mirror_partitions{mirror,state} counted from the
 * model, every state (0 too), whether per-partition metrics are on or not. */
static void collect_mirror_partitions(struct metric_family *f, void *arg)
{
	struct daemon *d = arg;

	for (size_t i = 0; i < mstate_mirror_count(d->st); i++) {
		const struct mirror *m = mstate_mirror_at(d->st, i);
		size_t n[MPART_STATE_COUNT] = { 0 };

		for (size_t t = 0; t < m->ntopics; t++)
			for (int32_t p = 0; p < m->topics[t]->npart; p++)
				n[m->topics[t]->parts[p]->state]++;
		for (int s = 0; s < MPART_STATE_COUNT; s++)
			metrics_gauge_set(METRICS_SERIES(f, m->name,
			    mpart_state_name(s)), (double)n[s]);
	}
}

static bool ready_destination(void *arg, char *why, size_t whylen)
{
	struct daemon *d = arg;

	return pipeline_destination_ready(d->pl, why, whylen);
}

static bool ready_mlog(void *arg, char *why, size_t whylen)
{
	struct daemon *d = arg;
	struct mlog_stats s;

	mlog_stats(d->ml, &s);
	if (s.broken)
		snprintf(why, whylen, "the metadata log refuses writes (see the "
		    "log: fenced by a newer writer, or a failed write)");
	return !s.broken;
}

static bool ready_cluster(void *arg, char *why, size_t whylen)
{
	struct daemon *d = arg;

	if (d->cl == NULL) {
		snprintf(why, whylen, "not started");
		return false;
	}
	return cluster_ready(d->cl, why, whylen);
}

static bool ready_identity(void *arg, char *why, size_t whylen)
{
	struct daemon *d = arg;

	return d->pl == NULL || pipeline_identity_ready(d->pl, why, whylen);
}

static bool ready_divergence(void *arg, char *why, size_t whylen)
{
	struct daemon *d = arg;

	return d->pl == NULL || pipeline_divergence_ready(d->pl, why, whylen);
}

static bool ready_write_access(void *arg, char *why, size_t whylen)
{
	struct daemon *d = arg;

	return d->pl == NULL || pipeline_write_access_ready(d->pl, why, whylen);
}

static bool ready_sources(void *arg, char *why, size_t whylen)
{
	struct daemon *d = arg;

	return d->pl == NULL || pipeline_sources_ready(d->pl, why, whylen);
}

/* ---- start-up ------------------------------------------------------ */

static int open_state(struct daemon *d)
{
	char err[1024], where[512];

	metastore_describe(d->cfg, where, sizeof(where));
	d->ml = metastore_new(d->cfg, err, sizeof(err));
	if (d->ml == NULL) {
		log_errorx("metadata log: %s", err);
		return -1;
	}
	d->st = mstate_new();
	if (d->st == NULL) {
		log_errorx("out of memory");
		return -1;
	}
	secrets_attach(d->st, d->cfg);
	if (mstate_open(d->st, d->ml, err, sizeof(err)) < 0) {
		log_errorx("metadata log: %s", err);
		return -1;
	}
	mlog_stats(d->ml, &d->mlog_seen);
	mlog_set_sync_hook(d->ml, on_mlog_sync, d);
	/* Asynchronous metadata writes (group commit) complete on the loop. */
	mlog_set_event_base(d->ml, d->base);
	if (secrets_start(d->st, err, sizeof(err)) < 0) {
		log_errorx("%s", err);
		return -1;
	}
	d->log_loaded = true;
	log_info("metadata log %s loaded: cluster id %s, %zu mirror%s",
	    where, mstate_cluster_id(d->st),
	    mstate_mirror_count(d->st), mstate_mirror_count(d->st) == 1 ? "" : "s");
	return 0;
}

static int start_http(struct daemon *d)
{
	char err[512];

	if (d->cfg->metrics_listen.host == NULL)
		return 0;
	d->http = httpd_new(d->base, d->cfg->metrics_listen.host,
	    d->cfg->metrics_listen.port, d->reg, err, sizeof(err));
	if (d->http == NULL) {
		log_errorx("metrics.listen: %s", err);
		return -1;
	}
	httpd_add_ready_check(d->http, "metadata log loaded", httpd_ready_flag,
	    &d->log_loaded);
	httpd_add_ready_check(d->http, "listeners bound", httpd_ready_flag,
	    &d->listening);
	httpd_add_ready_check(d->http, "metadata log writable", ready_mlog, d);
	if (d->cfg->cluster_enabled)
		httpd_add_ready_check(d->http, "cluster member (writer: log "
		    "writable; follower: tailing the log)", ready_cluster, d);
	httpd_add_ready_check(d->http, "destination reachable",
	    ready_destination, d);
	httpd_add_ready_check(d->http, "topic and cluster identity",
	    ready_identity, d);
	httpd_add_ready_check(d->http, "source logs agree with the mirror",
	    ready_divergence, d);
	httpd_add_ready_check(d->http, "destination write access",
	    ready_write_access, d);
	httpd_add_ready_check(d->http, "sources readable", ready_sources, d);
	if (httpd_add_route(d->http, "/mirrors", mstatus_route, &d->adm) != 0) {
		log_errorx("metrics.listen: out of memory");
		return -1;
	}
	log_info("metrics: listening on %s:%d (/metrics, /healthz, /readyz, "
	    "/mirrors)", d->cfg->metrics_listen.host, httpd_port(d->http));
	return 0;
}

static int add_signal(struct daemon *d, struct event **ev, int sig)
{
	*ev = evsignal_new(d->base, sig, signal_cb, d);
	return *ev == NULL ? -1 : event_add(*ev, NULL);
}

int main(int argc, char **argv)
{
	static const struct option longopts[] = {
		{ "config", required_argument, NULL, 'c' },
		{ "check-config", required_argument, NULL, 'C' },
		{ "foreground", no_argument, NULL, 'f' },
		{ "log-level", required_argument, NULL, 'l' },
		{ "version", no_argument, NULL, 'V' },
		{ "help", no_argument, NULL, 'h' },
		{ "add-user", required_argument, NULL, 'A' },
		{ "delete-user", required_argument, NULL, 'D' },
		{ "list-users", no_argument, NULL, 'L' },
		{ "mechanism", required_argument, NULL, 'M' },
		{ "iterations", required_argument, NULL, 'I' },
		{ "credentials-file", required_argument, NULL, 'F' },
		{ "migrate-metadata", no_argument, NULL, 'G' },
		{ "from-dir", required_argument, NULL, 'R' },
		{ NULL, 0, NULL, 0 },
	};
	struct usercmd uc = { .action = USERCMD_LIST };
	int users = 0, migrate = 0;
	const char *from_dir = NULL;
	struct daemon d;
	char err[1024];
	uint64_t wd_usec = 0;
	int ch;

	memset(&d, 0, sizeof(d));
	d.config_path = DEFAULT_CONFIG;
	log_init("mirrord", LOG_LVL_INFO, LOG_F_AUTO);
	while ((ch = getopt_long(argc, argv, "c:fl:Vh", longopts, NULL)) != -1) {
		switch (ch) {
		case 'c':
			d.config_path = optarg;
			break;
		case 'C':
			return check_config(optarg);
		case 'f':
			break;
		case 'l':
			level_override = log_level_parse(optarg);
			if (level_override < 0) {
				fprintf(stderr, "mirrord: -l %s: expected error, warn, "
				    "info or debug\n", optarg);
				return 2;
			}
			break;
		case 'V':
			printf("mirrord %s\n", PACKAGE_VERSION);
			return 0;
		case 'h':
			usage(stdout);
			return 0;
		case 'A':
		case 'D':
		case 'L':
			if (users) {
				fprintf(stderr, "mirrord: give one of --add-user, "
				    "--delete-user and --list-users\n");
				return 2;
			}
			users = 1;
			uc.action = ch == 'A' ? USERCMD_ADD : ch == 'D' ?
			    USERCMD_DELETE : USERCMD_LIST;
			uc.user = optarg;
			break;
		case 'M':
			uc.mechanism = optarg;
			break;
		case 'I': {
			char *end;
			long n = strtol(optarg, &end, 10);

			if (*end != '\0' || n < 4096 || n > 16384) {
				fprintf(stderr, "mirrord: --iterations %s: expected "
				    "4096..16384\n", optarg);
				return 2;
			}
			uc.iterations = (int)n;
			break;
		}
		case 'F':
			uc.file = optarg;
			break;
		case 'G':
			migrate = 1;
			break;
		case 'R':
			from_dir = optarg;
			break;
		default:
			usage(stderr);
			return 2;
		}
	}
	if (optind < argc) {
		fprintf(stderr, "mirrord: unexpected argument '%s'\n", argv[optind]);
		usage(stderr);
		return 2;
	}
	if (migrate != (from_dir != NULL)) {
		fprintf(stderr, "mirrord: --migrate-metadata and --from-dir DIR "
		    "go together\n");
		return 2;
	}
	if (migrate)
		return metastore_migrate(d.config_path, from_dir);
	if (users) {
		uc.config_path = d.config_path;
		return usercmd_run(&uc);
	}
	if (uc.mechanism != NULL || uc.iterations != 0 || uc.file != NULL) {
		fprintf(stderr, "mirrord: --mechanism, --iterations and "
		    "--credentials-file go with --add-user, --delete-user or "
		    "--list-users\n");
		return 2;
	}

	signal(SIGPIPE, SIG_IGN);
	d.cfg = load_config(d.config_path);
	if (d.cfg == NULL) {
		log_errorx("%s: configuration is not valid; not starting",
		    d.config_path);
		return 1;
	}
	apply_log_settings(d.cfg, level_override);
	log_info("mirrord %s starting (config %s)", PACKAGE_VERSION, d.config_path);
	log_route_libevent();

	d.base = event_base_new();
	d.reg = metrics_new();
	if (d.base == NULL || d.reg == NULL)
		fatalx("out of memory");
	if (metrics_std_init(&d.ms, d.reg, d.cfg->metrics_per_partition, err,
	    sizeof(err)) < 0)
		fatalx("metrics: %s", err);
	if (open_state(&d) < 0)
		return 1;
	metrics_family_on_collect(MSTD(&d.ms, MIRROR_PARTITIONS),
	    collect_mirror_partitions, &d);

	d.pl = pipeline_new(d.base, d.st, d.cfg, &d.ms, err, sizeof(err));
	if (d.pl == NULL) {
		log_errorx("data plane: %s", err);
		return 1;
	}
	d.adm = admin_new(d.base, d.st, d.cfg, d.pl, &d.ms, err, sizeof(err));
	if (d.adm == NULL) {
		log_errorx("%s", err);
		return 1;
	}
	d.listening = true;
	if (start_http(&d) < 0)
		return 1;
	if (add_signal(&d, &d.ev_term, SIGTERM) < 0 ||
	    add_signal(&d, &d.ev_int, SIGINT) < 0 ||
	    add_signal(&d, &d.ev_hup, SIGHUP) < 0)
		fatalx("cannot install signal handlers");
	{
		struct timeval tv = { 5, 0 };

		d.ev_housekeep = event_new(d.base, -1, EV_PERSIST, housekeep_cb, &d);
		event_add(d.ev_housekeep, &tv);
	}
	if (sdnotify_watchdog_usec(&wd_usec) > 0 && wd_usec > 0) {
		/* Ping at half the interval, as systemd recommends. */
		struct timeval tv = { (time_t)(wd_usec / 2000000),
			(suseconds_t)((wd_usec / 2) % 1000000) };

		d.ev_watchdog = event_new(d.base, -1, EV_PERSIST, watchdog_cb, &d);
		event_add(d.ev_watchdog, &tv);
	}
	if (d.cfg->cluster_enabled) {
		/* The metadata log is open as a follower; the group makes one
		 * instance its writer.  Ownership first, then the data plane,
		 * so no partition is copied before the log names its owner. */
		d.cl = cluster_new(d.base, d.cfg, d.st, d.ml, d.pl, d.adm, &d.ms,
		    admin_port(d.adm), d.http != NULL ? httpd_port(d.http) : 0,
		    err, sizeof(err));
		if (d.cl == NULL) {
			log_errorx("cluster: %s", err);
			return 1;
		}
	}
	pipeline_start(d.pl);
	if (d.cl != NULL)
		cluster_start(d.cl);

	log_info("ready: admin listener on %s:%d, node id %lld, cluster id %s",
	    d.cfg->server_listen.host, admin_port(d.adm),
	    (long long)d.cfg->server_node_id, mstate_cluster_id(d.st));
	sdnotify_ready();
	sdnotify_status("mirroring; %zu mirror(s)", mstate_mirror_count(d.st));

	event_base_dispatch(d.base);

	log_info("mirrord stopped");
	cluster_free(d.cl);
	admin_free(d.adm);
	/* Metadata writes in flight land (and apply) while the pipeline is
	 * still there; their callbacks are dropped with the model. */
	if (d.st != NULL)
		mstate_async_wait(d.st);
	pipeline_free(d.pl);
	httpd_free(d.http);
	if (d.ev_deadline != NULL)
		event_free(d.ev_deadline);
	if (d.ev_watchdog != NULL)
		event_free(d.ev_watchdog);
	event_free(d.ev_housekeep);
	event_free(d.ev_term);
	event_free(d.ev_int);
	event_free(d.ev_hup);
	mstate_free(d.st);
	secrets_fini();
	mlog_free(d.ml);
	metrics_free(d.reg);
	config_free(d.cfg);
	event_base_free(d.base);
	return d.exit_code;
}
