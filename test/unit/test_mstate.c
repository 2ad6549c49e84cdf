/*
 * Unit tests for mstate: every operation and every error code of the wire
 * contract with its message, the transition table (allowed and refused),
 * the data-plane records, hooks, and that the model rebuilt from the log
 * (after a reopen, after a compaction, after a kill at any byte of the last
 * record, after a failed disk write) equals the one before.
 */
#include "config.h"

#include <check.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <event2/event.h>

#include "compat.h"
#include "kerr.h"
#include "kbuf.h"
#include "mlog.h"
#include "mrec.h"
#include "mstate.h"
#include "xlate.h"

/* ---- fixture ----------------------------------------------------------- */

struct faults {
	int write_errno;
	int fsync_errno;
	/* An fsync the test holds (the writer thread waits in it). */
	pthread_mutex_t mu;
	pthread_cond_t cv;
	int hold, inside;
};

static ssize_t fault_pwrite(void *arg, int fd, const void *buf, size_t n,
    off_t off)
{
	struct faults *f = arg;

	if (f->write_errno != 0) {
		errno = f->write_errno;
		return -1;
	}
	return pwrite(fd, buf, n, off);
}

static int fault_fsync(void *arg, int fd)
{
	struct faults *f = arg;
	int e;

	pthread_mutex_lock(&f->mu);
	if (f->hold) {
		f->inside = 1;
		pthread_cond_broadcast(&f->cv);
		while (f->hold)
			pthread_cond_wait(&f->cv, &f->mu);
		f->inside = 0;
	}
	e = f->fsync_errno;
	pthread_mutex_unlock(&f->mu);
	if (e != 0) {
		errno = e;
		return -1;
	}
	return 0;   /* the tests do not need durability across a power cut */
}

struct fx {
	char dir[256];
	uint64_t compact_records;   /* 0: the default */
	struct faults faults;
	struct mlog_io io;
	struct mlog *ml;
	struct mstate *st;
	char msg[2048];
};

static struct fx F;

static void fx_open(void)
{
	struct mlog_opts o;
	char err[1024];

	mlog_opts_init(&o);
	o.dir = F.dir;
	o.io = &F.io;
	if (F.compact_records != 0)
		o.compact_records = F.compact_records;
	F.ml = mlog_file_new(&o, err, sizeof(err));
	ck_assert_msg(F.ml != NULL, "%s", err);
	F.st = mstate_new();
	ck_assert_ptr_nonnull(F.st);
	ck_assert_msg(mstate_open(F.st, F.ml, err, sizeof(err)) == 0, "%s",
	    err);
}

static void fx_close(void)
{
	mstate_free(F.st);
	mlog_free(F.ml);
	F.st = NULL;
	F.ml = NULL;
}

static void rm_rf(const char *dir)
{
	DIR *d = opendir(dir);
	struct dirent *de;
	char path[4096];

	if (d == NULL)
		return;
	while ((de = readdir(d)) != NULL) {
		if (de->d_name[0] == '.')
			continue;
		snprintf(path, sizeof(path), "%s/%s", dir, de->d_name);
		unlink(path);
	}
	closedir(d);
	rmdir(dir);
}

static void setup(void)
{
	const char *base = getenv("TMPDIR");

	memset(&F, 0, sizeof(F));
	pthread_mutex_init(&F.faults.mu, NULL);
	pthread_cond_init(&F.faults.cv, NULL);
	snprintf(F.dir, sizeof(F.dir), "%s/test_mstate.XXXXXX",
	    base != NULL && base[0] != '\0' ? base : "/tmp");
	ck_assert_ptr_nonnull(mkdtemp(F.dir));
	F.io.pwrite = fault_pwrite;
	F.io.fsync = fault_fsync;
	F.io.arg = &F.faults;
	fx_open();
}

static struct event_base *B;

static void teardown(void)
{
	fx_close();
	if (B != NULL) {
		event_base_free(B);
		B = NULL;
	}
	rm_rf(F.dir);
}

/* Reopens from disk and checks that the model is what it was. */
static void reopen_same(void)
{
	char *before = mstate_dump(F.st), *after;

	fx_close();
	fx_open();
	after = mstate_dump(F.st);
	ck_assert_str_eq(after, before);
	free(before);
	free(after);
}

#define CODE(expr, want) do { \
	F.msg[0] = '\0'; \
	int code_ = (expr); \
	ck_assert_msg(code_ == (want), "%s: got %d (%s), want %d: %s", #expr, \
	    code_, kerr_name((int16_t)code_), (want), F.msg); \
} while (0)
#define MSG_HAS(s) ck_assert_msg(strstr(F.msg, (s)) != NULL, \
	"message '%s' lacks '%s'", F.msg, (s))

static const struct mcfg BOOT[] = { { (char *)"bootstrap.servers",
	(char *)"127.0.0.1:9092" } };

/* The synchronous forms (callback NULL) of the data plane's writes. */
static int anchor_now(struct mstate *st, struct mpart *p, int64_t src,
    int64_t dst, char *msg, size_t msglen)
{
	return mpart_add_anchor_async(st, p, src, dst, NULL, NULL, NULL, msg,
	    msglen);
}

static int sending_now(struct mstate *st, struct mpart *p, int64_t dst,
    char *msg, size_t msglen)
{
	return mpart_note_sending_async(st, p, dst, NULL, NULL, NULL, msg,
	    msglen);
}

static void mk_mirror(const char *name)
{
	CODE(mstate_create_mirror(F.st, name, BOOT, 1, F.msg, sizeof(F.msg)),
	    0);
}

static void mk_topic(const char *m, const char *t, int n)
{
	CODE(mstate_add_topic(F.st, m, t, n, F.msg, sizeof(F.msg)), 0);
}

static struct mtopic *topic(const char *m, const char *t)
{
	struct mtopic *tp = mirror_topic_find(mstate_mirror_find(F.st, m), t);

	ck_assert_msg(tp != NULL, "%s/%s missing", m, t);
	return tp;
}

static struct mpart *part(const char *m, const char *t, int i)
{
	struct mtopic *tp = topic(m, t);

	ck_assert_int_lt(i, tp->npart);
	return tp->parts[i];
}

/* Moves every partition of the topic through the data plane. */
static void topic_to(const char *m, const char *t, int to)
{
	struct mtopic *tp = topic(m, t);

	for (int32_t i = 0; i < tp->npart; i++)
		CODE(mpart_set_state(F.st, tp->parts[i], to, "test", F.msg,
		    sizeof(F.msg)), 0);
}

static void stop_topic(const char *m, const char *t)
{
	struct mtopic *tp = topic(m, t);

	CODE(mstate_remove_topic(F.st, m, t, F.msg, sizeof(F.msg)), 0);
	for (int32_t i = 0; i < tp->npart; i++)
		CODE(mpart_stopped(F.st, tp->parts[i], 100 + i, 7, "stopped",
		    F.msg, sizeof(F.msg)), 0);
}

static uint64_t log_records(void)
{
	struct mlog_stats s;

	mlog_stats(F.ml, &s);
	return s.records;
}

/* ---- tests ------------------------------------------------------------- */

START_TEST(test_cluster_id)
{
	const char *id = mstate_cluster_id(F.st);
	char saved[32];

	ck_assert_uint_eq(strlen(id), MSTATE_CLUSTER_ID_LEN);
	ck_assert_int_ne(id[0], '-');
	ck_assert_uint_eq(strspn(id, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijkl"
	    "mnopqrstuvwxyz0123456789-_"), MSTATE_CLUSTER_ID_LEN);
	snprintf(saved, sizeof(saved), "%s", id);
	fx_close();
	fx_open();
	ck_assert_str_eq(mstate_cluster_id(F.st), saved);
}
END_TEST

START_TEST(test_create_mirror)
{
	struct mcfg cfg[] = {
		{ (char *)"bootstrap.servers", (char *)"a:1,b:2" },
		{ (char *)"security.protocol", (char *)"SSL" },
		{ (char *)"sasl.jaas.config", NULL },
	};
	char longname[300];
	struct mirror *m;

	CODE(mstate_create_mirror(F.st, "m1", cfg, 3, F.msg, sizeof(F.msg)), 0);
	m = mstate_mirror_find(F.st, "m1");
	ck_assert_ptr_nonnull(m);
	ck_assert_uint_eq(m->nconfigs, 3);
	ck_assert_str_eq(m->configs[1].name, "security.protocol");
	ck_assert_str_eq(m->configs[1].value, "SSL");
	ck_assert_ptr_null(m->configs[2].value);
	ck_assert_str_eq(mirror_bootstrap(m), "a:1,b:2");
	ck_assert_ptr_null(m->source_cluster_id);
	ck_assert_uint_eq(m->ntopics, 0);

	CODE(mstate_create_mirror(F.st, "m1", cfg, 3, F.msg, sizeof(F.msg)),
	    KERR_CLUSTER_MIRROR_ALREADY_EXISTS);
	MSG_HAS("cluster mirror 'm1' already exists");

	static const struct { const char *name, *why; } bad[] = {
		{ "", "is empty" },
		{ "a b", "outside [a-zA-Z0-9._-]" },
		{ "m/1", "outside [a-zA-Z0-9._-]" },
		{ ".", "cannot be '.' or '..'" },
		{ "..", "cannot be '.' or '..'" },
		{ "x.removed", "cannot end in '.removed' or '.paused'" },
		{ "x.paused", "cannot end in '.removed' or '.paused'" },
	};
	for (size_t i = 0; i < ARRAY_SIZE(bad); i++) {
		CODE(mstate_create_mirror(F.st, bad[i].name, cfg, 1, F.msg,
		    sizeof(F.msg)), KERR_INVALID_CLUSTER_MIRROR_NAME);
		MSG_HAS(bad[i].why);
	}
	memset(longname, 'a', 250);
	longname[250] = '\0';
	CODE(mstate_create_mirror(F.st, longname, cfg, 1, F.msg, sizeof(F.msg)),
	    KERR_INVALID_CLUSTER_MIRROR_NAME);
	MSG_HAS("longer than 249");
	longname[249] = '\0';
	CODE(mstate_create_mirror(F.st, longname, cfg, 1, F.msg, sizeof(F.msg)),
	    0);
	CODE(mstate_create_mirror(F.st, "a.removedx", cfg, 1, F.msg,
	    sizeof(F.msg)), 0);

	/* bootstrap.servers is required (42, naming the key). */
	CODE(mstate_create_mirror(F.st, "m2", cfg + 1, 2, F.msg, sizeof(F.msg)),
	    KERR_INVALID_REQUEST);
	MSG_HAS("'m2': the configs must set bootstrap.servers");
	struct mcfg nullboot[] = { { (char *)"bootstrap.servers", NULL } };
	CODE(mstate_create_mirror(F.st, "m2", nullboot, 1, F.msg,
	    sizeof(F.msg)), KERR_INVALID_REQUEST);
	struct mcfg dup[] = { cfg[0], cfg[1], cfg[1] };
	CODE(mstate_create_mirror(F.st, "m2", dup, 3, F.msg, sizeof(F.msg)),
	    KERR_INVALID_REQUEST);
	MSG_HAS("config 'security.protocol' is given twice");
	ck_assert_ptr_null(mstate_mirror_find(F.st, "m2"));

	/* Sorted by name. */
	mk_mirror("b");
	mk_mirror("A");
	ck_assert_uint_eq(mstate_mirror_count(F.st), 5);
	for (size_t i = 1; i < mstate_mirror_count(F.st); i++)
		ck_assert_int_lt(strcmp(mstate_mirror_at(F.st, i - 1)->name,
		    mstate_mirror_at(F.st, i)->name), 0);
	reopen_same();
}
END_TEST

START_TEST(test_add_topic)
{
	struct mtopic *t;

	mk_mirror("m1");
	mk_mirror("m2");
	CODE(mstate_add_topic(F.st, "nope", "t", 3, F.msg, sizeof(F.msg)),
	    KERR_UNKNOWN_CLUSTER_MIRROR);
	MSG_HAS("cluster mirror 'nope' does not exist");
	CODE(mstate_add_topic(F.st, "m1", "bad topic", 3, F.msg,
	    sizeof(F.msg)), KERR_INVALID_TOPIC_EXCEPTION);
	MSG_HAS("topic name 'bad topic'");
	CODE(mstate_add_topic(F.st, "m1", "t", 0, F.msg, sizeof(F.msg)),
	    KERR_INVALID_PARTITIONS);
	MSG_HAS("m1/t: partition count 0");

	mk_topic("m1", "t", 3);
	t = topic("m1", "t");
	ck_assert_int_eq(t->npart, 3);
	for (int i = 0; i < 3; i++) {
		ck_assert_int_eq(t->parts[i]->state, MPART_PREPARING);
		ck_assert_int_eq(t->parts[i]->index, i);
		ck_assert_int_eq(t->parts[i]->last_offset, -1);
		ck_assert_int_eq(t->parts[i]->last_epoch, -1);
	}
	ck_assert_str_eq(mtopic_state_name(t), "PREPARING");

	/* Another mirror holds it (not STOPPED): 138 naming that mirror. */
	CODE(mstate_add_topic(F.st, "m2", "t", 3, F.msg, sizeof(F.msg)),
	    KERR_TOPIC_ALREADY_IN_CLUSTER_MIRROR);
	MSG_HAS("topic 't' is already in cluster mirror 'm1' (PREPARING)");
	ck_assert_ptr_null(mirror_topic_find(mstate_mirror_find(F.st, "m2"),
	    "t"));

	/* Already in this mirror and mirrored: success, nothing written. */
	uint64_t n = log_records();
	CODE(mstate_add_topic(F.st, "m1", "t", 3, F.msg, sizeof(F.msg)), 0);
	ck_assert_uint_eq(log_records(), n);

	/* Growth: new partitions in PREPARING, old ones untouched. */
	topic_to("m1", "t", MPART_MIRRORING);
	CODE(mstate_grow_topic(F.st, "m1", "t", 5, F.msg, sizeof(F.msg)), 0);
	ck_assert_int_eq(t->npart, 5);
	ck_assert_int_eq(t->parts[2]->state, MPART_MIRRORING);
	ck_assert_int_eq(t->parts[3]->state, MPART_PREPARING);
	ck_assert_int_eq(t->parts[4]->state, MPART_PREPARING);
	ck_assert_int_eq(mtopic_state(t), MTOPIC_MIXED);
	ck_assert_str_eq(mtopic_state_name(t), "MIXED");
	CODE(mstate_grow_topic(F.st, "m1", "t", 4, F.msg, sizeof(F.msg)), 0);
	ck_assert_int_eq(t->npart, 5);
	CODE(mstate_grow_topic(F.st, "m1", "zz", 4, F.msg, sizeof(F.msg)),
	    KERR_TOPIC_NOT_IN_CLUSTER_MIRROR);

	/* STOPPING: re-adding is 142. */
	CODE(mstate_remove_topic(F.st, "m1", "t", F.msg, sizeof(F.msg)), 0);
	CODE(mstate_add_topic(F.st, "m1", "t", 5, F.msg, sizeof(F.msg)),
	    KERR_MIRROR_TOPIC_BEING_STOPPED);
	MSG_HAS("topic 't' of cluster mirror 'm1' is being stopped");
	/* Growth of a stopping topic does nothing. */
	CODE(mstate_grow_topic(F.st, "m1", "t", 9, F.msg, sizeof(F.msg)), 0);
	ck_assert_int_eq(t->npart, 5);

	/* STOPPED: another mirror may take it (failback), and this one may
	 * restart it (-> PREPARING). */
	for (int i = 0; i < 5; i++)
		CODE(mpart_stopped(F.st, t->parts[i], 10, 2, "done", F.msg,
		    sizeof(F.msg)), 0);
	ck_assert_str_eq(mtopic_state_name(t), "STOPPED");
	mk_topic("m2", "t", 5);
	ck_assert_str_eq(mtopic_state_name(topic("m2", "t")), "PREPARING");
	CODE(mstate_add_topic(F.st, "m1", "t", 5, F.msg, sizeof(F.msg)),
	    KERR_TOPIC_ALREADY_IN_CLUSTER_MIRROR);
	MSG_HAS("already in cluster mirror 'm2'");
	stop_topic("m2", "t");
	mk_topic("m1", "t", 6);
	ck_assert_int_eq(t->npart, 6);
	ck_assert_str_eq(mtopic_state_name(t), "PREPARING");
	/* The last mirrored position survives the restart (failback). */
	ck_assert_int_eq(t->parts[0]->last_offset, 10);
	ck_assert_int_eq(t->parts[0]->last_epoch, 2);
	reopen_same();
}
END_TEST

START_TEST(test_remove_topic)
{
	mk_mirror("m");
	mk_topic("m", "t", 2);
	CODE(mstate_remove_topic(F.st, "x", "t", F.msg, sizeof(F.msg)),
	    KERR_UNKNOWN_CLUSTER_MIRROR);
	CODE(mstate_remove_topic(F.st, "m", "u", F.msg, sizeof(F.msg)),
	    KERR_TOPIC_NOT_IN_CLUSTER_MIRROR);
	MSG_HAS("topic 'u' is not in cluster mirror 'm'");
	CODE(mstate_remove_topic(F.st, "m", "t", F.msg, sizeof(F.msg)), 0);
	ck_assert_str_eq(mtopic_state_name(topic("m", "t")), "STOPPING");
	CODE(mstate_remove_topic(F.st, "m", "t", F.msg, sizeof(F.msg)),
	    KERR_MIRROR_TOPIC_BEING_STOPPED);
	MSG_HAS("topic 't' of cluster mirror 'm' is already being stopped");
	for (int i = 0; i < 2; i++)
		CODE(mpart_stopped(F.st, part("m", "t", i), 5, 1, "ok", F.msg,
		    sizeof(F.msg)), 0);
	uint64_t n = log_records();
	CODE(mstate_remove_topic(F.st, "m", "t", F.msg, sizeof(F.msg)), 0);
	ck_assert_uint_eq(log_records(), n);
	ck_assert_str_eq(mtopic_state_name(topic("m", "t")), "STOPPED");

	/* From every removable state. */
	mk_topic("m", "u", 5);
	struct mtopic *u = topic("m", "u");
	CODE(mpart_set_state(F.st, u->parts[1], MPART_MIRRORING, "", F.msg,
	    sizeof(F.msg)), 0);
	CODE(mpart_set_state(F.st, u->parts[2], MPART_MIRRORING, "", F.msg,
	    sizeof(F.msg)), 0);
	CODE(mpart_set_state(F.st, u->parts[2], MPART_PAUSING, "", F.msg,
	    sizeof(F.msg)), 0);
	CODE(mpart_set_state(F.st, u->parts[3], MPART_MIRRORING, "", F.msg,
	    sizeof(F.msg)), 0);
	CODE(mpart_set_state(F.st, u->parts[3], MPART_PAUSING, "", F.msg,
	    sizeof(F.msg)), 0);
	CODE(mpart_set_state(F.st, u->parts[3], MPART_PAUSED, "", F.msg,
	    sizeof(F.msg)), 0);
	CODE(mpart_fail(F.st, u->parts[4], "boom", 2, F.msg, sizeof(F.msg)), 0);
	CODE(mstate_remove_topic(F.st, "m", "u", F.msg, sizeof(F.msg)), 0);
	ck_assert_str_eq(mtopic_state_name(u), "STOPPING");
	ck_assert_ptr_null(u->parts[4]->error);
	reopen_same();
}
END_TEST

START_TEST(test_pause_resume)
{
	struct mtopic *t;

	mk_mirror("m");
	mk_topic("m", "t", 2);
	t = topic("m", "t");
	CODE(mstate_pause_topic(F.st, "x", "t", F.msg, sizeof(F.msg)),
	    KERR_UNKNOWN_CLUSTER_MIRROR);
	CODE(mstate_pause_topic(F.st, "m", "u", F.msg, sizeof(F.msg)),
	    KERR_TOPIC_NOT_IN_CLUSTER_MIRROR);
	CODE(mstate_resume_topic(F.st, "m", "u", F.msg, sizeof(F.msg)),
	    KERR_TOPIC_NOT_IN_CLUSTER_MIRROR);
	CODE(mstate_resume_topic(F.st, "m", "t", F.msg, sizeof(F.msg)),
	    KERR_MIRROR_TOPIC_NOT_PAUSED);
	MSG_HAS("topic 't' of cluster mirror 'm' is not paused (PREPARING)");

	topic_to("m", "t", MPART_MIRRORING);
	CODE(mstate_pause_topic(F.st, "m", "t", F.msg, sizeof(F.msg)), 0);
	ck_assert_str_eq(mtopic_state_name(t), "PAUSING");
	CODE(mstate_pause_topic(F.st, "m", "t", F.msg, sizeof(F.msg)),
	    KERR_MIRROR_TOPIC_ALREADY_PAUSED);
	MSG_HAS("topic 't' of cluster mirror 'm' is already paused");
	/* Resume straight from PAUSING. */
	CODE(mstate_resume_topic(F.st, "m", "t", F.msg, sizeof(F.msg)), 0);
	ck_assert_str_eq(mtopic_state_name(t), "MIRRORING");
	CODE(mstate_pause_topic(F.st, "m", "t", F.msg, sizeof(F.msg)), 0);
	topic_to("m", "t", MPART_PAUSED);
	ck_assert_str_eq(mtopic_state_name(t), "PAUSED");
	CODE(mstate_pause_topic(F.st, "m", "t", F.msg, sizeof(F.msg)),
	    KERR_MIRROR_TOPIC_ALREADY_PAUSED);
	reopen_same();
	t = topic("m", "t");
	CODE(mstate_resume_topic(F.st, "m", "t", F.msg, sizeof(F.msg)), 0);
	ck_assert_str_eq(mtopic_state_name(t), "MIRRORING");
	CODE(mstate_resume_topic(F.st, "m", "t", F.msg, sizeof(F.msg)),
	    KERR_MIRROR_TOPIC_NOT_PAUSED);

	/* Half paused (one partition PAUSED, one MIRRORING): pause moves the
	 * rest, resume moves the paused one. */
	CODE(mpart_set_state(F.st, t->parts[0], MPART_PAUSING, "", F.msg,
	    sizeof(F.msg)), 0);
	CODE(mstate_pause_topic(F.st, "m", "t", F.msg, sizeof(F.msg)), 0);
	ck_assert_str_eq(mtopic_state_name(t), "PAUSING");
	CODE(mpart_set_state(F.st, t->parts[1], MPART_PAUSED, "", F.msg,
	    sizeof(F.msg)), 0);
	CODE(mstate_resume_topic(F.st, "m", "t", F.msg, sizeof(F.msg)), 0);
	ck_assert_str_eq(mtopic_state_name(t), "MIRRORING");

	/* A FAILED partition can be paused too. */
	CODE(mpart_fail(F.st, t->parts[1], "fetch failed", 1, F.msg,
	    sizeof(F.msg)), 0);
	CODE(mstate_pause_topic(F.st, "m", "t", F.msg, sizeof(F.msg)), 0);
	ck_assert_str_eq(mtopic_state_name(t), "PAUSING");

	/* STOPPING and STOPPED: 142 for both. */
	CODE(mstate_remove_topic(F.st, "m", "t", F.msg, sizeof(F.msg)), 0);
	CODE(mstate_pause_topic(F.st, "m", "t", F.msg, sizeof(F.msg)),
	    KERR_MIRROR_TOPIC_BEING_STOPPED);
	MSG_HAS("is being stopped");
	CODE(mstate_resume_topic(F.st, "m", "t", F.msg, sizeof(F.msg)),
	    KERR_MIRROR_TOPIC_BEING_STOPPED);
	for (int i = 0; i < 2; i++)
		CODE(mpart_stopped(F.st, t->parts[i], 1, 1, "", F.msg,
		    sizeof(F.msg)), 0);
	CODE(mstate_pause_topic(F.st, "m", "t", F.msg, sizeof(F.msg)),
	    KERR_MIRROR_TOPIC_BEING_STOPPED);
	MSG_HAS("topic 't' of cluster mirror 'm' is stopped");
	CODE(mstate_resume_topic(F.st, "m", "t", F.msg, sizeof(F.msg)),
	    KERR_MIRROR_TOPIC_BEING_STOPPED);
	reopen_same();
}
END_TEST

