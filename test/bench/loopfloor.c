/*
 * loopfloor: the CPU a process spends only moving bytes from one loopback
 * TCP connection to another, the floor under any mirroring process that
 * bench_kafka.py measures on 127.0.0.1.
 *
 *   loopfloor [MIB [BUFFER_KIB]]
 *
 * Three processes: a source writes MIB MiB (default 1024) into a
 * connection as fast as it can, a sink reads another connection and throws
 * the bytes away, and this process in the middle recv()s from the first
 * and send()s to the second through one buffer of BUFFER_KIB KiB (default
 * 256), with no event loop, no parsing and no checksum.  It prints one
 * line of JSON: {"bytes": N, "wall_s": W, "cpu_s": C, "cpu_s_per_gb": X},
 * C being the middle process's user + system time from the first byte
 * received to the last one sent.
 *
 * On loopback the kernel's TCP work for both ends of a connection runs on
 * the CPU of whichever process sends: the middle pays for its reads, its
 * sends and much of the sink's receive path.  A mirroring process on
 * 127.0.0.1 pays the same, so its CPU-s/GB can be read against this one.
 */
#include "config.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static void die(const char *what)
{
	fprintf(stderr, "loopfloor: %s: %s\n", what, strerror(errno));
	exit(1);
}

static int listen_any(int *port)
{
	struct sockaddr_in a = { .sin_family = AF_INET };
	socklen_t alen = sizeof(a);
	int s = socket(AF_INET, SOCK_STREAM, 0);

	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	if (s < 0 || bind(s, (struct sockaddr *)&a, sizeof(a)) != 0 ||
	    listen(s, 1) != 0 ||
	    getsockname(s, (struct sockaddr *)&a, &alen) != 0)
		die("listening on 127.0.0.1");
	*port = ntohs(a.sin_port);
	return s;
}

static int dial(int port)
{
	struct sockaddr_in a = { .sin_family = AF_INET };
	int s = socket(AF_INET, SOCK_STREAM, 0);

	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	a.sin_port = htons((uint16_t)port);
	if (s < 0 || connect(s, (struct sockaddr *)&a, sizeof(a)) != 0)
		die("connecting to 127.0.0.1");
	return s;
}

static double cpu_s(void)
{
	struct rusage ru;

	if (getrusage(RUSAGE_SELF, &ru) != 0)
		die("getrusage");
	return (double)ru.ru_utime.tv_sec + ru.ru_utime.tv_usec / 1e6 +
	    (double)ru.ru_stime.tv_sec + ru.ru_stime.tv_usec / 1e6;
}

static double now_s(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double)t.tv_sec + t.tv_nsec / 1e9;
}

int main(int argc, char **argv)
{
	size_t total = (size_t)(argc > 1 ? atol(argv[1]) : 1024) << 20;
	size_t bufsz = (size_t)(argc > 2 ? atol(argv[2]) : 256) << 10;
	int in_port, out_port, lin, lout, in, out, status, failed = 0;
	size_t moved = 0;
	double t0 = 0, c0 = 0, t1, c1;
	ssize_t n;
	char *buf;

	if (total == 0 || bufsz == 0) {
		fprintf(stderr, "usage: loopfloor [MIB [BUFFER_KIB]]\n");
		return 2;
	}
	if ((buf = malloc(bufsz)) == NULL)
		die("malloc");
	memset(buf, 'm', bufsz);
	lin = listen_any(&in_port);
	lout = listen_any(&out_port);
	if (fork() == 0) {              /* the sink */
		int c = accept(lout, NULL, NULL);

		while (c >= 0 && recv(c, buf, bufsz, 0) > 0)
			;
		_exit(c >= 0 ? 0 : 1);
	}
	if (fork() == 0) {              /* the source */
		int c = dial(in_port);

		for (size_t sent = 0; sent < total; ) {
			size_t want = total - sent < bufsz ? total - sent : bufsz;

			if ((n = send(c, buf, want, 0)) <= 0)
				_exit(1);
			sent += (size_t)n;
		}
		close(c);
		_exit(0);
	}
	if ((in = accept(lin, NULL, NULL)) < 0)
		die("accept");
	out = dial(out_port);
	while ((n = recv(in, buf, bufsz, 0)) > 0) {
		if (moved == 0) {
			t0 = now_s();
			c0 = cpu_s();
		}
		for (ssize_t off = 0; off < n; ) {
			ssize_t w = send(out, buf + off, (size_t)(n - off), 0);

			if (w <= 0)
				die("send");
			off += w;
		}
		moved += (size_t)n;
	}
	if (n < 0)
		die("recv");
	t1 = now_s();
	c1 = cpu_s();
	close(out);
	while (wait(&status) > 0)
		failed |= !WIFEXITED(status) || WEXITSTATUS(status) != 0;
	if (failed || moved != total) {
		fprintf(stderr, "loopfloor: moved %zu of %zu bytes\n", moved, total);
		return 1;
	}
	printf("{\"bytes\": %zu, \"wall_s\": %.3f, \"cpu_s\": %.3f, "
	    "\"cpu_s_per_gb\": %.3f}\n", moved, t1 - t0, c1 - c0,
	    (c1 - c0) / ((double)moved / 1e9));
	free(buf);
	return 0;
}
