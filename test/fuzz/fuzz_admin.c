/*
 * fuzz_admin: byte streams through mirrord's real admin server.
 *
 * Each input becomes the bytes a peer sends on one admin connection: the
 * real listener (daemon/admin/adminsrv.c: framing, size cap, pipelining, one
 * request at a time) hands them to the real handlers (daemon/admin/admin.c) on
 * top of the real state model (lib/mstate) with a metadata log in a
 * temporary directory, written asynchronously as in the daemon (the
 * commands take the exclusive turn and are answered once their group is
 * applied), and source lookups go through the real srclookup and
 * kcluster.  The harness writes the stream, runs the event loop until the
 * server has answered every complete frame (or closed the connection), and
 * reads the answers.  Everything lives on one event_base created once per
 * process.  At the start of every input the admin server is created afresh
 * (cancelling what the last one still had running) over a model whose
 * mirrors have all been deleted, so that one run does not change the next.
 *
 * Input format (the state model: requests in sequence, so CreateMirror then
 * AddTopicsToMirror / DescribeMirrors / PauseMirrorTopics / DeleteMirror on
 * the same name is one input):
 *
 *   byte 0   flags: bit 0 set: raw, the rest is sent as it is (framing);
 *            bits 1-2 how it is written: 0 at once, 1 one byte at a time
 *            (first 64 bytes, then at once), 2 in 7-byte pieces, 3 one
 *            request (raw: 512 bytes) per loop turn;
 *            bit 3: shut the write side after the last byte (EOF while
 *            requests may still be pending).
 *   then, unless raw, requests until the input ends, each
 *            int16 ApiKey, int16 version, uint16 body length, body;
 *            the harness frames it with a request header of the right
 *            version (correlation id = its index, client id "fuzz").
 *
 * Nothing leaves the machine: connect() is interposed below.  127.0.0.1:9092
 * (FUZZ_SOURCE_PORT) is redirected to a fake source cluster in this process
 * (topics alpha/3, beta/1, orders.eu/2, orders.us/2, __consumer_offsets);
 * the harness's own client reaches the admin port; every other address is
 * refused at once, as a closed port would be (seeds use 127.0.0.1:1 for a
 * source that is down).  Host names fail without DNS (srclookup has no
 * resolver).
 *
 * The data plane is not linked; a stand-in moves partitions on between
 * requests (PREPARING -> MIRRORING, topic "beta" -> FAILED, PAUSING ->
 * PAUSED, STOPPING -> STOPPED) so that Pause/Resume/Remove/Delete reach
 * their success paths.
 *
 * server.max_request_bytes is 1 MiB here (the daemon's default is 100 MiB)
 * so that the per-request arena cap (4x that) is within reach of inputs of
 * a size the corpus can hold.
 *
 * What it checks besides the sanitizers: every complete frame is answered
 * (or the connection closed) within RUN_DEADLINE_S, else it aborts (a hang;
 * the replay program also arms alarm() in case the loop itself blocks), and
 * the answers carry the requests' correlation ids in order.
 *
 * Built as test/fuzz/fuzz_admin (libFuzzer, --enable-fuzzers) and as
 * test/fuzz/fuzz_admin_replay (replays test/fuzz/corpus/admin in make check).
 * Seeds: test/fuzz/mkseeds_admin.  FUZZ_ADMIN_LOG=debug shows the daemon's log.
 */
#include "config.h"

#include <sys/socket.h>
#include <sys/syscall.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/event.h>
#include <event2/listener.h>

#include "admin.h"
#include "compat.h"
#include "daemonconf.h"
#include "kbuf.h"
#include "kproto.h"
#include "log.h"
#include "metrics.h"
#include "metrics_std.h"
#include "mlog.h"
#include "mstate.h"
#include "pipeline.h"

#define FUZZ_SOURCE_PORT 9092
#define MAX_REQUEST_BYTES (1u << 20)
#define RUN_DEADLINE_S 30
#define FAKE_MAX_FRAME (1u << 20)

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static struct {
	int ready;
	struct event_base *base;
	struct config *cfg;
	struct metrics *reg;
	struct metrics_std ms;
	struct mlog *ml;
	struct mstate *st;
	struct admin *adm;
	struct evconnlistener *src_lst;
	struct event *dataplane_ev;
	int admin_port, src_port;
	/* What the inputs reached, reported by the replay program. */
	unsigned long inputs, answers, mirrors_created, topics_added;
	char dir[256];
} G;

