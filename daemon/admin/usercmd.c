/* usercmd.c: see usercmd.h. */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <termios.h>
#include <unistd.h>

#include <openssl/crypto.h>

#include "credstore.h"
#include "daemonconf.h"
#include "ksasl.h"
#include "scram.h"
#include "usercmd.h"

#define DEFAULT_ITERATIONS 4096
#define MAX_PASSWORD 1024

/* One line from fd (without the newline); -1 on EOF before any byte. */
static int read_line(int fd, char *buf, size_t len)
{
	size_t n = 0;
	char ch;

	for (;;) {
		ssize_t r = read(fd, &ch, 1);

		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			return n > 0 ? 0 : -1;
		if (ch == '\n')
			break;
		if (n + 1 >= len)
			return -2;
		buf[n++] = ch;
	}
	if (n > 0 && buf[n - 1] == '\r')
		n--;
	buf[n] = '\0';
	return 0;
}

/* From the terminal with echo off (asked twice), or stdin's first line. */
static int read_password(const char *user, char *pw, size_t len)
{
	char again[MAX_PASSWORD + 2];
	struct termios old, quiet;
	int fd = isatty(STDIN_FILENO) ? open("/dev/tty", O_RDWR | O_CLOEXEC) : -1;
	int rc;

	if (fd < 0) {
		rc = read_line(STDIN_FILENO, pw, len);
		if (rc == -2)
			fprintf(stderr, "mirrord: password longer than %d bytes\n",
			    MAX_PASSWORD);
		else if (rc < 0)
			fprintf(stderr, "mirrord: no password on standard input\n");
		return rc < 0 ? -1 : 0;
	}
	if (tcgetattr(fd, &old) < 0) {
		close(fd);
		return -1;
	}
	quiet = old;
	quiet.c_lflag &= ~(tcflag_t)ECHO;
	dprintf(fd, "Password for %s: ", user);
	tcsetattr(fd, TCSAFLUSH, &quiet);
	rc = read_line(fd, pw, len);
	dprintf(fd, "\nAgain: ");
	if (rc == 0)
		rc = read_line(fd, again, sizeof(again));
	tcsetattr(fd, TCSAFLUSH, &old);
	dprintf(fd, "\n");
	close(fd);
	if (rc == 0 && strcmp(pw, again) != 0) {
		fprintf(stderr, "mirrord: the passwords differ\n");
		rc = -1;
	}
	OPENSSL_cleanse(again, sizeof(again));
	return rc < 0 ? -1 : 0;
}

static const char *store_path(const struct usercmd *uc, struct config **cfgp)
{
	struct config_errors errs;
	struct config *cfg = NULL;

	if (uc->file != NULL)
		return uc->file;
	config_errors_init(&errs);
	if (config_load(uc->config_path, &cfg, &errs) < 0) {
		config_errors_print(&errs, stderr);
		config_errors_fini(&errs);
		fprintf(stderr, "mirrord: give --credentials-file FILE, or fix "
		    "%s\n", uc->config_path);
		return NULL;
	}
	config_errors_fini(&errs);
	if (cfg->server_sasl_credentials_file == NULL) {
		fprintf(stderr, "mirrord: %s sets no server.sasl.credentials_file; "
		    "give --credentials-file FILE\n", uc->config_path);
		config_free(cfg);
		return NULL;
	}
	*cfgp = cfg;
	return cfg->server_sasl_credentials_file;
}

int usercmd_run(const struct usercmd *uc)
{
	struct config *cfg = NULL;
	struct credstore *cs = NULL;
	const char *path;
	char err[512], pw[MAX_PASSWORD + 2];
	int mech = -1, rc = 1;

	if (uc->mechanism != NULL) {
		mech = ksasl_mech_parse(uc->mechanism);
		if (mech < 0 || scram_hash_len(mech) == 0) {
			fprintf(stderr, "mirrord: --mechanism %s: expected "
			    "SCRAM-SHA-256 or SCRAM-SHA-512 (PLAIN logins use "
			    "these credentials)\n", uc->mechanism);
			return 2;
		}
	}
	if (uc->user != NULL && credstore_check_user(uc->user, err,
	    sizeof(err)) < 0) {
		fprintf(stderr, "mirrord: '%s': %s\n", uc->user, err);
		return 2;
	}
	if ((path = store_path(uc, &cfg)) == NULL)
		return 2;
	cs = credstore_load(path, uc->action == USERCMD_ADD, err, sizeof(err));
	if (cs == NULL) {
		fprintf(stderr, "mirrord: %s\n", err);
		goto out;
	}
	switch (uc->action) {
	case USERCMD_LIST:
		for (size_t i = 0; i < credstore_count(cs); i++) {
			const char *u;
			int m, it;

			credstore_entry(cs, i, &u, &m, &it);
			printf("%s %s iterations=%d\n", u, ksasl_mech_name(m), it);
		}
		rc = 0;
		break;
	case USERCMD_DELETE: {
		size_t n = credstore_delete(cs, uc->user, mech);

		if (n == 0) {
			fprintf(stderr, "mirrord: %s has no %s credential for "
			    "'%s'\n", path, mech < 0 ? "SCRAM" :
			    ksasl_mech_name(mech), uc->user);
			break;
		}
		if (credstore_save(cs, path, err, sizeof(err)) < 0) {
			fprintf(stderr, "mirrord: %s\n", err);
			break;
		}
		printf("deleted %zu credential(s) of '%s' from %s; send mirrord "
		    "SIGHUP to apply\n", n, uc->user, path);
		rc = 0;
		break;
	}
	case USERCMD_ADD: {
		struct scram_cred cred;
		int it = uc->iterations > 0 ? uc->iterations : DEFAULT_ITERATIONS;

		if (mech < 0)
			mech = KSASL_SCRAM_SHA_512;
		if (read_password(uc->user, pw, sizeof(pw)) < 0)
			break;
		if (pw[0] == '\0') {
			fprintf(stderr, "mirrord: the password is empty\n");
			break;
		}
		if (scram_cred_derive(mech, pw, strlen(pw), NULL, 0, it, &cred,
		    err, sizeof(err)) < 0 ||
		    credstore_set(cs, uc->user, &cred, err, sizeof(err)) < 0) {
			OPENSSL_cleanse(&cred, sizeof(cred));
			fprintf(stderr, "mirrord: --add-user %s: %s\n", uc->user,
			    err);
			break;
		}
		OPENSSL_cleanse(&cred, sizeof(cred));
		if (credstore_save(cs, path, err, sizeof(err)) < 0) {
			fprintf(stderr, "mirrord: %s\n", err);
			break;
		}
		printf("stored %s credential of '%s' (%d iterations) in %s; send "
		    "mirrord SIGHUP to apply\n", ksasl_mech_name(mech), uc->user,
		    it, path);
		rc = 0;
		break;
	}
	}
out:
	OPENSSL_cleanse(pw, sizeof(pw));
	credstore_free(cs);
	config_free(cfg);
	return rc;
}