START_TEST(test_recover)
{
	struct mtopic *t;

	mk_mirror("m");
	mk_topic("m", "t", 3);
	t = topic("m", "t");
	topic_to("m", "t", MPART_MIRRORING);
	CODE(mstate_recover_topic(F.st, "m", "u", NULL, F.msg, sizeof(F.msg)),
	    KERR_TOPIC_NOT_IN_CLUSTER_MIRROR);
	/* Nothing FAILED: success, no change. */
	CODE(mstate_recover_topic(F.st, "m", "t", NULL, F.msg, sizeof(F.msg)), 0);
	ck_assert_str_eq(mtopic_state_name(t), "MIRRORING");
	CODE(mstate_recover_topic(F.st, "m", "t", "ignore", F.msg, sizeof(F.msg)),
	    KERR_INVALID_REQUEST);
	MSG_HAS("resolution 'ignore' is not one of: skip-over, preserve, "
	    "realign");
	/* A plain failure: retried without a resolution. */
	CODE(mpart_fail(F.st, t->parts[0], "fetch: NOT_LEADER", -1, F.msg,
	    sizeof(F.msg)), 0);
	ck_assert_ptr_null(mpart_needs_resolution(t->parts[0]));
	CODE(mstate_recover_topic(F.st, "m", "t", NULL, F.msg, sizeof(F.msg)), 0);
	ck_assert_int_eq(t->parts[0]->state, MPART_PREPARING);
	/* A foreign write needs skip-over; nothing moves without it. */
	CODE(mpart_fail(F.st, t->parts[0], "fetch: NOT_LEADER", -1, F.msg,
	    sizeof(F.msg)), 0);
	CODE(mpart_fail(F.st, t->parts[2], "foreign write: destination offsets "
	    "20..29 (10 records) were not written by mirrord", -1, F.msg,
	    sizeof(F.msg)), 0);
	ck_assert_str_eq(mpart_needs_resolution(t->parts[2]), "skip-over");
	CODE(mstate_recover_topic(F.st, "m", "t", NULL, F.msg, sizeof(F.msg)),
	    KERR_INVALID_REQUEST);
	MSG_HAS("partition 2 of topic 't' of cluster mirror 'm' needs an operator "
	    "decision (foreign write: destination offsets 20..29");
	MSG_HAS("with the resolution skip-over");
	ck_assert_int_eq(t->parts[0]->state, MPART_FAILED);
	ck_assert_int_eq(t->parts[2]->state, MPART_FAILED);
	CODE(mstate_recover_topic(F.st, "m", "t", "skip-over", F.msg,
	    sizeof(F.msg)), 0);
	ck_assert_int_eq(t->parts[0]->state, MPART_PREPARING);
	ck_assert_int_eq(t->parts[1]->state, MPART_MIRRORING);
	ck_assert_int_eq(t->parts[2]->state, MPART_PREPARING);
	/* A truncated destination: only a realign repairs it. */
	CODE(mpart_fail(F.st, t->parts[1], "destination truncated: the "
	    "destination partition ends at offset 0", -1, F.msg, sizeof(F.msg)), 0);
	CODE(mstate_recover_topic(F.st, "m", "t", "skip-over", F.msg,
	    sizeof(F.msg)), KERR_INVALID_REQUEST);
	MSG_HAS("failed for a reason only the resolution realign repairs: the "
	    "resolution realign deletes the destination topic and copies it "
	    "again from the source (see REALIGN in kafka-mirrors(1)) (its "
	    "reason: destination truncated:");
	reopen_same();
	ck_assert_int_eq(topic("m", "t")->parts[1]->state, MPART_FAILED);
}
END_TEST

/* A translation map of the anchors a[0..n). */
static struct xlate *map_of(const struct manchor *a, size_t n)
{
	struct xlate *m = xlate_new(0);

	ck_assert_ptr_nonnull(m);
	for (size_t i = 0; i < n; i++)
		ck_assert_int_eq(xlate_add(m, a[i].src, a[i].dst, NULL, 0), 0);
	return m;
}

/* Where the destination's own records begin after a stop (the marks'
 * dst=): the destination offset after last_offset, through the anchors. */
START_TEST(test_stop_dst)
{
	struct manchor a[] = { { 0, 0 }, { 5, 4 }, { 9, 7 } };
	struct manchor b[] = { { 0, 0 }, { 5, 4 }, { 5, 6 } };
	struct mpart p;

	memset(&p, 0, sizeof(p));
	p.last_offset = -1;
	ck_assert_int_eq(mpart_stop_dst(&p), -1);    /* nothing mirrored */
	p.last_offset = 9;
	ck_assert_int_eq(mpart_stop_dst(&p), 10);    /* identical offsets */
	p.map = map_of(a, 3);
	p.last_offset = 3;
	ck_assert_int_eq(mpart_stop_dst(&p), 4);
	p.last_offset = 4;                           /* a source hole */
	ck_assert_int_eq(mpart_stop_dst(&p), -1);
	p.last_offset = 6;
	ck_assert_int_eq(mpart_stop_dst(&p), 6);
	p.last_offset = 10;                          /* after the last anchor */
	ck_assert_int_eq(mpart_stop_dst(&p), 9);
	xlate_free(p.map);
	p.map = map_of(b, 3);                        /* destination-only records */
	p.last_offset = 5;
	ck_assert_int_eq(mpart_stop_dst(&p), 7);
	xlate_free(p.map);
	p.map = map_of(a + 1, 2);                    /* trimmed below 5 */
	p.last_offset = 2;
	ck_assert_int_eq(mpart_stop_dst(&p), -1);
	xlate_free(p.map);
}
END_TEST

START_TEST(test_recover_failback)
{
	struct mtopic *t;

	mk_mirror("m");
	mk_topic("m", "t", 3);
	t = topic("m", "t");
	topic_to("m", "t", MPART_MIRRORING);
	/* A failback divergence: skip-over or preserve. */
	CODE(mpart_fail(F.st, t->parts[0], "failback divergence at offset 20: "
	    "the destination partition (the old primary) holds offsets 20..26",
	    -1, F.msg, sizeof(F.msg)), 0);
	ck_assert_str_eq(mpart_needs_resolution(t->parts[0]),
	    "skip-over or preserve");
	CODE(mstate_recover_topic(F.st, "m", "t", NULL, F.msg, sizeof(F.msg)),
	    KERR_INVALID_REQUEST);
	MSG_HAS("needs an operator decision (failback divergence at offset 20");
	MSG_HAS("recover it with the resolution skip-over or preserve");
	/* A foreign write takes skip-over only. */
	CODE(mpart_fail(F.st, t->parts[1], "foreign write: destination offsets "
	    "20..29 (10 records) were not written by mirrord", -1, F.msg,
	    sizeof(F.msg)), 0);
	CODE(mstate_recover_topic(F.st, "m", "t", "preserve", F.msg,
	    sizeof(F.msg)), KERR_INVALID_REQUEST);
	MSG_HAS("partition 1 of topic 't' of cluster mirror 'm' needs another "
	    "decision (foreign write: destination offsets 20..29");
	MSG_HAS("the resolution preserve does not apply to it, recover it with "
	    "the resolution skip-over");
	ck_assert_int_eq(t->parts[0]->state, MPART_FAILED);
	CODE(mstate_recover_topic(F.st, "m", "t", "skip-over", F.msg,
	    sizeof(F.msg)), 0);
	ck_assert_int_eq(t->parts[0]->state, MPART_PREPARING);
	ck_assert_int_eq(t->parts[1]->state, MPART_PREPARING);
	/* preserve moves a divergence. */
	CODE(mpart_fail(F.st, t->parts[0], "failback divergence at offset 20: "
	    "...", -1, F.msg, sizeof(F.msg)), 0);
	CODE(mstate_recover_topic(F.st, "m", "t", "preserve", F.msg,
	    sizeof(F.msg)), 0);
	ck_assert_int_eq(t->parts[0]->state, MPART_PREPARING);
	/* A rewritten old primary: no resolution; the refusal says what the
	 * operator can do instead. */
	CODE(mpart_fail(F.st, t->parts[2], "failback: the old primary's log was "
	    "rewritten: divergence at offset 19 or before", -1, F.msg,
	    sizeof(F.msg)), 0);
	ck_assert_str_eq(mpart_needs_resolution(t->parts[2]), "");
	CODE(mstate_recover_topic(F.st, "m", "t", "preserve", F.msg,
	    sizeof(F.msg)), KERR_INVALID_REQUEST);
	MSG_HAS("partition 2 of topic 't' of cluster mirror 'm' failed for a "
	    "reason only the resolution realign repairs: nothing was written to "
	    "the destination; to mirror the topic back, realign it after saving "
	    "what you need of its records on the destination cluster (the old "
	    "primary): the resolution realign deletes the destination topic and "
	    "copies it again from the source");
	MSG_HAS("(its reason: failback: the old primary's log was rewritten");
	/* A mark that does not say enough yet: a plain retry. */
	CODE(mpart_fail(F.st, t->parts[0], "failback mark without a source "
	    "offset: ...", -1, F.msg, sizeof(F.msg)), 0);
	ck_assert_ptr_null(mpart_needs_resolution(t->parts[0]));
	ck_assert_int_eq(t->parts[2]->state, MPART_FAILED);
}
END_TEST

START_TEST(test_delete_mirror)
{
	mk_mirror("m");
	mk_topic("m", "t", 2);
	mk_topic("m", "u", 1);
	CODE(mstate_delete_mirror(F.st, "x", F.msg, sizeof(F.msg)),
	    KERR_UNKNOWN_CLUSTER_MIRROR);
	MSG_HAS("cluster mirror 'x' does not exist");
	CODE(mstate_delete_mirror(F.st, "m", F.msg, sizeof(F.msg)),
	    KERR_CLUSTER_MIRROR_NOT_EMPTY);
	MSG_HAS("cluster mirror 'm' is not empty: topic 't' is PREPARING");
	stop_topic("m", "t");
	CODE(mstate_delete_mirror(F.st, "m", F.msg, sizeof(F.msg)),
	    KERR_CLUSTER_MIRROR_NOT_EMPTY);
	MSG_HAS("topic 'u' is PREPARING");
	stop_topic("m", "u");
	CODE(mstate_delete_mirror(F.st, "m", F.msg, sizeof(F.msg)), 0);
	ck_assert_ptr_null(mstate_mirror_find(F.st, "m"));
	ck_assert_uint_eq(mstate_mirror_count(F.st), 0);
	reopen_same();
	ck_assert_ptr_null(mstate_mirror_find(F.st, "m"));
	/* The name is free again, with no state left over. */
	mk_mirror("m");
	ck_assert_uint_eq(mstate_mirror_find(F.st, "m")->ntopics, 0);
	/* An empty mirror deletes at once. */
	CODE(mstate_delete_mirror(F.st, "m", F.msg, sizeof(F.msg)), 0);
	reopen_same();
}
END_TEST

static void result_cb(void *arg, const char *t, int code, const char *msg)
{
	char *out = arg;

	snprintf(out + strlen(out), 256, "%s=%d;", t, code);
}

START_TEST(test_patterns)
{
	const char *inc[] = { "orders\\..*", "audit" };
	const char *exc[] = { "orders\\.tmp.*" };
	const char *bad[] = { "(" };
	struct mirror *m;
	char res[1024] = "";
	int what;

	mk_mirror("m");
	CODE(mstate_add_patterns(F.st, "x", inc, 2, NULL, 0, F.msg,
	    sizeof(F.msg)), KERR_UNKNOWN_CLUSTER_MIRROR);
	CODE(mstate_add_patterns(F.st, "m", bad, 1, NULL, 0, F.msg,
	    sizeof(F.msg)), KERR_INVALID_REQUEST);
	MSG_HAS("pattern '(' is not a valid regular expression");
	CODE(mstate_add_patterns(F.st, "m", inc, 2, exc, 1, F.msg,
	    sizeof(F.msg)), 0);
	m = mstate_mirror_find(F.st, "m");
	ck_assert_uint_eq(m->nincludes, 2);
	ck_assert_uint_eq(m->nexcludes, 1);
	/* Adding them again changes nothing. */
	uint64_t n = log_records();
	CODE(mstate_add_patterns(F.st, "m", inc, 2, exc, 1, F.msg,
	    sizeof(F.msg)), 0);
	ck_assert_uint_eq(log_records(), n);
	ck_assert_uint_eq(m->nincludes, 2);
	ck_assert(mirror_wants_topic(m, "orders.eu"));
	ck_assert(mirror_wants_topic(m, "audit"));
	ck_assert(!mirror_wants_topic(m, "audit2"));     /* whole name */
	ck_assert(!mirror_wants_topic(m, "xorders.eu"));
	ck_assert(!mirror_wants_topic(m, "orders.tmp1")); /* excluded */

	mk_topic("m", "orders.eu", 1);
	mk_topic("m", "orders.us", 1);
	mk_topic("m", "audit", 1);
	/* Not an include: the matching topics stop and it is excluded. */
	CODE(mstate_remove_pattern(F.st, "m", "orders\\.e.*", result_cb, res,
	    &what, F.msg, sizeof(F.msg)), 0);
	ck_assert_int_eq(what, MSTATE_PAT_EXCLUDE_ADDED);
	ck_assert_str_eq(res, "orders.eu=0;");
	ck_assert_str_eq(mtopic_state_name(topic("m", "orders.eu")),
	    "STOPPING");
	ck_assert_str_eq(mtopic_state_name(topic("m", "audit")), "PREPARING");
	ck_assert_uint_eq(m->nexcludes, 2);
	ck_assert_str_eq(m->excludes[1], "orders\\.e.*");
	ck_assert(!mirror_wants_topic(m, "orders.eu"));
	/* Again: the topic is STOPPING now (142), the exclude kept. */
	res[0] = '\0';
	CODE(mstate_remove_pattern(F.st, "m", "orders\\.e.*", result_cb, res,
	    &what, F.msg, sizeof(F.msg)), 0);
	ck_assert_int_eq(what, MSTATE_PAT_EXCLUDE_KEPT);
	ck_assert_str_eq(res, "orders.eu=142;");
	/* A saved include pattern is removed, not excluded, and its
	 * topics stop. */
	res[0] = '\0';
	n = log_records();
	CODE(mstate_remove_pattern(F.st, "m", inc[0], result_cb, res,
	    &what, F.msg, sizeof(F.msg)), 0);
	ck_assert_int_eq(what, MSTATE_PAT_INCLUDE_REMOVED);
	ck_assert_str_eq(res, "orders.eu=142;orders.us=0;");
	ck_assert_uint_eq(m->nincludes, 1);
	ck_assert_str_eq(m->includes[0], "audit");
	ck_assert_uint_eq(m->nexcludes, 2);
	ck_assert(!mirror_wants_topic(m, "orders.new"));
	/* Neither, and matching nothing: refused, nothing written. */
	n = log_records();
	CODE(mstate_remove_pattern(F.st, "m", "zzz.*", result_cb, res,
	    &what, F.msg, sizeof(F.msg)), KERR_INVALID_REQUEST);
	MSG_HAS("pattern 'zzz.*' is not an include pattern of cluster mirror "
	    "'m' and matches none of its topics; nothing was changed (its "
	    "include patterns are 'audit')");
	ck_assert_uint_eq(log_records(), n);
	reopen_same();
	m = mstate_mirror_find(F.st, "m");
	ck_assert_uint_eq(m->nincludes, 1);
}
END_TEST

/* Patterns are Java regular expressions (PCRE2), bounded (tpattern.h). */
START_TEST(test_patterns_java_and_limits)
{
	const char *inc[] = { "(?i)Orders\\.[a-z]+-v\\d+", "foo|bar",
		"\\Qaudit.log\\E" };
	const char *exc[] = { ".*(?<=-tmp)" };
	const char *hostile[] = { "((.{1,1000}){1,1000})" };
	const char *redos[] = { "(a+)+b" };
	const char *bad[] = { "ok", "a(" };
	struct mirror *m;
	uint64_t n;

	mk_mirror("m");
	m = mstate_mirror_find(F.st, "m");
	n = log_records();
	/* Refused, naming the pattern and why; nothing written. */
	CODE(mstate_add_patterns(F.st, "m", hostile, 1, NULL, 0, F.msg,
	    sizeof(F.msg)), KERR_INVALID_REQUEST);
	MSG_HAS("cluster mirror 'm': include pattern '((.{1,1000}){1,1000})' "
	    "is refused: its compiled form is ");
	MSG_HAS("more than the limit of 16384 bytes");
	CODE(mstate_add_patterns(F.st, "m", redos, 1, NULL, 0, F.msg,
	    sizeof(F.msg)), KERR_INVALID_REQUEST);
	MSG_HAS("include pattern '(a+)+b' is refused: matching it against the "
	    "249-character name");
	MSG_HAS("the match limit (100000 backtracking steps)");
	CODE(mstate_add_patterns(F.st, "m", NULL, 0, bad, 2, F.msg,
	    sizeof(F.msg)), KERR_INVALID_REQUEST);
	MSG_HAS("exclude pattern 'a(' is not a valid regular expression: "
	    "missing closing parenthesis at offset 2");
	ck_assert_uint_eq(log_records(), n);
	ck_assert_uint_eq(m->nincludes + m->nexcludes, 0);

	CODE(mstate_add_patterns(F.st, "m", inc, 3, exc, 1, F.msg,
	    sizeof(F.msg)), 0);
	ck_assert(mirror_wants_topic(m, "orders.eu-v2"));
	ck_assert(mirror_wants_topic(m, "ORDERS.us-v10"));
	ck_assert(!mirror_wants_topic(m, "orders.eu-v"));
	ck_assert(!mirror_wants_topic(m, "orders.eu-v2-tmp")); /* excluded */
	ck_assert(mirror_wants_topic(m, "foo"));
	ck_assert(mirror_wants_topic(m, "bar"));
	ck_assert(!mirror_wants_topic(m, "foobar"));   /* whole name */
	ck_assert(!mirror_wants_topic(m, "xbar"));
	ck_assert(mirror_wants_topic(m, "audit.log"));
	ck_assert(!mirror_wants_topic(m, "auditxlog"));
	ck_assert(mstate_pattern_match("foo|bar", "bar"));
	ck_assert(!mstate_pattern_match("foo|bar", "foobar"));
	ck_assert(!mstate_pattern_match("a(", "a("));
	/* Kept compiled across a reopen. */
	reopen_same();
	m = mstate_mirror_find(F.st, "m");
	ck_assert(mirror_wants_topic(m, "ORDERS.us-v10"));
	ck_assert(!mirror_wants_topic(m, "foobar"));
}
END_TEST

/* Appends a MIRROR_PATTERN record for mirror "m" straight to the log, as
 * the POSIX ERE versions of mirrord validated (or did not). */
static void raw_pattern(int kind, const char *pat)
{
	uint8_t rec[512];
	size_t n = 0, l = strlen(pat);
	char err[1024];

	ck_assert_uint_lt(l, 120);
	rec[n++] = 0;                      /* version */
	rec[n++] = 2;                      /* mirror "m" */
	rec[n++] = 'm';
	rec[n++] = (uint8_t)kind;
	rec[n++] = (uint8_t)(l + 1);       /* compact string, one-byte varint */
	memcpy(rec + n, pat, l);
	n += l;
	ck_assert_int_eq(mlog_append(F.ml, 5, rec, n, err, sizeof(err)), 0);
	ck_assert_int_eq(mlog_sync(F.ml, err, sizeof(err)), 0);
}

static char *capture_stderr(void (*fn)(void));

static void reopen_plain(void)
{
	fx_close();
	fx_open();
}

START_TEST(test_patterns_from_posix_logs)
{
	struct mirror *m;
	char *err;

	mk_mirror("m");
	/* Patterns POSIX ERE accepted: the usual ones mean the same in PCRE2;
	 * a collating element and the issue's hostile pattern do not compile
	 * any more: replay goes on, they match nothing, and say so. */
	raw_pattern(0, "[[:alpha:]]+-[0-9]{2}");
	raw_pattern(0, "orders\\..*|audit");
	raw_pattern(0, "[[.a.]]x");
	raw_pattern(0, "((.{1,1000}){1,1000})");
	raw_pattern(1, "audit|orders\\.tmp.*");
	err = capture_stderr(reopen_plain);
	ck_assert_msg(strstr(err, "mirror m: include pattern '[[.a.]]x' is not "
	    "a valid regular expression: POSIX collating elements are not "
	    "supported at offset") != NULL, "%s", err);
	ck_assert_msg(strstr(err, "mirror m: include pattern "
	    "'((.{1,1000}){1,1000})' is refused: its compiled form is") != NULL,
	    "%s", err);
	ck_assert_msg(strstr(err, "it matches no topic") != NULL, "%s", err);
	m = mstate_mirror_find(F.st, "m");
	ck_assert_ptr_nonnull(m);
	ck_assert_uint_eq(m->nincludes, 4);
	ck_assert_uint_eq(m->nexcludes, 1);
	ck_assert(mirror_wants_topic(m, "abc-12"));
	ck_assert(!mirror_wants_topic(m, "abc-123"));
	ck_assert(mirror_wants_topic(m, "orders.eu"));
	ck_assert(!mirror_wants_topic(m, "orders.tmp1"));
	ck_assert(!mirror_wants_topic(m, "audit"));     /* excluded */
	ck_assert(!mirror_wants_topic(m, "ax"));
	ck_assert(!mirror_wants_topic(m, "anything-else"));
	/* The text stays as it was written, through compaction too. */
	ck_assert_str_eq(m->includes[3], "((.{1,1000}){1,1000})");
	reopen_same();
}
END_TEST

/* The table, written out independently of mstate.c. */
START_TEST(test_transition_table)
{
	enum { U = MPART_UNKNOWN, PR = MPART_PREPARING, MI = MPART_MIRRORING,
		PG = MPART_PAUSING, PD = MPART_PAUSED, SG = MPART_STOPPING,
		SD = MPART_STOPPED, FA = MPART_FAILED };
	static const int ok[][2] = {
		{ U, PR }, { SD, PR }, { FA, PR },
		{ PR, MI }, { PD, MI }, { PG, MI }, { FA, MI },
		{ MI, PG }, { PR, PG }, { FA, PG },
		{ PG, PD },
		{ PR, SG }, { MI, SG }, { PG, SG }, { PD, SG }, { FA, SG },
		{ SG, SD },
		{ U, FA }, { PR, FA }, { MI, FA }, { PG, FA }, { PD, FA },
		{ SG, FA }, { SD, FA },
	};
	int want[MPART_STATE_COUNT][MPART_STATE_COUNT] = { { 0 } };

	for (int s = 0; s < MPART_STATE_COUNT; s++)
		want[s][s] = 1;
	for (size_t i = 0; i < ARRAY_SIZE(ok); i++)
		want[ok[i][0]][ok[i][1]] = 1;
	for (int f = 0; f < MPART_STATE_COUNT; f++)
		for (int t = 0; t < MPART_STATE_COUNT; t++)
			ck_assert_msg(mpart_transition_ok(f, t) == want[f][t],
			    "%s -> %s", mpart_state_name(f),
			    mpart_state_name(t));
	ck_assert(!mpart_transition_ok(-1, PR));
	ck_assert(!mpart_transition_ok(PR, MPART_STATE_COUNT));
	for (int s = 0; s < MPART_STATE_COUNT; s++)
		ck_assert_int_eq(mpart_state_parse(mpart_state_name(s)), s);
	ck_assert_int_eq(mpart_state_parse("MIXED"), -1);

	/* The setter refuses with 145 and changes nothing. */
	mk_mirror("m");
	mk_topic("m", "t", 1);
	struct mpart *p = part("m", "t", 0);
	uint64_t n = log_records();
	CODE(mpart_set_state(F.st, p, MPART_STOPPED, "x", F.msg, sizeof(F.msg)),
	    KERR_INVALID_CLUSTER_MIRROR_STATES);
	MSG_HAS("m/t-0: PREPARING -> STOPPED is not an allowed transition");
	CODE(mpart_set_state(F.st, p, MPART_PAUSED, "x", F.msg, sizeof(F.msg)),
	    KERR_INVALID_CLUSTER_MIRROR_STATES);
	CODE(mpart_stopped(F.st, p, 1, 1, "x", F.msg, sizeof(F.msg)),
	    KERR_INVALID_CLUSTER_MIRROR_STATES);
	MSG_HAS("PREPARING -> STOPPED");
	CODE(mpart_set_state(F.st, p, 99, "x", F.msg, sizeof(F.msg)),
	    KERR_INVALID_REQUEST);
	ck_assert_int_eq(p->state, MPART_PREPARING);
	ck_assert_uint_eq(log_records(), n);
	/* Staying put writes nothing either. */
	CODE(mpart_set_state(F.st, p, MPART_PREPARING, "x", F.msg,
	    sizeof(F.msg)), 0);
	ck_assert_uint_eq(log_records(), n);
}
END_TEST

struct evlog {
	char text[4096];
};