/* ---- connect(): loopback only ------------------------------------------ */

/*
 * Interposes libc's connect() for the whole process (libevent's included):
 * the fuzzer writes the bootstrap addresses, and nothing it writes may reach
 * another host or another program on this one.
 */
int connect(int fd, const struct sockaddr *sa, socklen_t len)
{
	struct sockaddr_in sin;

	if (sa != NULL && sa->sa_family == AF_UNIX)
		return (int)syscall(SYS_connect, fd, sa, len);
	if (sa == NULL || sa->sa_family != AF_INET ||
	    len < (socklen_t)sizeof(sin)) {
		errno = ENETUNREACH;
		return -1;
	}
	memcpy(&sin, sa, sizeof(sin));
	if (sin.sin_addr.s_addr != htonl(INADDR_LOOPBACK)) {
		errno = ENETUNREACH;
		return -1;
	}
	if (ntohs(sin.sin_port) == FUZZ_SOURCE_PORT && G.src_port > 0)
		sin.sin_port = htons((uint16_t)G.src_port);
	else if (G.admin_port <= 0 || (ntohs(sin.sin_port) != G.admin_port &&
	    ntohs(sin.sin_port) != G.src_port)) {
		errno = ECONNREFUSED;
		return -1;
	}
	/*
	 * Closed with a reset, not a FIN: every input opens a few loopback
	 * connections, and thousands of them a second in TIME_WAIT would
	 * exhaust the host's ephemeral ports (and slow every connect and
	 * bind on it).  A reset also ends the peer's side at once.
	 */
	setsockopt(fd, SOL_SOCKET, SO_LINGER, &(struct linger){ 1, 0 },
	    sizeof(struct linger));
	return (int)syscall(SYS_connect, fd, (struct sockaddr *)&sin,
	    (socklen_t)sizeof(sin));
}

/* ---- the fake source cluster --------------------------------------------- */

static const struct {
	const char *name;
	int32_t partitions;
	int internal;
} src_topics[] = {
	{ "alpha", 3, 0 },
	{ "beta", 1, 0 },
	{ "orders.eu", 2, 0 },
	{ "orders.us", 2, 0 },
	{ "__consumer_offsets", 1, 1 },
};

static void src_reply(struct bufferevent *bev, int16_t key, int16_t ver,
    int32_t corr, const void *msg)
{
	const struct kp_api *api = kp_api_find(key);
	struct kw w;
	uint8_t hdr[9];
	int hv = key == KP_API_API_VERSIONS ? 0 :
	    kp_response_header_version(key, ver);
	size_t hlen = hv >= 1 ? 9 : 8;

	kw_init(&w, FAKE_MAX_FRAME);
	if (api->response_encode(&w, ver, msg) != 0 || w.err) {
		fprintf(stderr, "fuzz_admin: the fake source cannot encode %s v%d\n",
		    api->name, ver);
		abort();
	}
	be32_store(hdr, (uint32_t)(hlen - 4 + w.len));
	be32_store(hdr + 4, (uint32_t)corr);
	hdr[8] = 0;
	bufferevent_write(bev, hdr, hlen);
	bufferevent_write(bev, w.buf, w.len);
	kw_fini(&w);
}

