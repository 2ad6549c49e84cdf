/*
 * fileload.h: reading files named over the wire without blocking the event
 * loop (module prefix fileload_).
 *
 * A mirror's ssl.*.location files are read when its source client is set
 * up: at start-up for every stored mirror, and for every source lookup.
 * Even a regular file can stall a read (NFS, FUSE, a disk in error), so
 * the reads happen on one worker thread shared by the process: the loop
 * queues a batch of (key, path) pairs, the worker reads each with
 * safefile_read() against the allowed directories given, and hands the
 * results back to the loop through a pipe the loop watches.  The worker
 * touches no libevent object and no caller data: it works on copies.
 *
 * The callback runs exactly once, on the loop, never from inside
 * fileload_start(), unless the load is cancelled first.  The results (and
 * the file contents, which may be private keys) are wiped and freed when
 * the callback returns: copy what you keep.  The loader frees itself after
 * the callback; do not cancel it from or after its callback.
 */
#ifndef MIRRORD_FILELOAD_H
#define MIRRORD_FILELOAD_H

#include <stddef.h>

struct event_base;
struct fileload;

struct fileload_result {
	const char *key;   /* as given ("ssl.ca.location") */
	const char *path;  /* as given */
	const char *data;  /* NUL-terminated contents, NULL on failure */
	size_t len;
	const char *err;   /* NULL on success, else "path: why" */
};

typedef void (*fileload_cb)(void *arg, const struct fileload_result *res,
    size_t n);

/*
 * Queues n files (keys[i] is a name for messages, paths[i] the file) to be
 * read with safefile_read(path, allowed, max).  allowed is copied.  Returns
 * NULL with the reason in err when the load cannot be queued (out of memory,
 * no thread).
 */
struct fileload *fileload_start(struct event_base *base,
    const char *const *keys, const char *const *paths, size_t n,
    const char *const *allowed, size_t max, fileload_cb cb, void *arg,
    char *err, size_t errlen);

/* The callback will not run; the memory goes as soon as the worker is done
 * with it.  NULL is a no-op. */
void fileload_cancel(struct fileload *fl);

#endif
