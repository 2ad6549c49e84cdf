/*
 * cfgprov.h: Kafka's config providers in client property values, so that a
 * secret is named where it is configured and read only when it is used:
 *
 *   ${file:/etc/mirrord/secrets.properties:source.password}
 *        the value of key source.password in that Java .properties file
 *   ${dir:/etc/mirrord/secrets:source-password}
 *        the whole content of file source-password in that directory
 *   ${env:SOURCE_PASSWORD}
 *        an environment variable of the daemon
 *   ${credential:source-password}
 *        a systemd credential: the file $CREDENTIALS_DIRECTORY/source-password
 *        (LoadCredential=, SetCredentialEncrypted=, ...)
 *
 * dir and credential contents lose their trailing newlines (CR and LF).  As
 * in Kafka, the path of file and dir ends at the first ':' after it starts,
 * and a value may hold text around references and several references.
 * Unlike Kafka, anything of the form ${word:...} is a reference: an unknown
 * provider, a missing file, key or variable is an error naming the property,
 * the provider and what is missing (never the secret), not a value left
 * as written.
 *
 * References are resolved at use and the resolved value is never stored.
 * Who may use which provider is the caller's policy (struct cfgprov_opts):
 * mirrord.yaml is the operator's own file; CreateMirror configs come from
 * the network, so their file names go through lib/safefile (the operator's
 * allowed directories) and env/credential are refused by default (a client
 * could send the daemon's environment or credentials to a broker of its
 * own).
 */
#ifndef MIRRORD_CFGPROV_H
#define MIRRORD_CFGPROV_H

#include <stddef.h>

#define CFGPROV_KINDS(X) \
	X(FILE, "file") \
	X(DIR, "dir") \
	X(ENV, "env") \
	X(CREDENTIAL, "credential")

enum cfgprov_kind {
#define X(e, s) CFGPROV_##e,
	CFGPROV_KINDS(X)
#undef X
	CFGPROV_COUNT
};
#define CFGPROV_BIT(k) (1u << CFGPROV_##k)
#define CFGPROV_ALL ((1u << CFGPROV_COUNT) - 1)

/* Largest resolved value and largest file read for one reference. */
#define CFGPROV_MAX_VALUE (1u << 20)

/* Reads a file for a file or dir reference: *out malloc'd and
 * NUL-terminated; -1 with err ("path: why"). */
typedef int (*cfgprov_read_fn)(void *arg, const char *path, char **out,
    size_t *outlen, char *err, size_t errlen);

struct cfgprov_opts {
	unsigned allowed;            /* CFGPROV_BIT()s that may be used */
	/* File names from the network: file and dir providers read through
	 * safefile_read() within dirs (NULL or empty: no file at all). */
	int untrusted;
	const char *const *dirs;
	/* NULL: $CREDENTIALS_DIRECTORY of the environment. */
	const char *credentials_dir;
	/* Appended to "provider X is not allowed here" (which providers the
	 * context accepts, and how to change it). */
	const char *refused_hint;
	/* NULL: file and dir references read their files here (blocking);
	 * else through read (e.g. contents read earlier off the loop). */
	cfgprov_read_fn read;
	void *read_arg;
};

/* "file"; "?" out of range. */
const char *cfgprov_kind_name(int kind);
/* 1 if value holds at least one ${word:...} reference. */
int cfgprov_has_ref(const char *value);

/*
 * Checks every reference of value (the value of property name): its form,
 * that its provider is allowed, and, with look, what can be seen without
 * reading a secret: the file or directory entry exists (through
 * safefile_check() when untrusted), the variable is set.  Returns 0 (also
 * for a value without references), or -1 with err naming name, the
 * reference's provider and what is wrong.
 */
int cfgprov_check(const char *name, const char *value,
    const struct cfgprov_opts *o, int look, char *err, size_t errlen);

/*
 * Calls fn with every file the file and dir references of value would read
 * (the same path a later cfgprov_resolve() reads), after the checks of
 * cfgprov_check() without look.  Returns 0, or -1 with err.
 */
int cfgprov_files(const char *name, const char *value,
    const struct cfgprov_opts *o, void (*fn)(void *arg, const char *path),
    void *arg, char *err, size_t errlen);

/*
 * Resolves every reference of value; *out is malloc'd (wipe it with
 * secretbox_wipe_free or memset before free: it may be a secret).  A value
 * without references is copied.  Errors as for cfgprov_check().
 */
int cfgprov_resolve(const char *name, const char *value,
    const struct cfgprov_opts *o, char **out, char *err, size_t errlen);

#endif