/* Answers one request; 0, or -1 to close the connection. */
static int src_request(struct bufferevent *bev, const uint8_t *p, size_t n)
{
	struct kp_request_header h;
	struct kr r;
	int hv;

	kr_init(&r, p, n);
	kp_request_header_init(&h);
	if (kp_request_header_read(&r, &h, &hv) != 0 || hv < 0)
		return -1;
	if (h.request_api_key == KP_API_API_VERSIONS) {
		struct kp_api_versions_response m;
		struct kp_api_versions_response_api_version k[2];
		int16_t v = MIN(h.request_api_version, 3);

		kp_api_versions_response_init(&m);
		for (int i = 0; i < 2; i++)
			kp_api_versions_response_api_version_init(&k[i]);
		k[0].api_key = KP_API_API_VERSIONS;
		k[0].min_version = 0;
		k[0].max_version = 3;
		k[1].api_key = KP_API_METADATA;
		k[1].min_version = 0;
		k[1].max_version = 12;
		m.api_keys = k;
		m.api_keys_n = 2;
		src_reply(bev, KP_API_API_VERSIONS, v, h.correlation_id, &m);
		return 0;
	}
	if (h.request_api_key == KP_API_METADATA && h.request_api_version >= 0 &&
	    h.request_api_version <= 12) {
		struct kp_metadata_response m;
		struct kp_metadata_response_broker b;
		struct kp_metadata_response_topic t[ARRAY_SIZE(src_topics)];
		struct kp_metadata_response_partition part[8];

		kp_metadata_response_init(&m);
		kp_metadata_response_broker_init(&b);
		b.node_id = 1;
		b.host = kstr_c("127.0.0.1");
		b.port = FUZZ_SOURCE_PORT;
		m.brokers = &b;
		m.brokers_n = 1;
		m.cluster_id = kstr_c("fuzz-source-cluster");
		m.controller_id = 1;
		for (int i = 0; i < 8; i++) {
			kp_metadata_response_partition_init(&part[i]);
			part[i].partition_index = i;
			part[i].leader_id = 1;
			part[i].replica_nodes_n = 0;
			part[i].isr_nodes_n = 0;
			part[i].offline_replicas_n = 0;
		}
		for (size_t i = 0; i < ARRAY_SIZE(src_topics); i++) {
			kp_metadata_response_topic_init(&t[i]);
			t[i].name = kstr_c(src_topics[i].name);
			t[i].is_internal = src_topics[i].internal;
			t[i].partitions = part;
			t[i].partitions_n = src_topics[i].partitions;
		}
		m.topics = t;
		m.topics_n = (int32_t)ARRAY_SIZE(src_topics);
		src_reply(bev, KP_API_METADATA, h.request_api_version,
		    h.correlation_id, &m);
		return 0;
	}
	return -1;
}

static void src_read_cb(struct bufferevent *bev, void *arg)
{
	struct evbuffer *in = bufferevent_get_input(bev);
	uint8_t szb[4];

	(void)arg;
	while (evbuffer_get_length(in) >= 4) {
		uint32_t size;

		evbuffer_copyout(in, szb, 4);
		size = be32_load(szb);
		if (size > FAKE_MAX_FRAME) {
			bufferevent_free(bev);
			return;
		}
		if (evbuffer_get_length(in) < 4 + (size_t)size)
			return;
		if (src_request(bev, evbuffer_pullup(in, 4 + (ssize_t)size) + 4,
		    size) < 0) {
			bufferevent_free(bev);
			return;
		}
		evbuffer_drain(in, 4 + (size_t)size);
	}
}

static void src_event_cb(struct bufferevent *bev, short what, void *arg)
{
	(void)arg;
	if (what & (BEV_EVENT_EOF | BEV_EVENT_ERROR))
		bufferevent_free(bev);
}

static void src_accept_cb(struct evconnlistener *l, evutil_socket_t fd,
    struct sockaddr *sa, int salen, void *arg)
{
	struct bufferevent *bev;

	(void)l;
	(void)sa;
	(void)salen;
	(void)arg;
	bev = bufferevent_socket_new(G.base, fd, BEV_OPT_CLOSE_ON_FREE);
	if (bev == NULL) {
		evutil_closesocket(fd);
		return;
	}
	bufferevent_setcb(bev, src_read_cb, NULL, src_event_cb, NULL);
	bufferevent_enable(bev, EV_READ | EV_WRITE);
}

static void dataplane_hook(void *arg, const struct mstate_event *ev);
static void dataplane_cb(evutil_socket_t fd, short what, void *arg);

/* ---- set-up, once per process -------------------------------------------- */

static void remove_dir(void)
{
	DIR *d;
	struct dirent *de;

	if (G.dir[0] == '\0')
		return;
	if ((d = opendir(G.dir)) != NULL) {
		while ((de = readdir(d)) != NULL) {
			char p[512];

			if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0)
				continue;
			snprintf(p, sizeof(p), "%s/%s", G.dir, de->d_name);
			unlink(p);
		}
		closedir(d);
	}
	rmdir(G.dir);
}

