/*
 * mkseeds_admin: write the seed corpus of fuzz_admin.
 *
 *   mkseeds_admin CORPUS_DIR [CRASHERS_DIR]
 *
 * Inputs in fuzz_admin's format (see the top of fuzz_admin.c): valid
 * requests of every API mirrord serves, whole mirror lifecycles on a source
 * that answers (127.0.0.1:9092, the harness's fake cluster), on one that is
 * down (127.0.0.1:1) and on one off this host, deep pipelining behind an
 * asynchronous AddTopicsToMirror, the same streams written byte by byte and
 * in pieces, and framing errors.  CRASHERS_DIR gets the inputs that once
 * crashed or hung mirrord (a DescribeMirrors
 * naming one mirror 10,000 times, 5,000 requests pipelined behind an
 * AddTopicsToMirror, ssl.ca.location=/proc/self/fd/4, a pattern that took
 * gigabytes to compile); they are now regression seeds of the replayed
 * corpus.  The output is deterministic; the files are committed in
 * test/fuzz/corpus/admin (give it as both directories).
 *
 *   mkseeds_admin --issue9 DIR
 *
 * writes those inputs at full size into DIR (a DescribeMirrors naming
 * one mirror 100,000 times, 300,000 requests pipelined behind an
 * AddTopicsToMirror: 6 MB, so not stored).
 */
#include "config.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "compat.h"
#include "kbuf.h"
#include "kproto.h"

#define UP "127.0.0.1:9092"
#define DOWN "127.0.0.1:1"
#define REMOTE "10.0.0.1:9092"

/* Flags byte (fuzz_admin.c). */
#define F_RAW 1
#define F_DRIBBLE (1 << 1)
#define F_PIECES (2 << 1)
#define F_PER_REQUEST (3 << 1)
#define F_HALF_CLOSE (1 << 3)

/* One input being built: the flags byte, then records. */
struct seed {
	struct kw w;
	int32_t corr; /* raw mode: the next correlation id */
	int raw;
};

static void seed_begin(struct seed *s, int flags)
{
	kw_init(&s->w, 16u << 20);
	kw_i8(&s->w, (int8_t)flags);
	s->corr = 0;
	s->raw = flags & F_RAW;
}

static void seed_put(struct seed *s, const char *dir, const char *name)
{
	char path[4096];
	FILE *fp;

	if (s->w.err) {
		fprintf(stderr, "mkseeds_admin: %s: %s\n", name, s->w.why);
		exit(1);
	}
	snprintf(path, sizeof(path), "%s/%s", dir, name);
	fp = fopen(path, "wb");
	if (fp == NULL || fwrite(s->w.buf, 1, s->w.len, fp) != s->w.len ||
	    fclose(fp) != 0) {
		fprintf(stderr, "mkseeds_admin: %s: %s\n", path, strerror(errno));
		exit(1);
	}
	kw_fini(&s->w);
}

/* Appends a request: a record, or in raw mode a whole frame. */
static void req(struct seed *s, int16_t key, int16_t ver, const void *msg)
{
	const struct kp_api *api = kp_api_find(key);
	struct kw b;

	kw_init(&b, 1u << 20);
	if (api->request_encode(&b, ver, msg) != 0 || b.err) {
		fprintf(stderr, "mkseeds_admin: %s v%d does not encode: %s\n",
		    api->name, ver, b.why != NULL ? b.why : "?");
		exit(1);
	}
	if (s->raw) {
		struct kp_request_header h;

		kp_request_header_init(&h);
		h.request_api_key = key;
		h.request_api_version = ver;
		h.correlation_id = s->corr++;
		h.client_id = kstr_c("seed");
		if (kp_request_write(&s->w, &h, msg) != 0) {
			fprintf(stderr, "mkseeds_admin: %s: %s\n", api->name, s->w.why);
			exit(1);
		}
	} else {
		if (b.len > 0xffff) {
			fprintf(stderr, "mkseeds_admin: %s body of %zu bytes is "
			    "too long for a record\n", api->name, b.len);
			exit(1);
		}
		kw_i16(&s->w, key);
		kw_i16(&s->w, ver);
		kw_u16(&s->w, (uint16_t)b.len);
		kw_raw(&s->w, b.buf, b.len);
	}
	kw_fini(&b);
}

