/*
 * pipedrive: the data plane on its own, for black-box tests and the bench.
 *
 * It is mirrord minus the admin listener: a metadata log in DIR, the state
 * model, and daemon/pipeline on a libevent loop.  Instead of Kafka-protocol
 * admin RPCs it reads one command per line on stdin and answers on stdout
 * with one line, "ok ..." or "err <code> <message>" (describe prints one
 * "part ..." line per partition, then "end").
 *
 *   pipedrive -d DIR -b DEST_BOOTSTRAP [-v]
 *
 *   create MIRROR SOURCE_BOOTSTRAP [key=value ...]
 *   add MIRROR TOPIC PARTITIONS
 *   include MIRROR REGEX
 *   pause|resume|remove MIRROR TOPIC
 *   delete MIRROR
 *   describe
 *   totals
 *
 * "part" lines: mirror topic partition state source_hwm dest_end lag
 * last_offset last_epoch anchors epochs error...
 */
#include "config.h"

#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <event2/event.h>

#include "daemonconf.h"
#include "log.h"
#include "mlog.h"
#include "mstate.h"
#include "pipeline.h"

#define MAXARGS 64

struct drive {
	struct event_base *base;
	struct mstate *st;
	struct pipeline *pl;
	char line[65536];
	size_t linelen;
};

static void answer(int code, const char *msg)
{
	if (code == 0)
		printf("ok %s\n", msg);
	else
		printf("err %d %s\n", code, msg);
	fflush(stdout);
}

static void describe(struct drive *d)
{
	for (size_t i = 0; i < mstate_mirror_count(d->st); i++) {
		const struct mirror *m = mstate_mirror_at(d->st, i);

		for (size_t t = 0; t < m->ntopics; t++) {
			const struct mtopic *mt = m->topics[t];

			for (int32_t k = 0; k < mt->npart; k++) {
				const struct mpart *p = mt->parts[k];
				struct pipeline_live lv;

				if (pipeline_partition_live(d->pl, p, &lv) != 0) {
					memset(&lv, 0xff, sizeof(lv)); /* all -1 */
				}
				printf("part %s %s %" PRId32 " %s %" PRId64 " %" PRId64 " %" PRId64
				    " %" PRId64 " %" PRId32 " %zu %zu %" PRId64 " %" PRId64 " %s\n",
				    m->name, mt->name, k, mpart_state_name(p->state),
				    lv.source_high_watermark, lv.destination_end, lv.lag,
				    p->last_offset, p->last_epoch, p->nanchors, p->nepochs,
				    lv.crc_failures, lv.offset_holes,
				    p->error ? p->error : "-");
			}
		}
	}
	printf("end\n");
	fflush(stdout);
}

static void command(struct drive *d, char *line)
{
	char *argv[MAXARGS], *save = NULL, msg[1024];
	int argc = 0, code = -1;

	for (char *t = strtok_r(line, " \t", &save); t && argc < MAXARGS;
	    t = strtok_r(NULL, " \t", &save))
		argv[argc++] = t;
	if (argc == 0)
		return;
	msg[0] = '\0';
	if (strcmp(argv[0], "create") == 0 && argc >= 3) {
		struct mcfg cf[MAXARGS];
		size_t n = 0;

		cf[n].name = (char *)"bootstrap.servers";
		cf[n++].value = argv[2];
		for (int i = 3; i < argc; i++) {
			char *eq = strchr(argv[i], '=');

			if (eq == NULL)
				continue;
			*eq = '\0';
			cf[n].name = argv[i];
			cf[n++].value = eq + 1;
		}
		code = mstate_create_mirror(d->st, argv[1], cf, n, msg, sizeof(msg));
	} else if (strcmp(argv[0], "add") == 0 && argc == 4) {
		code = mstate_add_topic(d->st, argv[1], argv[2], atoi(argv[3]), msg,
		    sizeof(msg));
	} else if (strcmp(argv[0], "include") == 0 && argc == 3) {
		const char *inc[1] = { argv[2] };

		code = mstate_add_patterns(d->st, argv[1], inc, 1, NULL, 0, msg,
		    sizeof(msg));
	} else if (strcmp(argv[0], "pause") == 0 && argc == 3) {
		code = mstate_pause_topic(d->st, argv[1], argv[2], msg, sizeof(msg));
	} else if (strcmp(argv[0], "resume") == 0 && argc == 3) {
		code = mstate_resume_topic(d->st, argv[1], argv[2], msg, sizeof(msg));
	} else if (strcmp(argv[0], "remove") == 0 && argc == 3) {
		code = mstate_remove_topic(d->st, argv[1], argv[2], msg, sizeof(msg));
	} else if (strcmp(argv[0], "delete") == 0 && argc == 2) {
		code = mstate_delete_mirror(d->st, argv[1], msg, sizeof(msg));
	} else if (strcmp(argv[0], "describe") == 0) {
		describe(d);
		return;
	} else if (strcmp(argv[0], "totals") == 0) {
		struct pipeline_totals t;

		pipeline_totals(d->pl, &t);
		snprintf(msg, sizeof(msg), "records=%" PRId64 " bytes=%" PRId64
		    " batches=%" PRId64 " produces=%" PRId64 " fetches=%" PRId64
		    " queued=%" PRId64 " queued_peak=%" PRId64, t.records, t.bytes,
		    t.batches, t.produces, t.fetches, t.queued_bytes,
		    t.queued_bytes_peak);
		code = 0;
	} else {
		snprintf(msg, sizeof(msg), "unknown command or wrong arguments: %s", argv[0]);
		code = 42;
	}
	answer(code, msg[0] ? msg : "done");
}