static void at_exit(void)
{
	int reached_nothing;

	if (!G.ready)
		return;
	/*
	 * The replay must not pass by reaching nothing: a corpus of lifecycles
	 * that gets no answer, or creates no mirror or topic, means the harness
	 * (or the server) is broken.
	 */
	reached_nothing = G.inputs >= 20 && (G.answers == 0 ||
	    G.mirrors_created == 0 || G.topics_added == 0);
	admin_free(G.adm);
	event_base_loop(G.base, EVLOOP_NONBLOCK);
	evconnlistener_free(G.src_lst);
	event_free(G.dataplane_ev);
	mstate_free(G.st);
	mlog_free(G.ml);
	metrics_free(G.reg);
	config_free(G.cfg);
	event_base_free(G.base);
	remove_dir();
	G.ready = 0;
#ifndef MIRRORD_LIBFUZZER
	printf("fuzz_admin: %lu answers, %lu mirrors created, %lu topics added\n",
	    G.answers, G.mirrors_created, G.topics_added);
	if (reached_nothing) {
		fprintf(stderr, "fuzz_admin: %lu inputs reached no handler that "
		    "answers, creates mirrors and adds topics\n", G.inputs);
		fflush(NULL);
		_exit(1);
	}
#else
	(void)reached_nothing;
#endif
}

static void die(const char *what, const char *why)
{
	fprintf(stderr, "fuzz_admin: %s: %s\n", what, why);
	remove_dir();
	exit(1);
}

static void setup(void)
{
	const char *tmp = getenv("TMPDIR"), *lvl = getenv("FUZZ_ADMIN_LOG");
	struct mlog_opts mo;
	struct sockaddr_in sin;
	socklen_t sl = sizeof(sin);
	struct config_errors errs;
	char err[1024], yaml[1024];

	signal(SIGPIPE, SIG_IGN);
	config_errors_init(&errs);
	log_init("fuzz_admin", lvl != NULL && log_level_parse(lvl) >= 0 ?
	    log_level_parse(lvl) : LOG_LVL_ERROR, 0);
	snprintf(G.dir, sizeof(G.dir), "%s/fuzz_admin.XXXXXX",
	    tmp != NULL && tmp[0] != '\0' ? tmp : "/tmp");
	if (mkdtemp(G.dir) == NULL) {
		G.dir[0] = '\0';
		die("mkdtemp", strerror(errno));
	}
	/*
	 * OpenSSL's default CA store is an empty directory here: loading the
	 * system's bundle takes 40 ms per TLS source lookup, which would make
	 * inputs with security.protocol=SSL two orders of magnitude slower.
	 */
	snprintf(yaml, sizeof(yaml), "%s/no-such-ca.pem", G.dir);
	setenv("SSL_CERT_FILE", yaml, 1);
	setenv("SSL_CERT_DIR", G.dir, 1);
	G.base = event_base_new();
	G.reg = metrics_new();
	if (G.base == NULL || G.reg == NULL)
		die("setup", "out of memory");
	/* Through the real loader, so derived values are as in the daemon. */
	snprintf(yaml, sizeof(yaml),
	    "server:\n"
	    "  listen: \"127.0.0.1:0\"\n"
	    "  max_request_bytes: %u\n"
	    "storage:\n"
	    "  data_dir: \"%s\"\n"
	    "  fsync: false\n"
	    "destination:\n"
	    "  bootstrap_servers: \"127.0.0.1:1\"\n",
	    MAX_REQUEST_BYTES, G.dir);
	if (config_load_string("fuzz_admin.yaml", yaml, strlen(yaml), &G.cfg,
	    &errs) < 0) {
		config_errors_print(&errs, stderr);
		die("config", "the harness's configuration does not load");
	}
	config_errors_fini(&errs);
	if (metrics_std_init(&G.ms, G.reg, false, err, sizeof(err)) < 0)
		die("metrics", err);

	mlog_opts_init(&mo);
	mo.dir = G.dir;
	mo.no_fsync = 1;
	mo.compact_records = 5000; /* the log is rewritten now and then */
	G.ml = mlog_file_new(&mo, err, sizeof(err));
	if (G.ml == NULL)
		die("metadata log", err);
	G.st = mstate_new();
	if (G.st == NULL || mstate_open(G.st, G.ml, err, sizeof(err)) < 0)
		die("mstate_open", G.st == NULL ? "out of memory" : err);
	/* As in the daemon: the commands' writes go through the exclusive
	 * turn asynchronously (waiting for the group in flight, in flight
	 * themselves while later requests arrive), on the log's writer
	 * thread. */
	mlog_set_event_base(G.ml, G.base);
	G.dataplane_ev = evtimer_new(G.base, dataplane_cb, NULL);
	if (G.dataplane_ev == NULL || mstate_add_hook(G.st, dataplane_hook,
	    NULL) != 0)
		die("setup", "cannot hook the state model");

	memset(&sin, 0, sizeof(sin));
	sin.sin_family = AF_INET;
	sin.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	G.src_lst = evconnlistener_new_bind(G.base, src_accept_cb, NULL,
	    LEV_OPT_CLOSE_ON_FREE | LEV_OPT_REUSEABLE, 64,
	    (struct sockaddr *)&sin, sizeof(sin));
	if (G.src_lst == NULL || getsockname(evconnlistener_get_fd(G.src_lst),
	    (struct sockaddr *)&sin, &sl) != 0)
		die("fake source", strerror(errno));
	G.src_port = ntohs(sin.sin_port);

	G.ready = 1;
	atexit(at_exit);
}

