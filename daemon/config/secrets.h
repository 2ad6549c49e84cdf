/*
 * secrets.h: the daemon's secrets (module prefix secrets_).
 *
 * At rest: CreateMirror secrets (sasl.password, ssl.key.password) are
 * sealed (lib/secretbox) before they reach the metadata log, under the key
 * of storage.secret_key_file.  secrets_attach() gives lib/mstate the policy
 * before the log is replayed; secrets_start() then loads (or, on a first
 * start, creates) the key, proves it opens every sealed value of the log,
 * and migrates a log written before secrets were sealed: its clear values
 * are sealed and the files that held them replaced by a snapshot.
 *
 * In use: a mirror's configs are opened and their config provider
 * references (lib/cfgprov) resolved only when a client is configured
 * (secrets_mirror_values), and the result is never stored.  CreateMirror
 * configs come from the network: their references are held to the wire
 * policy (secrets_check_wire): file and dir only inside
 * mirrors.provider_dirs, env only with mirrors.allow_env_provider,
 * credential never.  destination.client in mirrord.yaml is the operator's:
 * every provider, systemd credentials included (secrets_resolve_map).
 *
 * One key per process: this module keeps it, and the running config, as
 * process state set at start-up (and on reload for the config).  Loop
 * thread only.
 */
#ifndef MIRRORD_SECRETS_H
#define MIRRORD_SECRETS_H

#include <stddef.h>

struct config;
struct config_map;
struct event_base;
struct mirror;
struct mstate;

/* Name of the systemd credential that holds the key when
 * storage.secret_key_file is unset. */
#define SECRETS_KEY_CREDENTIAL "mirrord.secret_key"

/* Before mstate_open(): the sealing policy, so replay notes clear secrets. */
void secrets_attach(struct mstate *st, const struct config *cfg);
/* After mstate_open(): the key, its check against the log, the migration.
 * Returns 0, or -1 with err naming the key file and what is wrong. */
int secrets_start(struct mstate *st, char *err, size_t errlen);
/* The config after a reload (the key itself never changes while running). */
void secrets_set_config(const struct config *cfg);
void secrets_fini(void);

/* A CreateMirror config's references against the wire policy, looking at
 * the files and variables they name.  0, or -1 with err. */
int secrets_check_wire(const char *name, const char *value, char *err,
    size_t errlen);

/*
 * The values of m's configs ready for a client, in m->configs order:
 * sealed values opened, references resolved.  *values has m->nconfigs
 * entries (NULL where the config's value is null); free it with
 * secrets_values_free().  Errors name the config and the provider, never
 * a secret.
 */
int secrets_mirror_values(const struct mirror *m, char ***values, char *err,
    size_t errlen);
/*
 * One stored value of mirror's config name as the operator gave it: a
 * sealed value opened, anything else (references included) copied.  For
 * validating a mirror's configs again (IncrementalAlterConfigs).  0 with
 * *out (free it with secrets_values_free(out, 1) semantics: wiped), or -1
 * with err naming the config, never the secret.
 */
int secrets_open_stored(const char *mirror, const char *name,
    const char *stored, char **out, char *err, size_t errlen);
/*
 * 1 if m's references name files (file and dir providers): then resolve
 * them with secrets_resolve_start(), which reads those files off the
 * loop; secrets_mirror_values() refuses to read a file on the loop.
 */
int secrets_mirror_reads_files(const struct mirror *m);

/*
 * Called once, on the loop, never from inside secrets_resolve_start(),
 * unless cancelled first.  On success err is NULL and values (n of them,
 * in m->configs order) are the callee's to free with
 * secrets_values_free(); names (m's config names, copied) are valid
 * during the call.  On failure values is NULL and err names the config,
 * the reference and why.
 */
typedef void (*secrets_resolved_fn)(void *arg, const char *err,
    const char *const *names, char **values, size_t n);
struct secrets_resolve;
/* secrets_mirror_values() with the files read by the fileload worker.  m
 * is copied: it may go away meanwhile.  NULL with err when nothing could
 * be started. */
struct secrets_resolve *secrets_resolve_start(struct event_base *base,
    const struct mirror *m, secrets_resolved_fn cb, void *arg, char *err,
    size_t errlen);
/* The callback will not run.  NULL is a no-op.  Not from the callback. */
void secrets_resolve_cancel(struct secrets_resolve *r);

/* The same for a map of mirrord.yaml (what names it in messages). */
int secrets_resolve_map(const char *what, const struct config_map *map,
    char ***values, char *err, size_t errlen);
/* Wipes and frees n values. */
void secrets_values_free(char **values, size_t n);

#endif