static void hook(void *arg, const struct mstate_event *ev)
{
	struct evlog *e = arg;
	size_t l = strlen(e->text);

	switch (ev->kind) {
	case MSTATE_EV_STATE:
		snprintf(e->text + l, sizeof(e->text) - l, "%s/%s-%d:%s>%s(%s);",
		    ev->mirror->name, ev->topic->name, (int)ev->part->index,
		    mpart_state_name(ev->from), mpart_state_name(ev->to),
		    ev->why);
		break;
	case MSTATE_EV_MIRROR_CREATED:
		snprintf(e->text + l, sizeof(e->text) - l, "created:%s;",
		    ev->mirror->name);
		break;
	case MSTATE_EV_MIRROR_DELETING:
		snprintf(e->text + l, sizeof(e->text) - l, "deleting:%s;",
		    ev->mirror->name);
		break;
	case MSTATE_EV_TOPIC_ADDED:
		snprintf(e->text + l, sizeof(e->text) - l, "topic:%s;",
		    ev->topic->name);
		break;
	case MSTATE_EV_OWNER:
		snprintf(e->text + l, sizeof(e->text) - l, "owner:%s/%s-%d:%s>%s;",
		    ev->mirror->name, ev->topic->name, (int)ev->part->index,
		    ev->why != NULL ? ev->why : "-",
		    ev->part->owner != NULL ? ev->part->owner : "-");
		break;
	case MSTATE_EV_MEMBERS:
		snprintf(e->text + l, sizeof(e->text) - l, "members;");
		break;
	default:
		snprintf(e->text + l, sizeof(e->text) - l, "ev%d;", ev->kind);
		break;
	}
}

/* A partition's write history as the data plane writes it. */
static void some_history(struct mpart *p, int64_t base)
{
	CODE(mpart_add_epoch(F.st, p, 5, base, F.msg, sizeof(F.msg)), 0);
	CODE(mpart_set_producer(F.st, p, 4000 + base, 0, base, F.msg,
	    sizeof(F.msg)), 0);
	CODE(sending_now(F.st, p, base + 7, F.msg, sizeof(F.msg)), 0);
	CODE(anchor_now(F.st, p, base + 20, base + 27, F.msg, sizeof(F.msg)), 0);
}

static int history_empty(const struct mpart *p)
{
	return p->nepochs == 0 && mpart_nanchors(p) == 0 && p->nproducers == 0 &&
	    p->sending_dst == -1 && p->last_offset == -1 && p->last_epoch == -1;
}

/* Added again after the destination topic was deleted on purpose: the
 * write history stays with the topic it was written in (prior), and is
 * dropped only by a reset naming that topic; the same topic keeps it. */
START_TEST(test_realign_added_again)
{
	struct evlog e = { "" };
	struct mtopic *t;
	char err[1024];

	mk_mirror("m");
	mk_topic("m", "t", 2);
	t = topic("m", "t");
	topic_to("m", "t", MPART_MIRRORING);
	CODE(mtopic_set_ident(F.st, t, MTOPIC_IDENT_DEST,
	    "fGUlPWmGQOmB117Z4v0JxA", F.msg, sizeof(F.msg)), 0);
	some_history(t->parts[0], 0);
	some_history(t->parts[1], 100);
	stop_topic("m", "t");
	ck_assert_int_eq(t->parts[0]->last_offset, 100);
	mk_topic("m", "t", 2);      /* added again */
	ck_assert_ptr_null(t->dst_topic_id);
	ck_assert_str_eq(t->prior_dst_topic_id, "fGUlPWmGQOmB117Z4v0JxA");
	ck_assert_uint_eq(mpart_nanchors(t->parts[0]), 1);   /* kept for now */
	reopen_same();
	t = topic("m", "t");
	ck_assert_int_eq(mstate_add_hook(F.st, hook, &e), 0);
	/* Not the topic the history is of: a no-op. */
	CODE(mtopic_realign_reset(F.st, t, "AAAAAAAAAAAAAAAAAAAAAA", F.msg,
	    sizeof(F.msg)), 0);
	ck_assert_uint_eq(mpart_nanchors(t->parts[0]), 1);
	CODE(mtopic_realign_reset(F.st, t, "fGUlPWmGQOmB117Z4v0JxA", F.msg,
	    sizeof(F.msg)), 0);
	ck_assert(history_empty(t->parts[0]));
	ck_assert(history_empty(t->parts[1]));
	ck_assert_ptr_null(t->prior_dst_topic_id);
	ck_assert_str_eq(e.text, "ev9;");   /* MSTATE_EV_REALIGNED */
	/* Again (a second writer's copy): nothing to do, no record. */
	CODE(mtopic_realign_reset(F.st, t, "fGUlPWmGQOmB117Z4v0JxA", F.msg,
	    sizeof(F.msg)), 0);
	ck_assert_int_eq(t->parts[0]->state, MPART_PREPARING);
	reopen_same();
	t = topic("m", "t");
	ck_assert(history_empty(t->parts[0]));

	/* Added again onto the same destination topic: history kept, the
	 * prior id cleared by the topic-ident record of it. */
	CODE(mtopic_set_ident(F.st, t, MTOPIC_IDENT_DEST,
	    "Zk2cZ0f3TnGyS1v6cF0x0w", F.msg, sizeof(F.msg)), 0);
	topic_to("m", "t", MPART_MIRRORING);
	some_history(t->parts[0], 0);
	stop_topic("m", "t");
	mk_topic("m", "t", 2);
	ck_assert_str_eq(t->prior_dst_topic_id, "Zk2cZ0f3TnGyS1v6cF0x0w");
	ck_assert_msg(mstate_compact(F.st, err, sizeof(err)) == 0, "%s", err);
	reopen_same();   /* the snapshot keeps the prior id */
	t = topic("m", "t");
	ck_assert_str_eq(t->prior_dst_topic_id, "Zk2cZ0f3TnGyS1v6cF0x0w");
	CODE(mtopic_set_ident(F.st, t, MTOPIC_IDENT_DEST,
	    "Zk2cZ0f3TnGyS1v6cF0x0w", F.msg, sizeof(F.msg)), 0);
	ck_assert_ptr_null(t->prior_dst_topic_id);
	ck_assert_uint_eq(mpart_nanchors(t->parts[0]), 1);
	ck_assert_uint_eq(t->parts[0]->nproducers, 1);
	reopen_same();
}
END_TEST

/* RecoverMirrorTopics' resolution realign: who it is for, what it
 * records, what is refused while the deletion is to come. */
START_TEST(test_realign_operator)
{
	struct evlog e = { "" };
	struct mtopic *t;
	char err[1024];
	uint64_t n;

	mk_mirror("m");
	mk_topic("m", "t", 3);
	t = topic("m", "t");
	topic_to("m", "t", MPART_MIRRORING);
	CODE(mtopic_set_ident(F.st, t, MTOPIC_IDENT_DEST,
	    "fGUlPWmGQOmB117Z4v0JxA", F.msg, sizeof(F.msg)), 0);
	for (int i = 0; i < 3; i++)
		some_history(t->parts[i], 100 * i);
	/* Nothing that needs it. */
	CODE(mstate_recover_topic(F.st, "m", "t", "realign", F.msg,
	    sizeof(F.msg)), KERR_INVALID_REQUEST);
	MSG_HAS("topic 't' of cluster mirror 'm' has no partition FAILED for a "
	    "failback divergence or a destination truncated, deleted or "
	    "recreated: nothing to realign (MIRRORING)");
	/* A foreign write is skip-over's, not a realign's. */
	CODE(mpart_fail(F.st, t->parts[1], "foreign write: destination offsets "
	    "20..29 (10 records) were not written by mirrord", -1, F.msg,
	    sizeof(F.msg)), 0);
	CODE(mpart_fail(F.st, t->parts[2], "failback divergence at offset 20: "
	    "the destination partition (the old primary) holds offsets 20..26",
	    -1, F.msg, sizeof(F.msg)), 0);
	ck_assert(mpart_realign_reason(t->parts[2]));
	ck_assert(!mpart_realign_reason(t->parts[1]));
	mk_topic("m", "u", 1);
	CODE(mpart_fail(F.st, part("m", "u", 0), "destination end offset 10 "
	    "is below the first translated offset 15: the destination partition "
	    "lost data mirrord wrote", 2, F.msg, sizeof(F.msg)), 0);
	ck_assert(mpart_realign_reason(part("m", "u", 0)));
	CODE(mstate_recover_topic(F.st, "m", "t", "realign", F.msg,
	    sizeof(F.msg)), KERR_INVALID_REQUEST);
	MSG_HAS("partition 1 of topic 't' of cluster mirror 'm' is FAILED for a "
	    "reason a realign does not repair (foreign write:");
	CODE(mstate_recover_topic(F.st, "m", "t", "skip-over", F.msg,
	    sizeof(F.msg)), 0);
	/* Paused: refused. */
	CODE(mpart_fail(F.st, t->parts[2], "destination topic t was deleted and "
	    "recreated (topic id fGUlPWmGQOmB117Z4v0JxA -> Zk2cZ0f3TnGyS1v6cF0x0w)",
	    -1, F.msg, sizeof(F.msg)), 0);
	ck_assert(mpart_realign_reason(t->parts[2]));
	CODE(mpart_set_state(F.st, t->parts[1], MPART_PAUSING, "", F.msg,
	    sizeof(F.msg)), 0);
	CODE(mstate_recover_topic(F.st, "m", "t", "realign", F.msg,
	    sizeof(F.msg)), KERR_INVALID_REQUEST);
	MSG_HAS("partition 1 of topic 't' of cluster mirror 'm' is PAUSING: "
	    "resume the topic first");
	CODE(mpart_set_state(F.st, t->parts[1], MPART_MIRRORING, "", F.msg,
	    sizeof(F.msg)), 0);
	CODE(mpart_set_state(F.st, t->parts[0], MPART_MIRRORING, "", F.msg,
	    sizeof(F.msg)), 0);
	/* FAILED (recreated), PREPARING and MIRRORING: realigned. */
	CODE(mpart_fail(F.st, t->parts[0], "destination truncated: the "
	    "destination partition ends at offset 0", -1, F.msg, sizeof(F.msg)), 0);
	CODE(mstate_recover_topic(F.st, "m", "t", NULL, F.msg, sizeof(F.msg)),
	    KERR_INVALID_REQUEST);
	ck_assert_int_eq(mstate_add_hook(F.st, hook, &e), 0);
	CODE(mstate_recover_topic(F.st, "m", "t", "realign", F.msg,
	    sizeof(F.msg)), 0);
	MSG_HAS("destination topic t (topic id fGUlPWmGQOmB117Z4v0JxA, 3 "
	    "partitions) is deleted and copied again from the source: partition "
	    "0 FAILED (destination truncated), partition 1 MIRRORING, partition "
	    "2 FAILED (destination topic t was deleted and recreated (topic id "
	    "fGUlPWmGQOmB117Z4v0JxA -> Zk2cZ0f3TnGyS1v6cF0x0w))");
	ck_assert_str_eq(e.text, "m/t-0:FAILED>PREPARING(recovered by the "
	    "operator, resolution realign);m/t-1:MIRRORING>PREPARING(recovered by "
	    "the operator, resolution realign);m/t-2:FAILED>PREPARING(recovered "
	    "by the operator, resolution realign);ev9;");
	for (int i = 0; i < 3; i++) {
		ck_assert_int_eq(t->parts[i]->state, MPART_PREPARING);
		ck_assert_ptr_null(t->parts[i]->error);
		ck_assert(history_empty(t->parts[i]));
	}
	ck_assert_ptr_null(t->dst_topic_id);
	ck_assert_int_eq(t->realign, 1);
	ck_assert_str_eq(t->realign_dst_topic_id, "fGUlPWmGQOmB117Z4v0JxA");
	/* Until the deletion, no write history is recorded. */
	n = log_records();
	CODE(anchor_now(F.st, t->parts[0], 1, 1, F.msg, sizeof(F.msg)),
	    KERR_INVALID_REQUEST);
	MSG_HAS("m/t-0: the topic is being realigned (its destination topic is "
	    "deleted first)");
	CODE(mpart_add_epoch(F.st, t->parts[0], 1, 0, F.msg, sizeof(F.msg)),
	    KERR_INVALID_REQUEST);
	CODE(mpart_set_producer(F.st, t->parts[0], 1, 0, 0, F.msg,
	    sizeof(F.msg)), KERR_INVALID_REQUEST);
	CODE(sending_now(F.st, t->parts[0], 3, F.msg, sizeof(F.msg)),
	    KERR_INVALID_CLUSTER_MIRROR_STATES);
	ck_assert_uint_eq(log_records(), n);
	reopen_same();
	ck_assert_msg(mstate_compact(F.st, err, sizeof(err)) == 0, "%s", err);
	reopen_same();   /* the snapshot keeps the realign to come */
	t = topic("m", "t");
	ck_assert_int_eq(t->realign, 1);
	/* Deleted (the id the destination named then). */
	CODE(mtopic_realign_deleted(F.st, t, "Zk2cZ0f3TnGyS1v6cF0x0w", F.msg,
	    sizeof(F.msg)), 0);
	ck_assert_int_eq(t->realign, 0);
	ck_assert_ptr_null(t->realign_dst_topic_id);
	ck_assert_str_eq(t->gone_dst_topic_id, "Zk2cZ0f3TnGyS1v6cF0x0w");
	n = log_records();
	CODE(mtopic_realign_deleted(F.st, t, "Zk2cZ0f3TnGyS1v6cF0x0w", F.msg,
	    sizeof(F.msg)), 0);
	ck_assert_uint_eq(log_records(), n);   /* recorded already */
	ck_assert_msg(mstate_compact(F.st, err, sizeof(err)) == 0, "%s", err);
	reopen_same();
	t = topic("m", "t");
	CODE(anchor_now(F.st, t->parts[0], 0, 0, F.msg, sizeof(F.msg)), 0);
	/* The new topic's id: the deleted one is forgotten. */
	CODE(mtopic_set_ident(F.st, t, MTOPIC_IDENT_DEST,
	    "x8mYV0eUQ2i2JmHh4GmE3g", F.msg, sizeof(F.msg)), 0);
	ck_assert_ptr_null(t->gone_dst_topic_id);
	reopen_same();
}
END_TEST

START_TEST(test_data_plane_and_hooks)
{
	struct evlog e = { "" };
	struct mpart *p;

	ck_assert_int_eq(mstate_add_hook(F.st, hook, &e), 0);
	mk_mirror("m");
	mk_topic("m", "t", 1);
	p = part("m", "t", 0);
	CODE(mpart_set_state(F.st, p, MPART_MIRRORING, "aligned", F.msg,
	    sizeof(F.msg)), 0);
	CODE(mpart_fail(F.st, p, "fetch: NOT_LEADER", 3, F.msg, sizeof(F.msg)),
	    0);
	ck_assert_int_eq(p->state, MPART_FAILED);
	ck_assert_str_eq(p->error, "fetch: NOT_LEADER");
	ck_assert_int_eq(p->retry_attempt, 3);
	/* FAILED again with a new message: kept. */
	CODE(mpart_fail(F.st, p, "fetch: CORRUPT", -1, F.msg, sizeof(F.msg)), 0);
	ck_assert_str_eq(p->error, "fetch: CORRUPT");
	ck_assert_int_eq(p->retry_attempt, -1);
	CODE(mpart_set_state(F.st, p, MPART_PREPARING, "retry", F.msg,
	    sizeof(F.msg)), 0);
	ck_assert_ptr_null(p->error);
	ck_assert_int_eq(p->retry_attempt, -1);
	CODE(mpart_set_state(F.st, p, MPART_MIRRORING, "aligned", F.msg,
	    sizeof(F.msg)), 0);
	ck_assert_int_eq(p->retry_attempt, 0);
	ck_assert_str_eq(e.text, "created:m;"
	    "m/t-0:UNKNOWN>PREPARING(added to the mirror);topic:t;"
	    "m/t-0:PREPARING>MIRRORING(aligned);"
	    "m/t-0:MIRRORING>FAILED(fetch: NOT_LEADER);"
	    "m/t-0:FAILED>PREPARING(retry);"
	    "m/t-0:PREPARING>MIRRORING(aligned);");

	/* Epoch history. */
	CODE(mpart_add_epoch(F.st, p, 3, 0, F.msg, sizeof(F.msg)), 0);
	CODE(mpart_add_epoch(F.st, p, 5, 100, F.msg, sizeof(F.msg)), 0);
	uint64_t n = log_records();
	CODE(mpart_add_epoch(F.st, p, 5, 100, F.msg, sizeof(F.msg)), 0);
	ck_assert_uint_eq(log_records(), n);
	CODE(mpart_add_epoch(F.st, p, 5, 120, F.msg, sizeof(F.msg)),
	    KERR_INVALID_REQUEST);
	MSG_HAS("m/t-0: epoch 5 at offset 120 does not follow epoch 5 at "
	    "offset 100");
	CODE(mpart_add_epoch(F.st, p, 6, 99, F.msg, sizeof(F.msg)),
	    KERR_INVALID_REQUEST);
	CODE(mpart_add_epoch(F.st, p, -1, 99, F.msg, sizeof(F.msg)),
	    KERR_INVALID_REQUEST);
	ck_assert_uint_eq(p->nepochs, 2);
	ck_assert_int_eq(p->epochs[1].epoch, 5);
	ck_assert_int_eq(p->epochs[1].start_offset, 100);

	/* Anchors, with lib/xlate's rules. */
	CODE(anchor_now(F.st, p, 0, 0, F.msg, sizeof(F.msg)), 0);
	n = log_records();
	CODE(anchor_now(F.st, p, 50, 50, F.msg, sizeof(F.msg)), 0);
	ck_assert_uint_eq(log_records(), n);   /* same delta: not stored */
	CODE(anchor_now(F.st, p, 100, 90, F.msg, sizeof(F.msg)), 0);
	/* source 90..99 is a hole and destination 90..94 foreign: both kept */
	CODE(anchor_now(F.st, p, 100, 95, F.msg, sizeof(F.msg)), 0);
	ck_assert_uint_eq(mpart_nanchors(p), 3);
	ck_assert_int_eq(mpart_anchor(p, 1).src, 100);
	ck_assert_int_eq(mpart_anchor(p, 1).dst, 90);
	/* more foreign records at the same point extend that skip */
	CODE(anchor_now(F.st, p, 100, 100, F.msg, sizeof(F.msg)), 0);
	ck_assert_uint_eq(mpart_nanchors(p), 3);
	ck_assert_int_eq(mpart_anchor(p, 2).dst, 100);
	CODE(anchor_now(F.st, p, 200, 150, F.msg, sizeof(F.msg)), 0);
	CODE(anchor_now(F.st, p, 150, 160, F.msg, sizeof(F.msg)),
	    KERR_INVALID_REQUEST);
	MSG_HAS("m/t-0: anchor (150, 160) goes back from (200, 150)");
	CODE(anchor_now(F.st, p, -1, 160, F.msg, sizeof(F.msg)),
	    KERR_INVALID_REQUEST);
	ck_assert_uint_eq(mpart_nanchors(p), 4);

	/* Source cluster id. */
	CODE(mstate_set_source_cluster_id(F.st, "x", "abc", F.msg,
	    sizeof(F.msg)), KERR_UNKNOWN_CLUSTER_MIRROR);
	CODE(mstate_set_source_cluster_id(F.st, "m", "", F.msg,
	    sizeof(F.msg)), KERR_INVALID_REQUEST);
	CODE(mstate_set_source_cluster_id(F.st, "m", "src-cluster-1", F.msg,
	    sizeof(F.msg)), 0);
	ck_assert_str_eq(mstate_mirror_find(F.st, "m")->source_cluster_id,
	    "src-cluster-1");

	/* Stop with the last mirrored position. */
	CODE(mstate_remove_topic(F.st, "m", "t", F.msg, sizeof(F.msg)), 0);
	CODE(mpart_stopped(F.st, p, 4242, 5, "failover", F.msg, sizeof(F.msg)),
	    0);
	ck_assert_int_eq(p->last_offset, 4242);
	ck_assert_int_eq(p->last_epoch, 5);
	ck_assert_ptr_nonnull(strstr(e.text,
	    "m/t-0:MIRRORING>STOPPING(removed from the mirror);"
	    "m/t-0:STOPPING>STOPPED(failover);"));
	ck_assert_ptr_nonnull(strstr(e.text,
	    "m/t-0:MIRRORING>FAILED(fetch: NOT_LEADER);"));
	CODE(mstate_delete_mirror(F.st, "m", F.msg, sizeof(F.msg)), 0);
	ck_assert_ptr_nonnull(strstr(e.text, "deleting:m;"));
}
END_TEST

/* Builds a model that uses every record type. */
static void build_rich(void)
{
	const char *inc[] = { "a.*" }, *exc[] = { "a\\.x" };
	struct mpart *p;

	mk_mirror("east");
	mk_mirror("west");
	CODE(mstate_add_patterns(F.st, "east", inc, 1, exc, 1, F.msg,
	    sizeof(F.msg)), 0);
	CODE(mstate_set_source_cluster_id(F.st, "east", "Q1w2E3r4T5y6U7i8O9p0aS",
	    F.msg, sizeof(F.msg)), 0);
	mk_topic("east", "a1", 3);
	mk_topic("east", "a2", 2);
	mk_topic("west", "w", 1);
	topic_to("east", "a1", MPART_MIRRORING);
	p = part("east", "a1", 1);
	CODE(mpart_add_epoch(F.st, p, 1, 0, F.msg, sizeof(F.msg)), 0);
	CODE(mpart_add_epoch(F.st, p, 4, 77, F.msg, sizeof(F.msg)), 0);
	CODE(anchor_now(F.st, p, 10, 10, F.msg, sizeof(F.msg)), 0);
	CODE(anchor_now(F.st, p, 30, 25, F.msg, sizeof(F.msg)), 0);
	CODE(anchor_now(F.st, p, 50, 40, F.msg, sizeof(F.msg)), 0);
	/* The anchors above came with a batch sent to 40 (part-sending):
	 * kept across a reopen and a compaction (the dumps compare it). */
	ck_assert_int_eq(p->sending_dst, -1);
	CODE(sending_now(F.st, p, 40, F.msg, sizeof(F.msg)), 0);
	CODE(sending_now(F.st, p, 40, F.msg, sizeof(F.msg)), 0);
	CODE(sending_now(F.st, p, -1, F.msg, sizeof(F.msg)),
	    KERR_INVALID_REQUEST);
	ck_assert_int_eq(p->sending_dst, 40);
	CODE(mpart_trim(F.st, p, 35, 27, NULL, F.msg, sizeof(F.msg)), 0);
	ck_assert_uint_eq(mpart_nanchors(p), 2);      /* 10 -> 10 went */
	CODE(mpart_fail(F.st, part("east", "a1", 2), "source gone", 2, F.msg,
	    sizeof(F.msg)), 0);
	CODE(mstate_pause_topic(F.st, "east", "a1", F.msg, sizeof(F.msg)), 0);
	CODE(mpart_set_state(F.st, part("east", "a1", 0), MPART_PAUSED, "",
	    F.msg, sizeof(F.msg)), 0);
	/* a2 stopped: partition 0 with a failover report (part-failover),
	 * partition 1 without. */
	{
		/* Asked of nobody: the source did not answer at the stop. */
		const struct mfailover fo = { 500, 12, 3400, 1700000000000,
		    1700000005000, 0 };

		CODE(mstate_remove_topic(F.st, "east", "a2", F.msg,
		    sizeof(F.msg)), 0);
		CODE(mpart_stopped_report(F.st, part("east", "a2", 0), 100, 7,
		    &fo, "group g: the coordinator is not available", "stopped",
		    F.msg, sizeof(F.msg)), 0);
		CODE(mpart_stopped_report(F.st, part("east", "a2", 1), 101, 7,
		    NULL, NULL, "stopped", F.msg, sizeof(F.msg)), 0);
		ck_assert_int_eq(part("east", "a2", 0)->has_failover, 1);
		ck_assert_int_eq(part("east", "a2", 0)->failover.lag, 12);
		ck_assert(part("east", "a2", 0)->failover.hwm_at == 1700000000000);
		ck_assert(part("east", "a2", 0)->failover.stopped_at ==
		    1700000005000);
		ck_assert_int_eq(part("east", "a2", 0)->failover.asked, 0);
		ck_assert_int_eq(part("east", "a2", 1)->has_failover, 0);
		/* What the final group sync missed (part-failover-note). */
		ck_assert_str_eq(part("east", "a2", 0)->failover_note,
		    "group g: the coordinator is not available");
		ck_assert_ptr_null(part("east", "a2", 1)->failover_note);
		/* Only at STOPPING -> STOPPED. */
		CODE(mpart_stopped_report(F.st, part("east", "a2", 0), 100, 7,
		    &fo, NULL, "again", F.msg, sizeof(F.msg)),
		    KERR_INVALID_CLUSTER_MIRROR_STATES);
	}
	CODE(mpart_fail(F.st, part("west", "w", 0), "no leader", -1, F.msg,
	    sizeof(F.msg)), 0);
}

