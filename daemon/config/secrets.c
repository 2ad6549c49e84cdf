/*
 * secrets.c: see secrets.h.
 */
#include "config.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include <openssl/crypto.h>

#include "cfgprov.h"
#include "compat.h"
#include "daemonconf.h"
#include "fileload.h"
#include "log.h"
#include "mirrorconf.h"
#include "mstate.h"
#include "secretbox.h"
#include "secrets.h"

#define WIRE_HINT "(CreateMirror accepts the file and dir providers only for " \
	"files inside mirrors.provider_dirs, env only with " \
	"mirrors.allow_env_provider: true in mirrord.yaml, credential never)"

static struct {
	const struct config *cfg;
	struct secretbox *box;   /* NULL until secrets_start() */
	char key_path[4096];
} S;

/* ---- sealing ----------------------------------------------------------- */

/* Associated data of a sealed value: the mirror and the config name, so a
 * value only opens where it was stored. */
static char *aad_of(const char *mirror, const char *name, size_t *len)
{
	size_t ml = strlen(mirror), nl = strlen(name);
	char *a = malloc(ml + nl + 2);

	if (a == NULL)
		return NULL;
	memcpy(a, mirror, ml + 1);
	memcpy(a + ml + 1, name, nl + 1);
	*len = ml + nl + 2;
	return a;
}

/* Whether a value must be sealed: a secret, in clear.  References are
 * stored as written: they name the secret, they do not hold it.  A request
 * cannot hand in a value that merely looks sealed (it would be opened as
 * if mirrord had sealed it): from a request, every secret is sealed. */
static int needs_seal(void *arg, const char *name, const char *value,
    int stored)
{
	(void)arg;
	return mirrorconf_is_secret(name) && !cfgprov_has_ref(value) &&
	    !(stored && secretbox_is_sealed(value));
}

/* aad_of() once the key is loaded; NULL with err otherwise. */
static char *keyed_aad(const char *mirror, const char *name, size_t *alen,
    char *err, size_t errlen)
{
	char *aad;

	if (S.box == NULL) {
		snprintf(err, errlen, "the secret key is not loaded");
		return NULL;
	}
	if ((aad = aad_of(mirror, name, alen)) == NULL)
		snprintf(err, errlen, "out of memory");
	return aad;
}

static int seal(void *arg, const char *mirror, const char *name,
    const char *value, char **out, char *err, size_t errlen)
{
	size_t alen;
	char *aad = keyed_aad(mirror, name, &alen, err, errlen);
	int rc;

	(void)arg;
	if (aad == NULL)
		return -1;
	rc = secretbox_seal(S.box, value, aad, alen, out, err, errlen);
	free(aad);
	return rc;
}

static int open_sealed(const char *mirror, const char *name,
    const char *value, char **out, char *err, size_t errlen)
{
	size_t alen;
	char *aad = keyed_aad(mirror, name, &alen, err, errlen);
	int rc;

	if (aad == NULL)
		return -1;
	rc = secretbox_open(S.box, value, aad, alen, out, err, errlen);
	free(aad);
	return rc;
}

void secrets_attach(struct mstate *st, const struct config *cfg)
{
	const struct mstate_sealer s = { .needs_seal = needs_seal,
	    .seal = seal, .arg = NULL };

	S.cfg = cfg;
	mstate_set_sealer(st, &s);
}

void secrets_set_config(const struct config *cfg)
{
	S.cfg = cfg;
}

void secrets_fini(void)
{
	secretbox_free(S.box);
	S.box = NULL;
	S.cfg = NULL;
}

/* ---- the key ------------------------------------------------------------ */

/* storage.secret_key_file, else the systemd credential, else the data
 * directory's secret.key.  *fixed: 1 unless it is the data directory's
 * default (which may be created). */
