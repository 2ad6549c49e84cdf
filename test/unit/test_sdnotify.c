/*
 * Unit tests for sdnotify: every message is received on a real AF_UNIX
 * datagram socket, bound to a path and to an abstract name, and compared
 * byte for byte; the watchdog variables are parsed as systemd sets them.
 */
#include "config.h"

#include <check.h>
#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "sdnotify.h"

#define RECV_DEADLINE_MS 10000

static char sockdir[] = "/tmp/mirrord-sdnotify-XXXXXX";

/* Bind a datagram socket to name (a path or "@abstract"), export it. */
static int listener(const char *name)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	socklen_t len;
	int fd = socket(AF_UNIX, SOCK_DGRAM, 0);

	ck_assert_int_ge(fd, 0);
	strcpy(sa.sun_path, name);
	len = (socklen_t)(offsetof(struct sockaddr_un, sun_path) +
	    strlen(name) + 1);
	if (name[0] == '@') {
		sa.sun_path[0] = '\0';
		len--; /* abstract names are not NUL-terminated */
	}
	ck_assert_msg(bind(fd, (struct sockaddr *)&sa, len) == 0, "bind %s: %s",
	    name, strerror(errno));
	ck_assert_int_eq(setenv("NOTIFY_SOCKET", name, 1), 0);
	return fd;
}

/* The next datagram, NUL-terminated, waited for with a deadline. */
static void receive(int fd, char *buf, size_t len)
{
	struct pollfd p = { .fd = fd, .events = POLLIN };
	ssize_t n;

	ck_assert_msg(poll(&p, 1, RECV_DEADLINE_MS) == 1,
	    "no datagram within %d ms", RECV_DEADLINE_MS);
	n = recv(fd, buf, len - 1, 0);
	ck_assert_int_ge(n, 0);
	buf[n] = '\0';
}

static uint64_t mono_usec(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000u + (uint64_t)ts.tv_nsec / 1000u;
}

START_TEST(test_unset_is_noop)
{
	uint64_t u = 77;

	unsetenv("NOTIFY_SOCKET");
	unsetenv("WATCHDOG_USEC");
	unsetenv("WATCHDOG_PID");
	ck_assert_int_eq(sdnotify_ready(), 0);
	ck_assert_int_eq(sdnotify_status("x %d", 1), 0);
	ck_assert_int_eq(sdnotify_watchdog(), 0);
	ck_assert_int_eq(sdnotify_watchdog_usec(&u), 0);
	ck_assert_uint_eq(u, 77);
}
END_TEST

START_TEST(test_path_socket_messages)
{
	char path[128], buf[SDNOTIFY_MAX_MSG + 64], longtext[3000];
	unsigned long long mono;
	uint64_t before, after;
	int fd;

	ck_assert_ptr_nonnull(mkdtemp(sockdir));
	snprintf(path, sizeof(path), "%s/notify", sockdir);
	fd = listener(path);

	ck_assert_int_eq(sdnotify_ready(), 0);
	receive(fd, buf, sizeof(buf));
	ck_assert_str_eq(buf, "READY=1");

	before = mono_usec();
	ck_assert_int_eq(sdnotify_reloading(), 0);
	after = mono_usec();
	receive(fd, buf, sizeof(buf));
	ck_assert_int_eq(sscanf(buf, "RELOADING=1\nMONOTONIC_USEC=%llu", &mono),
	    1);
	ck_assert_uint_ge(mono, before);
	ck_assert_uint_le(mono, after);

	ck_assert_int_eq(sdnotify_stopping(), 0);
	receive(fd, buf, sizeof(buf));
	ck_assert_str_eq(buf, "STOPPING=1");

	ck_assert_int_eq(sdnotify_watchdog(), 0);
	receive(fd, buf, sizeof(buf));
	ck_assert_str_eq(buf, "WATCHDOG=1");

	ck_assert_int_eq(sdnotify_extend_timeout(5000000), 0);
	receive(fd, buf, sizeof(buf));
	ck_assert_str_eq(buf, "EXTEND_TIMEOUT_USEC=5000000");

	/* A newline in a status must not start a second assignment. */
	ck_assert_int_eq(sdnotify_status("mirroring %d partitions\nof %s", 3,
	    "m1"), 0);
	receive(fd, buf, sizeof(buf));
	ck_assert_str_eq(buf, "STATUS=mirroring 3 partitions of m1");

	/* Too long: cut at the cap, still one datagram. */
	memset(longtext, 'a', sizeof(longtext) - 1);
	longtext[sizeof(longtext) - 1] = '\0';
	ck_assert_int_eq(sdnotify_status("%s", longtext), 0);
	receive(fd, buf, sizeof(buf));
	ck_assert_uint_eq(strlen(buf), SDNOTIFY_MAX_MSG - 1);
	ck_assert_int_eq(strncmp(buf, "STATUS=aaaa", 11), 0);

	close(fd);
	/* Nobody listens any more: a clear errno, not silence. */
	errno = 0;
	ck_assert_int_eq(sdnotify_ready(), -1);
	ck_assert_int_eq(errno, ECONNREFUSED);
	unlink(path);
	rmdir(sockdir);
	ck_assert_int_eq(sdnotify_ready(), -1);
	ck_assert_int_eq(errno, ENOENT);
}
END_TEST