START_TEST(test_replay_equality)
{
	char *before, *text;

	build_rich();
	before = mstate_dump(F.st);
	/* The dump covers every field (else comparing it proves little). */
	static const char *const fields[] = {
		"cluster_id ", "mirror east", "config bootstrap.servers=127.0.0.1:9092",
		"source_cluster_id Q1w2E3r4T5y6U7i8O9p0aS", "include a.*",
		"exclude a\\.x", "topic a1 partitions 3 state MIXED",
		"partition 0 PAUSED", "partition 1 PAUSING retry 0 last -1@-1",
		"partition 2 PAUSING retry 2", "epoch 4 from 77",
		"anchor 30 -> 25", "topic a2 partitions 2 state STOPPED",
		"partition 1 STOPPED retry 0 last 101@7",
		"partition 0 FAILED retry -1 last -1@-1 error no leader",
		"source_cluster_id (unresolved)",
		"stopped behind the source: high watermark 500, 12 offsets, "
		"3400 ms",
		"stopped at 1700000005000 ms, high watermark as of "
		"1700000000000 ms (the source did not answer at the stop)",
		"groups not synced at the stop: group g: the coordinator is "
		"not available",
	};
	for (size_t i = 0; i < ARRAY_SIZE(fields); i++)
		ck_assert_msg(strstr(before, fields[i]) != NULL, "dump lacks "
		    "'%s':\n%s", fields[i], before);
	reopen_same();
	/* Through a snapshot, and a snapshot plus later records. */
	char err[1024];
	ck_assert_msg(mstate_compact(F.st, err, sizeof(err)) == 0, "%s", err);
	reopen_same();
	CODE(mstate_resume_topic(F.st, "east", "a1", F.msg, sizeof(F.msg)), 0);
	reopen_same();
	ck_assert_msg(mstate_compact(F.st, err, sizeof(err)) == 0, "%s", err);
	reopen_same();
	text = mstate_dump(F.st);
	ck_assert_ptr_nonnull(strstr(text, "topic a1 partitions 3 state "
	    "MIRRORING"));
	free(text);
	free(before);
}
END_TEST

/* A copy of the model as a snapshot replay builds it (no log, no hooks). */
struct copy_sink {
	struct mlog_sink base;
	struct mstate *to;
	char err[512];
};

static int copy_put(struct mlog_sink *sink, uint16_t type, const void *p,
    size_t len)
{
	struct copy_sink *c = (struct copy_sink *)sink;
	struct mlog_rec rec = { .type = type, .p = p, .len = (uint32_t)len,
	    .in_snapshot = 1 };

	return mstate_apply_rec(c->to, &rec, c->err, sizeof(c->err));
}

static struct mstate *copy_model(void)
{
	struct copy_sink c = { .base = { .put = copy_put } };

	c.to = mstate_rebuild_new(F.st);
	ck_assert_ptr_nonnull(c.to);
	ck_assert_msg(mstate_dump_records(F.st, &c.base) == 0, "%s", c.err);
	return c.to;
}

/* mstate_rebuild_adopt(): a model made equal in place to a newer one (a
 * follower behind the trimmed log start): the objects in both keep their
 * addresses, the hooks see each difference, and nothing else fires. */
START_TEST(test_rebuild_adopt)
{
	struct mstate *old, *fresh;
	struct evlog ev = { "" };
	struct mpart *kept;
	struct mirror *east;
	char err[512], *want, *got;

	build_rich();
	mk_mirror("gone");
	old = copy_model();
	ck_assert_int_eq(mstate_add_hook(old, hook, &ev), 0);
	east = mstate_mirror_find(old, "east");
	kept = mirror_topic_find(east, "a1")->parts[0];
	/* The writer goes on: a mirror deleted, one created with a topic, a
	 * topic added, a partition's state changed, an anchor. */
	CODE(mstate_delete_mirror(F.st, "gone", F.msg, sizeof(F.msg)), 0);
	mk_mirror("north");
	mk_topic("north", "n1", 2);
	mk_topic("east", "a3", 1);
	CODE(mpart_set_state(F.st, part("east", "a1", 0), MPART_STOPPING,
	    "removed", F.msg, sizeof(F.msg)), 0);
	CODE(anchor_now(F.st, part("east", "a1", 1), 60, 70, F.msg,
	    sizeof(F.msg)), 0);
	fresh = copy_model();
	ck_assert_msg(mstate_rebuild_adopt(old, fresh, err, sizeof(err)) == 0,
	    "%s", err);
	want = mstate_dump(F.st);
	got = mstate_dump(old);
	ck_assert_str_eq(got, want);
	ck_assert_ptr_eq(mstate_mirror_find(old, "east"), east);
	ck_assert_ptr_eq(mirror_topic_find(east, "a1")->parts[0], kept);
	ck_assert_int_eq(kept->state, MPART_STOPPING);
	ck_assert_ptr_eq(kept->topic->mirror, east);
	ck_assert_ptr_eq(mirror_topic_find(mstate_mirror_find(old, "north"),
	    "n1")->parts[1]->topic->mirror, mstate_mirror_find(old, "north"));
	for (const char *const *w = (const char *const[]){ "deleting:gone;",
	    "created:north;", "topic:n1;", "topic:a3;",
	    "east/a1-0:PAUSED>STOPPING(", NULL }; *w != NULL; w++)
		ck_assert_msg(strstr(ev.text, *w) != NULL, "no '%s' in %s", *w,
		    ev.text);
	ck_assert_msg(strstr(ev.text, "created:east;") == NULL &&
	    strstr(ev.text, "created:west;") == NULL &&
	    strstr(ev.text, "topic:a1;") == NULL &&
	    strstr(ev.text, "a1-1:") == NULL, "spurious events: %s", ev.text);
	free(want);
	free(got);
	mstate_free(old);
}
END_TEST

/* Topic identity (topic-ident records): a topic starts without ids (as
 * one from a log older than them), ids and the note are set, survive a
 * replay and a snapshot, the note is cleared when the topic is added
 * again, and values are checked. */
START_TEST(test_topic_ident)
{
	char err[1024], *text;
	struct mtopic *t;
	uint64_t n;

	mk_mirror("east");
	mk_topic("east", "orders", 2);
	t = topic("east", "orders");
	ck_assert_ptr_null(t->src_topic_id);
	ck_assert_ptr_null(t->dst_topic_id);
	ck_assert_ptr_null(t->note);
	CODE(mtopic_set_ident(F.st, t, MTOPIC_IDENT_SOURCE,
	    "zv7c4lbWQ8a5sBcDwn4ioA", F.msg, sizeof(F.msg)), 0);
	CODE(mtopic_set_ident(F.st, t, MTOPIC_IDENT_DEST,
	    "fGUlPWmGQOmB117Z4v0JxA", F.msg, sizeof(F.msg)), 0);
	CODE(mtopic_set_ident(F.st, t, MTOPIC_IDENT_DEST_CLUSTER,
	    "Q1w2E3r4T5y6U7i8O9p0aS", F.msg, sizeof(F.msg)), 0);
	n = log_records();
	CODE(mtopic_set_ident(F.st, t, MTOPIC_IDENT_SOURCE,
	    "zv7c4lbWQ8a5sBcDwn4ioA", F.msg, sizeof(F.msg)), 0);
	ck_assert_uint_eq(log_records(), n);   /* the same value: no record */
	CODE(mtopic_set_ident(F.st, t, 7, "x", F.msg, sizeof(F.msg)),
	    KERR_INVALID_REQUEST);
	MSG_HAS("east/orders");
	CODE(mtopic_set_ident(F.st, t, MTOPIC_IDENT_NOTE, "", F.msg,
	    sizeof(F.msg)), KERR_INVALID_REQUEST);
	MSG_HAS("1-249");
	reopen_same();
	t = topic("east", "orders");
	ck_assert_str_eq(t->src_topic_id, "zv7c4lbWQ8a5sBcDwn4ioA");
	ck_assert_str_eq(t->dst_topic_id, "fGUlPWmGQOmB117Z4v0JxA");
	ck_assert_str_eq(t->dst_cluster_id, "Q1w2E3r4T5y6U7i8O9p0aS");
	stop_topic("east", "orders");
	t = topic("east", "orders");
	CODE(mtopic_set_ident(F.st, t, MTOPIC_IDENT_NOTE,
	    "the source topic orders was deleted", F.msg, sizeof(F.msg)), 0);
	ck_assert_msg(mstate_compact(F.st, err, sizeof(err)) == 0, "%s", err);
	reopen_same();
	text = mstate_dump(F.st);
	ck_assert_ptr_nonnull(strstr(text, "ident source zv7c4lbWQ8a5sBcDwn4ioA "
	    "destination fGUlPWmGQOmB117Z4v0JxA note the source topic orders "
	    "was deleted destination cluster Q1w2E3r4T5y6U7i8O9p0aS"));
	free(text);
	/* Added again (the operator's decision): note and ids go, to be
	 * adopted again from the next answers. */
	mk_topic("east", "orders", 2);
	t = topic("east", "orders");
	ck_assert_ptr_null(t->note);
	ck_assert_ptr_null(t->src_topic_id);
	ck_assert_ptr_null(t->dst_topic_id);
	ck_assert_ptr_null(t->dst_cluster_id);
	reopen_same();
	ck_assert_ptr_null(topic("east", "orders")->note);
	CODE(mtopic_set_ident(F.st, topic("east", "orders"), MTOPIC_IDENT_DEST,
	    "fGUlPWmGQOmB117Z4v0JxA", F.msg, sizeof(F.msg)), 0);
	CODE(mtopic_set_ident(F.st, topic("east", "orders"), MTOPIC_IDENT_DEST,
	    NULL, F.msg, sizeof(F.msg)), 0);
	reopen_same();
	ck_assert_ptr_null(topic("east", "orders")->dst_topic_id);
}
END_TEST

/* Producer identities (part-producer records): appended per partition,
 * the same one again is no record, values checked, the oldest dropped past
 * MPART_MAX_PRODUCERS, kept over a replay and a snapshot. */
START_TEST(test_part_producer)
{
	char err[1024], *text;
	struct mpart *p;
	uint64_t n;

	mk_mirror("east");
	mk_topic("east", "orders", 2);
	p = part("east", "orders", 1);
	ck_assert_uint_eq(p->nproducers, 0);
	CODE(mpart_set_producer(F.st, p, 7000, 0, 0, F.msg, sizeof(F.msg)), 0);
	CODE(mpart_set_producer(F.st, p, 7000, 1, 120, F.msg, sizeof(F.msg)), 0);
	n = log_records();
	CODE(mpart_set_producer(F.st, p, 7000, 1, 120, F.msg, sizeof(F.msg)), 0);
	ck_assert_uint_eq(log_records(), n);
	CODE(mpart_set_producer(F.st, p, 7000, 40000, 0, F.msg, sizeof(F.msg)),
	    KERR_INVALID_REQUEST);
	MSG_HAS("east/orders-1");
	CODE(mpart_set_producer(F.st, p, -1, 0, 0, F.msg, sizeof(F.msg)),
	    KERR_INVALID_REQUEST);
	ck_assert_uint_eq(part("east", "orders", 0)->nproducers, 0);
	reopen_same();
	p = part("east", "orders", 1);
	ck_assert_uint_eq(p->nproducers, 2);
	ck_assert_int_eq(p->producers[1].pid, 7000);
	ck_assert_int_eq(p->producers[1].epoch, 1);
	ck_assert_int_eq(p->producers[1].seq_base, 120);
	for (int i = 0; i < MPART_MAX_PRODUCERS; i++)
		CODE(mpart_set_producer(F.st, p, 9000 + i, 0, 200 + i, F.msg,
		    sizeof(F.msg)), 0);
	ck_assert_uint_eq(p->nproducers, MPART_MAX_PRODUCERS);
	ck_assert_int_eq(p->producers[0].pid, 9000);
	ck_assert_msg(mstate_compact(F.st, err, sizeof(err)) == 0, "%s", err);
	reopen_same();
	p = part("east", "orders", 1);
	ck_assert_uint_eq(p->nproducers, MPART_MAX_PRODUCERS);
	ck_assert_int_eq(p->producers[MPART_MAX_PRODUCERS - 1].pid,
	    9000 + MPART_MAX_PRODUCERS - 1);
	text = mstate_dump(F.st);
	ck_assert_ptr_nonnull(strstr(text, "producer 9000 epoch 0 sequence 0 at 200"));
	free(text);
}
END_TEST

/* acl-binding records (mrec 22): what mirrord created on the destination,
 * by mirror name, surviving a reopen, a snapshot and the mirror's deletion. */
START_TEST(test_acl_bindings)
{
	char err[1024], *text;
	uint64_t n;

	mk_mirror("east");
	CODE(mstate_acl_note(F.st, "east", MACL_SYNC, "2 3 3 3 10:User:alice 1:* t1",
	    1, F.msg, sizeof(F.msg)), 0);
	CODE(mstate_acl_note(F.st, "east", MACL_READONLY, "2 3 4 2 10:User:alice 1:* t1",
	    1, F.msg, sizeof(F.msg)), 0);
	n = log_records();
	CODE(mstate_acl_note(F.st, "east", MACL_SYNC, "2 3 3 3 10:User:alice 1:* t1",
	    1, F.msg, sizeof(F.msg)), 0);
	CODE(mstate_acl_note(F.st, "west", MACL_SYNC, "x", 0, F.msg,
	    sizeof(F.msg)), 0);
	ck_assert_uint_eq(log_records(), n);          /* no-ops: nothing logged */
	CODE(mstate_acl_note(F.st, "east", 7, "x", 1, F.msg, sizeof(F.msg)),
	    KERR_INVALID_REQUEST);
	CODE(mstate_acl_note(F.st, "east", MACL_SYNC, "", 1, F.msg, sizeof(F.msg)),
	    KERR_INVALID_REQUEST);
	ck_assert_uint_eq(mstate_acl_count(F.st), 2);
	reopen_same();
	ck_assert_uint_eq(mstate_acl_count(F.st), 2);
	CODE(mstate_delete_mirror(F.st, "east", F.msg, sizeof(F.msg)), 0);
	ck_assert_uint_eq(mstate_acl_count(F.st), 2); /* outlive the mirror */
	ck_assert_msg(mstate_compact(F.st, err, sizeof(err)) == 0, "%s", err);
	reopen_same();
	text = mstate_dump(F.st);
	ck_assert_ptr_nonnull(strstr(text, "acl east read-only 2 3 4 2 10:User:alice 1:* t1"));
	free(text);
	CODE(mstate_acl_note(F.st, "east", MACL_READONLY, "2 3 4 2 10:User:alice 1:* t1",
	    0, F.msg, sizeof(F.msg)), 0);
	ck_assert_uint_eq(mstate_acl_count(F.st), 1);
	ck_assert_int_eq(mstate_acl_get(F.st, 0)->kind, MACL_SYNC);
	reopen_same();
	ck_assert_uint_eq(mstate_acl_count(F.st), 1);
}
END_TEST

/* With a small record trigger the log compacts by itself as operations
 * go, and every reopen still rebuilds the same model. */
/* ---- asynchronous writes (group commit) -------------------------------- */


struct acall {
	int n;
	int id[256];
	int code[256];
	char msg[256][1024];
	size_t anchors_seen[256];   /* of the written partition, in cb */
	int state_seen[256];        /* of the written partition, in cb */
	struct mpart *part[256];
};
static struct acall AC;

struct aarg {
	int id;
	struct mpart *p;
};

static void acb(void *arg, int code, const char *msg)
{
	struct aarg *a = arg;

	ck_assert_int_lt(AC.n, 256);
	AC.id[AC.n] = a->id;
	AC.code[AC.n] = code;
	snprintf(AC.msg[AC.n], sizeof(AC.msg[0]), "%s", msg != NULL ? msg : "");
	AC.anchors_seen[AC.n] = mpart_nanchors(a->p);
	AC.state_seen[AC.n] = a->p->state;
	AC.n++;
}

static void async_base(void)
{
	if (B == NULL)
		B = event_base_new();
	mlog_set_event_base(F.ml, B);
	memset(&AC, 0, sizeof(AC));
}

/* Mirror m with topic t of n partitions, the loop for callbacks; a[i] is
 * partition i (callback id i). */
static void async_parts(struct aarg *a, int n)
{
	mk_mirror("m");
	mk_topic("m", "t", n);
	async_base();
	for (int i = 0; i < n; i++)
		a[i] = (struct aarg){ i, part("m", "t", i) };
}

/* After failed fsyncs: the model is what it was (before, a mstate_dump()
 * taken then); the disk works again from here. */
static void model_unchanged(const char *before)
{
	char *now;

	F.faults.fsync_errno = 0;
	now = mstate_dump(F.st);
	ck_assert_str_eq(now, before);
	free(now);
}

static void run_until(int n)
{
	for (int i = 0; i < 20000 && AC.n < n; i++) {
		event_base_loop(B, EVLOOP_ONCE | EVLOOP_NONBLOCK);
		if (AC.n < n)
			usleep(i < 100 ? 0 : 1000);
	}
	ck_assert_msg(AC.n >= n, "%d of %d callbacks", AC.n, n);
}

static void gate_hold(int on)
{
	pthread_mutex_lock(&F.faults.mu);
	F.faults.hold = on;
	pthread_cond_broadcast(&F.faults.cv);
	pthread_mutex_unlock(&F.faults.mu);
}

static void gate_wait_inside(void)
{
	pthread_mutex_lock(&F.faults.mu);
	while (!F.faults.inside)
		pthread_cond_wait(&F.faults.cv, &F.faults.mu);
	pthread_mutex_unlock(&F.faults.mu);
}

static void anchor_async(struct aarg *a, int64_t src, int64_t dst)
{
	int started = 0;

	CODE(mpart_add_anchor_async(F.st, a->p, src, dst, acb, a, &started,
	    F.msg, sizeof(F.msg)), 0);
	ck_assert_int_eq(started, 1);
}

/*
 * Asynchronous anchors of several partitions: the first goes alone, the
 * ones written while its fsync runs share the next group; the model shows
 * none before its group completed; callbacks come in write order, from the
 * loop, never inside the call; the reopened model is the same.
 */
START_TEST(test_async_apply_order)
{
	struct aarg a[4];
	struct mstate_async_stats as;

	async_parts(a, 4);
	gate_hold(1);
	anchor_async(&a[0], 10, 0);
	gate_wait_inside();
	anchor_async(&a[1], 20, 0);
	anchor_async(&a[2], 30, 0);
	anchor_async(&a[3], 40, 0);
	/* Nothing applied, nothing called back yet. */
	for (int i = 0; i < 4; i++)
		ck_assert_uint_eq(mpart_nanchors(a[i].p), 0);
	ck_assert_int_eq(AC.n, 0);
	mstate_async_stats(F.st, &as);
	ck_assert_uint_eq(as.in_flight, 4);
	gate_hold(0);
	run_until(4);
	for (int i = 0; i < 4; i++) {
		ck_assert_int_eq(AC.id[i], i);
		ck_assert_msg(AC.code[i] == 0, "%s", AC.msg[i]);
		/* Applied before its callback ran. */
		ck_assert_uint_eq(AC.anchors_seen[i], 1);
		ck_assert_int_eq(mpart_anchor(a[i].p, 0).src, 10 * (i + 1));
	}
	mstate_async_stats(F.st, &as);
	ck_assert_uint_eq(as.ops, 4);
	ck_assert_uint_eq(as.groups, 2);
	ck_assert_uint_eq(as.max_group_ops, 3);
	ck_assert_uint_eq(as.in_flight, 0);
	/* Each partition's next anchor validates against the applied one. */
	anchor_async(&a[0], 50, 20);
	run_until(5);
	ck_assert_int_eq(AC.code[4], 0);
	ck_assert_uint_eq(mpart_nanchors(a[0].p), 2);
	/* A no-op starts nothing. */
	int started = 1;
	CODE(mpart_add_anchor_async(F.st, a[0].p, 50, 20, acb, &a[0], &started,
	    F.msg, sizeof(F.msg)), 0);
	ck_assert_int_eq(started, 0);
	/* A refused one neither (going backwards). */
	CODE(mpart_add_anchor_async(F.st, a[1].p, 5, 0, acb, &a[1], &started,
	    F.msg, sizeof(F.msg)), KERR_INVALID_REQUEST);
	ck_assert_int_eq(started, 0);
	reopen_same();
}
END_TEST

/*
 * The asynchronous trim: *dropped is what goes, the model keeps the
 * entries until the group completed, then drops them before the callback
 * runs; nothing to drop starts nothing; the log reopens the same.
 */
START_TEST(test_async_trim)
{
	struct aarg a[1];
	size_t dropped = 0;
	int started = 0;

	async_parts(a, 1);
	CODE(anchor_now(F.st, a[0].p, 10, 10, F.msg, sizeof(F.msg)), 0);
	CODE(anchor_now(F.st, a[0].p, 30, 25, F.msg, sizeof(F.msg)), 0);
	CODE(anchor_now(F.st, a[0].p, 50, 40, F.msg, sizeof(F.msg)), 0);
	gate_hold(1);
	CODE(mpart_trim_async(F.st, a[0].p, 35, 27, &dropped, acb, &a[0],
	    &started, F.msg, sizeof(F.msg)), 0);
	ck_assert_int_eq(started, 1);
	ck_assert_uint_eq(dropped, 1);
	gate_wait_inside();
	ck_assert_uint_eq(mpart_nanchors(a[0].p), 3);   /* not applied yet */
	gate_hold(0);
	run_until(1);
	ck_assert_int_eq(AC.code[0], 0);
	ck_assert_uint_eq(AC.anchors_seen[0], 2);
	CODE(mpart_trim_async(F.st, a[0].p, 35, 27, &dropped, acb, &a[0],
	    &started, F.msg, sizeof(F.msg)), 0);
	ck_assert_int_eq(started, 0);
	ck_assert_uint_eq(dropped, 0);
	reopen_same();
	ck_assert_uint_eq(mpart_nanchors(part("m", "t", 0)), 2);
}
END_TEST

/*
 * A failed fsync fails its group (KAFKA_STORAGE_ERROR, the partition and
 * the file's error named) and the group written after it; the model keeps
 * neither; later writes are refused until restart.
 */
START_TEST(test_async_fsync_fails_group_and_later)
{
	struct aarg a[3];
	char *before;

	async_parts(a, 3);
	before = mstate_dump(F.st);
	F.faults.fsync_errno = EIO;
	gate_hold(1);
	anchor_async(&a[0], 10, 0);
	gate_wait_inside();
	anchor_async(&a[1], 20, 0);
	anchor_async(&a[2], 30, 0);
	gate_hold(0);
	run_until(3);
	for (int i = 0; i < 3; i++) {
		ck_assert_int_eq(AC.id[i], i);
		ck_assert_int_eq(AC.code[i], KERR_KAFKA_STORAGE_ERROR);
		ck_assert_msg(strstr(AC.msg[i], "the change was not made") !=
		    NULL && strstr(AC.msg[i], "fsync failed") != NULL &&
		    strstr(AC.msg[i], strerror(EIO)) != NULL &&
		    strstr(AC.msg[i], F.dir) != NULL, "%s", AC.msg[i]);
		ck_assert_uint_eq(mpart_nanchors(a[i].p), 0);
	}
	ck_assert_ptr_nonnull(strstr(AC.msg[0], "m/t-0"));
	ck_assert_ptr_nonnull(strstr(AC.msg[1], "m/t-1"));
	model_unchanged(before);
	/* Broken: refused at once, saying why. */
	int started = 0;
	CODE(mpart_add_anchor_async(F.st, a[0].p, 10, 0, acb, &a[0], &started,
	    F.msg, sizeof(F.msg)), KERR_KAFKA_STORAGE_ERROR);
	MSG_HAS("read-only after an earlier failure");
	CODE(mpart_set_state(F.st, a[0].p, MPART_MIRRORING, "test", F.msg,
	    sizeof(F.msg)), KERR_KAFKA_STORAGE_ERROR);
	MSG_HAS("fsync failed");
	reopen_same();
	free(before);
}
END_TEST

/*
 * A synchronous write after asynchronous ones waits for them: they are
 * applied (in log order) before it returns, their callbacks stay for the
 * loop; the log reopens to the same model.
 */