static void key_path(const struct config *cfg, char *buf, size_t len,
    int *may_create)
{
	const char *cd = getenv("CREDENTIALS_DIRECTORY");
	struct stat sb;

	*may_create = 0;
	if (cfg->storage_secret_key_file != NULL) {
		snprintf(buf, len, "%s", cfg->storage_secret_key_file);
		*may_create = 1;
		return;
	}
	if (cd != NULL && cd[0] != '\0') {
		snprintf(buf, len, "%s/%s", cd, SECRETS_KEY_CREDENTIAL);
		if (stat(buf, &sb) == 0)
			return;
	}
	snprintf(buf, len, "%s/secret.key", cfg->storage_data_dir);
	*may_create = 1;
}

/* The first sealed value of the model, for messages (NULL if none). */
static const struct mcfg *first_sealed(struct mstate *st,
    const struct mirror **mp, size_t *count)
{
	const struct mcfg *first = NULL;

	*count = 0;
	for (size_t i = 0; i < mstate_mirror_count(st); i++) {
		const struct mirror *m = mstate_mirror_at(st, i);

		for (size_t c = 0; c < m->nconfigs; c++) {
			if (!secretbox_is_sealed(m->configs[c].value))
				continue;
			if (first == NULL) {
				first = &m->configs[c];
				*mp = m;
			}
			(*count)++;
		}
	}
	return first;
}

/* Every sealed value of the model opens with the loaded key. */
static int verify_all(struct mstate *st, char *err, size_t errlen)
{
	char why[256], *plain;

	for (size_t i = 0; i < mstate_mirror_count(st); i++) {
		const struct mirror *m = mstate_mirror_at(st, i);

		for (size_t c = 0; c < m->nconfigs; c++) {
			if (!secretbox_is_sealed(m->configs[c].value))
				continue;
			if (open_sealed(m->name, m->configs[c].name,
			    m->configs[c].value, &plain, why, sizeof(why)) != 0) {
				snprintf(err, errlen, "storage.secret_key_file %s: "
				    "this key does not decrypt the secrets of the "
				    "metadata log (mirror %s, config %s: %s); is it "
				    "the key file this data directory was written "
				    "with?", S.key_path, m->name, m->configs[c].name,
				    why);
				return -1;
			}
			secretbox_wipe_free(plain);
		}
	}
	return 0;
}

int secrets_start(struct mstate *st, char *err, size_t errlen)
{
	uint8_t key[SECRETBOX_KEY_LEN];
	const struct mirror *sm = NULL;
	const struct mcfg *sc;
	char why[512], id[9] = "?";
	size_t nsealed_log, nsealed;
	int may_create, compacted;
	struct stat sb;

	key_path(S.cfg, S.key_path, sizeof(S.key_path), &may_create);
	sc = first_sealed(st, &sm, &nsealed_log);
	if (secretbox_load_key(S.key_path, key, why, sizeof(why)) != 0) {
		if (errno != ENOENT) {
			snprintf(err, errlen, "storage.secret_key_file: %s", why);
			return -1;
		}
		if (sc != NULL) {
			secretbox_sealed_key_id(sc->value, id);
			snprintf(err, errlen, "storage.secret_key_file %s does not "
			    "exist, but the metadata log in %s holds %zu secret%s "
			    "encrypted under key id %s (mirror %s, config %s): "
			    "restore that key file; mirrord will not start without "
			    "it", S.key_path, S.cfg->storage_data_dir, nsealed_log,
			    nsealed_log == 1 ? "" : "s", id, sm->name, sc->name);
			return -1;
		}
		if (!may_create) {
			snprintf(err, errlen, "storage.secret_key_file: %s", why);
			return -1;
		}
		if (secretbox_create_key_file(S.key_path, key, why,
		    sizeof(why)) != 0) {
			snprintf(err, errlen, "storage.secret_key_file: %s", why);
			return -1;
		}
		S.box = secretbox_new(key);
		OPENSSL_cleanse(key, sizeof(key));
		if (S.box == NULL) {
			snprintf(err, errlen, "out of memory");
			return -1;
		}
		log_info("secrets: created the key file %s (key id %s): keep a "
		    "copy; without it the secrets stored in the metadata log "
		    "cannot be read", S.key_path, secretbox_key_id(S.box));
	} else {
		S.box = secretbox_new(key);
		OPENSSL_cleanse(key, sizeof(key));
		if (S.box == NULL) {
			snprintf(err, errlen, "out of memory");
			return -1;
		}
		if (stat(S.key_path, &sb) == 0 && (sb.st_mode & 077) != 0)
			log_warnx("secrets: %s can be read by other users (mode "
			    "%03o); chmod 600 it", S.key_path,
			    (unsigned)(sb.st_mode & 0777));
		log_info("secrets: key id %s from %s", secretbox_key_id(S.box),
		    S.key_path);
	}
	if (verify_all(st, err, errlen) != 0)
		goto fail;
	if (mstate_seal_clear_secrets(st, &nsealed, &compacted, why,
	    sizeof(why)) != 0) {
		snprintf(err, errlen, "metadata log: cannot encrypt the secrets "
		    "stored in clear: %s", why);
		goto fail;
	}
	if (nsealed > 0 || compacted)
		log_warnx("secrets: the metadata log held secrets in clear: "
		    "%zu value%s now encrypted, and the log files that held "
		    "them replaced by a snapshot", nsealed,
		    nsealed == 1 ? "" : "s");
	return 0;
fail:
	secretbox_free(S.box);
	S.box = NULL;
	return -1;
}