/* ---- the requests ------------------------------------------------------ */

static void api_versions(struct seed *s, int16_t ver)
{
	struct kp_api_versions_request m;

	kp_api_versions_request_init(&m);
	m.client_software_name = kstr_c("mkseeds");
	m.client_software_version = kstr_c("1.0");
	req(s, KP_API_API_VERSIONS, ver, &m);
}

static void metadata(struct seed *s, int16_t ver, const char *topic)
{
	struct kp_metadata_request m;
	struct kp_metadata_request_topic t;

	kp_metadata_request_init(&m);
	kp_metadata_request_topic_init(&t);
	t.name = kstr_c(topic);
	m.topics = topic != NULL ? &t : NULL;
	m.topics_n = topic != NULL ? 1 : (ver == 0 ? 0 : -1);
	req(s, KP_API_METADATA, ver, &m);
}

/* configs: "name=value" strings (a value of "\x01" is sent as null). */
static void create(struct seed *s, const char *name, const char *bootstrap,
    const char *const *configs, int n)
{
	struct kp_create_mirror_request m;
	struct kp_create_mirror_request_mirror_config c[16];
	char buf[16][256];
	int k = 0;

	kp_create_mirror_request_init(&m);
	m.mirror_name = kstr_c(name);
	if (bootstrap != NULL) {
		kp_create_mirror_request_mirror_config_init(&c[k]);
		c[k].name = kstr_c("bootstrap.servers");
		c[k].value = kstr_c(bootstrap);
		k++;
	}
	for (int i = 0; i < n && k < 16; i++, k++) {
		char *eq;

		snprintf(buf[k], sizeof(buf[k]), "%s", configs[i]);
		eq = strchr(buf[k], '=');
		kp_create_mirror_request_mirror_config_init(&c[k]);
		if (eq != NULL)
			*eq = '\0';
		c[k].name = kstr_c(buf[k]);
		c[k].value = eq == NULL || strcmp(eq + 1, "\x01") == 0 ? KSTR_NULL :
		    kstr_c(eq + 1);
	}
	m.configs = c;
	m.configs_n = k;
	req(s, KP_API_CREATE_MIRROR, 0, &m);
}

static void add_topics(struct seed *s, const char *mirror,
    const char *const *topics, int nt, const char *const *inc, int ni,
    const char *const *exc, int ne)
{
	struct kp_add_topics_to_mirror_request m;
	struct kp_add_topics_to_mirror_request_topic t[8];
	struct kstr in[4], ex[4];

	kp_add_topics_to_mirror_request_init(&m);
	m.mirror_name = kstr_c(mirror);
	for (int i = 0; i < nt; i++) {
		kp_add_topics_to_mirror_request_topic_init(&t[i]);
		t[i].name = kstr_c(topics[i]);
	}
	for (int i = 0; i < ni; i++)
		in[i] = kstr_c(inc[i]);
	for (int i = 0; i < ne; i++)
		ex[i] = kstr_c(exc[i]);
	m.topics = t;
	m.topics_n = nt;
	m.include_patterns = in;
	m.include_patterns_n = ni;
	m.exclude_patterns = ex;
	m.exclude_patterns_n = ne;
	req(s, KP_API_ADD_TOPICS_TO_MIRROR, 0, &m);
}

static void remove_topics(struct seed *s, const char *mirror,
    const char *const *topics, int nt, const char *const *pats, int np)
{
	struct kp_remove_topics_from_mirror_request m;
	struct kp_remove_topics_from_mirror_request_topic t[8];
	struct kstr p[4];

	kp_remove_topics_from_mirror_request_init(&m);
	m.mirror_name = kstr_c(mirror);
	for (int i = 0; i < nt; i++) {
		kp_remove_topics_from_mirror_request_topic_init(&t[i]);
		t[i].name = kstr_c(topics[i]);
	}
	for (int i = 0; i < np; i++)
		p[i] = kstr_c(pats[i]);
	m.topics = t;
	m.topics_n = nt;
	m.patterns = p;
	m.patterns_n = np;
	req(s, KP_API_REMOVE_TOPICS_FROM_MIRROR, 0, &m);
}

