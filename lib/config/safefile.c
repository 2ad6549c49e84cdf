/*
 * safefile.c: reading files whose names come from untrusted input (see
 * safefile.h for the rules).
 *
 * The order of the checks is: absolute name, not under /proc, /sys or /dev
 * as written, every symbolic link resolved (realpath), not under /proc, /sys
 * or /dev once resolved, inside an allowed directory (each allowed directory
 * resolved too, so an operator's /etc/mirrord may itself be a link), then
 * lstat of the resolved name: a regular file of at most the cap, readable.
 * safefile_read() opens the resolved name with O_NOFOLLOW | O_NONBLOCK and
 * checks that the descriptor is the very file that was looked at (device and
 * inode), so a name swapped for a link, a fifo or a device between the look
 * and the open is refused instead of read.
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/types.h>
#include <unistd.h>

#include "compat.h"
#include "safefile.h"

/* From <linux/magic.h>; spelled out so the header is not needed. */
#define SAFEFILE_PROC_MAGIC 0x9fa0
#define SAFEFILE_SYSFS_MAGIC 0x62656572

/* Length of dir without its trailing slashes ("/" gives 0). */
static size_t dir_len(const char *dir)
{
	size_t n = strlen(dir);

	while (n > 0 && dir[n - 1] == '/')
		n--;
	return n;
}

/* Whether path lies strictly below dir (dir_len(dir) bytes of it). */
static int below(const char *path, const char *dir, size_t n)
{
	return strncmp(path, dir, n) == 0 && path[n] == '/' &&
	    path[n + 1] != '\0';
}

static int pseudo_fs_name(const char *path)
{
	static const char *const pseudo[] = { "/proc", "/sys", "/dev" };
	size_t i;

	for (i = 0; i < sizeof(pseudo) / sizeof(pseudo[0]); i++) {
		size_t n = strlen(pseudo[i]);

		if (strncmp(path, pseudo[i], n) == 0 &&
		    (path[n] == '/' || path[n] == '\0'))
			return 1;
	}
	return 0;
}

/*
 * Follows the links of path's last component by hand (at most 8): 1 with
 * the hop in hop when one leads under /proc, /sys or /dev.
 */
static int link_into_pseudo(const char *path, char *hop, size_t hoplen)
{
	char cur[PATH_MAX], target[PATH_MAX];

	if (strlen(path) >= sizeof(cur))
		return 0;
	memcpy(cur, path, strlen(path) + 1);
	for (int i = 0; i < 8; i++) {
		ssize_t n = readlink(cur, target, sizeof(target) - 1);
		char *slash;

		if (n < 0)
			return 0;
		target[n] = '\0';
		if (target[0] != '/') {
			/* Relative to the link's directory. */
			slash = strrchr(cur, '/');
			if (slash == NULL || (size_t)(slash - cur) + 1 +
			    (size_t)n >= sizeof(cur))
				return 0;
			memcpy(slash + 1, target, (size_t)n + 1);
		} else {
			memcpy(cur, target, (size_t)n + 1);
		}
		if (pseudo_fs_name(cur)) {
			snprintf(hop, hoplen, "%s", cur);
			return 1;
		}
	}
	return 0;
}

static int pseudo_fs_magic(long type)
{
	return type == SAFEFILE_PROC_MAGIC || type == SAFEFILE_SYSFS_MAGIC;
}

/* "(/etc/mirrord, /etc/ssl/certs)" into buf, cut short if it must be. */
static void list_dirs(const char *const *allowed, char *buf, size_t len)
{
	size_t off = 0;
	int i;

	buf[0] = '\0';
	for (i = 0; allowed[i] != NULL; i++) {
		int w = snprintf(buf + off, len - off, "%s%s",
		    i > 0 ? ", " : "", allowed[i]);

		if (w < 0 || (size_t)w >= len - off) {
			if (len > 4)
				memcpy(buf + len - 4, "...", 4);
			return;
		}
		off += (size_t)w;
	}
}

static const char *kind_name(mode_t mode)
{
	if (S_ISDIR(mode))
		return "a directory";
	if (S_ISFIFO(mode))
		return "a fifo";
	if (S_ISCHR(mode))
		return "a character device";
	if (S_ISBLK(mode))
		return "a block device";
	if (S_ISSOCK(mode))
		return "a socket";
	if (S_ISLNK(mode))
		return "a symbolic link";
	return "not a plain file";
}

/*
 * Every check short of opening.  On success the resolved name is in
 * resolved (PATH_MAX bytes) and its lstat in st.
 */
