/*
 * fileload.c: see fileload.h.
 *
 * One worker thread, started on first use, takes jobs from a FIFO queue
 * under a mutex.  Each job owns a pipe: the loop watches the read end, the
 * worker closes the write end when the job is done (no byte is written, so
 * a loop that has gone cannot raise SIGPIPE).  A job is freed by whichever
 * side lets go of it last, decided under the mutex:
 *   - cancel while QUEUED: the loop unlinks and frees it;
 *   - cancel while RUNNING: the worker frees it when done (orphan);
 *   - done, then the loop's read event: the loop calls back and frees it.
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <event2/event.h>

#include "fileload.h"
#include "safefile.h"

#define FILELOAD_ERR_LEN 600

enum job_state { JOB_QUEUED, JOB_RUNNING, JOB_DONE };

struct fileload {
	struct fileload *next;       /* queue link */
	enum job_state state;        /* under mu */
	int orphan;                  /* cancelled while RUNNING (under mu) */
	int rfd, wfd;                /* the pipe; wfd closed by the worker */
	struct event *ev;            /* loop side only */
	fileload_cb cb;
	void *arg;
	size_t max;
	char **allowed;              /* NULL-terminated copy */
	size_t n;
	struct fileload_result *res; /* key, path copied; data, err filled */
	char **keys, **paths, **data, **errs;
};

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cv = PTHREAD_COND_INITIALIZER;
static struct fileload *q_head, **q_tail = &q_head;
static int worker_started;

static void job_free(struct fileload *fl)
{
	if (fl == NULL)
		return;
	for (size_t i = 0; i < fl->n; i++) {
		if (fl->data != NULL && fl->data[i] != NULL) {
			/* Contents may be private keys. */
			explicit_bzero(fl->data[i], fl->res[i].len);
			free(fl->data[i]);
		}
		if (fl->keys != NULL)
			free(fl->keys[i]);
		if (fl->paths != NULL)
			free(fl->paths[i]);
		if (fl->errs != NULL)
			free(fl->errs[i]);
	}
	if (fl->allowed != NULL)
		for (size_t i = 0; fl->allowed[i] != NULL; i++)
			free(fl->allowed[i]);
	free(fl->allowed);
	free(fl->keys);
	free(fl->paths);
	free(fl->data);
	free(fl->errs);
	free(fl->res);
	if (fl->rfd >= 0)
		close(fl->rfd);
	if (fl->wfd >= 0)
		close(fl->wfd);
	free(fl);
}

/* The worker's part of a job: no lock held, only the job's own memory. */
static void job_run(struct fileload *fl)
{
	char err[FILELOAD_ERR_LEN];

	for (size_t i = 0; i < fl->n; i++) {
		char *out = NULL;
		size_t len = 0;

		if (safefile_read(fl->paths[i], (const char *const *)fl->allowed,
		    fl->max, &out, &len, err, sizeof(err)) == 0) {
			fl->data[i] = out;
			fl->res[i].len = len;
		} else {
			fl->errs[i] = strdup(err);
			if (fl->errs[i] == NULL)
				fl->errs[i] = strdup("out of memory");
		}
	}
}

static void *worker(void *unused)
{
	(void)unused;
	pthread_mutex_lock(&mu);
	for (;;) {
		struct fileload *fl;

		while (q_head == NULL)
			pthread_cond_wait(&cv, &mu);
		fl = q_head;
		q_head = fl->next;
		if (q_head == NULL)
			q_tail = &q_head;
		fl->next = NULL;
		fl->state = JOB_RUNNING;
		pthread_mutex_unlock(&mu);

		job_run(fl);

		pthread_mutex_lock(&mu);
		fl->state = JOB_DONE;
		if (fl->orphan) {
			job_free(fl);
		} else {
			close(fl->wfd);     /* the loop sees EOF */
			fl->wfd = -1;
		}
	}
	return NULL;
}

/* Loop side: the worker closed the pipe. */
static void done_cb(evutil_socket_t fd, short what, void *arg)
{
	struct fileload *fl = arg;
	char buf[16];
	ssize_t r;

	(void)what;
	r = read(fd, buf, sizeof(buf));
	if (r < 0 && (errno == EAGAIN || errno == EINTR))
		return;     /* spurious wake-up: not done yet */
	pthread_mutex_lock(&mu);
	if (fl->state != JOB_DONE) {
		pthread_mutex_unlock(&mu);
		return;
	}
	pthread_mutex_unlock(&mu);
	event_free(fl->ev);
	fl->ev = NULL;
	for (size_t i = 0; i < fl->n; i++) {
		fl->res[i].data = fl->data[i];
		fl->res[i].err = fl->errs[i];
		if (fl->data[i] == NULL && fl->errs[i] == NULL)
			fl->res[i].err = "out of memory";
	}
	fl->cb(fl->arg, fl->res, fl->n);
	job_free(fl);
}