/* PauseMirrorTopics or ResumeMirrorTopics (the same fields). */
static void pause_resume(struct seed *s, int16_t key, const char *mirror,
    const char *const *topics, int nt)
{
	struct kp_pause_mirror_topics_request m;
	struct kp_pause_mirror_topics_request_topic t[8];

	_Static_assert(sizeof(struct kp_pause_mirror_topics_request) ==
	    sizeof(struct kp_resume_mirror_topics_request), "same shape");
	kp_pause_mirror_topics_request_init(&m);
	m.mirror_name = kstr_c(mirror);
	for (int i = 0; i < nt; i++) {
		kp_pause_mirror_topics_request_topic_init(&t[i]);
		t[i].name = kstr_c(topics[i]);
	}
	m.topics = t;
	m.topics_n = nt;
	if (key == KP_API_PAUSE_MIRROR_TOPICS) {
		req(s, key, 0, &m);
	} else {
		struct kp_resume_mirror_topics_request r;

		kp_resume_mirror_topics_request_init(&r);
		r.mirror_name = m.mirror_name;
		r.topics = (struct kp_resume_mirror_topics_request_topic *)t;
		r.topics_n = nt;
		req(s, key, 0, &r);
	}
}

static void list_mirrors(struct seed *s)
{
	struct kp_list_mirrors_request m;

	kp_list_mirrors_request_init(&m);
	req(s, KP_API_LIST_MIRRORS, 0, &m);
}

/* names NULL: all mirrors (a null array). */
static void describe(struct seed *s, const char *const *names, int n)
{
	struct kp_describe_mirrors_request m;
	struct kstr v[8];

	kp_describe_mirrors_request_init(&m);
	for (int i = 0; i < n; i++)
		v[i] = kstr_c(names[i]);
	m.mirror_names = names != NULL ? v : NULL;
	m.mirror_names_n = names != NULL ? n : -1;
	req(s, KP_API_DESCRIBE_MIRRORS, 0, &m);
}

static void delete_mirror(struct seed *s, const char *name)
{
	struct kp_delete_mirror_request m;

	kp_delete_mirror_request_init(&m);
	m.mirror_name = kstr_c(name);
	req(s, KP_API_DELETE_MIRROR, 0, &m);
}

#define A(...) (const char *const[]){ __VA_ARGS__ }
#define N(...) (int)(sizeof((const char *const[]){ __VA_ARGS__ }) / sizeof(char *))

/* Create, add (names and patterns), describe, pause, resume, remove,
 * list, delete: the whole life of a mirror on one connection. */
static void lifecycle(struct seed *s, const char *boot)
{
	create(s, "m1", boot, NULL, 0);
	add_topics(s, "m1", A("alpha", "beta"), 2, A("orders\\..*"), 1,
	    A(".*\\.us"), 1);
	describe(s, A("m1"), 1);
	pause_resume(s, KP_API_PAUSE_MIRROR_TOPICS, "m1", A("alpha"), 1);
	describe(s, NULL, 0);
	pause_resume(s, KP_API_RESUME_MIRROR_TOPICS, "m1", A("alpha", "nope"), 2);
	remove_topics(s, "m1", A("beta"), 1, A("orders\\.eu"), 1);
	remove_topics(s, "m1", A("alpha"), 1, NULL, 0);
	list_mirrors(s);
	delete_mirror(s, "m1");
	describe(s, A("m1"), 1);
}

static const char *corpus, *crashers;