static int look(const char *path, const char *const *allowed, size_t max,
    char *resolved, struct stat *st, char *err, size_t errlen)
{
	char dirs[512];
	struct statfs sfs;
	int i, inside = 0;

	if (path == NULL || path[0] == '\0') {
		seterr(err, errlen, "empty file name");
		return -1;
	}
	if (path[0] != '/') {
		seterr(err, errlen, "%s: not an absolute path", path);
		return -1;
	}
	if (allowed == NULL || allowed[0] == NULL) {
		seterr(err, errlen, "%s: no file may be named here "
		    "(mirrors.allowed_file_dirs is empty)", path);
		return -1;
	}
	if (pseudo_fs_name(path)) {
		seterr(err, errlen, "%s: not a regular file (under /proc, "
		    "/sys or /dev)", path);
		return -1;
	}
	if (realpath(path, resolved) == NULL) {
		int e = errno;
		char hop[PATH_MAX];

		/* A link to /proc/self/fd/N of a pipe does not resolve: say
		 * where it leads rather than "No such file or directory". */
		if (link_into_pseudo(path, hop, sizeof(hop))) {
			seterr(err, errlen, "%s: resolves to %s, not a regular "
			    "file (under /proc, /sys or /dev)", path, hop);
			return -1;
		}
		seterr(err, errlen, "%s: %s", path, strerror(e));
		return -1;
	}
	if (pseudo_fs_name(resolved)) {
		seterr(err, errlen, "%s: resolves to %s, not a regular file "
		    "(under /proc, /sys or /dev)", path, resolved);
		return -1;
	}
	for (i = 0; allowed[i] != NULL && !inside; i++) {
		char rdir[PATH_MAX];
		const char *dir = allowed[i];

		if (dir[0] != '/')
			continue;       /* the config refuses these */
		if (realpath(dir, rdir) != NULL)
			dir = rdir;     /* else compare as written */
		inside = below(resolved, dir, dir_len(dir));
	}
	if (!inside) {
		list_dirs(allowed, dirs, sizeof(dirs));
		if (strcmp(path, resolved) != 0)
			seterr(err, errlen, "%s: resolves to %s, outside the "
			    "allowed directories (%s)", path, resolved, dirs);
		else
			seterr(err, errlen, "%s: outside the allowed "
			    "directories (%s)", path, dirs);
		return -1;
	}
	if (lstat(resolved, st) != 0) {
		seterr(err, errlen, "%s: %s", path, strerror(errno));
		return -1;
	}
	if (!S_ISREG(st->st_mode)) {
		seterr(err, errlen, "%s: not a regular file (%s)", path,
		    kind_name(st->st_mode));
		return -1;
	}
	if (statfs(resolved, &sfs) == 0 && pseudo_fs_magic((long)sfs.f_type)) {
		seterr(err, errlen, "%s: not a regular file (on procfs or "
		    "sysfs)", path);
		return -1;
	}
	if ((unsigned long long)st->st_size > (unsigned long long)max) {
		seterr(err, errlen, "%s: larger than %zu bytes (%lld bytes)",
		    path, max, (long long)st->st_size);
		return -1;
	}
	return 0;
}

int safefile_check(const char *path, const char *const *allowed, char *err,
    size_t errlen)
{
	char resolved[PATH_MAX];
	struct stat st;

	if (look(path, allowed, SAFEFILE_DEFAULT_MAX, resolved, &st, err,
	    errlen) != 0)
		return -1;
	if (access(resolved, R_OK) != 0) {
		seterr(err, errlen, "%s: %s", path, strerror(errno));
		return -1;
	}
	return 0;
}

int safefile_read(const char *path, const char *const *allowed, size_t max,
    char **out, size_t *outlen, char *err, size_t errlen)
{
	char resolved[PATH_MAX];
	struct stat st, fst;
	struct statfs sfs;
	char *buf = NULL;
	size_t len = 0, cap;
	int fd = -1, rc = -1;

	if (look(path, allowed, max, resolved, &st, err, errlen) != 0)
		return -1;
	fd = open(resolved, O_RDONLY | O_NONBLOCK | O_NOCTTY | O_NOFOLLOW |
	    O_CLOEXEC);
	if (fd < 0) {
		if (errno == ELOOP)
			seterr(err, errlen, "%s: became a symbolic link while "
			    "being opened", path);
		else
			seterr(err, errlen, "%s: %s", path, strerror(errno));
		goto out;
	}
	if (fstat(fd, &fst) != 0) {
		seterr(err, errlen, "%s: %s", path, strerror(errno));
		goto out;
	}
	if (!S_ISREG(fst.st_mode)) {
		seterr(err, errlen, "%s: not a regular file (%s)", path,
		    kind_name(fst.st_mode));
		goto out;
	}
	if (fst.st_dev != st.st_dev || fst.st_ino != st.st_ino) {
		seterr(err, errlen, "%s: replaced while being opened", path);
		goto out;
	}
	if (fstatfs(fd, &sfs) == 0 && pseudo_fs_magic((long)sfs.f_type)) {
		seterr(err, errlen, "%s: not a regular file (on procfs or "
		    "sysfs)", path);
		goto out;
	}
	/* The size may change under us: read at most max + 1 bytes. */
	cap = (size_t)fst.st_size < max ? (size_t)fst.st_size : max;
	buf = malloc(cap + 1);
	if (buf == NULL) {
		seterr(err, errlen, "%s: out of memory", path);
		goto out;
	}
	for (;;) {
		ssize_t n;

		if (len == cap) {
			char *nb;

			if (cap > max) {
				seterr(err, errlen, "%s: larger than %zu "
				    "bytes", path, max);
				goto out;
			}
			/* Grew since fstat: room for max + 1 at most. */
			cap = cap + 4096 < max + 1 ? cap + 4096 : max + 1;
			nb = realloc(buf, cap + 1);
			if (nb == NULL) {
				seterr(err, errlen, "%s: out of memory", path);
				goto out;
			}
			buf = nb;
		}
		n = read(fd, buf + len, cap - len);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			seterr(err, errlen, "%s: %s", path, strerror(errno));
			goto out;
		}
		if (n == 0)
			break;
		len += (size_t)n;
		if (len > max) {
			seterr(err, errlen, "%s: larger than %zu bytes", path,
			    max);
			goto out;
		}
	}
	buf[len] = '\0';
	*out = buf;
	*outlen = len;
	buf = NULL;
	rc = 0;
out:
	free(buf);
	if (fd >= 0)
		close(fd);
	return rc;
}