/* ---- references ---------------------------------------------------------- */

/*
 * The policy for configs that came over the network.  What a reference
 * reads is sent to brokers the admin client chooses, so the files it may
 * read are in a list of their own (mirrors.provider_dirs, empty by
 * default), not mirrors.allowed_file_dirs: those default to /etc/mirrord,
 * whose mirrord.yaml the .properties reader would read as well.
 */
static void wire_opts(struct cfgprov_opts *o)
{
	memset(o, 0, sizeof(*o));
	o->untrusted = 1;
	o->refused_hint = WIRE_HINT;
	if (S.cfg == NULL)
		return;
	if (S.cfg->mirrors_provider_dirs.n > 0) {
		o->allowed |= CFGPROV_BIT(FILE) | CFGPROV_BIT(DIR);
		o->dirs = (const char *const *)S.cfg->mirrors_provider_dirs.v;
	}
	if (S.cfg->mirrors_allow_env_provider)
		o->allowed |= CFGPROV_BIT(ENV);
}

int secrets_check_wire(const char *name, const char *value, char *err,
    size_t errlen)
{
	struct cfgprov_opts o;

	wire_opts(&o);
	return cfgprov_check(name, value, &o, 1, err, errlen);
}

void secrets_values_free(char **values, size_t n)
{
	if (values == NULL)
		return;
	for (size_t i = 0; i < n; i++)
		secretbox_wipe_free(values[i]);
	free(values);
}

/* The loop never reads a file: the default reader of the synchronous path. */
static int no_loop_read(void *arg, const char *path, char **out,
    size_t *outlen, char *err, size_t errlen)
{
	(void)arg;
	(void)out;
	(void)outlen;
	snprintf(err, errlen, "%s: not read on the event loop (internal error)",
	    path);
	return -1;
}

/* Opens and resolves n stored values of mirror under o. */
static int resolve_values(const char *mirror, const char *const *names,
    const char *const *stored, size_t n, const struct cfgprov_opts *o,
    char ***values, char *err, size_t errlen)
{
	char **v, why[512];

	*values = NULL;
	if ((v = calloc(n + 1, sizeof(*v))) == NULL) {
		snprintf(err, errlen, "out of memory");
		return -1;
	}
	for (size_t i = 0; i < n; i++) {
		int rc;

		if (stored[i] == NULL)
			continue;
		/* A sealed value is the secret itself, never a reference. */
		if (secretbox_is_sealed(stored[i])) {
			rc = open_sealed(mirror, names[i], stored[i], &v[i], why,
			    sizeof(why));
			if (rc != 0)
				snprintf(err, errlen, "%s: cannot decrypt it: %s",
				    names[i], why);
		} else {
			rc = cfgprov_resolve(names[i], stored[i], o, &v[i], err,
			    errlen);
		}
		if (rc != 0) {
			secrets_values_free(v, n);
			return -1;
		}
	}
	*values = v;
	return 0;
}