static void lifecycle_seeds(void)
{
	static const struct {
		const char *name;
		int flags;
	} modes[] = {
		{ "lifecycle", 0 },
		{ "lifecycle-raw", F_RAW },
		{ "lifecycle-dribble", F_DRIBBLE },
		{ "lifecycle-raw-pieces", F_RAW | F_PIECES },
		{ "lifecycle-per-request", F_PER_REQUEST },
		{ "lifecycle-half-close", F_HALF_CLOSE },
	};
	struct seed s;

	for (size_t i = 0; i < ARRAY_SIZE(modes); i++) {
		seed_begin(&s, modes[i].flags);
		lifecycle(&s, UP);
		seed_put(&s, corpus, modes[i].name);
	}
	seed_begin(&s, 0);
	lifecycle(&s, DOWN);
	seed_put(&s, corpus, "lifecycle-source-down");
	seed_begin(&s, 0);
	lifecycle(&s, REMOTE);
	seed_put(&s, corpus, "lifecycle-source-remote");
}

static void per_api_seeds(void)
{
	struct seed s;
	char name[64];

	for (int16_t v = 0; v <= 4; v++) {
		seed_begin(&s, 0);
		api_versions(&s, v);
		snprintf(name, sizeof(name), "api-versions-v%d", v);
		seed_put(&s, corpus, name);
	}
	/* A version newer than the codec knows (KIP-511: answered in v0). */
	seed_begin(&s, 0);
	kw_raw(&s.w, "\x00\x12\x00\x09\x00\x01\x00", 7);
	seed_put(&s, corpus, "api-versions-v9");
	for (int16_t v = 0; v <= 13; v++) {
		seed_begin(&s, 0);
		metadata(&s, v, v % 2 ? "alpha" : NULL);
		snprintf(name, sizeof(name), "metadata-v%d", v);
		seed_put(&s, corpus, name);
	}
	seed_begin(&s, 0);
	create(&s, "m1", UP, A("security.protocol=PLAINTEXT",
	    "mirror.topic.prefix=src.", "client.id=\x01"), 3);
	seed_put(&s, corpus, "create-mirror");
	seed_begin(&s, 0);
	create(&s, "m1", UP, A("security.protocol=SASL_SSL",
	    "sasl.mechanism=SCRAM-SHA-512", "sasl.username=u",
	    "sasl.password=p"), 4);
	seed_put(&s, corpus, "create-mirror-sasl");
	seed_begin(&s, 0);
	create(&s, "m1", NULL, A("no.such.key=1"), 1);
	create(&s, "", UP, NULL, 0);
	create(&s, "bad/name", UP, NULL, 0);
	create(&s, "m1", UP, NULL, 0);
	create(&s, "m1", UP, NULL, 0);
	seed_put(&s, corpus, "create-mirror-refused");
	seed_begin(&s, 0);
	add_topics(&s, "nope", A("alpha"), 1, NULL, 0, NULL, 0);
	create(&s, "m1", UP, NULL, 0);
	add_topics(&s, "m1", A("missing", "__consumer_offsets", "bad topic"), 3,
	    A("("), 1, NULL, 0);
	add_topics(&s, "m1", NULL, 0, A(".*"), 1, A("__.*", "beta"), 2);
	describe(&s, NULL, 0);
	seed_put(&s, corpus, "add-topics");
	seed_begin(&s, 0);
	create(&s, "m1", UP, NULL, 0);
	create(&s, "m2", UP, NULL, 0);
	add_topics(&s, "m1", A("alpha"), 1, NULL, 0, NULL, 0);
	add_topics(&s, "m2", A("alpha", "beta"), 2, NULL, 0, NULL, 0);
	remove_topics(&s, "m2", NULL, 0, A(".*"), 1);
	pause_resume(&s, KP_API_PAUSE_MIRROR_TOPICS, "m2", A("beta"), 1);
	list_mirrors(&s);
	describe(&s, A("m1", "m2", "m3"), 3);
	seed_put(&s, corpus, "two-mirrors");
	seed_begin(&s, 0);
	remove_topics(&s, "nope", A("alpha"), 1, NULL, 0);
	pause_resume(&s, KP_API_PAUSE_MIRROR_TOPICS, "nope", A("alpha"), 1);
	pause_resume(&s, KP_API_RESUME_MIRROR_TOPICS, "nope", A("alpha"), 1);
	delete_mirror(&s, "nope");
	list_mirrors(&s);
	describe(&s, A("nope"), 1);
	seed_put(&s, corpus, "unknown-mirror");
}

