/*
 * credstore.h: the SCRAM credential store of mirrord's admin listener
 * (server.sasl.credentials_file), and its management for
 * `mirrord --add-user/--delete-user/--list-users`.
 *
 * One line per user and mechanism, fields separated by single spaces:
 *
 *   # comment
 *   alice SCRAM-SHA-512 iterations=4096 salt=B64 stored_key=B64 server_key=B64
 *
 * Salted keys only, never a password.  The file must not be readable or
 * writable by group or others (mode 0600 or stricter): loading refuses it
 * otherwise.  Saving writes a temporary file with mode 0600 in the same
 * directory, fsyncs it and renames it over the old one.
 *
 * User names: 1..255 bytes, no whitespace or control characters.
 */
#ifndef MIRRORD_CREDSTORE_H
#define MIRRORD_CREDSTORE_H

#include <stddef.h>

#include "scram.h"

#define CREDSTORE_MAX_FILE_BYTES (16 * 1024 * 1024)

struct credstore;

/* An empty store (for a file that does not exist yet). */
struct credstore *credstore_new(void);
/*
 * Loads path.  missing_ok: a file that does not exist is an empty store.
 * Errors name the path (and line): "FILE:LINE: reason".
 */
struct credstore *credstore_load(const char *path, int missing_ok, char *err,
    size_t errlen);
void credstore_free(struct credstore *cs);

/* 0 and *out filled, or -1 if user has no credential for mech. */
int credstore_lookup(const struct credstore *cs, const char *user, int mech,
    struct scram_cred *out);

/* 0 if name is acceptable as a user name, else -1 with the reason. */
int credstore_check_user(const char *name, char *err, size_t errlen);
/* Adds or replaces user's credential for cred->mech. */
int credstore_set(struct credstore *cs, const char *user,
    const struct scram_cred *cred, char *err, size_t errlen);
/* Removes user's credentials (one mechanism, or all with mech -1);
 * returns how many were removed. */
size_t credstore_delete(struct credstore *cs, const char *user, int mech);

size_t credstore_count(const struct credstore *cs);
/* Entry i: user name, mechanism, iteration count. */
void credstore_entry(const struct credstore *cs, size_t i, const char **user,
    int *mech, int *iterations);

int credstore_save(const struct credstore *cs, const char *path, char *err,
    size_t errlen);

#endif