int secrets_open_stored(const char *mirror, const char *name,
    const char *stored, char **out, char *err, size_t errlen)
{
	char why[512];

	*out = NULL;
	if (stored == NULL)
		return 0;
	if (secretbox_is_sealed(stored)) {
		if (open_sealed(mirror, name, stored, out, why, sizeof(why)) != 0) {
			snprintf(err, errlen, "%s: cannot decrypt it: %s", name, why);
			return -1;
		}
		return 0;
	}
	if ((*out = strdup(stored)) == NULL) {
		snprintf(err, errlen, "out of memory");
		return -1;
	}
	return 0;
}

int secrets_mirror_values(const struct mirror *m, char ***values, char *err,
    size_t errlen)
{
	const char **names = calloc(m->nconfigs + 1, sizeof(*names));
	const char **stored = calloc(m->nconfigs + 1, sizeof(*stored));
	struct cfgprov_opts o;
	int rc = -1;

	*values = NULL;
	if (names == NULL || stored == NULL) {
		snprintf(err, errlen, "out of memory");
		goto out;
	}
	for (size_t i = 0; i < m->nconfigs; i++) {
		names[i] = m->configs[i].name;
		stored[i] = m->configs[i].value;
	}
	wire_opts(&o);
	o.read = no_loop_read;
	rc = resolve_values(m->name, names, stored, m->nconfigs, &o, values,
	    err, errlen);
out:
	free(names);
	free(stored);
	return rc;
}

/* ---- resolving off the loop ---------------------------------------------- */

struct secrets_resolve {
	struct fileload *fl;
	char *mirror;
	size_t n;
	char **names, **stored;      /* copies of the mirror's configs */
	char **paths;                /* files to read, each once */
	size_t npaths;
	const struct fileload_result *res;  /* during the load's callback */
	size_t nres;
	secrets_resolved_fn cb;
	void *arg;
	int oom;
};

static void add_path(void *arg, const char *path)
{
	struct secrets_resolve *r = arg;
	char **np;

	for (size_t i = 0; i < r->npaths; i++)
		if (strcmp(r->paths[i], path) == 0)
			return;
	if ((np = realloc(r->paths, (r->npaths + 2) * sizeof(*np))) == NULL) {
		r->oom = 1;
		return;
	}
	r->paths = np;
	if ((r->paths[r->npaths] = strdup(path)) == NULL) {
		r->oom = 1;
		return;
	}
	r->paths[++r->npaths] = NULL;
}

static void count_path(void *arg, const char *path)
{
	(void)path;
	(*(size_t *)arg)++;
}

int secrets_mirror_reads_files(const struct mirror *m)
{
	struct cfgprov_opts o;
	char why[512];
	size_t n = 0;

	wire_opts(&o);
	for (size_t i = 0; i < m->nconfigs; i++)
		if (!secretbox_is_sealed(m->configs[i].value))
			(void)cfgprov_files(m->configs[i].name, m->configs[i].value,
			    &o, count_path, &n, why, sizeof(why));
	return n > 0;
}

static void resolve_free(struct secrets_resolve *r)
{
	for (size_t i = 0; i < r->n; i++) {
		free(r->names[i]);
		secretbox_wipe_free(r->stored[i]);
	}
	for (size_t i = 0; i < r->npaths; i++)
		free(r->paths[i]);
	free(r->names);
	free(r->stored);
	free(r->paths);
	free(r->mirror);
	free(r);
}