START_TEST(test_sync_after_async)
{
	struct aarg a[3];

	async_parts(a, 3);
	anchor_async(&a[0], 10, 0);
	anchor_async(&a[1], 20, 0);
	anchor_async(&a[2], 30, 0);
	/* The synchronous write depends on what the first one wrote. */
	CODE(anchor_now(F.st, a[0].p, 40, 10, F.msg, sizeof(F.msg)), 0);
	ck_assert_int_eq(AC.n, 0);
	for (int i = 0; i < 3; i++)
		ck_assert_uint_ge(mpart_nanchors(a[i].p), 1);
	ck_assert_uint_eq(mpart_nanchors(a[0].p), 2);
	run_until(3);
	for (int i = 0; i < 3; i++) {
		ck_assert_int_eq(AC.id[i], i);
		ck_assert_int_eq(AC.code[i], 0);
	}
	reopen_same();
	ck_assert_uint_eq(mpart_nanchors(part("m", "t", 0)), 2);
}
END_TEST

static void state_async(struct aarg *a, int to)
{
	int started = 0;

	CODE(mpart_set_state_async(F.st, a->p, to, "test", acb, a, &started,
	    F.msg, sizeof(F.msg)), 0);
	ck_assert_int_eq(started, 1);
}

/*
 * Asynchronous state changes of several partitions share groups as the
 * anchors do: the model keeps the old state until the group completed
 * (the change is applied before its callback runs, in write order); a
 * failure (with its retry attempt) and a STOPPED with its failover report
 * go the same way; refused or no-op changes start nothing; the log
 * reopens to the same model.
 */
START_TEST(test_async_state_order)
{
	struct aarg a[4];
	struct mstate_async_stats as;
	int started;

	async_parts(a, 4);
	for (int i = 0; i < 4; i++)
		ck_assert_int_eq(a[i].p->state, MPART_PREPARING);
	gate_hold(1);
	state_async(&a[0], MPART_MIRRORING);
	gate_wait_inside();
	state_async(&a[1], MPART_MIRRORING);
	state_async(&a[2], MPART_MIRRORING);
	started = 0;
	CODE(mpart_fail_async(F.st, a[3].p, "disk on fire", 2, acb, &a[3],
	    &started, F.msg, sizeof(F.msg)), 0);
	ck_assert_int_eq(started, 1);
	for (int i = 0; i < 4; i++)
		ck_assert_int_eq(a[i].p->state, MPART_PREPARING);
	ck_assert_int_eq(AC.n, 0);
	gate_hold(0);
	run_until(4);
	for (int i = 0; i < 3; i++) {
		ck_assert_int_eq(AC.id[i], i);
		ck_assert_msg(AC.code[i] == 0, "%s", AC.msg[i]);
		ck_assert_int_eq(AC.state_seen[i], MPART_MIRRORING);
	}
	ck_assert_int_eq(AC.id[3], 3);
	ck_assert_int_eq(AC.code[3], 0);
	ck_assert_int_eq(AC.state_seen[3], MPART_FAILED);
	ck_assert_str_eq(a[3].p->error, "disk on fire");
	ck_assert_int_eq(a[3].p->retry_attempt, 2);
	mstate_async_stats(F.st, &as);
	ck_assert_uint_eq(as.groups, 2);
	ck_assert_uint_eq(as.max_group_ops, 3);
	/* No-op (already there) and refused (not an allowed transition):
	 * nothing started, the refusal named. */
	started = 1;
	CODE(mpart_set_state_async(F.st, a[0].p, MPART_MIRRORING, "again", acb,
	    &a[0], &started, F.msg, sizeof(F.msg)), 0);
	ck_assert_int_eq(started, 0);
	started = 1;
	CODE(mpart_set_state_async(F.st, a[0].p, MPART_PAUSED, "no", acb,
	    &a[0], &started, F.msg, sizeof(F.msg)),
	    KERR_INVALID_CLUSTER_MIRROR_STATES);
	ck_assert_int_eq(started, 0);
	MSG_HAS("m/t-0: MIRRORING -> PAUSED is not an allowed transition");
	/* STOPPING -> STOPPED with its report, one write. */
	CODE(mpart_set_state(F.st, a[1].p, MPART_STOPPING, "test", F.msg,
	    sizeof(F.msg)), 0);
	struct mfailover fo = { 100, 7, 1500, 1000, 2000, 1 };
	started = 0;
	CODE(mpart_stopped_report_async(F.st, a[1].p, 92, 3, &fo, NULL,
	    "stopped", acb, &a[1], &started, F.msg, sizeof(F.msg)), 0);
	ck_assert_int_eq(started, 1);
	ck_assert_int_eq(a[1].p->state, MPART_STOPPING);
	run_until(5);
	ck_assert_int_eq(AC.code[4], 0);
	ck_assert_int_eq(AC.state_seen[4], MPART_STOPPED);
	ck_assert_int_eq(a[1].p->last_offset, 92);
	ck_assert_int_eq(a[1].p->last_epoch, 3);
	ck_assert_int_eq(a[1].p->has_failover, 1);
	/* STOPPED only from STOPPING. */
	started = 1;
	CODE(mpart_stopped_report_async(F.st, a[2].p, 1, 1, NULL, NULL, "x",
	    acb, &a[2], &started, F.msg, sizeof(F.msg)),
	    KERR_INVALID_CLUSTER_MIRROR_STATES);
	ck_assert_int_eq(started, 0);
	MSG_HAS("m/t-2: MIRRORING -> STOPPED is not an allowed transition");
	reopen_same();
	ck_assert_int_eq(part("m", "t", 0)->state, MPART_MIRRORING);
	ck_assert_int_eq(part("m", "t", 1)->state, MPART_STOPPED);
	ck_assert_int_eq(part("m", "t", 3)->state, MPART_FAILED);
}
END_TEST

/* ---- exclusive writes (the operator's commands) ---------------------- */

static int excl_ready_calls;

static void excl_ready(void *arg)
{
	(void)arg;
	excl_ready_calls++;
}

static void run_until_ready(void)
{
	for (int i = 0; i < 20000 && excl_ready_calls == 0; i++) {
		event_base_loop(B, EVLOOP_ONCE | EVLOOP_NONBLOCK);
		if (excl_ready_calls == 0)
			usleep(i < 100 ? 0 : 1000);
	}
	ck_assert_int_eq(excl_ready_calls, 1);
}

/* The callback slot of the operator's write: id 100, n-th callback. */
static int cb_of(int id)
{
	for (int i = 0; i < AC.n; i++)
		if (AC.id[i] == id)
			return i;
	ck_abort_msg("no callback for id %d", id);
	return -1;
}

/*
 * An operator's write waits (without blocking) for the group in flight,
 * validates against everything before it, and goes as a group of its own;
 * the data plane's writes meanwhile are held, then handed to the log:
 * those in the mirror it changed are checked again and refused when they
 * no longer apply or were decided from a state it changed (a PREPARING ->
 * MIRRORING would undo the pause, though PAUSING -> MIRRORING is valid),
 * those elsewhere go unchecked.  Every record in the log applies: the log
 * reopens to the same model.
 */
START_TEST(test_excl_holds_and_rechecks)
{
	struct aarg a[4], o, op;
	struct mstate_async_stats as;
	int started = 0;

	mk_mirror("o");
	mk_topic("o", "u", 1);
	async_parts(a, 4);
	o = (struct aarg){ 10, part("o", "u", 0) };
	op = (struct aarg){ 100, a[0].p };
	excl_ready_calls = 0;
	/* A group in flight: the operator's write must wait for it. */
	gate_hold(1);
	anchor_async(&a[0], 10, 0);
	gate_wait_inside();
	ck_assert_int_eq(mstate_excl_begin(F.st, excl_ready, NULL), 0);
	ck_assert_int_eq(mstate_excl_state(F.st), MSTATE_EXCL_WAITING);
	/* A second one waits its turn; cancelled, it never gets it. */
	ck_assert_int_eq(mstate_excl_begin(F.st, excl_ready, &o), 0);
	mstate_excl_cancel(F.st, &o);
	ck_assert_int_eq(mstate_excl_state(F.st), MSTATE_EXCL_WAITING);
	/* Written while it waits: held (nothing appended). */
	state_async(&a[1], MPART_MIRRORING);
	anchor_async(&o, 5, 0);
	mstate_async_stats(F.st, &as);
	ck_assert_uint_eq(as.held, 2);
	ck_assert_uint_eq(as.in_flight, 3);
	gate_hold(0);
	run_until_ready();
	/* Its turn: the group before it applied, the held ones not yet. */
	ck_assert_int_eq(AC.n, 1);
	ck_assert_int_eq(AC.code[0], 0);
	ck_assert_uint_eq(mpart_nanchors(a[0].p), 1);
	ck_assert_int_eq(a[1].p->state, MPART_PREPARING);
	ck_assert_uint_eq(mpart_nanchors(o.p), 0);
	ck_assert_int_eq(mstate_excl_state(F.st), MSTATE_EXCL_OPEN);
	/* The operator pauses m/t (queued in the open batch). */
	CODE(mstate_pause_topic(F.st, "m", "t", F.msg, sizeof(F.msg)), 0);
	ck_assert_int_eq(a[2].p->state, MPART_PREPARING);
	gate_hold(1);
	CODE(mstate_excl_commit(F.st, acb, &op, &started, F.msg,
	    sizeof(F.msg)), 0);
	ck_assert_int_eq(started, 1);
	gate_wait_inside();
	ck_assert_int_eq(mstate_excl_state(F.st), MSTATE_EXCL_FLIGHT);
	/* Validated against the model before the pause: held too. */
	state_async(&a[2], MPART_MIRRORING);
	ck_assert_int_eq(a[2].p->state, MPART_PREPARING);
	gate_hold(0);
	run_until(5);
	/* The pause first, applied before its callback ran. */
	ck_assert_int_eq(AC.id[1], 100);
	ck_assert_msg(AC.code[1] == 0, "%s", AC.msg[1]);
	ck_assert_int_eq(AC.state_seen[1], MPART_PAUSING);
	/* The held state changes of m/t no longer apply: refused, why said. */
	for (int k = 1; k <= 2; k++) {
		int i = cb_of(k);

		ck_assert_int_eq(AC.code[i], KERR_INVALID_CLUSTER_MIRROR_STATES);
		ck_assert_msg(strstr(AC.msg[i], "not recorded, an operator's "
		    "command moved it from PREPARING to PAUSING meanwhile") !=
		    NULL && strstr(AC.msg[i], "m/t-") != NULL, "%s",
		    AC.msg[i]);
		ck_assert_int_eq(a[k].p->state, MPART_PAUSING);
	}
	/* The other mirror's anchor went through. */
	ck_assert_int_eq(AC.code[cb_of(10)], 0);
	ck_assert_uint_eq(mpart_nanchors(o.p), 1);
	mstate_async_stats(F.st, &as);
	ck_assert_uint_eq(as.held, 3);
	ck_assert_uint_eq(as.held_refused, 2);
	ck_assert_uint_eq(as.excl_waits, 2);
	ck_assert_uint_eq(as.in_flight, 0);
	ck_assert_int_eq(mstate_excl_state(F.st), MSTATE_EXCL_NONE);
	for (int i = 0; i < 4; i++)
		ck_assert_int_eq(part("m", "t", i)->state, MPART_PAUSING);
	reopen_same();
}
END_TEST

/*
 * The operator's write fails (fsync): its callback says so, the writes
 * held behind it fail too (the log is broken), the model keeps none of
 * them and the log reopens to the model before.  A write with nothing
 * queued (the command answered an error) starts nothing and releases the
 * held writes at once; a cancelled wait releases them too.
 */
START_TEST(test_excl_fails_and_empty)
{
	struct aarg a[2], op;
	char *before;
	int started = 1;

	async_parts(a, 2);
	op = (struct aarg){ 100, a[0].p };
	/* Nothing queued: answered now. */
	ck_assert_int_eq(mstate_excl_begin(F.st, excl_ready, NULL), 1);
	CODE(mstate_create_mirror(F.st, "x", BOOT, 1, F.msg, sizeof(F.msg)),
	    0);
	mstate_excl_discard(F.st);
	CODE(mstate_excl_commit(F.st, acb, &op, &started, F.msg,
	    sizeof(F.msg)), 0);
	ck_assert_int_eq(started, 0);
	ck_assert_ptr_null(mstate_mirror_find(F.st, "x"));
	ck_assert_int_eq(mstate_excl_state(F.st), MSTATE_EXCL_NONE);
	/* A cancelled wait: the held write goes. */
	excl_ready_calls = 0;
	gate_hold(1);
	anchor_async(&a[0], 10, 0);
	gate_wait_inside();
	ck_assert_int_eq(mstate_excl_begin(F.st, excl_ready, NULL), 0);
	anchor_async(&a[1], 20, 0);
	mstate_excl_cancel(F.st, NULL);
	gate_hold(0);
	run_until(2);
	ck_assert_int_eq(AC.code[0], 0);
	ck_assert_int_eq(AC.code[1], 0);
	ck_assert_uint_eq(mpart_nanchors(a[1].p), 1);
	ck_assert_int_eq(excl_ready_calls, 0);
	/* The operator's write fails. */
	before = mstate_dump(F.st);
	ck_assert_int_eq(mstate_excl_begin(F.st, excl_ready, NULL), 1);
	CODE(mstate_create_mirror(F.st, "x", BOOT, 1, F.msg, sizeof(F.msg)),
	    0);
	F.faults.fsync_errno = EIO;
	gate_hold(1);
	CODE(mstate_excl_commit(F.st, acb, &op, &started, F.msg,
	    sizeof(F.msg)), 0);
	ck_assert_int_eq(started, 1);
	gate_wait_inside();
	anchor_async(&a[0], 30, 10);
	gate_hold(0);
	run_until(4);
	ck_assert_int_eq(AC.id[2], 100);
	ck_assert_int_eq(AC.code[2], KERR_KAFKA_STORAGE_ERROR);
	ck_assert_msg(strstr(AC.msg[2], "fsync failed") != NULL, "%s",
	    AC.msg[2]);
	ck_assert_int_eq(AC.id[3], 0);
	ck_assert_int_eq(AC.code[3], KERR_KAFKA_STORAGE_ERROR);
	ck_assert_ptr_null(mstate_mirror_find(F.st, "x"));
	ck_assert_int_eq(mstate_excl_state(F.st), MSTATE_EXCL_NONE);
	model_unchanged(before);
	reopen_same();
	free(before);
}
END_TEST

/* test_excl_queue: the turns given, in order. */
static struct {
	void *who[8];
	int n;
	int state_seen[8];       /* m/t-0's state when the turn came */
	size_t anchors_seen[8];  /* m/t-1's anchors then */
	struct aarg *a;
} XQ;

static void xq_ready(void *arg)
{
	struct aarg *op = arg;
	int started = 0;

	ck_assert_int_lt(XQ.n, 8);
	XQ.who[XQ.n] = arg;
	XQ.state_seen[XQ.n] = XQ.a[0].p->state;
	XQ.anchors_seen[XQ.n] = mpart_nanchors(XQ.a[1].p);
	XQ.n++;
	ck_assert_int_eq(mstate_excl_state(F.st), MSTATE_EXCL_OPEN);
	/* The second resumes what the first paused. */
	CODE(mstate_resume_topic(F.st, "m", "t", F.msg, sizeof(F.msg)), 0);
	CODE(mstate_excl_commit(F.st, acb, op, &started, F.msg,
	    sizeof(F.msg)), 0);
	ck_assert_int_eq(started, 1);
}

/*
 * Exclusive writes asked for while one is open or in flight (the
 * operator's commands and the data plane's metadata passes share the
 * turn) wait in the order they asked: the next opens once the one before
 * is applied and the writes held behind it are written and applied, so it
 * validates against all of them; a cancelled one never opens.
 */
START_TEST(test_excl_queue)
{
	struct aarg a[2], op1, op2, op3;
	struct mstate_async_stats as;
	int started = 0;

	async_parts(a, 2);
	XQ.a = a;
	op1 = (struct aarg){ 100, a[0].p };
	op2 = (struct aarg){ 200, a[0].p };
	op3 = (struct aarg){ 300, a[0].p };
	ck_assert_int_eq(mstate_excl_begin(F.st, xq_ready, &op1), 1);
	/* Asked for while the first is open: queued. */
	ck_assert_int_eq(mstate_excl_begin(F.st, xq_ready, &op2), 0);
	ck_assert_int_eq(mstate_excl_begin(F.st, xq_ready, &op3), 0);
	mstate_excl_cancel(F.st, &op3);
	CODE(mstate_pause_topic(F.st, "m", "t", F.msg, sizeof(F.msg)), 0);
	gate_hold(1);
	CODE(mstate_excl_commit(F.st, acb, &op1, &started, F.msg,
	    sizeof(F.msg)), 0);
	ck_assert_int_eq(started, 1);
	gate_wait_inside();
	/* Held behind the first, written before the second opens. */
	anchor_async(&a[1], 10, 0);
	gate_hold(0);
	run_until(3);
	ck_assert_int_eq(XQ.n, 1);
	ck_assert_ptr_eq(XQ.who[0], &op2);
	ck_assert_int_eq(XQ.state_seen[0], MPART_PAUSING);
	ck_assert_uint_eq(XQ.anchors_seen[0], 1);
	ck_assert_int_eq(AC.id[0], 100);
	ck_assert_int_eq(AC.code[0], 0);
	ck_assert_int_eq(AC.code[cb_of(1)], 0);
	ck_assert_int_eq(AC.code[cb_of(200)], 0);
	ck_assert_int_eq(AC.state_seen[cb_of(200)], MPART_MIRRORING);
	/* The cancelled one never opened. */
	for (int i = 0; i < 50; i++)
		event_base_loop(B, EVLOOP_ONCE | EVLOOP_NONBLOCK);
	ck_assert_int_eq(XQ.n, 1);
	ck_assert_int_eq(AC.n, 3);
	ck_assert_int_eq(mstate_excl_state(F.st), MSTATE_EXCL_NONE);
	mstate_async_stats(F.st, &as);
	ck_assert_uint_eq(as.excl_waits, 2);
	ck_assert_uint_eq(as.in_flight, 0);
	/* Cancelled once applied, before its callback ran (shutdown): the
	 * change stands, the callback is dropped, another caller's is not. */
	op3 = (struct aarg){ 400, a[0].p };
	ck_assert_int_eq(mstate_excl_begin(F.st, xq_ready, &op3), 1);
	CODE(mstate_pause_topic(F.st, "m", "t", F.msg, sizeof(F.msg)), 0);
	CODE(mstate_excl_commit(F.st, acb, &op3, &started, F.msg,
	    sizeof(F.msg)), 0);
	ck_assert_int_eq(started, 1);
	anchor_async(&a[1], 20, 15);
	mstate_async_wait(F.st);
	ck_assert_int_eq(a[0].p->state, MPART_PAUSING);
	mstate_excl_cancel(F.st, &op3);
	run_until(4);
	for (int i = 0; i < 50; i++)
		event_base_loop(B, EVLOOP_ONCE | EVLOOP_NONBLOCK);
	ck_assert_int_eq(AC.n, 4);
	ck_assert_int_eq(AC.id[3], 1);
	ck_assert_int_eq(AC.code[3], 0);
	reopen_same();
	ck_assert_int_eq(part("m", "t", 0)->state, MPART_PAUSING);
	ck_assert_int_eq(part("m", "t", 1)->state, MPART_PAUSING);
	ck_assert_uint_eq(mpart_nanchors(part("m", "t", 1)), 2);
}
END_TEST

/* A log that refuses a group without breaking, as the replicated log
 * does when the writer refuses a follower's write: the file backend with
 * its sync replaced (and written through the generic path: the sync runs
 * at once, its completion later from the loop). */
static const struct mlog_ops *wrap_orig;
static struct mlog_ops wrap_ops;
static int wrap_refuse;
static int16_t wrap_code = KERR_INVALID_REQUEST;

static int wrap_sync(struct mlog *ml, char *err, size_t errlen)
{
	if (wrap_refuse > 0) {
		wrap_refuse--;
		wrap_orig->discard(ml);
		ml->sync_error = wrap_code;
		snprintf(err, errlen, "the writer refused the group (test)");
		return -1;
	}
	return wrap_orig->sync(ml, err, errlen);
}

static void wrap_log(void)
{
	wrap_orig = F.ml->ops;
	wrap_ops = *wrap_orig;
	wrap_ops.sync = wrap_sync;
	wrap_ops.sync_async = NULL;
	F.ml->ops = &wrap_ops;
}

/*
 * A group refused while the log stays usable fails its own writes only:
 * the writes queued behind it (validated without it) go as the next
 * group, and the log goes on.  They used to fail with it, so a follower's
 * partitions went FAILED for another partition's refused record.
 */
START_TEST(test_refused_group_keeps_next)
{
	struct aarg a[3];
	struct mstate_async_stats as;

	async_parts(a, 3);
	wrap_log();
	wrap_refuse = 1;
	anchor_async(&a[0], 10, 0);          /* its group: refused */
	anchor_async(&a[1], 20, 5);          /* queued behind it */
	state_async(&a[2], MPART_MIRRORING);
	run_until(3);
	ck_assert_int_eq(AC.id[0], 0);
	ck_assert_int_eq(AC.code[0], KERR_INVALID_REQUEST);
	ck_assert_msg(strstr(AC.msg[0], "the writer refused the group") !=
	    NULL && strstr(AC.msg[0], "m/t-0") != NULL, "%s", AC.msg[0]);
	ck_assert_msg(AC.code[cb_of(1)] == 0, "%s", AC.msg[cb_of(1)]);
	ck_assert_msg(AC.code[cb_of(2)] == 0, "%s", AC.msg[cb_of(2)]);
	ck_assert_uint_eq(mpart_nanchors(a[0].p), 0);
	ck_assert_uint_eq(mpart_nanchors(a[1].p), 1);
	ck_assert_int_eq(a[2].p->state, MPART_MIRRORING);
	/* The log goes on. */
	anchor_async(&a[0], 30, 10);
	run_until(4);
	ck_assert_int_eq(AC.code[3], 0);
	ck_assert_uint_eq(mpart_nanchors(a[0].p), 1);
	mstate_async_stats(F.st, &as);
	ck_assert_uint_eq(as.in_flight, 0);
	reopen_same();
	ck_assert_uint_eq(mpart_nanchors(part("m", "t", 0)), 1);
	ck_assert_int_eq(mpart_anchor(part("m", "t", 0), 0).src, 30);
	ck_assert_uint_eq(mpart_nanchors(part("m", "t", 1)), 1);
	ck_assert_int_eq(part("m", "t", 2)->state, MPART_MIRRORING);
}
END_TEST

/*
 * A follower's group refused because one of its partitions moved to
 * another instance while it was out (the writer validates the group
 * whole): only that partition's write fails; the others go again, in
 * order, before the writes queued after them, and land.  Without this
 * instance's id (single mode) the whole group fails as before.
 */