static char *dup_or_empty(const char *s)
{
	return strdup(s != NULL ? s : "");
}

struct fileload *fileload_start(struct event_base *base,
    const char *const *keys, const char *const *paths, size_t n,
    const char *const *allowed, size_t max, fileload_cb cb, void *arg,
    char *err, size_t errlen)
{
	struct fileload *fl = calloc(1, sizeof(*fl));
	size_t na = 0;
	int fds[2];

	if (fl == NULL) {
		snprintf(err, errlen, "out of memory");
		return NULL;
	}
	fl->rfd = fl->wfd = -1;
	fl->cb = cb;
	fl->arg = arg;
	fl->max = max;
	fl->n = n;
	while (allowed != NULL && allowed[na] != NULL)
		na++;
	fl->allowed = calloc(na + 1, sizeof(*fl->allowed));
	fl->res = calloc(n + 1, sizeof(*fl->res));
	fl->keys = calloc(n + 1, sizeof(*fl->keys));
	fl->paths = calloc(n + 1, sizeof(*fl->paths));
	fl->data = calloc(n + 1, sizeof(*fl->data));
	fl->errs = calloc(n + 1, sizeof(*fl->errs));
	if (fl->allowed == NULL || fl->res == NULL || fl->keys == NULL ||
	    fl->paths == NULL || fl->data == NULL || fl->errs == NULL)
		goto oom;
	for (size_t i = 0; i < na; i++)
		if ((fl->allowed[i] = strdup(allowed[i])) == NULL)
			goto oom;
	for (size_t i = 0; i < n; i++) {
		fl->keys[i] = dup_or_empty(keys[i]);
		fl->paths[i] = dup_or_empty(paths[i]);
		if (fl->keys[i] == NULL || fl->paths[i] == NULL)
			goto oom;
		fl->res[i].key = fl->keys[i];
		fl->res[i].path = fl->paths[i];
	}
	if (pipe2(fds, O_CLOEXEC | O_NONBLOCK) < 0) {
		snprintf(err, errlen, "cannot make a pipe: %s", strerror(errno));
		goto fail;
	}
	fl->rfd = fds[0];
	fl->wfd = fds[1];
	fl->ev = event_new(base, fl->rfd, EV_READ | EV_PERSIST, done_cb, fl);
	if (fl->ev == NULL || event_add(fl->ev, NULL) < 0) {
		snprintf(err, errlen, "cannot watch the file loader's pipe");
		goto fail;
	}

	pthread_mutex_lock(&mu);
	if (!worker_started) {
		pthread_t t;
		pthread_attr_t at;
		int rc;

		pthread_attr_init(&at);
		pthread_attr_setdetachstate(&at, PTHREAD_CREATE_DETACHED);
		rc = pthread_create(&t, &at, worker, NULL);
		pthread_attr_destroy(&at);
		if (rc != 0) {
			pthread_mutex_unlock(&mu);
			snprintf(err, errlen, "cannot start the file loader "
			    "thread: %s", strerror(rc));
			goto fail;
		}
		worker_started = 1;
	}
	fl->state = JOB_QUEUED;
	*q_tail = fl;
	q_tail = &fl->next;
	pthread_cond_signal(&cv);
	pthread_mutex_unlock(&mu);
	return fl;
oom:
	snprintf(err, errlen, "out of memory");
fail:
	if (fl->ev != NULL)
		event_free(fl->ev);
	job_free(fl);
	return NULL;
}

void fileload_cancel(struct fileload *fl)
{
	if (fl == NULL)
		return;
	if (fl->ev != NULL) {
		event_free(fl->ev);
		fl->ev = NULL;
	}
	pthread_mutex_lock(&mu);
	switch (fl->state) {
	case JOB_QUEUED: {
		struct fileload **pp = &q_head;

		while (*pp != fl)
			pp = &(*pp)->next;
		*pp = fl->next;
		if (q_tail == &fl->next)
			q_tail = pp;
		job_free(fl);
		break;
	}
	case JOB_RUNNING:
		fl->orphan = 1;     /* the worker frees it */
		break;
	case JOB_DONE:
		job_free(fl);
		break;
	}
	pthread_mutex_unlock(&mu);
}