/*
 * The data plane is not linked (it is not the admin plane, and it would
 * connect to the destination).  In its place, the state moves it would make
 * once a request has been answered, so that sequences such as
 * Pause -> Resume and Remove -> Delete reach their success paths: on the
 * next loop turn after a change, PREPARING partitions start MIRRORING (those
 * of topic "beta" FAIL instead, as a partition whose source is offline),
 * PAUSING ones are PAUSED, STOPPING ones STOPPED.  DescribeMirrors asks it
 * for live offsets, and there are none (as before a partition's first
 * fetch).
 */
void pipeline_partition_offsets(struct pipeline *pl, const struct mpart *p,
    int64_t *source_hwm, int64_t *dest_end)
{
	(void)pl;
	(void)p;
	*source_hwm = -1;
	*dest_end = -1;
}

int pipeline_partition_live(struct pipeline *pl, const struct mpart *p,
    struct pipeline_live *out)
{
	(void)pl;
	(void)p;
	(void)out;
	return -1;
}

int pipeline_partition_status(struct pipeline *pl, const struct mpart *p,
    struct pipeline_status *out)
{
	(void)pl;
	(void)p;
	(void)out;
	return -1;
}

int pipeline_mirror_health(struct pipeline *pl, const char *mirror,
    struct pipeline_mirror_health *out)
{
	(void)pl;
	(void)mirror;
	(void)out;
	return -1;
}

const char *pipeline_destination_cluster_id(struct pipeline *pl)
{
	(void)pl;
	return NULL;
}

int pipeline_partition_warning(struct pipeline *pl, const struct mpart *p,
    char *buf, size_t len)
{
	(void)pl;
	(void)p;
	(void)buf;
	(void)len;
	return 0;
}

static void dataplane_settle(void)
{
	char msg[512];

	for (size_t i = 0; i < mstate_mirror_count(G.st); i++) {
		struct mirror *m = mstate_mirror_at(G.st, i);

		for (size_t t = 0; t < m->ntopics; t++) {
			struct mtopic *mt = m->topics[t];

			for (int32_t k = 0; k < mt->npart; k++) {
				struct mpart *p = mt->parts[k];

				if (p == NULL)
					continue;
				if (p->state == MPART_PREPARING &&
				    strcmp(mt->name, "beta") == 0)
					mpart_fail(G.st, p, "fuzz: the source partition "
					    "is offline", -1, msg, sizeof(msg));
				else if (p->state == MPART_PREPARING)
					mpart_set_state(G.st, p, MPART_MIRRORING,
					    "fuzz data plane", msg, sizeof(msg));
				else if (p->state == MPART_PAUSING)
					mpart_set_state(G.st, p, MPART_PAUSED,
					    "fuzz data plane", msg, sizeof(msg));
				else if (p->state == MPART_STOPPING)
					mpart_stopped(G.st, p, p->last_offset,
					    p->last_epoch, "fuzz data plane", msg,
					    sizeof(msg));
			}
		}
	}
}

static void dataplane_cb(evutil_socket_t fd, short what, void *arg)
{
	(void)fd;
	(void)what;
	(void)arg;
	dataplane_settle();
}

/* An mstate hook: changes are acted on from the loop, never inside it. */
static void dataplane_hook(void *arg, const struct mstate_event *ev)
{
	static const struct timeval zero = { 0, 0 };

	(void)arg;
	if (ev->kind == MSTATE_EV_MIRROR_CREATED)
		G.mirrors_created++;
	if (ev->kind == MSTATE_EV_TOPIC_ADDED)
		G.topics_added++;
	if ((ev->kind == MSTATE_EV_STATE || ev->kind == MSTATE_EV_TOPIC_ADDED) &&
	    !evtimer_pending(G.dataplane_ev, NULL))
		evtimer_add(G.dataplane_ev, &zero);
}