START_TEST(test_refused_group_splits_lost)
{
	struct aarg a[4];
	struct mstate_async_stats as;
	struct mmember mem[2] = {
		{ (char *)"i1", (char *)"i1-a", -1, (char *)"", (char *)"" },
		{ (char *)"i2", (char *)"i2-a", -1, (char *)"", (char *)"" },
	};
	struct mpart *parts[4];
	const char *owners[4] = { "i2", "i1", "i1", "i1" };

	async_parts(a, 4);
	CODE(mstate_set_members(F.st, 1, mem, 2, F.msg, sizeof(F.msg)), 0);
	for (int i = 0; i < 4; i++)
		parts[i] = a[i].p;
	CODE(mpart_set_owners(F.st, parts, owners, 4, 1, F.msg,
	    sizeof(F.msg)), 0);
	ck_assert_int_eq(mstate_set_instance(F.st, "i1"), 0);
	wrap_log();
	wrap_code = KERR_NOT_LEADER_OR_FOLLOWER;
	anchor_async(&a[3], 10, 0);          /* its group: written at once */
	anchor_async(&a[1], 20, 5);          /* the next group: refused ... */
	anchor_async(&a[0], 30, 10);         /* ... for t-0, i2's now */
	state_async(&a[2], MPART_MIRRORING);
	wrap_refuse = 1;
	run_until(4);
	ck_assert_int_eq(AC.id[0], 3);
	ck_assert_int_eq(AC.code[0], 0);
	ck_assert_int_eq(AC.code[cb_of(0)], KERR_NOT_LEADER_OR_FOLLOWER);
	ck_assert_msg(strstr(AC.msg[cb_of(0)], "m/t-0") != NULL &&
	    strstr(AC.msg[cb_of(0)], "the writer refused the group") != NULL,
	    "%s", AC.msg[cb_of(0)]);
	ck_assert_msg(AC.code[cb_of(1)] == 0, "%s", AC.msg[cb_of(1)]);
	ck_assert_msg(AC.code[cb_of(2)] == 0, "%s", AC.msg[cb_of(2)]);
	/* In order: t-1's anchor before t-2's state change, as written. */
	ck_assert_int_lt(cb_of(1), cb_of(2));
	ck_assert_uint_eq(mpart_nanchors(a[0].p), 0);
	ck_assert_uint_eq(mpart_nanchors(a[1].p), 1);
	ck_assert_int_eq(a[2].p->state, MPART_MIRRORING);
	mstate_async_stats(F.st, &as);
	ck_assert_uint_eq(as.split_groups, 1);
	ck_assert_uint_eq(as.in_flight, 0);
	/* Single mode: all or nothing, as before. */
	ck_assert_int_eq(mstate_set_instance(F.st, NULL), 0);
	anchor_async(&a[3], 40, 20);
	anchor_async(&a[1], 50, 25);
	anchor_async(&a[0], 60, 30);
	wrap_refuse = 1;
	run_until(7);
	ck_assert_int_eq(AC.code[4], 0);
	ck_assert_int_eq(AC.code[5], KERR_NOT_LEADER_OR_FOLLOWER);
	ck_assert_int_eq(AC.code[6], KERR_NOT_LEADER_OR_FOLLOWER);
	mstate_async_stats(F.st, &as);
	ck_assert_uint_eq(as.split_groups, 1);
	wrap_code = KERR_INVALID_REQUEST;
	reopen_same();
	ck_assert_uint_eq(mpart_nanchors(part("m", "t", 0)), 0);
	ck_assert_uint_eq(mpart_nanchors(part("m", "t", 1)), 1);
	ck_assert_int_eq(part("m", "t", 2)->state, MPART_MIRRORING);
	ck_assert_uint_eq(mpart_nanchors(part("m", "t", 3)), 2);
}
END_TEST

/*
 * A synchronous write while the operator's write is in flight waits for
 * it and for the writes held behind it (checked), so the log order stays
 * the apply order.
 */
START_TEST(test_excl_then_sync)
{
	struct aarg a[2], op;
	struct mstate_async_stats as;
	int started = 0;

	async_parts(a, 2);
	op = (struct aarg){ 100, a[0].p };
	ck_assert_int_eq(mstate_excl_begin(F.st, excl_ready, NULL), 1);
	CODE(mstate_pause_topic(F.st, "m", "t", F.msg, sizeof(F.msg)), 0);
	gate_hold(1);
	CODE(mstate_excl_commit(F.st, acb, &op, &started, F.msg,
	    sizeof(F.msg)), 0);
	gate_wait_inside();
	anchor_async(&a[1], 10, 0);
	gate_hold(0);
	/* PAUSING -> PAUSED is valid only once the pause is applied. */
	mstate_async_stats(F.st, &as);
	ck_assert_uint_eq(as.sync_writes, 0);
	CODE(mpart_set_state(F.st, a[0].p, MPART_PAUSED, "test", F.msg,
	    sizeof(F.msg)), 0);
	ck_assert_uint_eq(mpart_nanchors(a[1].p), 1);
	/* Counted: the loop waited for it (the metric of the loop's writes). */
	mstate_async_stats(F.st, &as);
	ck_assert_uint_eq(as.sync_writes, 1);
	run_until(2);
	ck_assert_int_eq(AC.code[0], 0);
	ck_assert_int_eq(AC.code[1], 0);
	reopen_same();
	ck_assert_int_eq(part("m", "t", 0)->state, MPART_PAUSED);
	ck_assert_int_eq(part("m", "t", 1)->state, MPART_PAUSING);
}
END_TEST

/*
 * A failed fsync: the state changes of its group and of the next are not
 * made (the model keeps the old states, the callbacks say
 * KAFKA_STORAGE_ERROR naming the partition and the disk's error), and the
 * log reopens to the states before.
 */
START_TEST(test_async_state_fails)
{
	struct aarg a[3];
	char *before;

	async_parts(a, 3);
	before = mstate_dump(F.st);
	F.faults.fsync_errno = EIO;
	gate_hold(1);
	state_async(&a[0], MPART_MIRRORING);
	gate_wait_inside();
	state_async(&a[1], MPART_MIRRORING);
	state_async(&a[2], MPART_PAUSING);
	gate_hold(0);
	run_until(3);
	for (int i = 0; i < 3; i++) {
		char want[32];

		snprintf(want, sizeof(want), "m/t-%d", i);
		ck_assert_int_eq(AC.id[i], i);
		ck_assert_int_eq(AC.code[i], KERR_KAFKA_STORAGE_ERROR);
		ck_assert_msg(strstr(AC.msg[i], want) != NULL && strstr(AC.msg[i],
		    "the change was not made") != NULL && strstr(AC.msg[i],
		    strerror(EIO)) != NULL, "%s", AC.msg[i]);
		ck_assert_int_eq(AC.state_seen[i], MPART_PREPARING);
		ck_assert_int_eq(a[i].p->state, MPART_PREPARING);
	}
	model_unchanged(before);
	reopen_same();
	free(before);
}
END_TEST

/*
 * A synchronous state change while an asynchronous one of the same
 * partition is in flight is validated against the state the log will
 * hold (it waits for the write first): PAUSING in flight, then PAUSED is
 * allowed (it would be refused from MIRRORING, the state the model still
 * showed), and the log replays.
 */
START_TEST(test_sync_state_after_async_state)
{
	struct aarg a = { 0, NULL };

	mk_mirror("m");
	mk_topic("m", "t", 1);
	a.p = part("m", "t", 0);
	CODE(mpart_set_state(F.st, a.p, MPART_MIRRORING, "test", F.msg,
	    sizeof(F.msg)), 0);
	async_base();
	state_async(&a, MPART_PAUSING);
	ck_assert_int_eq(a.p->state, MPART_MIRRORING);
	CODE(mpart_set_state(F.st, a.p, MPART_PAUSED, "test", F.msg,
	    sizeof(F.msg)), 0);
	ck_assert_int_eq(a.p->state, MPART_PAUSED);
	/* And one refused from what the log holds, not from the model's
	 * older state: PAUSED -> STOPPED is not allowed. */
	CODE(mpart_stopped(F.st, a.p, 1, 1, "x", F.msg, sizeof(F.msg)),
	    KERR_INVALID_CLUSTER_MIRROR_STATES);
	run_until(1);
	ck_assert_int_eq(AC.code[0], 0);
	reopen_same();
	ck_assert_int_eq(part("m", "t", 0)->state, MPART_PAUSED);
}
END_TEST

/*
 * Snapshots taken between groups (every 5 records) while partitions keep
 * writing: every callback succeeds, snapshots were written, and the
 * reopened model equals the live one.
 */
START_TEST(test_async_compaction_with_groups)
{
	struct aarg a[8];
	struct mlog_stats s;
	int want = 0;

	F.compact_records = 5;
	fx_close();
	fx_open();
	async_parts(a, 8);
	for (int round = 0; round < 12; round++) {
		for (int i = 0; i < 8; i++) {
			/* a shifted mapping each round: a new anchor */
			anchor_async(&a[i], 100 * round + 10, 50 * round);
			want++;
		}
		run_until(want);
	}
	for (int i = 0; i < want; i++)
		ck_assert_msg(AC.code[i] == 0, "%d: %s", i, AC.msg[i]);
	mlog_stats(F.ml, &s);
	ck_assert_uint_ge(s.compactions, 2);
	ck_assert_int_eq(s.broken, 0);
	reopen_same();
}
END_TEST

START_TEST(test_automatic_compaction)
{
	struct mlog_stats s;

	F.compact_records = 7;
	fx_close();
	fx_open();
	build_rich();
	mlog_stats(F.ml, &s);
	ck_assert_uint_ge(s.compactions, 3);
	ck_assert_uint_lt(s.records_since_snapshot, 7);
	ck_assert_int_gt(s.snapshot_wall_ms, 0);
	reopen_same();
	CODE(mstate_resume_topic(F.st, "east", "a1", F.msg, sizeof(F.msg)), 0);
	reopen_same();
}
END_TEST

static void assert_anchors(const struct mpart *p, const struct xlate *ref)
{
	ck_assert_uint_eq(mpart_nanchors(p), xlate_count(ref));
	for (size_t i = 0; i < mpart_nanchors(p); i++) {
		struct xlate_anchor a = xlate_at(ref, i);
		struct manchor g = mpart_anchor(p, i);

		ck_assert_msg(g.src == a.src && g.dst == a.dst, "anchor %zu: "
		    "(%lld, %lld), want (%lld, %lld)", i, (long long)g.src,
		    (long long)g.dst, (long long)a.src, (long long)a.dst);
	}
}

/*
 * The translation map has no count cap: 10,000+ anchors (and 5,000+ epochs)
 * of one partition survive restarts and compaction exactly, equal to
 * lib/xlate fed the same anchors (whose exactness test_xlate checks offset
 * by offset); trims drop the same anchors there and here, and replay too.
 */
START_TEST(test_anchors_uncapped_and_trimmed)
{
	struct xlate *ref = xlate_new(0);
	struct mpart *p;
	uint64_t rng = 0x2545f4914f6cdd1dull;
	int64_t s = 0, d = 0, src_at[12001], dst_at[12001];
	char err[1024];
	size_t dropped, ne;
	uint64_t n;

	mk_mirror("m");
	mk_topic("m", "t", 1);
	p = part("m", "t", 0);
	for (int i = 0; i < 12000; i++) {
		int64_t run, hole, foreign;

		rng ^= rng << 13;
		rng ^= rng >> 7;
		rng ^= rng << 17;
		run = 1 + (int64_t)(rng % 20);
		hole = (int64_t)(rng >> 8) % 6;
		foreign = (int64_t)(rng >> 16) % 4;
		if (hole == 0 && foreign == 0)
			hole = 1;
		src_at[i] = s;
		dst_at[i] = d;
		/* a mapped run, then a skip on one side or both */
		CODE(anchor_now(F.st, p, s, d, F.msg, sizeof(F.msg)), 0);
		ck_assert_int_eq(xlate_add(ref, s, d, err, sizeof(err)), 0);
		s += run + hole;
		d += run;
		if (hole > 0) {
			CODE(anchor_now(F.st, p, s, d, F.msg, sizeof(F.msg)), 0);
			ck_assert_int_eq(xlate_add(ref, s, d, err, sizeof(err)), 0);
		}
		d += foreign;
		if (i % 2 == 0)
			CODE(mpart_add_epoch(F.st, p, i / 2, d, F.msg, sizeof(F.msg)), 0);
	}
	src_at[12000] = s;
	dst_at[12000] = d;
	ck_assert_uint_gt(mpart_nanchors(p), 10000);
	ck_assert_uint_eq(p->nepochs, 6000);
	assert_anchors(p, ref);
	reopen_same();
	p = part("m", "t", 0);
	assert_anchors(p, ref);
	ck_assert_uint_eq(p->nepochs, 6000);
	ck_assert_msg(mstate_compact(F.st, err, sizeof(err)) == 0, "%s", err);
	reopen_same();
	p = part("m", "t", 0);
	assert_anchors(p, ref);

	/* Nothing below both log starts: no record. */
	n = log_records();
	CODE(mpart_trim(F.st, p, src_at[5000], 0, &dropped, F.msg,
	    sizeof(F.msg)), 0);
	ck_assert_uint_eq(dropped, 0);
	ck_assert_uint_eq(log_records(), n);
	CODE(mpart_trim(F.st, p, -1, 0, NULL, F.msg, sizeof(F.msg)),
	    KERR_INVALID_REQUEST);
	/* Trims at rising points, each matched by lib/xlate's. */
	for (int k = 1; k <= 3; k++) {
		int64_t smin = src_at[k * 3000] + 3, dmin = dst_at[k * 3000 - 7];
		size_t went = xlate_trim_both(ref, smin, dmin);

		ne = p->nepochs;
		CODE(mpart_trim(F.st, p, smin, dmin, &dropped, F.msg,
		    sizeof(F.msg)), 0);
		ck_assert_uint_gt(went, 0);
		ck_assert_uint_eq(dropped, went + (ne - p->nepochs));
		assert_anchors(p, ref);
		/* the kept epochs: the first starts at or below both */
		ck_assert_int_le(p->epochs[0].start_offset, MIN(smin, dmin));
		ck_assert_int_gt(p->epochs[1].start_offset, MIN(smin, dmin));
		reopen_same();
		p = part("m", "t", 0);
		assert_anchors(p, ref);
		if (k == 2) {
			ck_assert_msg(mstate_compact(F.st, err, sizeof(err)) == 0,
			    "%s", err);
			reopen_same();
			p = part("m", "t", 0);
			assert_anchors(p, ref);
		}
	}
	xlate_free(ref);
}
END_TEST

/* Runs fn with stderr going to a file; returns what was written. */
static char *capture_stderr(void (*fn)(void))
{
	char path[300];
	int saved = dup(2), fd;
	FILE *f;
	static char out[8192];
	size_t n;

	snprintf(path, sizeof(path), "%s/stderr.txt", F.dir);
	fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
	ck_assert_int_ge(fd, 0);
	ck_assert_int_ge(saved, 0);
	dup2(fd, 2);
	close(fd);
	fn();
	dup2(saved, 2);
	close(saved);
	f = fopen(path, "r");
	ck_assert_ptr_nonnull(f);
	n = fread(out, 1, sizeof(out) - 1, f);
	out[n] = '\0';
	fclose(f);
	unlink(path);
	return out;
}

static void log_some_transitions(void)
{
	mk_mirror("m");
	mk_topic("m", "orders", 4);
	CODE(mpart_set_state(F.st, part("m", "orders", 3), MPART_MIRRORING,
	    "log aligned", F.msg, sizeof(F.msg)), 0);
	CODE(mpart_fail(F.st, part("m", "orders", 3), "fetch: CORRUPT_MESSAGE",
	    1, F.msg, sizeof(F.msg)), 0);
}

/* The operator's view: one info line per transition, in the house form. */
START_TEST(test_transition_log_lines)
{
	char *out = capture_stderr(log_some_transitions);

	ck_assert_msg(strstr(out, " info: m/orders-3: UNKNOWN -> PREPARING "
	    "(added to the mirror)\n") != NULL, "%s", out);
	ck_assert_msg(strstr(out, " info: m/orders-3: PREPARING -> MIRRORING "
	    "(log aligned)\n") != NULL, "%s", out);
	ck_assert_msg(strstr(out, " info: m/orders-3: MIRRORING -> FAILED "
	    "(fetch: CORRUPT_MESSAGE)\n") != NULL, "%s", out);
	/* Replay does not repeat them at info level. */
	out = capture_stderr(reopen_same);
	ck_assert_msg(strstr(out, "-> PREPARING") == NULL, "%s", out);
}
END_TEST

/* A batch: many operations, one fsync; applied only at commit. */
START_TEST(test_batch)
{
	struct mlog_stats s0, s1;
	char *before;
	char names[20][8];

	mk_mirror("m");
	mk_topic("m", "held", 1);
	mk_mirror("other");
	mlog_stats(F.ml, &s0);
	ck_assert_int_eq(mstate_batch_begin(F.st), 0);
	ck_assert_int_eq(mstate_batch_begin(F.st), -1);
	for (int i = 0; i < 20; i++) {
		snprintf(names[i], sizeof(names[i]), "t%02d", i);
		CODE(mstate_add_topic(F.st, "m", names[i], 2, F.msg,
		    sizeof(F.msg)), 0);
	}
	/* Errors are still immediate, from the model as it was. */
	CODE(mstate_add_topic(F.st, "other", "held", 1, F.msg, sizeof(F.msg)),
	    KERR_TOPIC_ALREADY_IN_CLUSTER_MIRROR);
	/* Nothing applied yet, nothing synced. */
	ck_assert_ptr_null(mirror_topic_find(mstate_mirror_find(F.st, "m"),
	    "t00"));
	char err[256];
	ck_assert_int_eq(mstate_compact(F.st, err, sizeof(err)), -1);
	ck_assert_ptr_nonnull(strstr(err, "batch is open"));
	CODE(mstate_batch_commit(F.st, F.msg, sizeof(F.msg)), 0);
	mlog_stats(F.ml, &s1);
	ck_assert_uint_eq(s1.syncs, s0.syncs + 1);
	ck_assert_uint_eq(s1.records, s0.records + 20);
	ck_assert_uint_eq(mstate_mirror_find(F.st, "m")->ntopics, 21);
	ck_assert_str_eq(mtopic_state_name(topic("m", "t19")), "PREPARING");
	reopen_same();

	/* The disk refuses at commit: none of it happened. */
	before = mstate_dump(F.st);
	ck_assert_int_eq(mstate_batch_begin(F.st), 0);
	CODE(mstate_remove_topic(F.st, "m", "t00", F.msg, sizeof(F.msg)), 0);
	CODE(mstate_remove_topic(F.st, "m", "t01", F.msg, sizeof(F.msg)), 0);
	F.faults.write_errno = ENOSPC;
	CODE(mstate_batch_commit(F.st, F.msg, sizeof(F.msg)),
	    KERR_KAFKA_STORAGE_ERROR);
	MSG_HAS("none of the batch's changes were made");
	MSG_HAS(strerror(ENOSPC));
	F.faults.write_errno = 0;
	char *now = mstate_dump(F.st);
	ck_assert_str_eq(now, before);
	free(now);
	reopen_same();

	/* Abort drops the queued operations. */
	ck_assert_int_eq(mstate_batch_begin(F.st), 0);
	CODE(mstate_remove_topic(F.st, "m", "t02", F.msg, sizeof(F.msg)), 0);
	mstate_batch_abort(F.st);
	ck_assert_str_eq(mtopic_state_name(topic("m", "t02")), "PREPARING");
	now = mstate_dump(F.st);
	ck_assert_str_eq(now, before);
	free(now);
	reopen_same();
	free(before);
}
END_TEST

/* Offset of the last frame in the newest segment of dir. */
static char *newest_segment(size_t *last_off, size_t *size)
{
	DIR *d = opendir(F.dir);
	struct dirent *de;
	char best[256] = "", *path;
	FILE *f;
	uint8_t hdr[MLOG_FRAME_HDR];
	size_t off = 0;

	while ((de = readdir(d)) != NULL)
		if (strncmp(de->d_name, "mlog-", 5) == 0 &&
		    strcmp(de->d_name, best) > 0)
			snprintf(best, sizeof(best), "%s", de->d_name);
	closedir(d);
	ck_assert_int_gt(asprintf(&path, "%s/%s", F.dir, best), 0);
	f = fopen(path, "rb");
	ck_assert_ptr_nonnull(f);
	fseek(f, 0, SEEK_END);
	*size = (size_t)ftell(f);
	for (;;) {
		fseek(f, (long)off, SEEK_SET);
		ck_assert_uint_eq(fread(hdr, 1, sizeof(hdr), f), sizeof(hdr));
		size_t next = off + MLOG_FRAME_HDR + be32_load(hdr);
		if (next >= *size)
			break;
		off = next;
	}
	fclose(f);
	*last_off = off;
	return path;
}

/* A kill at any byte of the last record leaves the model of just before it
 * (and the complete record gives the model after it). */
START_TEST(test_kill_at_every_byte_of_last_record)
{
	char *before, *after, *path, *now;
	size_t last, size;

	build_rich();
	before = mstate_dump(F.st);
	CODE(mpart_fail(F.st, part("east", "a1", 1),
	    "a long enough error message to make the record bigger", 4,
	    F.msg, sizeof(F.msg)), 0);
	after = mstate_dump(F.st);
	ck_assert_str_ne(before, after);
	fx_close();
	path = newest_segment(&last, &size);
	for (size_t cut = last; cut <= size; cut++) {
		ck_assert_int_eq(truncate(path, (off_t)cut), 0);
		fx_open();
		now = mstate_dump(F.st);
		ck_assert_msg(strcmp(now, cut == size ? after : before) == 0,
		    "cut at %zu of %zu:\n%s", cut, size, now);
		free(now);
		fx_close();
		if (cut < size) {
			/* Restore the full record for the next cut. */
			fx_open();
			CODE(mpart_fail(F.st, part("east", "a1", 1),
			    "a long enough error message to make the record "
			    "bigger", 4, F.msg, sizeof(F.msg)), 0);
			fx_close();
		}
	}
	fx_open();
	free(path);
	free(before);
	free(after);
}
END_TEST

/* A failed append+sync answers 56 naming the file and changes nothing. */
START_TEST(test_disk_errors_leave_state_unchanged)
{
	char *before, *now;

	build_rich();
	before = mstate_dump(F.st);
	F.faults.write_errno = ENOSPC;
	CODE(mstate_create_mirror(F.st, "north", BOOT, 1, F.msg,
	    sizeof(F.msg)), KERR_KAFKA_STORAGE_ERROR);
	MSG_HAS("north: the change was not made");
	MSG_HAS(F.dir);
	MSG_HAS(strerror(ENOSPC));
	ck_assert_ptr_null(mstate_mirror_find(F.st, "north"));
	CODE(mstate_resume_topic(F.st, "east", "a1", F.msg, sizeof(F.msg)),
	    KERR_KAFKA_STORAGE_ERROR);
	MSG_HAS("east/a1: the change was not made");
	CODE(anchor_now(F.st, part("east", "a1", 1), 500, 400, F.msg,
	    sizeof(F.msg)), KERR_KAFKA_STORAGE_ERROR);
	CODE(mstate_delete_mirror(F.st, "west", F.msg, sizeof(F.msg)),
	    KERR_CLUSTER_MIRROR_NOT_EMPTY);
	now = mstate_dump(F.st);
	ck_assert_str_eq(now, before);
	free(now);
	/* Space is back: works again, and nothing of the failures shows. */
	F.faults.write_errno = 0;
	reopen_same();
	mk_mirror("north");

	/* fsync EIO: 56, and the log refuses writes until restart. */
	now = mstate_dump(F.st);
	F.faults.fsync_errno = EIO;
	CODE(mstate_create_mirror(F.st, "south", BOOT, 1, F.msg,
	    sizeof(F.msg)), KERR_KAFKA_STORAGE_ERROR);
	MSG_HAS("fsync failed");
	F.faults.fsync_errno = 0;
	CODE(mstate_create_mirror(F.st, "south", BOOT, 1, F.msg,
	    sizeof(F.msg)), KERR_KAFKA_STORAGE_ERROR);
	MSG_HAS("read-only after an earlier failure");
	ck_assert_ptr_null(mstate_mirror_find(F.st, "south"));
	char *after = mstate_dump(F.st);
	ck_assert_str_eq(after, now);
	free(after);
	reopen_same();
	ck_assert_ptr_null(mstate_mirror_find(F.st, "south"));
	free(now);
	free(before);
}
END_TEST

START_TEST(test_replay_refuses_bad_records)
{
	/* A record that does not apply stops the open, naming the file and
	 * offset: here a partition-state record for a partition that does
	 * not exist, written straight into the log. */
	char err[1024];
	struct mlog_opts o;
	static const uint8_t rec[] = {
		0,                 /* version */
		2, 'm',            /* mirror "m" */
		2, 't',            /* topic "t" */
		0, 0, 0, 9,        /* partition 9 */
		2,                 /* MIRRORING */
		0, 0, 0, 0, 0,     /* retry, flags */
		0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, /* off, epoch */
		0,                 /* null reason */
	};

	mk_mirror("m");
	mk_topic("m", "t", 1);
	ck_assert_int_eq(mlog_append(F.ml, 8, rec, sizeof(rec), err,
	    sizeof(err)), 0);
	ck_assert_int_eq(mlog_sync(F.ml, err, sizeof(err)), 0);
	fx_close();
	mlog_opts_init(&o);
	o.dir = F.dir;
	F.ml = mlog_file_new(&o, err, sizeof(err));
	F.st = mstate_new();
	ck_assert_int_eq(mstate_open(F.st, F.ml, err, sizeof(err)), -1);
	ck_assert_msg(strstr(err, "mlog-00000000000000000001.log: record at "
	    "byte offset") != NULL, "%s", err);
	ck_assert_msg(strstr(err, "part-state record names partition m/t-9, "
	    "the topic has 1") != NULL, "%s", err);
	fx_close();
	/* Remove the log so teardown's reopen-free path stays simple. */
	rm_rf(F.dir);
	ck_assert_int_eq(mkdir(F.dir, 0700), 0);
	fx_open();
}
END_TEST

/* ---- secrets at rest ------------------------------------------------------ */

