/*
 * daemonconf_int.h: the key table of daemonconf, shared by its two source
 * files (daemonconf.c parses, daemonconf_doc.c writes).  Not for other
 * modules: they use daemonconf.h.
 */
#ifndef MIRRORD_DAEMONCONF_INT_H
#define MIRRORD_DAEMONCONF_INT_H

#include <stddef.h>
#include <stdint.h>

#include "daemonconf.h"

enum ctype {
	CT_STRING,   /* char *, non-empty */
	CT_INT,      /* int64_t within [lo, hi] */
	CT_BOOL,     /* int */
	CT_DURATION, /* int64_t milliseconds within [lo, hi] */
	CT_SIZE,     /* int64_t bytes within [lo, hi] */
	CT_ENUM,     /* int: index into choices */
	CT_HOSTPORT, /* struct config_hostport */
	CT_HOSTLIST, /* char *: "host:port,host:port" */
	CT_MAP,      /* struct config_map of client properties */
	CT_PATHLIST, /* struct config_list of absolute paths */
	CT_PRINCIPALS, /* struct config_principals (authz principals) */
	CT_ACLS,     /* struct config_acls (authorization rules) */
};

#define KF_RELOAD 0x1   /* SIGHUP may change it */
#define KF_REQUIRED 0x2 /* no default: the file must set it */
#define KF_PORT0 0x4    /* host:port may use port 0 (a free port) */
#define KF_EMPTY 0x8    /* "" is a valid value meaning "off"/"derive it" */

struct ckey {
	const char *path;
	enum ctype type;
	size_t off;            /* offsetof(struct config, field) */
	const char *def;       /* default, written as in YAML; NULL: unset */
	int64_t lo, hi;        /* CT_INT, CT_DURATION, CT_SIZE */
	const char *choices;   /* CT_ENUM: "a|b|c" */
	unsigned flags;
	const char *example;   /* what the example file shows when no default */
	const char *desc;      /* one paragraph, sentences end in ". " */
};

extern const struct ckey config_keys[];
extern const size_t config_nkeys;

/* The field of key k inside a struct config. */
void *config_field(const void *cfg, const struct ckey *k);
const struct ckey *config_key_find(const char *path);
/* Length of the section part of a key path: 6 for "server.listen". */
size_t config_section_len(const char *path);
/* "integer", "one of a|b|c", ... */
const char *config_type_name(const struct ckey *k, char *buf, size_t len);
/* A bound or size as written in the docs: "1GiB", "100". */
void config_format_bound(const struct ckey *k, int64_t v, char *buf, size_t len);
/* "from 1KiB to 1GiB", "from 100 to 3600000 ms". */
void config_range_text(const struct ckey *k, char *buf, size_t len);

#endif