/* ---- one run -------------------------------------------------------------- */

struct run {
	uint8_t *out;          /* the bytes to send */
	size_t len, off;
	size_t *marks;         /* request boundaries (chunk mode 3) */
	size_t nmarks, mark;
	int chunk_mode;
	int half_close;
	size_t frames;         /* complete frames the server must answer */
	int fd;
	struct event *ev_read, *ev_write, *ev_next, *ev_deadline;
	int32_t *corrs;        /* correlation id of each frame */
	uint8_t hdr[8];        /* the answers: size and correlation id */
	size_t hdr_have;
	uint64_t skip;
	size_t answers;
	int eof, timed_out, shut;
};

static int run_done(const struct run *rn)
{
	return rn->eof || rn->timed_out ||
	    (rn->off == rn->len && rn->answers >= rn->frames);
}

/*
 * The frames of out the server reads before it answers or closes, and their
 * correlation ids (answers must come back in this order).
 */
static int count_frames(struct run *rn)
{
	const uint8_t *p = rn->out;
	size_t n = rn->len, off = 0;

	while (n - off >= 4) {
		int32_t size = (int32_t)be32_load(p + off);

		if (size < 8 || (size_t)size > MAX_REQUEST_BYTES)
			break; /* the server closes here */
		if (n - off - 4 < (size_t)size)
			break; /* partial: it waits for the rest */
		if (rn->frames % 256 == 0) {
			int32_t *c = realloc(rn->corrs,
			    (rn->frames + 256) * sizeof(*c));

			if (c == NULL)
				return -1;
			rn->corrs = c;
		}
		/* api_key int16, api_version int16, correlation_id int32 */
		rn->corrs[rn->frames++] = (int32_t)be32_load(p + off + 8);
		off += 4 + (size_t)size;
	}
	return 0;
}

/* One whole answer has arrived: it must be the next one in order. */
static void answer_seen(struct run *rn, int32_t corr)
{
	if (rn->answers >= rn->frames) {
		fprintf(stderr, "fuzz_admin: answer %zu (correlation id %d) to "
		    "%zu requests\n", rn->answers + 1, corr, rn->frames);
		abort();
	}
	if (corr != rn->corrs[rn->answers]) {
		fprintf(stderr, "fuzz_admin: answer %zu carries correlation id %d, "
		    "its request had %d: answers out of order\n", rn->answers + 1,
		    corr, rn->corrs[rn->answers]);
		abort();
	}
	rn->answers++;
	G.answers++;
}

static void client_read_cb(evutil_socket_t fd, short what, void *arg)
{
	struct run *rn = arg;
	uint8_t buf[65536];
	ssize_t n;

	(void)what;
	while ((n = read(fd, buf, sizeof(buf))) > 0) {
		for (size_t i = 0; i < (size_t)n;) {
			if (rn->skip > 0) {
				size_t k = (size_t)MIN(rn->skip, (uint64_t)((size_t)n - i));

				rn->skip -= k;
				i += k;
				continue;
			}
			/* size int32, then correlation id int32, then the rest */
			rn->hdr[rn->hdr_have++] = buf[i++];
			if (rn->hdr_have < 8)
				continue;
			rn->hdr_have = 0;
			if (be32_load(rn->hdr) < 4) {
				fprintf(stderr, "fuzz_admin: the server sent a "
				    "frame of %u bytes\n", be32_load(rn->hdr));
				abort();
			}
			rn->skip = be32_load(rn->hdr) - 4;
			answer_seen(rn, (int32_t)be32_load(rn->hdr + 4));
		}
	}
	if (n == 0 || (n < 0 && errno != EAGAIN && errno != EINTR))
		rn->eof = 1;
	if (rn->eof)
		event_del(rn->ev_read);
	if (run_done(rn))
		event_base_loopbreak(G.base);
}