/* 200 requests queued behind an AddTopicsToMirror that waits for its
 * source lookup: answered in order, one at a time. */
static void pipelining_seeds(void)
{
	struct seed s;

	seed_begin(&s, 0);
	create(&s, "m1", UP, NULL, 0);
	add_topics(&s, "m1", A("alpha"), 1, A("orders\\..*"), 1, NULL, 0);
	for (int i = 0; i < 200; i++) {
		if (i % 3 == 0)
			describe(&s, A("m1"), 1);
		else if (i % 3 == 1)
			list_mirrors(&s);
		else
			api_versions(&s, 3);
	}
	seed_put(&s, corpus, "pipelined-behind-add");
	seed_begin(&s, F_RAW | F_HALF_CLOSE);
	create(&s, "m1", DOWN, NULL, 0);
	add_topics(&s, "m1", A("alpha"), 1, NULL, 0, NULL, 0);
	for (int i = 0; i < 50; i++)
		list_mirrors(&s);
	seed_put(&s, corpus, "pipelined-half-close");
}

static void framing_seeds(void)
{
	struct seed s;

	/* A frame size below the 8-byte minimum. */
	seed_begin(&s, F_RAW);
	kw_i32(&s.w, 4);
	kw_i32(&s.w, 0);
	seed_put(&s, corpus, "frame-too-small");
	/* Over server.max_request_bytes (1 MiB in the harness). */
	seed_begin(&s, F_RAW);
	kw_i32(&s.w, 2000000);
	kw_raw(&s.w, "\x00\x12\x00\x00", 4);
	seed_put(&s, corpus, "frame-oversized");
	/* A request, then half of the next one. */
	seed_begin(&s, F_RAW);
	list_mirrors(&s);
	kw_i32(&s.w, 100);
	kw_raw(&s.w, "\x00\x62\x00\x00\x00\x00", 6);
	seed_put(&s, corpus, "frame-partial");
	/* A negative size. */
	seed_begin(&s, F_RAW);
	kw_i32(&s.w, -1);
	seed_put(&s, corpus, "frame-negative");
	/* Unknown ApiKey 97; an unserved one (Produce); unsupported versions. */
	seed_begin(&s, 0);
	kw_raw(&s.w, "\x00\x61\x00\x00\x00\x02\xde\xad", 8);
	seed_put(&s, corpus, "unknown-api");
	seed_begin(&s, 0);
	kw_raw(&s.w, "\x00\x00\x00\x09\x00\x00", 6);
	seed_put(&s, corpus, "unserved-api");
	seed_begin(&s, 0);
	kw_raw(&s.w, "\x00\x5e\x00\x07\x00\x02\x01\x00", 8);
	seed_put(&s, corpus, "unsupported-version");
	/* A header whose client id runs past the frame. */
	seed_begin(&s, F_RAW);
	kw_i32(&s.w, 10);
	kw_raw(&s.w, "\x00\x62\x00\x00\x00\x00\x00\x01\x00\x40", 10);
	seed_put(&s, corpus, "bad-header");
	/* A body with bytes left over; then a body that does not parse. */
	seed_begin(&s, 0);
	kw_raw(&s.w, "\x00\x62\x00\x00\x00\x03\x00\x00\x00", 9);
	seed_put(&s, corpus, "trailing-bytes");
	seed_begin(&s, 0);
	kw_raw(&s.w, "\x00\x5e\x00\x00\x00\x05\x03m1\xff\xff", 11);
	seed_put(&s, corpus, "malformed-body");
	/* Nothing at all, and an EOF right away. */
	seed_begin(&s, F_HALF_CLOSE);
	seed_put(&s, corpus, "empty-half-close");
}