/* The reader of the resolution after the load: what the worker read. */
static int read_loaded(void *arg, const char *path, char **out,
    size_t *outlen, char *err, size_t errlen)
{
	struct secrets_resolve *r = arg;

	for (size_t i = 0; i < r->nres; i++) {
		const struct fileload_result *f = &r->res[i];

		if (strcmp(f->path, path) != 0)
			continue;
		if (f->data == NULL) {
			snprintf(err, errlen, "%s", f->err != NULL ? f->err : path);
			return -1;
		}
		if ((*out = malloc(f->len + 1)) == NULL) {
			snprintf(err, errlen, "%s: out of memory", path);
			return -1;
		}
		memcpy(*out, f->data, f->len);
		(*out)[f->len] = '\0';
		*outlen = f->len;
		return 0;
	}
	/* The policy changed since the load started (a reload). */
	snprintf(err, errlen, "%s: was not read; try again", path);
	return -1;
}

static void loaded(void *arg, const struct fileload_result *res, size_t n)
{
	struct secrets_resolve *r = arg;
	struct cfgprov_opts o;
	char **values = NULL, err[800];
	int rc;

	r->fl = NULL;
	r->res = res;
	r->nres = n;
	wire_opts(&o);
	o.read = read_loaded;
	o.read_arg = r;
	rc = resolve_values(r->mirror, (const char *const *)r->names,
	    (const char *const *)r->stored, r->n, &o, &values, err, sizeof(err));
	r->res = NULL;
	r->cb(r->arg, rc == 0 ? NULL : err, (const char *const *)r->names,
	    rc == 0 ? values : NULL, r->n);
	resolve_free(r);
}

struct secrets_resolve *secrets_resolve_start(struct event_base *base,
    const struct mirror *m, secrets_resolved_fn cb, void *arg, char *err,
    size_t errlen)
{
	struct secrets_resolve *r = calloc(1, sizeof(*r));
	struct cfgprov_opts o;

	if (r == NULL || (r->mirror = strdup(m->name)) == NULL ||
	    (r->names = calloc(m->nconfigs + 1, sizeof(char *))) == NULL ||
	    (r->stored = calloc(m->nconfigs + 1, sizeof(char *))) == NULL) {
		snprintf(err, errlen, "out of memory");
		goto fail;
	}
	r->cb = cb;
	r->arg = arg;
	for (; r->n < m->nconfigs; r->n++) {
		const struct mcfg *c = &m->configs[r->n];

		if ((r->names[r->n] = strdup(c->name)) == NULL ||
		    (c->value != NULL &&
		    (r->stored[r->n] = strdup(c->value)) == NULL)) {
			r->n++;
			snprintf(err, errlen, "out of memory");
			goto fail;
		}
	}
	wire_opts(&o);
	for (size_t i = 0; i < r->n; i++)
		if (!secretbox_is_sealed(r->stored[i]) &&
		    cfgprov_files(r->names[i], r->stored[i], &o, add_path, r, err,
		    errlen) != 0)
			goto fail;
	if (r->oom) {
		snprintf(err, errlen, "out of memory");
		goto fail;
	}
	r->fl = fileload_start(base, (const char *const *)r->paths,
	    (const char *const *)r->paths, r->npaths, o.dirs, CFGPROV_MAX_VALUE,
	    loaded, r, err, errlen);
	if (r->fl == NULL)
		goto fail;
	return r;
fail:
	if (r != NULL)
		resolve_free(r);
	return NULL;
}

void secrets_resolve_cancel(struct secrets_resolve *r)
{
	if (r == NULL)
		return;
	/* The worker may still hold the load: it frees its own part. */
	fileload_cancel(r->fl);
	resolve_free(r);
}

int secrets_resolve_map(const char *what, const struct config_map *map,
    char ***values, char *err, size_t errlen)
{
	const struct cfgprov_opts o = { .allowed = CFGPROV_ALL };
	char **v, name[512];

	*values = NULL;
	if ((v = calloc(map->n + 1, sizeof(*v))) == NULL) {
		snprintf(err, errlen, "out of memory");
		return -1;
	}
	for (size_t i = 0; i < map->n; i++) {
		snprintf(name, sizeof(name), "%s.%s", what, map->names[i]);
		if (cfgprov_resolve(name, map->values[i], &o, &v[i], err,
		    errlen) != 0) {
			secrets_values_free(v, map->n);
			return -1;
		}
	}
	*values = v;
	return 0;
}