static void client_write_cb(evutil_socket_t fd, short what, void *arg)
{
	struct run *rn = arg;
	size_t want = rn->len - rn->off;
	ssize_t n;

	(void)what;
	switch (rn->chunk_mode) {
	case 1:
		if (rn->off < 64)
			want = 1;
		break;
	case 2:
		want = MIN(want, 7);
		break;
	case 3:
		if (rn->marks != NULL) {
			while (rn->mark < rn->nmarks && rn->marks[rn->mark] <= rn->off)
				rn->mark++;
			if (rn->mark < rn->nmarks)
				want = rn->marks[rn->mark] - rn->off;
		} else {
			want = MIN(want, 512);
		}
		break;
	}
	n = want > 0 ? write(fd, rn->out + rn->off, want) : 0;
	if (n > 0)
		rn->off += (size_t)n;
	else if (n < 0 && errno != EAGAIN && errno != EINTR)
		rn->off = rn->len; /* the server is gone: what is left is moot */
	if (rn->off == rn->len) {
		event_del(rn->ev_write);
		if (rn->half_close && !rn->shut) {
			shutdown(fd, SHUT_WR);
			rn->shut = 1;
		}
		if (run_done(rn))
			event_base_loopbreak(G.base);
	} else if (rn->chunk_mode != 0) {
		/* Let the server read this piece before the next one. */
		static const struct timeval zero = { 0, 0 };

		event_del(rn->ev_write);
		evtimer_add(rn->ev_next, &zero);
	}
}

static void client_next_cb(evutil_socket_t fd, short what, void *arg)
{
	struct run *rn = arg;

	(void)fd;
	(void)what;
	event_add(rn->ev_write, NULL);
}

static void deadline_cb(evutil_socket_t fd, short what, void *arg)
{
	struct run *rn = arg;

	(void)fd;
	(void)what;
	rn->timed_out = 1;
	event_base_loopbreak(G.base);
}

/* Builds the byte stream of a structured input (see the top). */
static int build_requests(struct run *rn, const uint8_t *p, size_t n)
{
	struct kw w;
	int32_t corr = 0;

	kw_init(&w, 64u << 20);
	while (n >= 6) {
		int16_t key = (int16_t)be16_load(p);
		int16_t ver = (int16_t)be16_load(p + 2);
		size_t blen = MIN((size_t)be16_load(p + 4), n - 6);
		int hv = kp_request_header_version(key, ver);
		size_t start = w.len;
		struct kp_request_header h;
		uint8_t *slot;

		p += 6;
		n -= 6;
		kp_request_header_init(&h);
		h.request_api_key = key;
		h.request_api_version = ver;
		h.correlation_id = corr++;
		h.client_id = kstr_c("fuzz");
		kw_i32(&w, 0); /* size, filled in below */
		if (kp_request_header_encode(&w, hv < 0 ? 1 : hv, &h) != 0)
			break;
		kw_raw(&w, p, blen);
		if (w.err)
			break;
		slot = w.buf + start;
		be32_store(slot, (uint32_t)(w.len - start - 4));
		p += blen;
		n -= blen;
		if (rn->nmarks % 64 == 0) {
			size_t *m = realloc(rn->marks, (rn->nmarks + 64) * sizeof(*m));

			if (m == NULL)
				break;
			rn->marks = m;
		}
		rn->marks[rn->nmarks++] = w.len;
	}
	if (w.err) {
		kw_fini(&w);
		return -1;
	}
	rn->out = kw_take(&w, &rn->len);
	kw_fini(&w);
	return 0;
}

/* Deletes every mirror: each input starts from an empty model. */
static void reset_state(void)
{
	char msg[512];

	while (mstate_mirror_count(G.st) > 0) {
		struct mirror *m = mstate_mirror_at(G.st,
		    mstate_mirror_count(G.st) - 1);
		char *name = strdup(m->name);

		if (name == NULL)
			abort();
		/* What an operator does: remove the topics, let the data plane
		 * stop them, delete the mirror. */
		for (size_t t = 0; t < m->ntopics; t++) {
			struct mtopic *mt = m->topics[t];

			if (mtopic_state(mt) != MPART_STOPPED &&
			    mtopic_state(mt) != MPART_STOPPING)
				mstate_remove_topic(G.st, name, mt->name, msg,
				    sizeof(msg));
		}
		dataplane_settle();
		if (mstate_delete_mirror(G.st, name, msg, sizeof(msg)) != 0) {
			fprintf(stderr, "fuzz_admin: cannot reset the model: %s\n",
			    msg);
			abort();
		}
		free(name);
	}
}

/*
 * A fresh admin server over an empty model for every input: admin_free()
 * cancels what the last one still had running (AddTopicsToMirror lookups,
 * the background lookups of source cluster ids), which would otherwise act
 * on a later input's mirror of the same name.
 */