/* The inputs that once crashed or hung mirrord (regression seeds). */
static void crasher_seeds(void)
{
	struct seed s;

	/* DescribeMirrors naming one mirror 10,000 times: its answer outgrows
	 * the request's arena (4 x server.max_request_bytes, 1 MiB here). */
	{
		struct kp_describe_mirrors_request m;
		struct kstr *v = calloc(10000, sizeof(*v));

		if (v == NULL)
			exit(1);
		for (int i = 0; i < 10000; i++)
			v[i] = kstr_c("m1");
		seed_begin(&s, 0);
		create(&s, "m1", UP, NULL, 0);
		add_topics(&s, "m1", A("alpha", "beta"), 2, NULL, 0, NULL, 0);
		kp_describe_mirrors_request_init(&m);
		m.mirror_names = v;
		m.mirror_names_n = 10000;
		req(&s, KP_API_DESCRIBE_MIRRORS, 0, &m);
		seed_put(&s, crashers, "describe-one-mirror-10000-times");
		free(v);
	}
	/* 5,000 requests queued behind an AddTopicsToMirror that waits for
	 * its source: its answer pumps them all, recursively (enough for a
	 * stack overflow under ASan; --issue9 writes the full 300,000). */
	seed_begin(&s, F_RAW);
	create(&s, "m1", UP, NULL, 0);
	add_topics(&s, "m1", A("alpha"), 1, NULL, 0, NULL, 0);
	for (int i = 0; i < 5000; i++)
		list_mirrors(&s);
	seed_put(&s, crashers, "pipelined-5000-behind-add");
	/* A CA file that is the daemon's own descriptor. */
	seed_begin(&s, 0);
	create(&s, "m1", UP, A("security.protocol=SSL",
	    "ssl.ca.location=/proc/self/fd/4"), 2);
	add_topics(&s, "m1", A("alpha"), 1, NULL, 0, NULL, 0);
	seed_put(&s, crashers, "ssl-ca-proc-self-fd-4");
	/* A pattern whose compiled form takes gigabytes (POSIX regcomp). */
	seed_begin(&s, 0);
	create(&s, "m1", UP, NULL, 0);
	add_topics(&s, "m1", NULL, 0, A("((.{1,1000}){1,1000})"), 1, NULL, 0);
	seed_put(&s, crashers, "pattern-bomb");
}

/* Those inputs at full size (megabytes: generated, not stored). */
static void issue9_inputs(const char *dir)
{
	struct kp_describe_mirrors_request m;
	struct kstr *v = calloc(100000, sizeof(*v));
	struct seed s;

	if (v == NULL)
		exit(1);
	for (int i = 0; i < 100000; i++)
		v[i] = kstr_c("m1");
	seed_begin(&s, F_RAW);
	create(&s, "m1", UP, NULL, 0);
	add_topics(&s, "m1", A("alpha", "beta"), 2, NULL, 0, NULL, 0);
	kp_describe_mirrors_request_init(&m);
	m.mirror_names = v;
	m.mirror_names_n = 100000;
	req(&s, KP_API_DESCRIBE_MIRRORS, 0, &m);
	seed_put(&s, dir, "describe-one-mirror-100000-times");
	free(v);
	seed_begin(&s, F_RAW);
	create(&s, "m1", UP, NULL, 0);
	add_topics(&s, "m1", A("alpha"), 1, NULL, 0, NULL, 0);
	for (int i = 0; i < 300000; i++)
		list_mirrors(&s);
	seed_put(&s, dir, "pipelined-300000-behind-add");
}

int main(int argc, char **argv)
{
	if (argc == 3 && strcmp(argv[1], "--issue9") == 0) {
		issue9_inputs(argv[2]);
		return 0;
	}
	if (argc < 2 || argc > 3) {
		fprintf(stderr, "usage: mkseeds_admin CORPUS_DIR [CRASHERS_DIR]\n"
		    "       mkseeds_admin --issue9 DIR\n");
		return 2;
	}
	corpus = argv[1];
	crashers = argc > 2 ? argv[2] : NULL;
	per_api_seeds();
	lifecycle_seeds();
	pipelining_seeds();
	framing_seeds();
	if (crashers != NULL)
		crasher_seeds();
	return 0;
}