START_TEST(test_abstract_socket)
{
	char name[64], buf[256];
	int fd;

	snprintf(name, sizeof(name), "@mirrord-test-%ld-%ld", (long)getpid(),
	    (long)mono_usec());
	fd = listener(name);
	ck_assert_int_eq(sdnotify_ready(), 0);
	receive(fd, buf, sizeof(buf));
	ck_assert_str_eq(buf, "READY=1");
	ck_assert_int_eq(sdnotify_send("STATUS=a\nERRNO=5"), 0);
	receive(fd, buf, sizeof(buf));
	ck_assert_str_eq(buf, "STATUS=a\nERRNO=5");
	close(fd);
}
END_TEST

START_TEST(test_bad_socket_names)
{
	setenv("NOTIFY_SOCKET", "relative/path", 1);
	errno = 0;
	ck_assert_int_eq(sdnotify_ready(), -1);
	ck_assert_int_eq(errno, EINVAL);
	setenv("NOTIFY_SOCKET", "@", 1);
	ck_assert_int_eq(sdnotify_ready(), -1);
	ck_assert_int_eq(errno, EINVAL);
	unsetenv("NOTIFY_SOCKET");
}
END_TEST

START_TEST(test_watchdog_usec)
{
	char pid[32];
	uint64_t u = 0;

	unsetenv("WATCHDOG_PID");
	setenv("WATCHDOG_USEC", "20000000", 1);
	ck_assert_int_eq(sdnotify_watchdog_usec(&u), 1);
	ck_assert_uint_eq(u, 20000000);

	snprintf(pid, sizeof(pid), "%ld", (long)getpid());
	setenv("WATCHDOG_PID", pid, 1);
	u = 0;
	ck_assert_int_eq(sdnotify_watchdog_usec(&u), 1);
	ck_assert_uint_eq(u, 20000000);

	/* Meant for another process (e.g. inherited from a parent). */
	snprintf(pid, sizeof(pid), "%ld", (long)getpid() + 1);
	setenv("WATCHDOG_PID", pid, 1);
	u = 0;
	ck_assert_int_eq(sdnotify_watchdog_usec(&u), 0);
	ck_assert_uint_eq(u, 0);

	unsetenv("WATCHDOG_PID");
	setenv("WATCHDOG_USEC", "20s", 1);
	errno = 0;
	ck_assert_int_eq(sdnotify_watchdog_usec(&u), -1);
	ck_assert_int_eq(errno, EINVAL);
	setenv("WATCHDOG_USEC", "0", 1);
	ck_assert_int_eq(sdnotify_watchdog_usec(&u), -1);
	setenv("WATCHDOG_USEC", "-5", 1);
	ck_assert_int_eq(sdnotify_watchdog_usec(&u), -1);
	setenv("WATCHDOG_USEC", "1000", 1);
	setenv("WATCHDOG_PID", "x1", 1);
	ck_assert_int_eq(sdnotify_watchdog_usec(&u), -1);
	unsetenv("WATCHDOG_USEC");
	unsetenv("WATCHDOG_PID");
}
END_TEST

static Suite *sdnotify_suite(void)
{
	Suite *s = suite_create("sdnotify");
	TCase *tc = tcase_create("core");

	tcase_add_test(tc, test_unset_is_noop);
	tcase_add_test(tc, test_path_socket_messages);
	tcase_add_test(tc, test_abstract_socket);
	tcase_add_test(tc, test_bad_socket_names);
	tcase_add_test(tc, test_watchdog_usec);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	SRunner *sr = srunner_create(sdnotify_suite());
	int failed;

	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