static void on_stdin(evutil_socket_t fd, short what, void *arg)
{
	struct drive *d = arg;
	ssize_t n;
	char *nl;

	(void)what;
	n = read(fd, d->line + d->linelen, sizeof(d->line) - 1 - d->linelen);
	if (n <= 0) {
		event_base_loopbreak(d->base);
		return;
	}
	d->linelen += (size_t)n;
	d->line[d->linelen] = '\0';
	while ((nl = strchr(d->line, '\n')) != NULL) {
		size_t used = (size_t)(nl - d->line) + 1;

		*nl = '\0';
		command(d, d->line);
		memmove(d->line, d->line + used, d->linelen - used);
		d->linelen -= used;
		d->line[d->linelen] = '\0';
	}
	if (d->linelen == sizeof(d->line) - 1) {
		answer(42, "line too long");
		d->linelen = 0;
	}
}

static void on_signal(evutil_socket_t sig, short what, void *arg)
{
	(void)sig;
	(void)what;
	event_base_loopbreak(arg);
}

int main(int argc, char **argv)
{
	struct drive d;
	const char *dir = NULL, *dest = NULL;
	struct config *cfg = NULL;
	struct config_errors errs;
	struct mlog_opts mo;
	struct mlog *ml = NULL;
	struct event *ev_in, *ev_term, *ev_int;
	char err[1024], yaml[4096];
	int opt, level = LOG_LVL_INFO, rc = 1;

	memset(&d, 0, sizeof(d));
	while ((opt = getopt(argc, argv, "d:b:v")) != -1) {
		switch (opt) {
		case 'd': dir = optarg; break;
		case 'b': dest = optarg; break;
		case 'v': level = LOG_LVL_DEBUG; break;
		default:
			fprintf(stderr, "usage: pipedrive -d DIR -b DEST_BOOTSTRAP [-v]\n");
			return 2;
		}
	}
	if (dir == NULL || dest == NULL) {
		fprintf(stderr, "usage: pipedrive -d DIR -b DEST_BOOTSTRAP [-v]\n");
		return 2;
	}
	log_init("pipedrive", level, 0);
	signal(SIGPIPE, SIG_IGN);
	snprintf(yaml, sizeof(yaml), "destination:\n  bootstrap_servers: \"%s\"\n"
	    "storage:\n  data_dir: \"%s\"\n", dest, dir);
	config_errors_init(&errs);
	if (config_load_string("pipedrive", yaml, strlen(yaml), &cfg, &errs) != 0) {
		config_errors_print(&errs, stderr);
		config_errors_fini(&errs);
		return 1;
	}
	config_errors_fini(&errs);
	mlog_opts_init(&mo);
	mo.dir = dir;
	ml = mlog_file_new(&mo, err, sizeof(err));
	d.st = mstate_new();
	if (ml == NULL || d.st == NULL || mstate_open(d.st, ml, err, sizeof(err)) != 0) {
		fprintf(stderr, "pipedrive: %s\n", err);
		goto out;
	}
	d.base = event_base_new();
	d.pl = pipeline_new(d.base, d.st, cfg, NULL, err, sizeof(err));
	if (d.pl == NULL) {
		fprintf(stderr, "pipedrive: %s\n", err);
		goto out;
	}
	pipeline_start(d.pl);
	ev_in = event_new(d.base, 0, EV_READ | EV_PERSIST, on_stdin, &d);
	ev_term = evsignal_new(d.base, SIGTERM, on_signal, d.base);
	ev_int = evsignal_new(d.base, SIGINT, on_signal, d.base);
	event_add(ev_in, NULL);
	event_add(ev_term, NULL);
	event_add(ev_int, NULL);
	answer(0, "ready");
	event_base_dispatch(d.base);
	event_free(ev_in);
	event_free(ev_term);
	event_free(ev_int);
	rc = 0;
out:
	pipeline_free(d.pl);
	mstate_free(d.st);
	mlog_free(ml);
	if (d.base)
		event_base_free(d.base);
	config_free(cfg);
	return rc;
}