/* A stand-in sealer: "enc:v1:" and the value's bytes in hex, reversed. */
static int fake_needs_seal(void *arg, const char *name, const char *value,
    int stored)
{
	(void)arg;
	return strstr(name, "password") != NULL && strncmp(value, "${", 2) != 0 &&
	    !(stored && strncmp(value, "enc:v1:", 7) == 0);
}

static int fake_seal(void *arg, const char *mirror, const char *name,
    const char *value, char **out, char *err, size_t errlen)
{
	size_t n = strlen(value);
	int *fail = arg;

	(void)mirror;
	(void)name;
	if (fail != NULL && *fail) {
		snprintf(err, errlen, "no key");
		return -1;
	}
	*out = malloc(7 + 2 * n + 1);
	memcpy(*out, "enc:v1:", 7);
	for (size_t i = 0; i < n; i++)
		snprintf(*out + 7 + 2 * i, 3, "%02x",
		    (unsigned char)value[n - 1 - i]);
	return 0;
}

/* 1 if any file of the log directory holds s. */
static int dir_holds(const char *s)
{
	DIR *d = opendir(F.dir);
	struct dirent *de;
	char path[4096], buf[1 << 16];
	int found = 0;

	ck_assert_ptr_nonnull(d);
	while (!found && (de = readdir(d)) != NULL) {
		FILE *f;
		size_t n;

		if (de->d_name[0] == '.')
			continue;
		snprintf(path, sizeof(path), "%s/%s", F.dir, de->d_name);
		if ((f = fopen(path, "rb")) == NULL)
			continue;
		n = fread(buf, 1, sizeof(buf), f);
		fclose(f);
		found = memmem(buf, n, s, strlen(s)) != NULL;
	}
	closedir(d);
	return found;
}

static void reopen_sealed(int *fail)
{
	struct mlog_opts o;
	struct mstate_sealer sl = { fake_needs_seal, fake_seal, fail };
	char err[1024];

	fx_close();
	mlog_opts_init(&o);
	o.dir = F.dir;
	o.io = &F.io;
	F.ml = mlog_file_new(&o, err, sizeof(err));
	ck_assert_msg(F.ml != NULL, "%s", err);
	F.st = mstate_new();
	mstate_set_sealer(F.st, &sl);
	ck_assert_msg(mstate_open(F.st, F.ml, err, sizeof(err)) == 0, "%s", err);
}

START_TEST(test_secrets_sealed_and_migrated)
{
#define C(n, v) { (char *)(n), (char *)(v) }
	struct mcfg c1[] = { C("bootstrap.servers", "a:1"),
	    C("sasl.password", "ClearOne"), C("sasl.username", "u") };
	struct mcfg c2[] = { C("bootstrap.servers", "a:1"),
	    C("sasl.password", "ClearTwo") };
	struct mcfg c3[] = { C("bootstrap.servers", "a:1"),
	    C("sasl.password", "ClearGone") };
	struct mcfg c4[] = { C("bootstrap.servers", "a:1"),
	    C("sasl.password", "ClearNew"), C("ssl.key.password", "enc:v1:6869"),
	    C("ssl.ca.location", "${file:/etc/x:y}") };
#undef C
	char err[1024], *before;
	size_t n;
	int compacted, fail = 0;
	struct mirror *m;

	/* As an earlier version wrote it: no sealer, clear values in a
	 * snapshot, in the segment, and in a mirror since deleted. */
	CODE(mstate_create_mirror(F.st, "old", c1, 3, F.msg, sizeof(F.msg)), 0);
	ck_assert_int_eq(mstate_compact(F.st, err, sizeof(err)), 0);
	CODE(mstate_create_mirror(F.st, "old2", c2, 2, F.msg, sizeof(F.msg)), 0);
	CODE(mstate_create_mirror(F.st, "gone", c3, 2, F.msg, sizeof(F.msg)), 0);
	CODE(mstate_delete_mirror(F.st, "gone", F.msg, sizeof(F.msg)), 0);
	ck_assert(dir_holds("ClearOne") && dir_holds("ClearTwo") &&
	    dir_holds("ClearGone"));

	/* The migration: sealed in the model, gone from every file. */
	reopen_sealed(&fail);
	ck_assert_int_eq(mstate_seal_clear_secrets(F.st, &n, &compacted, err,
	    sizeof(err)), 0);
	ck_assert_uint_eq(n, 2);
	ck_assert_int_eq(compacted, 1);
	ck_assert(!dir_holds("ClearOne") && !dir_holds("ClearTwo") &&
	    !dir_holds("ClearGone"));
	m = mstate_mirror_find(F.st, "old");
	ck_assert_str_eq(mirror_config_get(m, "sasl.password"),
	    "enc:v1:656e4f7261656c43");
	ck_assert_str_eq(mirror_config_get(m, "sasl.username"), "u");

	/* Reopened: the same model, nothing left to migrate. */
	before = mstate_dump(F.st);
	reopen_sealed(&fail);
	{
		char *after = mstate_dump(F.st);

		ck_assert_str_eq(after, before);
		free(after);
	}
	free(before);
	ck_assert_int_eq(mstate_seal_clear_secrets(F.st, &n, &compacted, err,
	    sizeof(err)), 0);
	ck_assert_uint_eq(n, 0);
	ck_assert_int_eq(compacted, 0);

	/* A new mirror: its secret is sealed before it is written; a value
	 * from a request that looks sealed is sealed all the same; a
	 * reference is stored as written. */
	CODE(mstate_create_mirror(F.st, "new", c4, 4, F.msg, sizeof(F.msg)), 0);
	ck_assert(!dir_holds("ClearNew"));
	m = mstate_mirror_find(F.st, "new");
	ck_assert_str_eq(mirror_config_get(m, "sasl.password"),
	    "enc:v1:77654e7261656c43");
	ck_assert_str_ne(mirror_config_get(m, "ssl.key.password"), "enc:v1:6869");
	ck_assert_str_eq(mirror_config_get(m, "ssl.ca.location"),
	    "${file:/etc/x:y}");

	/* A secret that cannot be sealed is never written in clear. */
	fail = 1;
	CODE(mstate_create_mirror(F.st, "nokey", c2, 2, F.msg, sizeof(F.msg)),
	    KERR_UNKNOWN_SERVER_ERROR);
	MSG_HAS("config sasl.password cannot be encrypted");
	ck_assert_ptr_null(mstate_mirror_find(F.st, "nokey"));
	fail = 0;
	reopen_same();
}
END_TEST


/* ---- multi-instance mode: cluster-members and part-owner records ---------- */

static uint64_t log_syncs(void)
{
	struct mlog_stats s;

	mlog_stats(F.ml, &s);
	return s.syncs;
}

/* Encodes r into a fresh buffer (*len); the caller frees it. */
static uint8_t *encode(const struct mrec *r, size_t *len)
{
	char err[256];
	struct kw w;
	uint8_t *b;

	kw_init(&w, 1 << 20);
	ck_assert_msg(mrec_encode(r, &w, err, sizeof(err)) == 0, "%s", err);
	b = kw_take(&w, len);
	ck_assert_ptr_nonnull(b);
	return b;
}

static int mrec_encode_fails(const struct mrec *r)
{
	char err[256];
	struct kw w;
	int rc;

	kw_init(&w, 1 << 20);
	rc = mrec_encode(r, &w, err, sizeof(err)) != 0;
	kw_fini(&w);
	return rc;
}

/* The codec of both new types: a round trip keeps every field, null
 * addresses stay null, bad members are refused both ways. */
START_TEST(test_mrec_members_and_owner_codec)
{
	static const struct mrec_member in[] = {
		{ { "b:9001", 6 }, { "b:9001-6f1c", 11 }, 2, { "10.0.0.2:9001", 13 },
		  { "10.0.0.2:8080", 13 } },
		{ { "a:9001", 6 }, { "", 0 }, -1, { NULL, -1 }, { NULL, -1 } },
	};
	struct mrec_member out[2];
	struct mrec r, d;
	struct mrec_config cfg[4];
	char err[256];
	uint8_t *b;
	size_t len;
	struct kw w;

	memset(&r, 0, sizeof(r));
	r.type = MREC_CLUSTER_MEMBERS;
	r.mirror = r.topic = r.str = KSTR_NULL;
	r.generation = 41;
	r.nmembers = 2;
	r.members = in;
	b = encode(&r, &len);
	ck_assert_int_eq(mrec_decode(MREC_CLUSTER_MEMBERS, b, len, &d, cfg, 4, err,
	    sizeof(err)), 0);
	ck_assert_int_eq(d.generation, 41);
	ck_assert_int_eq(d.nmembers, 2);
	ck_assert_int_eq(mrec_members(&d, out, err, sizeof(err)), 0);
	for (int i = 0; i < 2; i++) {
		ck_assert(kstr_eq(out[i].instance_id, in[i].instance_id.p));
		ck_assert_int_eq(out[i].member_id.len, in[i].member_id.len);
		ck_assert_int_eq(out[i].local_broker_id, in[i].local_broker_id);
		ck_assert_int_eq(out[i].admin_addr.len, in[i].admin_addr.len);
		ck_assert_int_eq(out[i].http_addr.len, in[i].http_addr.len);
	}
	ck_assert(kstr_eq(out[0].admin_addr, "10.0.0.2:9001"));
	ck_assert_str_eq(mrec_type_name(MREC_CLUSTER_MEMBERS), "cluster-members");
	/* Every truncation is refused, naming the type. */
	for (size_t cut = 0; cut < len; cut++) {
		ck_assert_int_eq(mrec_decode(MREC_CLUSTER_MEMBERS, b, cut, &d, cfg,
		    4, err, sizeof(err)), -1);
		ck_assert_msg(strstr(err, "cluster-members record") != NULL, "%s",
		    err);
	}
	free(b);

	/* An empty instance id cannot be written. */
	struct mrec_member bad = in[1];
	bad.instance_id = kstr_c("");
	r.members = &bad;
	r.nmembers = 1;
	kw_init(&w, 1 << 20);
	ck_assert_int_eq(mrec_encode(&r, &w, err, sizeof(err)), -1);
	ck_assert_msg(strstr(err, "member 0: instance id") != NULL, "%s", err);
	kw_fini(&w);
	/* Nor read: a hand-made payload with one. */
	static const uint8_t empty_id[] = { 0, 0, 0, 0, 1, 2, 1, 1, 0xff, 0xff,
	    0xff, 0xff, 0, 0 };
	ck_assert_int_eq(mrec_decode(MREC_CLUSTER_MEMBERS, empty_id,
	    sizeof(empty_id), &d, cfg, 4, err, sizeof(err)), -1);
	ck_assert_msg(strstr(err, "instance id empty") != NULL, "%s", err);

	/* part-owner: mirror/topic/partition, owner, generation. */
	memset(&r, 0, sizeof(r));
	r.type = MREC_PART_OWNER;
	r.mirror = kstr_c("east");
	r.topic = kstr_c("orders");
	r.partition = 3;
	r.str = kstr_c("b:9001");
	r.generation = 7;
	b = encode(&r, &len);
	ck_assert_int_eq(mrec_decode(MREC_PART_OWNER, b, len, &d, cfg, 4, err,
	    sizeof(err)), 0);
	ck_assert(kstr_eq(d.mirror, "east"));
	ck_assert(kstr_eq(d.topic, "orders"));
	ck_assert_int_eq(d.partition, 3);
	ck_assert(kstr_eq(d.str, "b:9001"));
	ck_assert_int_eq(d.generation, 7);
	ck_assert_int_eq(mrec_decode(MREC_PART_OWNER, b, len - 1, &d, cfg, 4, err,
	    sizeof(err)), -1);
	free(b);
}
END_TEST

/* Members and owners: setters, getters, hooks, one sync for many owners,
 * no record for an unchanged owner, "" = nobody, and the same model after
 * a replay, a snapshot and a snapshot plus later records. */
START_TEST(test_members_and_owners)
{
	struct evlog e = { "" };
	const struct mmember *got;
	struct mmember mem[3] = {
		{ (char *)"c:9001", (char *)"c:9001-aa", 3, (char *)"127.0.0.3:9001",
		  (char *)"" },
		{ (char *)"a:9001", (char *)"a:9001-bb", 1, (char *)"127.0.0.1:9001",
		  (char *)"127.0.0.1:8080" },
		{ (char *)"b:9001", (char *)"b:9001-cc", -1, (char *)"127.0.0.2:9001",
		  NULL },
	};
	struct mpart *parts[4];
	const char *owners[4];
	char err[1024], *text;
	uint64_t n, syncs;
	size_t nm;

	ck_assert_int_eq(mstate_add_hook(F.st, hook, &e), 0);
	ck_assert_int_eq(mstate_members(F.st, &got, &nm), -1);
	ck_assert_uint_eq(nm, 0);
	mk_mirror("east");
	mk_topic("east", "orders", 3);
	mk_topic("east", "pay", 1);
	ck_assert_ptr_null(part("east", "orders", 0)->owner);
	ck_assert_int_eq(part("east", "orders", 0)->owner_generation, -1);
	ck_assert(mpart_owned_by(part("east", "orders", 0), NULL));
	ck_assert(!mpart_owned_by(part("east", "orders", 0), "a:9001"));

	CODE(mstate_set_members(F.st, 5, mem, 3, F.msg, sizeof(F.msg)), 0);
	ck_assert_int_eq(mstate_members(F.st, &got, &nm), 5);
	ck_assert_uint_eq(nm, 3);
	ck_assert_str_eq(got[0].instance_id, "a:9001");   /* sorted */
	ck_assert_str_eq(got[2].instance_id, "c:9001");
	ck_assert_str_eq(got[1].http_addr, "");            /* NULL -> "" */
	ck_assert_int_eq(mstate_member_find(F.st, "c:9001")->local_broker_id, 3);
	ck_assert_ptr_null(mstate_member_find(F.st, "d:9001"));

	/* Four partitions in one call: one sync. */
	for (int i = 0; i < 3; i++)
		parts[i] = part("east", "orders", i);
	parts[3] = part("east", "pay", 0);
	owners[0] = "a:9001";
	owners[1] = "b:9001";
	owners[2] = "c:9001";
	owners[3] = NULL;       /* nobody, as it is: no record */
	n = log_records();
	syncs = log_syncs();
	CODE(mpart_set_owners(F.st, parts, owners, 4, 5, F.msg, sizeof(F.msg)), 0);
	ck_assert_uint_eq(log_records(), n + 3);
	ck_assert_uint_eq(log_syncs(), syncs + 1);
	ck_assert_str_eq(parts[0]->owner, "a:9001");
	ck_assert_int_eq(parts[0]->owner_generation, 5);
	ck_assert(mpart_owned_by(parts[1], "b:9001"));
	ck_assert(!mpart_owned_by(parts[1], "a:9001"));
	ck_assert_ptr_null(parts[3]->owner);
	ck_assert_msg(strstr(e.text, "members;owner:east/orders-0:->a:9001;"
	    "owner:east/orders-1:->b:9001;owner:east/orders-2:->c:9001;") != NULL,
	    "%s", e.text);
	/* Unchanged owners: nothing written. */
	n = log_records();
	CODE(mpart_set_owners(F.st, parts, owners, 4, 6, F.msg, sizeof(F.msg)), 0);
	ck_assert_uint_eq(log_records(), n);
	ck_assert_int_eq(parts[0]->owner_generation, 5);
	reopen_same();

	/* A move and a release ("" = nobody); the hook names the previous
	 * owner. */
	parts[0] = part("east", "orders", 0);
	parts[1] = part("east", "orders", 1);
	owners[0] = "c:9001";
	owners[1] = "";
	e.text[0] = '\0';
	ck_assert_int_eq(mstate_add_hook(F.st, hook, &e), 0);
	CODE(mpart_set_owners(F.st, parts, owners, 2, 6, F.msg, sizeof(F.msg)), 0);
	ck_assert_str_eq(e.text, "owner:east/orders-0:a:9001>c:9001;"
	    "owner:east/orders-1:b:9001>-;");
	ck_assert_ptr_null(parts[1]->owner);
	ck_assert_int_eq(parts[0]->owner_generation, 6);

	/* Through a snapshot, then one more change after it. */
	ck_assert_msg(mstate_compact(F.st, err, sizeof(err)) == 0, "%s", err);
	reopen_same();
	text = mstate_dump(F.st);
	ck_assert_ptr_nonnull(strstr(text, "members generation 5\n"));
	ck_assert_ptr_nonnull(strstr(text, "  member a:9001 id a:9001-bb broker 1 "
	    "admin 127.0.0.1:9001 http 127.0.0.1:8080\n"));
	ck_assert_ptr_nonnull(strstr(text, "owner c:9001 generation 6"));
	free(text);
	mem[2].local_broker_id = 2;
	CODE(mstate_set_members(F.st, 6, &mem[1], 2, F.msg, sizeof(F.msg)), 0);
	reopen_same();
	ck_assert_int_eq(mstate_members(F.st, &got, &nm), 6);
	ck_assert_uint_eq(nm, 2);
	ck_assert_int_eq(mstate_member_find(F.st, "b:9001")->local_broker_id, 2);
	ck_assert_ptr_null(mstate_member_find(F.st, "c:9001"));
	/* The owner record stays what the writer wrote (assignment moves it). */
	ck_assert_str_eq(part("east", "orders", 2)->owner, "c:9001");

	/* Refused: nothing written. */
	n = log_records();
	CODE(mstate_set_members(F.st, -1, mem, 3, F.msg, sizeof(F.msg)),
	    KERR_INVALID_REQUEST);
	MSG_HAS("generation -1");
	mem[0].instance_id = (char *)"a:9001";
	CODE(mstate_set_members(F.st, 7, mem, 3, F.msg, sizeof(F.msg)),
	    KERR_INVALID_REQUEST);
	MSG_HAS("instance 'a:9001' is named twice");
	mem[0].instance_id = (char *)"";
	CODE(mstate_set_members(F.st, 7, mem, 1, F.msg, sizeof(F.msg)),
	    KERR_INVALID_REQUEST);
	MSG_HAS("instance id must be 1-1024 bytes");
	ck_assert_uint_eq(log_records(), n);

	/* An empty group is a valid record (every member left). */
	CODE(mstate_set_members(F.st, 8, NULL, 0, F.msg, sizeof(F.msg)), 0);
	reopen_same();
	ck_assert_int_eq(mstate_members(F.st, &got, &nm), 8);
	ck_assert_uint_eq(nm, 0);
}
END_TEST

/* Owners inside a batch: queued, applied at commit with one sync. */
START_TEST(test_owners_in_batch)
{
	struct mpart *p[2];
	const char *o[2] = { "a:1", "b:1" };
	uint64_t syncs;

	mk_mirror("east");
	mk_topic("east", "orders", 2);
	p[0] = part("east", "orders", 0);
	p[1] = part("east", "orders", 1);
	syncs = log_syncs();
	ck_assert_int_eq(mstate_batch_begin(F.st), 0);
	CODE(mpart_set_owners(F.st, &p[0], &o[0], 1, 1, F.msg, sizeof(F.msg)), 0);
	CODE(mpart_set_owners(F.st, &p[1], &o[1], 1, 1, F.msg, sizeof(F.msg)), 0);
	ck_assert_ptr_null(p[0]->owner);   /* not applied before commit */
	CODE(mstate_batch_commit(F.st, F.msg, sizeof(F.msg)), 0);
	ck_assert_uint_eq(log_syncs(), syncs + 1);
	ck_assert_str_eq(p[0]->owner, "a:1");
	ck_assert_str_eq(p[1]->owner, "b:1");
	reopen_same();
}
END_TEST

/* What a forwarded record concerns (the writer's request handler). */
START_TEST(test_record_scope)
{
	struct mpart *out;
	struct mrec r;
	char err[512];
	uint8_t *b;
	size_t len;

	mk_mirror("east");
	mk_topic("east", "orders", 2);

	memset(&r, 0, sizeof(r));
	r.type = MREC_PART_ANCHOR;
	r.mirror = kstr_c("east");
	r.topic = kstr_c("orders");
	r.str = KSTR_NULL;
	r.partition = 1;
	r.off = 10;
	r.off2 = 12;
	b = encode(&r, &len);
	ck_assert_int_eq(mstate_record_scope(F.st, r.type, b, len, &out, err,
	    sizeof(err)), MSTATE_SCOPE_PART);
	ck_assert_ptr_eq(out, part("east", "orders", 1));
	free(b);

	for (uint16_t t = MREC_PART_STATE; t <= MREC_PART_SENDING; t++) {
		if (mrec_type_name(t) == NULL || t == MREC_TOPIC_RESTORE ||
		    t == MREC_PART_RESTORE || t == MREC_MIRROR_CONFIGS ||
		    t == MREC_TOPIC_IDENT)
			continue;
		r.type = t;
		b = encode(&r, &len);
		ck_assert_msg(mstate_record_scope(F.st, t, b, len, &out, err,
		    sizeof(err)) == MSTATE_SCOPE_PART, "%s: %s", mrec_type_name(t),
		    err);
		ck_assert_ptr_eq(out, part("east", "orders", 1));
		free(b);
	}

	/* A partition that does not exist: refused, naming it. */
	r.type = MREC_PART_SENDING;
	r.partition = 9;
	b = encode(&r, &len);
	ck_assert_int_eq(mstate_record_scope(F.st, r.type, b, len, &out, err,
	    sizeof(err)), -1);
	ck_assert_msg(strstr(err, "east/orders-9, the topic has 2") != NULL, "%s",
	    err);
	free(b);

	/* Only the writer writes owners. */
	r.type = MREC_PART_OWNER;
	r.partition = 0;
	r.str = kstr_c("a:1");
	b = encode(&r, &len);
	ck_assert_int_eq(mstate_record_scope(F.st, r.type, b, len, &out, err,
	    sizeof(err)), -1);
	ck_assert_msg(strstr(err, "part-owner record is written only by the "
	    "metadata writer") != NULL, "%s", err);
	free(b);

	/* Not partition-scoped: a topic added (discovery). */
	memset(&r, 0, sizeof(r));
	r.type = MREC_TOPIC_ADD;
	r.mirror = kstr_c("east");
	r.topic = kstr_c("more");
	r.str = KSTR_NULL;
	r.count = 2;
	b = encode(&r, &len);
	ck_assert_int_eq(mstate_record_scope(F.st, r.type, b, len, &out, err,
	    sizeof(err)), MSTATE_SCOPE_NONE);
	ck_assert_ptr_null(out);
	/* A payload that does not decode. */
	ck_assert_int_eq(mstate_record_scope(F.st, r.type, b, len - 1, &out, err,
	    sizeof(err)), -1);
	free(b);
}
END_TEST

/*
 * part-anchors records: a list written in pieces of any size (1 to 256)
 * gives exactly the map that one part-anchor record each gives, after a
 * replay and after a snapshot too (which writes the map as part-anchors
 * records); the list's sending offset sets mpart.sending_dst (-1 leaves
 * it); lists that go back, are empty or too long, or hold a negative
 * offset are refused with nothing written.
 */
