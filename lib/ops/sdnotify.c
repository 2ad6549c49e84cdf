/*
 * sdnotify.c: see sdnotify.h.  A fresh socket per message keeps this
 * stateless: notifications are rare (start, reload, stop, status, and the
 * watchdog at a few seconds' interval).
 */
#include "config.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "sdnotify.h"

/* Fill sa from $NOTIFY_SOCKET; 0 unset, 1 ready, -1 malformed (EINVAL). */
static int notify_addr(struct sockaddr_un *sa, socklen_t *salen)
{
	const char *e = getenv("NOTIFY_SOCKET");
	size_t n;

	if (e == NULL || *e == '\0')
		return 0;
	n = strlen(e);
	if ((e[0] != '/' && e[0] != '@') || n < 2 ||
	    n >= sizeof(sa->sun_path)) {
		errno = EINVAL;
		return -1;
	}
	memset(sa, 0, sizeof(*sa));
	sa->sun_family = AF_UNIX;
	memcpy(sa->sun_path, e, n);
	if (e[0] == '@') {
		/* Abstract: a leading NUL, and the length is exact (no NUL). */
		sa->sun_path[0] = '\0';
		*salen = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + n);
	} else {
		*salen = (socklen_t)(offsetof(struct sockaddr_un, sun_path) +
		    n + 1);
	}
	return 1;
}

int sdnotify_send(const char *msg)
{
	struct sockaddr_un sa;
	socklen_t salen = 0;
	ssize_t w;
	int fd, rc, saved;

	rc = notify_addr(&sa, &salen);
	if (rc <= 0)
		return rc;
	fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	if (fd == -1)
		return -1;
	w = sendto(fd, msg, strlen(msg), MSG_NOSIGNAL,
	    (struct sockaddr *)&sa, salen);
	saved = errno;
	close(fd);
	if (w == -1) {
		errno = saved;
		return -1;
	}
	if ((size_t)w != strlen(msg)) {
		errno = EMSGSIZE;
		return -1;
	}
	return 0;
}

int sdnotify_ready(void)
{
	return sdnotify_send("READY=1");
}

int sdnotify_reloading(void)
{
	struct timespec ts;
	char msg[64];

	clock_gettime(CLOCK_MONOTONIC, &ts);
	snprintf(msg, sizeof(msg), "RELOADING=1\nMONOTONIC_USEC=%llu",
	    (unsigned long long)ts.tv_sec * 1000000ull +
	    (unsigned long long)ts.tv_nsec / 1000ull);
	return sdnotify_send(msg);
}

int sdnotify_stopping(void)
{
	return sdnotify_send("STOPPING=1");
}

int sdnotify_watchdog(void)
{
	return sdnotify_send("WATCHDOG=1");
}

int sdnotify_extend_timeout(uint64_t usec)
{
	char msg[64];

	snprintf(msg, sizeof(msg), "EXTEND_TIMEOUT_USEC=%llu",
	    (unsigned long long)usec);
	return sdnotify_send(msg);
}

int sdnotify_status(const char *fmt, ...)
{
	char msg[SDNOTIFY_MAX_MSG];
	va_list ap;
	int n;

	if (getenv("NOTIFY_SOCKET") == NULL)
		return 0; /* do not even format */
	memcpy(msg, "STATUS=", 7);
	va_start(ap, fmt);
	n = vsnprintf(msg + 7, sizeof(msg) - 7, fmt, ap);
	va_end(ap);
	if (n < 0)
		return -1;
	/* One line: a newline would start a new (bogus) assignment. */
	for (char *p = msg + 7; *p != '\0'; p++)
		if (*p == '\n' || *p == '\r')
			*p = ' ';
	return sdnotify_send(msg);
}

static int parse_u64(const char *s, uint64_t *out)
{
	unsigned long long v;
	char *end;

	if (s == NULL || *s < '0' || *s > '9')
		return -1;
	errno = 0;
	v = strtoull(s, &end, 10);
	if (errno != 0 || *end != '\0')
		return -1;
	*out = v;
	return 0;
}

int sdnotify_watchdog_usec(uint64_t *usec)
{
	const char *u = getenv("WATCHDOG_USEC"), *p = getenv("WATCHDOG_PID");
	uint64_t v, pid;

	if (u == NULL)
		return 0;
	if (parse_u64(u, &v) == -1 || v == 0) {
		errno = EINVAL;
		return -1;
	}
	if (p != NULL) {
		if (parse_u64(p, &pid) == -1) {
			errno = EINVAL;
			return -1;
		}
		if (pid != (uint64_t)getpid())
			return 0; /* meant for another process */
	}
	*usec = v;
	return 1;
}