static void admin_restart(void)
{
	char err[1024];

	admin_free(G.adm);
	G.adm = NULL;
	G.admin_port = 0;
	/* A command of the last input may still be in flight (its answer
	 * cancelled, its write not): the reset validates against the model
	 * once it is applied. */
	mstate_async_wait(G.st);
	event_base_loop(G.base, EVLOOP_NONBLOCK); /* deferred frees */
	reset_state();
	/* No pipeline: the data plane is not the admin plane (see above). */
	G.adm = admin_new(G.base, G.st, G.cfg, NULL, &G.ms, err, sizeof(err));
	if (G.adm == NULL) {
		fprintf(stderr, "fuzz_admin: admin_new: %s\n", err);
		abort();
	}
	G.admin_port = admin_port(G.adm);
}

static int client_connect(void)
{
	struct sockaddr_in sin;
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	int one = 1;

	if (fd < 0)
		return -1;
	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	memset(&sin, 0, sizeof(sin));
	sin.sin_family = AF_INET;
	sin.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	sin.sin_port = htons((uint16_t)G.admin_port);
	if (connect(fd, (struct sockaddr *)&sin, sizeof(sin)) != 0 &&
	    errno != EINPROGRESS) {
		close(fd);
		return -1;
	}
	return fd;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct run rn;
	struct timeval dl = { RUN_DEADLINE_S, 0 };

	if (!G.ready)
		setup();
	if (size == 0)
		return 0;
	G.inputs++;
#ifndef MIRRORD_LIBFUZZER
	/* libFuzzer has -timeout; the replay program needs its own. */
	alarm(2 * RUN_DEADLINE_S);
#endif
	memset(&rn, 0, sizeof(rn));
	rn.chunk_mode = (data[0] >> 1) & 3;
	rn.half_close = (data[0] >> 3) & 1;
	if (data[0] & 1) {
		rn.len = size - 1;
		rn.out = malloc(rn.len ? rn.len : 1);
		if (rn.out == NULL)
			return 0;
		memcpy(rn.out, data + 1, rn.len);
	} else if (build_requests(&rn, data + 1, size - 1) < 0) {
		free(rn.marks);
		return 0;
	}
	if (count_frames(&rn) < 0) {
		free(rn.out);
		free(rn.marks);
		free(rn.corrs);
		return 0;
	}

	event_base_loop(G.base, EVLOOP_NONBLOCK); /* last run's leftovers */
	admin_restart();
	rn.fd = client_connect();
	if (rn.fd < 0) {
		fprintf(stderr, "fuzz_admin: cannot connect to the admin port: %s\n",
		    strerror(errno));
		abort();
	}
	rn.ev_read = event_new(G.base, rn.fd, EV_READ | EV_PERSIST,
	    client_read_cb, &rn);
	rn.ev_write = event_new(G.base, rn.fd, EV_WRITE | EV_PERSIST,
	    client_write_cb, &rn);
	rn.ev_next = evtimer_new(G.base, client_next_cb, &rn);
	rn.ev_deadline = evtimer_new(G.base, deadline_cb, &rn);
	if (rn.ev_read == NULL || rn.ev_write == NULL || rn.ev_next == NULL ||
	    rn.ev_deadline == NULL)
		abort();
	event_add(rn.ev_read, NULL);
	event_add(rn.ev_deadline, &dl);
	if (rn.len > 0)
		event_add(rn.ev_write, NULL);
	else if (rn.half_close)
		shutdown(rn.fd, SHUT_WR);
	while (!run_done(&rn))
		event_base_loop(G.base, EVLOOP_ONCE);
	if (rn.timed_out) {
		fprintf(stderr, "fuzz_admin: %zu of %zu requests answered after %d s "
		    "(%zu of %zu bytes written): the server hangs\n", rn.answers,
		    rn.frames, RUN_DEADLINE_S, rn.off, rn.len);
		abort();
	}
	event_free(rn.ev_read);
	event_free(rn.ev_write);
	event_free(rn.ev_next);
	event_free(rn.ev_deadline);
	close(rn.fd);
	/* The server sees the close now rather than in the next run. */
	event_base_loop(G.base, EVLOOP_NONBLOCK);
	free(rn.out);
	free(rn.marks);
	free(rn.corrs);
#ifndef MIRRORD_LIBFUZZER
	alarm(0);
#endif
	return 0;
}

/* The replay program's corpus: test/fuzz/corpus/admin (see replay.c). */
const char fuzz_corpus[] = "admin";