START_TEST(test_anchor_lists)
{
	struct xlate *ref = xlate_new(0);
	struct mrec_anchor v[MREC_MAX_ANCHORS + 1], bad[2];
	struct mpart *p, *q;
	uint64_t rng = 0x9e3779b97f4a7c15ull, n;
	int64_t s = 0, d = 0;
	size_t nv = 0, chunk = 1;
	char err[1024];

	mk_mirror("m");
	mk_topic("m", "t", 2);
	p = part("m", "t", 0);
	q = part("m", "t", 1);
	for (int i = 0; i < 6000; i++) {
		rng ^= rng << 13;
		rng ^= rng >> 7;
		rng ^= rng << 17;
		/* runs with gaps on either side or both */
		s += 1 + (int64_t)(rng % 50);
		d += 1 + (int64_t)((rng >> 8) % 40);
		v[nv].src = s;
		v[nv].dst = d;
		nv++;
		CODE(anchor_now(F.st, q, s, d, F.msg, sizeof(F.msg)), 0);
		ck_assert_int_eq(xlate_add(ref, s, d, err, sizeof(err)), 0);
		if ((rng >> 16) % 3 == 0) {
			/* a second gap at the same destination offset */
			s += 1 + (int64_t)((rng >> 24) % 5);
			v[nv].src = s;
			v[nv].dst = d;
			nv++;
			CODE(anchor_now(F.st, q, s, d, F.msg, sizeof(F.msg)), 0);
			ck_assert_int_eq(xlate_add(ref, s, d, err, sizeof(err)), 0);
		}
		if (nv >= chunk) {
			CODE(mpart_add_anchors_async(F.st, p, d + 1, v, nv, NULL, NULL,
			    NULL, F.msg, sizeof(F.msg)), 0);
			ck_assert_int_eq(p->sending_dst, d + 1);
			nv = 0;
			chunk = 1 + (size_t)((rng >> 32) % 256);
		}
	}
	if (nv > 0)
		CODE(mpart_add_anchors_async(F.st, p, -1, v, nv, NULL, NULL, NULL,
		    F.msg, sizeof(F.msg)), 0);
	assert_anchors(p, ref);
	assert_anchors(q, ref);
	reopen_same();
	p = part("m", "t", 0);
	assert_anchors(p, ref);
	ck_assert_msg(mstate_compact(F.st, err, sizeof(err)) == 0, "%s", err);
	reopen_same();
	p = part("m", "t", 0);
	q = part("m", "t", 1);
	assert_anchors(p, ref);
	assert_anchors(q, ref);

	/* Refused, nothing written. */
	n = log_records();
	bad[0].src = s - 1;
	bad[0].dst = d + 5;
	CODE(mpart_add_anchors_async(F.st, p, -1, bad, 1, NULL, NULL, NULL,
	    F.msg, sizeof(F.msg)), KERR_INVALID_REQUEST);
	MSG_HAS("goes back");
	bad[0].src = s + 10;
	bad[0].dst = d + 10;
	bad[1].src = s + 20;
	bad[1].dst = d + 9;
	CODE(mpart_add_anchors_async(F.st, p, -1, bad, 2, NULL, NULL, NULL,
	    F.msg, sizeof(F.msg)), KERR_INVALID_REQUEST);
	bad[1].dst = -1;
	CODE(mpart_add_anchors_async(F.st, p, -1, bad, 2, NULL, NULL, NULL,
	    F.msg, sizeof(F.msg)), KERR_INVALID_REQUEST);
	CODE(mpart_add_anchors_async(F.st, p, -1, bad, 0, NULL, NULL, NULL,
	    F.msg, sizeof(F.msg)), KERR_INVALID_REQUEST);
	for (size_t i = 0; i <= MREC_MAX_ANCHORS; i++) {
		v[i].src = s + 1 + (int64_t)i;
		v[i].dst = d + 1 + 2 * (int64_t)i;
	}
	CODE(mpart_add_anchors_async(F.st, p, -1, v, MREC_MAX_ANCHORS + 1, NULL,
	    NULL, NULL, F.msg, sizeof(F.msg)), KERR_INVALID_REQUEST);
	CODE(mpart_add_anchors_async(F.st, p, -2, v, 1, NULL, NULL, NULL,
	    F.msg, sizeof(F.msg)), KERR_INVALID_REQUEST);
	ck_assert_uint_eq(log_records(), n);
	assert_anchors(p, ref);
	xlate_free(ref);
}
END_TEST

/*
 * part-retract drops the anchors above a destination offset, the gaps of
 * batches that never landed: what stays maps every destination offset
 * below it, and every source offset mapped there, exactly as the map did
 * before those were added (lib/xlate fed only the anchors at or below
 * it), including a merge of two gaps at that very offset; replay and a
 * snapshot keep it; nothing above: no record.  New anchors then go on
 * from there, also ones that disagree with those dropped.
 */
START_TEST(test_anchor_retract)
{
	struct xlate *below = xlate_new(0), *all = xlate_new(0);
	struct mpart *p;
	struct mrec_anchor v[64];
	size_t nv = 0, dropped;
	int64_t s = 100, d = 40, cut = -1, got, want;
	char err[1024];
	uint64_t n;

	mk_mirror("m");
	mk_topic("m", "t", 1);
	p = part("m", "t", 0);
	/* landed: runs of 9 records with one marker after each */
	for (int i = 0; i < 20; i++) {
		CODE(anchor_now(F.st, p, s, d, F.msg, sizeof(F.msg)), 0);
		ck_assert_int_eq(xlate_add(below, s, d, err, sizeof(err)), 0);
		ck_assert_int_eq(xlate_add(all, s, d, err, sizeof(err)), 0);
		s += 10;
		d += 9;
	}
	/* a gap at the cut itself, merged with a second one there */
	cut = d;
	CODE(anchor_now(F.st, p, s, d, F.msg, sizeof(F.msg)), 0);
	ck_assert_int_eq(xlate_add(below, s, d, err, sizeof(err)), 0);
	ck_assert_int_eq(xlate_add(all, s, d, err, sizeof(err)), 0);
	s += 3;
	/* never landed: recorded in one list above the cut */
	for (int i = 0; i < 30; i++) {
		s += 10;
		d += 9;
		v[nv].src = s;
		v[nv].dst = d;
		nv++;
		ck_assert_int_eq(xlate_add(all, s, d, err, sizeof(err)), 0);
	}
	CODE(mpart_add_anchors_async(F.st, p, cut, v, nv, NULL, NULL, NULL,
	    F.msg, sizeof(F.msg)), 0);
	assert_anchors(p, all);
	ck_assert_uint_eq(mpart_anchors_above(p, cut), 30);
	CODE(mpart_retract_async(F.st, p, cut, &dropped, NULL, NULL, NULL,
	    F.msg, sizeof(F.msg)), 0);
	ck_assert_uint_eq(dropped, 30);
	assert_anchors(p, below);
	for (int64_t o = 40; o < cut; o++) {
		struct xlate *m = xlate_new(mpart_nanchors(p));

		for (size_t i = 0; i < mpart_nanchors(p); i++)
			ck_assert_int_eq(xlate_add(m, mpart_anchor(p, i).src,
			    mpart_anchor(p, i).dst, err, sizeof(err)), 0);
		ck_assert_int_eq(xlate_dst_to_src(m, o, &got),
		    xlate_dst_to_src(all, o, &want));
		ck_assert_int_eq(got, want);
		xlate_free(m);
	}
	reopen_same();
	p = part("m", "t", 0);
	assert_anchors(p, below);
	ck_assert_msg(mstate_compact(F.st, err, sizeof(err)) == 0, "%s", err);
	reopen_same();
	p = part("m", "t", 0);
	assert_anchors(p, below);

	/* Nothing above: no record. */
	n = log_records();
	CODE(mpart_retract_async(F.st, p, cut, &dropped, NULL, NULL, NULL,
	    F.msg, sizeof(F.msg)), 0);
	ck_assert_uint_eq(dropped, 0);
	ck_assert_uint_eq(log_records(), n);
	CODE(mpart_retract_async(F.st, p, -1, NULL, NULL, NULL, NULL, F.msg,
	    sizeof(F.msg)), KERR_INVALID_REQUEST);

	/* The batch fetched again after the source changed: a later start
	 * at the cut, then other gaps than those dropped. */
	v[0].src = s - 250;
	v[0].dst = cut;
	v[1].src = s - 200;
	v[1].dst = cut + 20;
	CODE(mpart_add_anchors_async(F.st, p, cut, v, 2, NULL, NULL, NULL,
	    F.msg, sizeof(F.msg)), 0);
	ck_assert_int_eq(xlate_add(below, v[0].src, v[0].dst, err, sizeof(err)), 0);
	ck_assert_int_eq(xlate_add(below, v[1].src, v[1].dst, err, sizeof(err)), 0);
	assert_anchors(p, below);
	reopen_same();
	xlate_free(below);
	xlate_free(all);
}
END_TEST

/* The anchor list's codec: a round trip keeps every offset (up to
 * 2^63-1), and damaged lists are refused at decode with the reason. */
START_TEST(test_mrec_anchors_codec)
{
	struct mrec_anchor in[3] = { { 0, 0 }, { 5, 3 }, { INT64_MAX, INT64_MAX } };
	struct mrec_anchor out[3];
	struct mrec r, dr;
	struct mrec_config cfg[1];
	char err[256];
	uint8_t *b;
	size_t len;

	memset(&r, 0, sizeof(r));
	r.type = MREC_PART_ANCHORS;
	r.mirror = kstr_c("m");
	r.topic = kstr_c("t");
	r.str = KSTR_NULL;
	r.partition = 3;
	r.off = 77;
	r.nanchors = 3;
	r.anchors = in;
	b = encode(&r, &len);
	ck_assert_int_eq(mrec_decode(MREC_PART_ANCHORS, b, len, &dr, cfg, 1, err,
	    sizeof(err)), 0);
	ck_assert_int_eq(dr.partition, 3);
	ck_assert_int_eq(dr.off, 77);
	ck_assert_int_eq(dr.nanchors, 3);
	ck_assert_int_eq(mrec_anchors(&dr, out, err, sizeof(err)), 0);
	for (int i = 0; i < 3; i++)
		ck_assert(out[i].src == in[i].src && out[i].dst == in[i].dst);
	/* every truncation fails */
	for (size_t cut = 0; cut < len; cut++)
		ck_assert_int_eq(mrec_decode(MREC_PART_ANCHORS, b, cut, &dr, cfg,
		    1, err, sizeof(err)), -1);
	/* the last distance (2^63-4, nine bytes) made 2^63-1: the offset
	 * would pass 2^63-1 */
	ck_assert_int_eq(b[len - 9], 0xfc);
	b[len - 9] = 0xff;
	ck_assert_int_eq(mrec_decode(MREC_PART_ANCHORS, b, len, &dr, cfg, 1, err,
	    sizeof(err)), -1);
	free(b);
	/* encode refuses a list that goes back, an empty one, a negative */
	in[2].src = 4;
	ck_assert_int_eq(mrec_encode_fails(&r), 1);
	r.nanchors = 0;
	ck_assert_int_eq(mrec_encode_fails(&r), 1);
	in[2].src = INT64_MAX;
	in[0].dst = -1;
	r.nanchors = 3;
	ck_assert_int_eq(mrec_encode_fails(&r), 1);
}
END_TEST

/* part-failover-note: a round trip keeps the note; truncations, an
 * empty, null or over-long note and one with a NUL are refused; applied
 * only to a STOPPED partition with a failover report, and it goes when
 * the partition leaves STOPPED; cut to MREC_MAX_NOTE bytes at the stop;
 * kept by a reopen and a compaction. */
START_TEST(test_failover_note)
{
	static const struct mfailover fo = { 50, 3, 900, 1000, 2000, 1 };
	struct mrec r, d;
	struct mrec_config cfg[1];
	struct mpart *p;
	char err[512], big[MREC_MAX_NOTE + 200], *text;
	uint8_t *b;
	size_t len;

	memset(&r, 0, sizeof(r));
	r.type = MREC_PART_FAILOVER_NOTE;
	r.mirror = kstr_c("m");
	r.topic = kstr_c("t");
	r.partition = 2;
	r.str = kstr_c("every group: the source is not asked");
	b = encode(&r, &len);
	ck_assert_str_eq(mrec_type_name(MREC_PART_FAILOVER_NOTE),
	    "part-failover-note");
	ck_assert_int_eq(mrec_decode(MREC_PART_FAILOVER_NOTE, b, len, &d, cfg,
	    1, err, sizeof(err)), 0);
	ck_assert(kstr_eq(d.mirror, "m") && kstr_eq(d.topic, "t"));
	ck_assert_int_eq(d.partition, 2);
	ck_assert(kstr_eq(d.str, "every group: the source is not asked"));
	for (size_t cut = 0; cut < len; cut++) {
		ck_assert_int_eq(mrec_decode(MREC_PART_FAILOVER_NOTE, b, cut, &d,
		    cfg, 1, err, sizeof(err)), -1);
		ck_assert_msg(strstr(err, "part-failover-note record") != NULL,
		    "%s", err);
	}
	/* A byte more is refused too. */
	{
		uint8_t *more = malloc(len + 1);

		ck_assert_ptr_nonnull(more);
		memcpy(more, b, len);
		more[len] = 0;
		ck_assert_int_eq(mrec_decode(MREC_PART_FAILOVER_NOTE, more,
		    len + 1, &d, cfg, 1, err, sizeof(err)), -1);
		ck_assert_msg(strstr(err, "trailing bytes") != NULL, "%s", err);
		free(more);
	}
	free(b);
	/* Empty, null, over MREC_MAX_NOTE bytes: not written... */
	r.str = kstr_c("");
	ck_assert_int_eq(mrec_encode_fails(&r), 1);
	r.str = KSTR_NULL;
	ck_assert_int_eq(mrec_encode_fails(&r), 1);
	memset(big, 'x', sizeof(big) - 1);
	big[sizeof(big) - 1] = '\0';
	r.str = kstr_c(big);
	r.str.len = MREC_MAX_NOTE + 1;
	ck_assert_int_eq(mrec_encode_fails(&r), 1);
	r.str.len = MREC_MAX_NOTE;
	b = encode(&r, &len);
	ck_assert_int_eq(mrec_decode(MREC_PART_FAILOVER_NOTE, b, len, &d, cfg,
	    1, err, sizeof(err)), 0);
	ck_assert_int_eq(d.str.len, MREC_MAX_NOTE);
	free(b);
	/* ...nor read: the same payloads by hand. */
	{
		/* version, "m", "t", partition 2, then the note. */
		static const uint8_t head[] = { 0, 2, 'm', 2, 't', 0, 0, 0, 2 };
		uint8_t pl[sizeof(head) + 4];

		memcpy(pl, head, sizeof(head));
		pl[sizeof(head)] = 1;   /* "" */
		ck_assert_int_eq(mrec_decode(MREC_PART_FAILOVER_NOTE, pl,
		    sizeof(head) + 1, &d, cfg, 1, err, sizeof(err)), -1);
		ck_assert_msg(strstr(err, "note empty, null or over 1024 bytes")
		    != NULL, "%s", err);
		pl[sizeof(head)] = 0;   /* null */
		ck_assert_int_eq(mrec_decode(MREC_PART_FAILOVER_NOTE, pl,
		    sizeof(head) + 1, &d, cfg, 1, err, sizeof(err)), -1);
		pl[sizeof(head)] = 3;   /* "a\0" */
		pl[sizeof(head) + 1] = 'a';
		pl[sizeof(head) + 2] = 0;
		ck_assert_int_eq(mrec_decode(MREC_PART_FAILOVER_NOTE, pl,
		    sizeof(head) + 3, &d, cfg, 1, err, sizeof(err)), -1);
		ck_assert_msg(strstr(err, "NUL") != NULL, "%s", err);
	}
	{
		/* 1025 bytes: the compact length 1026 as a uvarint. */
		size_t n = 9 + 2 + MREC_MAX_NOTE + 1;
		uint8_t *pl = malloc(n);
		static const uint8_t head[] = { 0, 2, 'm', 2, 't', 0, 0, 0, 2 };

		ck_assert_ptr_nonnull(pl);
		memcpy(pl, head, sizeof(head));
		pl[9] = (uint8_t)(((MREC_MAX_NOTE + 2) & 0x7f) | 0x80);
		pl[10] = (uint8_t)((MREC_MAX_NOTE + 2) >> 7);
		memset(pl + 11, 'x', MREC_MAX_NOTE + 1);
		ck_assert_int_eq(mrec_decode(MREC_PART_FAILOVER_NOTE, pl, n, &d,
		    cfg, 1, err, sizeof(err)), -1);
		ck_assert_msg(strstr(err, "note empty, null or over 1024 bytes")
		    != NULL, "%s", err);
		/* 1024 of them decode. */
		pl[9] = (uint8_t)(((MREC_MAX_NOTE + 1) & 0x7f) | 0x80);
		pl[10] = (uint8_t)((MREC_MAX_NOTE + 1) >> 7);
		ck_assert_int_eq(mrec_decode(MREC_PART_FAILOVER_NOTE, pl, n - 1,
		    &d, cfg, 1, err, sizeof(err)), 0);
		free(pl);
	}

	/* Applied only with a failover report. */
	mk_mirror("m");
	mk_topic("m", "t", 3);
	topic_to("m", "t", MPART_MIRRORING);
	r.str = kstr_c("group g: refused");
	b = encode(&r, &len);
	{
		struct mlog_rec rec = { .type = MREC_PART_FAILOVER_NOTE, .p = b,
		    .len = (uint32_t)len };

		ck_assert_int_eq(mstate_apply_rec(F.st, &rec, err, sizeof(err)),
		    -1);
		ck_assert_msg(strstr(err, "m/t-2: a final group sync note for a "
		    "partition without a failover report") != NULL, "%s", err);
	}
	free(b);
	/* At the stop: with the report, cut to MREC_MAX_NOTE bytes; "" and
	 * NULL are none; a stop without a report has none. */
	CODE(mstate_remove_topic(F.st, "m", "t", F.msg, sizeof(F.msg)), 0);
	CODE(mpart_stopped_report(F.st, part("m", "t", 0), 10, 1, &fo,
	    "every group: mirrord is shutting down", "stopped", F.msg,
	    sizeof(F.msg)), 0);
	CODE(mpart_stopped_report(F.st, part("m", "t", 1), 10, 1, &fo, big,
	    "stopped", F.msg, sizeof(F.msg)), 0);
	CODE(mpart_stopped_report(F.st, part("m", "t", 2), 10, 1, &fo, "",
	    "stopped", F.msg, sizeof(F.msg)), 0);
	ck_assert_str_eq(part("m", "t", 0)->failover_note,
	    "every group: mirrord is shutting down");
	ck_assert_uint_eq(strlen(part("m", "t", 1)->failover_note),
	    MREC_MAX_NOTE);
	ck_assert_ptr_null(part("m", "t", 2)->failover_note);
	/* Replayed, through a snapshot, and a snapshot plus later records. */
	reopen_same();
	ck_assert_str_eq(part("m", "t", 0)->failover_note,
	    "every group: mirrord is shutting down");
	ck_assert_uint_eq(strlen(part("m", "t", 1)->failover_note),
	    MREC_MAX_NOTE);
	ck_assert_ptr_null(part("m", "t", 2)->failover_note);
	ck_assert_msg(mstate_compact(F.st, err, sizeof(err)) == 0, "%s", err);
	reopen_same();
	ck_assert_str_eq(part("m", "t", 0)->failover_note,
	    "every group: mirrord is shutting down");
	ck_assert_uint_eq(strlen(part("m", "t", 1)->failover_note),
	    MREC_MAX_NOTE);
	ck_assert_ptr_null(part("m", "t", 2)->failover_note);
	text = mstate_dump(F.st);
	ck_assert_ptr_nonnull(strstr(text, "groups not synced at the stop: "
	    "every group: mirrord is shutting down\n"));
	free(text);
	/* Added again: the report, note and all, was of that stop. */
	CODE(mstate_add_topic(F.st, "m", "t", 3, F.msg, sizeof(F.msg)), 0);
	p = part("m", "t", 0);
	ck_assert_int_ne(p->state, MPART_STOPPED);
	ck_assert_int_eq(p->has_failover, 0);
	ck_assert_ptr_null(p->failover_note);
	reopen_same();
	ck_assert_ptr_null(part("m", "t", 0)->failover_note);
	ck_assert_msg(mstate_compact(F.st, err, sizeof(err)) == 0, "%s", err);
	reopen_same();
	ck_assert_ptr_null(part("m", "t", 0)->failover_note);
	ck_assert_ptr_null(part("m", "t", 1)->failover_note);

	/* A follower's stop, forwarded to the writer: the note is checked
	 * on the scratch after its report (a partition record), then kept;
	 * without the report it is refused, and nothing is applied. */
	{
		struct mrec fr[4];
		uint8_t *fb[4];
		size_t flen[4];
		struct mlog_rec lr[4];
		struct mpart *out;

		CODE(mstate_remove_topic(F.st, "m", "t", F.msg, sizeof(F.msg)),
		    0);
		for (int i = 0; i < 4; i++) {
			memset(&fr[i], 0, sizeof(fr[i]));
			fr[i].mirror = kstr_c("m");
			fr[i].topic = kstr_c("t");
			fr[i].str = KSTR_NULL;
			fr[i].partition = 0;
		}
		fr[0].type = MREC_PART_STATE;
		fr[0].state = MPART_STOPPED;
		fr[0].flags = MREC_F_LAST;
		fr[0].off = 9;
		fr[0].str = kstr_c("stopped");
		fr[1].type = MREC_PART_FAILOVER;
		fr[1].off = 20;
		fr[2].type = MREC_PART_FAILOVER_AT;
		fr[2].off = 1000;
		fr[2].off2 = 2000;
		fr[3].type = MREC_PART_FAILOVER_NOTE;
		fr[3].str = kstr_c("group g: refused");
		for (int i = 0; i < 4; i++) {
			fb[i] = encode(&fr[i], &flen[i]);
			lr[i] = (struct mlog_rec){ .type = fr[i].type, .p = fb[i],
			    .len = (uint32_t)flen[i] };
		}
		ck_assert_int_eq(mstate_record_scope(F.st, MREC_PART_FAILOVER_NOTE,
		    fb[3], flen[3], &out, err, sizeof(err)), MSTATE_SCOPE_PART);
		ck_assert_ptr_eq(out, part("m", "t", 0));
		/* The note alone (no report): refused. */
		ck_assert_int_ne(mstate_apply_forwarded(F.st, &lr[3], 1, F.msg,
		    sizeof(F.msg)), 0);
		MSG_HAS("without a failover report");
		ck_assert_int_eq(part("m", "t", 0)->state, MPART_STOPPING);
		CODE(mstate_apply_forwarded(F.st, lr, 4, F.msg, sizeof(F.msg)), 0);
		ck_assert_int_eq(part("m", "t", 0)->state, MPART_STOPPED);
		ck_assert_str_eq(part("m", "t", 0)->failover_note,
		    "group g: refused");
		reopen_same();
		ck_assert_str_eq(part("m", "t", 0)->failover_note,
		    "group g: refused");
		for (int i = 0; i < 4; i++)
			free(fb[i]);
	}
}
END_TEST

static Suite *mstate_suite(void)
{
	Suite *s = suite_create("mstate");
	TCase *tc = tcase_create("core");

	tcase_set_timeout(tc, 120);
	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_add_test(tc, test_cluster_id);
	tcase_add_test(tc, test_acl_bindings);
	tcase_add_test(tc, test_create_mirror);
	tcase_add_test(tc, test_add_topic);
	tcase_add_test(tc, test_remove_topic);
	tcase_add_test(tc, test_pause_resume);
	tcase_add_test(tc, test_recover);
	tcase_add_test(tc, test_recover_failback);
	tcase_add_test(tc, test_stop_dst);
	tcase_add_test(tc, test_realign_added_again);
	tcase_add_test(tc, test_realign_operator);
	tcase_add_test(tc, test_delete_mirror);
	tcase_add_test(tc, test_patterns);
	tcase_add_test(tc, test_patterns_java_and_limits);
	tcase_add_test(tc, test_patterns_from_posix_logs);
	tcase_add_test(tc, test_transition_table);
	tcase_add_test(tc, test_data_plane_and_hooks);
	tcase_add_test(tc, test_replay_equality);
	tcase_add_test(tc, test_rebuild_adopt);
	tcase_add_test(tc, test_topic_ident);
	tcase_add_test(tc, test_part_producer);
	tcase_add_test(tc, test_automatic_compaction);
	tcase_add_test(tc, test_async_apply_order);
	tcase_add_test(tc, test_async_fsync_fails_group_and_later);
	tcase_add_test(tc, test_sync_after_async);
	tcase_add_test(tc, test_async_state_order);
	tcase_add_test(tc, test_async_trim);
	tcase_add_test(tc, test_excl_holds_and_rechecks);
	tcase_add_test(tc, test_excl_fails_and_empty);
	tcase_add_test(tc, test_excl_then_sync);
	tcase_add_test(tc, test_excl_queue);
	tcase_add_test(tc, test_refused_group_keeps_next);
	tcase_add_test(tc, test_refused_group_splits_lost);
	tcase_add_test(tc, test_async_state_fails);
	tcase_add_test(tc, test_sync_state_after_async_state);
	tcase_add_test(tc, test_async_compaction_with_groups);
	tcase_add_test(tc, test_anchors_uncapped_and_trimmed);
	tcase_add_test(tc, test_batch);
	tcase_add_test(tc, test_transition_log_lines);
	tcase_add_test(tc, test_kill_at_every_byte_of_last_record);
	tcase_add_test(tc, test_disk_errors_leave_state_unchanged);
	tcase_add_test(tc, test_replay_refuses_bad_records);
	tcase_add_test(tc, test_secrets_sealed_and_migrated);
	tcase_add_test(tc, test_mrec_members_and_owner_codec);
	tcase_add_test(tc, test_members_and_owners);
	tcase_add_test(tc, test_owners_in_batch);
	tcase_add_test(tc, test_record_scope);
	tcase_add_test(tc, test_anchor_lists);
	tcase_add_test(tc, test_anchor_retract);
	tcase_add_test(tc, test_mrec_anchors_codec);
	tcase_add_test(tc, test_failover_note);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	SRunner *sr = srunner_create(mstate_suite());
	int failed;

	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
