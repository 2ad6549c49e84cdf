/*
 * kpgen: turn the proto/ YAML message specs into kp_gen.h and kp_gen.c.
 *
 *   kpgen -o OUTDIR SPEC.yaml...
 *
 * The spec model is Kafka's message schema model written as YAML (see
 * proto/README.md): a message has a name, an apiKey, a type (request or
 * response), validVersions, flexibleVersions and a list of fields; a field
 * has a name, a type (int8..int64, uint16, uint32, float64, bool, string,
 * bytes, records, uuid, a struct name with its own fields, or an array []T
 * of any of those), versions, and optionally nullableVersions,
 * taggedVersions + tag, default, ignorable and about.  A request spec may
 * say servedVersions, the range mirrord answers.
 *
 * For every message the generator emits a C struct, _init (defaults),
 * _decode (struct kr, arena) and _encode (struct kw) for all valid versions,
 * and an ApiKey table pairing requests with responses.  kp_gen_fill.[ch],
 * for the tests only, fill any message with non-default values.  The generated code
 * leans on lib/kbuf for every byte it reads or writes.
 *
 * Every spec error is reported as file:line:column with what is wrong, and
 * all of them are reported before exiting non-zero.  This is a build tool
 * that runs once and exits: it does not free what it allocates.
 */
#include "config.h"

#include <ctype.h>
#include <errno.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <yaml.h>

#define VMAX 0x7fff /* "N+" */

enum kind {
	K_INT8, K_INT16, K_INT32, K_INT64, K_UINT16, K_UINT32, K_FLOAT64,
	K_BOOL, K_STRING, K_BYTES, K_RECORDS, K_UUID, K_STRUCT
};

static const struct {
	const char *name;
	enum kind kind;
	const char *ctype;
} prims[] = {
	{ "int8", K_INT8, "int8_t" },
	{ "int16", K_INT16, "int16_t" },
	{ "int32", K_INT32, "int32_t" },
	{ "int64", K_INT64, "int64_t" },
	{ "uint16", K_UINT16, "uint16_t" },
	{ "uint32", K_UINT32, "uint32_t" },
	{ "float64", K_FLOAT64, "double" },
	{ "bool", K_BOOL, "int" },
	{ "string", K_STRING, "struct kstr" },
	{ "bytes", K_BYTES, "struct kbytes" },
	{ "records", K_RECORDS, "struct kbytes" },
	{ "uuid", K_UUID, "struct kuuid" },
};

struct vrange {
	int lo, hi; /* lo > hi: none */
};

struct sdef;

struct field {
	char *name, *snake;
	enum kind kind;
	int is_array;
	struct sdef *sub; /* K_STRUCT */
	struct vrange versions, nullable, tagged;
	int tag;          /* -1: not tagged */
	char *deflt;      /* NULL: the type's zero value */
	int ignorable;
	char *about;
	const char *where; /* file:line:col of the field, for messages */
};

struct sdef {
	char *name;  /* CamelCase, as written in the spec */
	char *cname; /* kp_<message>[_<struct>] */
	struct field *fields;
	int nfields;
	int used_as_value; /* appears as a non-array struct field */
};

struct msg {
	char *name, *snake, *file;
	int api_key; /* -1: none */
	int is_request;
	struct vrange valid, flexible, served;
	struct sdef *top;
	struct sdef **structs; /* inner first; top last */
	int nstructs;
};

static int nerrors;
static const char *cur_file;

static void *xcalloc(size_t n, size_t sz)
{
	void *p = calloc(n ? n : 1, sz ? sz : 1);

	if (p == NULL) {
		fprintf(stderr, "kpgen: out of memory\n");
		exit(2);
	}
	return p;
}

static void *xrealloc(void *p, size_t n)
{
	p = realloc(p, n ? n : 1);
	if (p == NULL) {
		fprintf(stderr, "kpgen: out of memory\n");
		exit(2);
	}
	return p;
}

static char *xstrdup(const char *s)
{
	char *d = xcalloc(strlen(s) + 1, 1);

	memcpy(d, s, strlen(s));
	return d;
}

static char *xprintf(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static char *xprintf(const char *fmt, ...)
{
	va_list ap;
	char *s;
	int n;

	va_start(ap, fmt);
	n = vsnprintf(NULL, 0, fmt, ap);
	va_end(ap);
	s = xcalloc((size_t)n + 1, 1);
	va_start(ap, fmt);
	vsnprintf(s, (size_t)n + 1, fmt, ap);
	va_end(ap);
	return s;
}

static void spec_error(const yaml_node_t *n, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void spec_error(const yaml_node_t *n, const char *fmt, ...)
{
	va_list ap;

	if (n != NULL)
		fprintf(stderr, "%s:%zu:%zu: ", cur_file, n->start_mark.line + 1,
		    n->start_mark.column + 1);
	else
		fprintf(stderr, "%s: ", cur_file);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
	nerrors++;
}

/* ---- names ---------------------------------------------------------- */

/* "ThrottleTimeMs" -> "throttle_time_ms", "IsrNodes" -> "isr_nodes". */
static char *snake(const char *camel)
{
	size_t n = strlen(camel);
	char *s = xcalloc(2 * n + 1, 1), *d = s;

	for (size_t i = 0; i < n; i++) {
		unsigned char c = (unsigned char)camel[i];

		if (isupper(c) && i > 0) {
			unsigned char prev = (unsigned char)camel[i - 1];
			unsigned char next = (unsigned char)camel[i + 1];

			if (islower(prev) || isdigit(prev) || (isupper(prev) && islower(next)))
				*d++ = '_';
		}
		*d++ = (char)tolower(c);
	}
	*d = '\0';
	return s;
}

static char *upper(const char *s)
{
	char *u = xstrdup(s);

	for (char *p = u; *p; p++)
		*p = (char)toupper((unsigned char)*p);
	return u;
}

/* ---- YAML helpers --------------------------------------------------- */

static yaml_document_t doc;

static const char *scalar(const yaml_node_t *n)
{
	if (n == NULL || n->type != YAML_SCALAR_NODE)
		return NULL;
	return (const char *)n->data.scalar.value;
}

static yaml_node_t *map_get(yaml_node_t *map, const char *key)
{
	if (map == NULL || map->type != YAML_MAPPING_NODE)
		return NULL;
	for (yaml_node_pair_t *p = map->data.mapping.pairs.start; p < map->data.mapping.pairs.top; p++) {
		const char *k = scalar(yaml_document_get_node(&doc, p->key));

		if (k != NULL && strcmp(k, key) == 0)
			return yaml_document_get_node(&doc, p->value);
	}
	return NULL;
}

/* Report keys of map not in allowed (NULL-terminated). */
static void check_keys(yaml_node_t *map, const char *what, const char *const *allowed)
{
	if (map == NULL || map->type != YAML_MAPPING_NODE)
		return;
	for (yaml_node_pair_t *p = map->data.mapping.pairs.start; p < map->data.mapping.pairs.top; p++) {
		yaml_node_t *kn = yaml_document_get_node(&doc, p->key);
		const char *k = scalar(kn);
		int ok = 0;

		for (const char *const *a = allowed; k && *a; a++)
			ok |= strcmp(k, *a) == 0;
		if (!ok)
			spec_error(kn, "unknown key '%s' in %s", k ? k : "?", what);
	}
}

static int parse_int(const char *s, long lo, long hi, long *out)
{
	char *end;
	long v;

	if (s == NULL || *s == '\0')
		return -1;
	errno = 0;
	v = strtol(s, &end, 10);
	if (errno != 0 || *end != '\0' || v < lo || v > hi)
		return -1;
	*out = v;
	return 0;
}

/* "none", "3", "3+", "3-7". */
static struct vrange parse_versions(yaml_node_t *n, const char *what, struct vrange dflt)
{
	struct vrange v = dflt;
	const char *s = scalar(n);
	char buf[32], *dash;
	long lo, hi;

	if (n == NULL)
		return dflt;
	if (s == NULL || strlen(s) >= sizeof(buf)) {
		spec_error(n, "%s must be a version range like \"0+\", \"1-3\" or \"none\"", what);
		return dflt;
	}
	if (strcmp(s, "none") == 0)
		return (struct vrange){ 1, 0 };
	strcpy(buf, s);
	if (buf[0] != '\0' && buf[strlen(buf) - 1] == '+') {
		buf[strlen(buf) - 1] = '\0';
		if (parse_int(buf, 0, VMAX, &lo) != 0)
			goto bad;
		return (struct vrange){ (int)lo, VMAX };
	}
	dash = strchr(buf, '-');
	if (dash != NULL) {
		*dash = '\0';
		if (parse_int(buf, 0, VMAX, &lo) != 0 || parse_int(dash + 1, 0, VMAX, &hi) != 0 || hi < lo)
			goto bad;
		return (struct vrange){ (int)lo, (int)hi };
	}
	if (parse_int(buf, 0, VMAX, &lo) != 0)
		goto bad;
	return (struct vrange){ (int)lo, (int)lo };
bad:
	spec_error(n, "%s: '%s' is not a version range like \"0+\", \"1-3\" or \"none\"", what, s);
	return v;
}

static int vr_empty(struct vrange v)
{
	return v.lo > v.hi;
}

static struct vrange vr_and(struct vrange a, struct vrange b)
{
	struct vrange r = { a.lo > b.lo ? a.lo : b.lo, a.hi < b.hi ? a.hi : b.hi };

	return r;
}

static int vr_subset(struct vrange a, struct vrange b)
{
	return vr_empty(a) || (!vr_empty(b) && a.lo >= b.lo && a.hi <= b.hi);
}

/*
 * A C condition true for the versions in v, given that the version is
 * already known to be inside valid.
 */
static char *vcond(struct vrange v, struct vrange valid)
{
	struct vrange x = vr_and(v, valid);

	if (vr_empty(x))
		return xstrdup("0");
	if (x.lo <= valid.lo && x.hi >= valid.hi)
		return xstrdup("1");
	if (x.lo <= valid.lo)
		return xprintf("(v <= %d)", x.hi);
	if (x.hi >= valid.hi)
		return xprintf("(v >= %d)", x.lo);
	if (x.lo == x.hi)
		return xprintf("(v == %d)", x.lo);
	return xprintf("(v >= %d && v <= %d)", x.lo, x.hi);
}

/* ---- spec loading --------------------------------------------------- */

static struct msg **msgs;
static int nmsgs;

static const char *const msg_keys[] = { "name", "apiKey", "type", "validVersions",
	"flexibleVersions", "servedVersions", "fields", "about", "listeners", NULL };
static const char *const field_keys[] = { "name", "type", "versions", "nullableVersions",
	"taggedVersions", "tag", "default", "ignorable", "about", "fields", "entityType",
	"mapKey", NULL };

static struct sdef *load_struct(struct msg *m, const char *name, yaml_node_t *fields,
    yaml_node_t *where);

static int valid_default(struct field *f, yaml_node_t *n)
{
	const char *d = f->deflt;
	long long ll;
	char *end;

	if (strcmp(d, "null") == 0) {
		if (!(f->is_array || f->kind == K_STRING || f->kind == K_BYTES || f->kind == K_RECORDS)) {
			spec_error(n, "field %s: default null needs a string, bytes or array type", f->name);
			return 0;
		}
		if (vr_empty(f->nullable)) {
			spec_error(n, "field %s: default null on a field that is never nullable", f->name);
			return 0;
		}
		return 1;
	}
	if (f->is_array) {
		spec_error(n, "field %s: an array default may only be null", f->name);
		return 0;
	}
	switch (f->kind) {
	case K_BOOL:
		if (strcmp(d, "true") != 0 && strcmp(d, "false") != 0) {
			spec_error(n, "field %s: bool default must be true or false", f->name);
			return 0;
		}
		return 1;
	case K_INT8: case K_INT16: case K_INT32: case K_INT64: case K_UINT16: case K_UINT32:
		errno = 0;
		ll = strtoll(d, &end, 0);
		if (errno != 0 || *end != '\0' || end == d) {
			spec_error(n, "field %s: default '%s' is not an integer", f->name, d);
			return 0;
		}
		{
			long long lo = f->kind == K_INT8 ? INT8_MIN : f->kind == K_INT16 ? INT16_MIN :
			    f->kind == K_INT32 ? INT32_MIN : f->kind == K_INT64 ? INT64_MIN : 0;
			long long hi = f->kind == K_INT8 ? INT8_MAX : f->kind == K_INT16 ? INT16_MAX :
			    f->kind == K_INT32 ? INT32_MAX : f->kind == K_INT64 ? INT64_MAX :
			    f->kind == K_UINT16 ? UINT16_MAX : (long long)UINT32_MAX;

			if (ll < lo || ll > hi) {
				spec_error(n, "field %s: default %s out of range for the type", f->name, d);
				return 0;
			}
		}
		return 1;
	case K_FLOAT64:
		(void)strtod(d, &end);
		if (*end != '\0' || end == d) {
			spec_error(n, "field %s: default '%s' is not a number", f->name, d);
			return 0;
		}
		return 1;
	case K_STRING:
		for (const char *p = d; *p; p++)
			if (!isprint((unsigned char)*p) || *p == '"' || *p == '\\') {
				spec_error(n, "field %s: string default may hold printable characters other than quote and backslash only", f->name);
				return 0;
			}
		return 1;
	default:
		spec_error(n, "field %s: no default is allowed for this type", f->name);
		return 0;
	}
}

static void load_field(struct msg *m, struct field *f, yaml_node_t *fn)
{
	yaml_node_t *tn = map_get(fn, "type"), *n;
	const char *name = scalar(map_get(fn, "name"));
	const char *type = scalar(tn);
	const char *base;

	f->where = xprintf("%s:%zu", cur_file, fn->start_mark.line + 1);
	f->tag = -1;
	check_keys(fn, "a field", field_keys);
	if (name == NULL || !isupper((unsigned char)name[0])) {
		spec_error(fn, "field needs a CamelCase name");
		name = "Invalid";
	}
	for (const char *p = name; *p; p++)
		if (!isalnum((unsigned char)*p)) {
			spec_error(fn, "field name '%s' must be letters and digits only", name);
			break;
		}
	f->name = xstrdup(name);
	f->snake = snake(name);
	if (type == NULL) {
		spec_error(fn, "field %s needs a type", name);
		type = "int8";
	}
	f->is_array = strncmp(type, "[]", 2) == 0;
	base = f->is_array ? type + 2 : type;
	f->kind = K_STRUCT;
	for (size_t i = 0; i < sizeof(prims) / sizeof(prims[0]); i++)
		if (strcmp(prims[i].name, base) == 0)
			f->kind = prims[i].kind;
	n = map_get(fn, "fields");
	if (f->kind == K_STRUCT) {
		if (!isupper((unsigned char)base[0]) || n == NULL)
			spec_error(tn, "field %s: type '%s' is neither a primitive type nor a struct with fields",
			    name, type);
		else
			f->sub = load_struct(m, base, n, fn);
		if (f->sub != NULL && !f->is_array)
			f->sub->used_as_value = 1;
	} else if (n != NULL) {
		spec_error(n, "field %s: only struct types have fields", name);
	}
	if (f->is_array && (f->kind == K_RECORDS || f->kind == K_BYTES))
		spec_error(tn, "field %s: arrays of bytes/records are not supported", name);

	f->versions = parse_versions(map_get(fn, "versions"), "versions", (struct vrange){ 1, 0 });
	if (map_get(fn, "versions") == NULL)
		spec_error(fn, "field %s needs versions", name);
	f->nullable = parse_versions(map_get(fn, "nullableVersions"), "nullableVersions", (struct vrange){ 1, 0 });
	if (!vr_empty(f->nullable) && !(f->is_array || f->kind == K_STRING || f->kind == K_BYTES ||
	    f->kind == K_RECORDS))
		spec_error(fn, "field %s: only strings, bytes, records and arrays can be nullable", name);
	if (!vr_subset(f->nullable, f->versions))
		spec_error(fn, "field %s: nullableVersions outside versions", name);

	n = map_get(fn, "tag");
	if (n != NULL) {
		long t;

		if (parse_int(scalar(n), 0, INT32_MAX, &t) != 0)
			spec_error(n, "field %s: tag must be a non-negative integer", name);
		else
			f->tag = (int)t;
		f->tagged = parse_versions(map_get(fn, "taggedVersions"), "taggedVersions", f->versions);
		if (!vr_subset(f->tagged, f->versions) || f->tagged.lo != f->versions.lo ||
		    f->tagged.hi != f->versions.hi)
			spec_error(fn, "field %s: taggedVersions must equal versions", name);
		if (!vr_subset(f->tagged, m->flexible))
			spec_error(fn, "field %s: tagged in versions that are not flexible", name);
	} else if (map_get(fn, "taggedVersions") != NULL) {
		spec_error(fn, "field %s: taggedVersions without a tag", name);
	}
	f->tagged = f->tag >= 0 ? f->tagged : (struct vrange){ 1, 0 };

	n = map_get(fn, "default");
	if (n != NULL) {
		f->deflt = xstrdup(scalar(n) ? scalar(n) : "");
		if (!valid_default(f, n))
			f->deflt = NULL;
	}
	n = map_get(fn, "ignorable");
	if (n != NULL) {
		const char *s = scalar(n);

		if (s == NULL || (strcmp(s, "true") != 0 && strcmp(s, "false") != 0))
			spec_error(n, "field %s: ignorable must be true or false", name);
		f->ignorable = s != NULL && strcmp(s, "true") == 0;
	}
	f->about = scalar(map_get(fn, "about")) ? xstrdup(scalar(map_get(fn, "about"))) : NULL;
}

static struct sdef *load_struct(struct msg *m, const char *name, yaml_node_t *fields,
    yaml_node_t *where)
{
	struct sdef *s = xcalloc(1, sizeof(*s));

	s->name = xstrdup(name);
	if (where == NULL) {
		s->cname = xprintf("kp_%s", m->snake);
	} else {
		/* "MetadataResponseBroker" in MetadataResponse is just "broker". */
		const char *shortname = name;

		if (strncmp(name, m->name, strlen(m->name)) == 0 && isupper((unsigned char)name[strlen(m->name)]))
			shortname = name + strlen(m->name);
		s->cname = xprintf("kp_%s_%s", m->snake, snake(shortname));
		for (int i = 0; i < m->nstructs; i++)
			if (strcmp(m->structs[i]->cname, s->cname) == 0)
				spec_error(where, "struct %s is defined twice in %s", name, m->name);
	}
	if (fields == NULL || fields->type != YAML_SEQUENCE_NODE) {
		spec_error(fields ? fields : where, "%s: fields must be a list", name);
	} else {
		int cap = (int)(fields->data.sequence.items.top - fields->data.sequence.items.start);

		s->fields = xcalloc((size_t)cap, sizeof(*s->fields));
		for (yaml_node_item_t *it = fields->data.sequence.items.start;
		     it < fields->data.sequence.items.top; it++) {
			yaml_node_t *fn = yaml_document_get_node(&doc, *it);
			struct field *f = &s->fields[s->nfields++];

			if (fn->type != YAML_MAPPING_NODE) {
				spec_error(fn, "a field must be a mapping");
				s->nfields--;
				continue;
			}
			load_field(m, f, fn);
		}
		/* Names and tags are unique within a struct. */
		for (int i = 0; i < s->nfields; i++)
			for (int j = i + 1; j < s->nfields; j++) {
				if (strcmp(s->fields[i].snake, s->fields[j].snake) == 0)
					spec_error(fields, "%s: field %s appears twice", name, s->fields[i].name);
				if (s->fields[i].tag >= 0 && s->fields[i].tag == s->fields[j].tag)
					spec_error(fields, "%s: tag %d used by %s and %s", name, s->fields[i].tag,
					    s->fields[i].name, s->fields[j].name);
			}
	}
	m->structs = xrealloc(m->structs, sizeof(*m->structs) * (size_t)(m->nstructs + 1));
	m->structs[m->nstructs++] = s;
	return s;
}

static void load_spec(const char *path)
{
	FILE *fp = fopen(path, "rb");
	yaml_parser_t parser;
	yaml_node_t *root, *n;
	struct msg *m;
	const char *s;
	long key;

	cur_file = path;
	if (fp == NULL) {
		fprintf(stderr, "kpgen: %s: %s\n", path, strerror(errno));
		nerrors++;
		return;
	}
	yaml_parser_initialize(&parser);
	yaml_parser_set_input_file(&parser, fp);
	if (!yaml_parser_load(&parser, &doc)) {
		fprintf(stderr, "%s:%zu:%zu: YAML error: %s\n", path, parser.problem_mark.line + 1,
		    parser.problem_mark.column + 1, parser.problem ? parser.problem : "?");
		nerrors++;
		goto out;
	}
	root = yaml_document_get_root_node(&doc);
	if (root == NULL || root->type != YAML_MAPPING_NODE) {
		spec_error(root, "a message spec must be a mapping");
		goto out_doc;
	}
	check_keys(root, "a message", msg_keys);
	m = xcalloc(1, sizeof(*m));
	m->file = xstrdup(path);
	s = scalar(map_get(root, "name"));
	if (s == NULL || !isupper((unsigned char)s[0])) {
		spec_error(root, "message needs a CamelCase name");
		s = "Invalid";
	}
	m->name = xstrdup(s);
	m->snake = snake(s);
	s = scalar(map_get(root, "type"));
	if (s == NULL || (strcmp(s, "request") != 0 && strcmp(s, "response") != 0))
		spec_error(root, "type must be request or response");
	m->is_request = s != NULL && strcmp(s, "request") == 0;
	n = map_get(root, "apiKey");
	if (n == NULL || parse_int(scalar(n), 0, INT16_MAX, &key) != 0) {
		spec_error(n ? n : root, "apiKey must be an integer 0-32767");
		key = 0;
	}
	m->api_key = (int)key;
	if (m->is_request && strlen(m->name) > 7 && strcmp(m->name + strlen(m->name) - 7, "Request") != 0)
		spec_error(root, "request %s: the name must end in Request", m->name);
	if (!m->is_request && strlen(m->name) > 8 && strcmp(m->name + strlen(m->name) - 8, "Response") != 0)
		spec_error(root, "response %s: the name must end in Response", m->name);
	{
		int before = nerrors;

		n = map_get(root, "validVersions");
		m->valid = parse_versions(n, "validVersions", (struct vrange){ 1, 0 });
		/* One report per mistake: a range that did not parse was reported. */
		if (nerrors == before && (vr_empty(m->valid) || m->valid.hi == VMAX))
			spec_error(n ? n : root, "validVersions must be a bounded, non-empty range");
	}
	m->flexible = parse_versions(map_get(root, "flexibleVersions"), "flexibleVersions", (struct vrange){ 1, 0 });
	if (map_get(root, "flexibleVersions") == NULL)
		spec_error(root, "flexibleVersions is required (\"none\" if never flexible)");
	if (!vr_empty(m->flexible) && m->flexible.hi != VMAX)
		spec_error(root, "flexibleVersions must be open-ended (\"N+\") or none");
	m->served = parse_versions(map_get(root, "servedVersions"), "servedVersions", (struct vrange){ 1, 0 });
	if (!m->is_request && map_get(root, "servedVersions") != NULL)
		spec_error(root, "servedVersions belongs in the request spec");
	if (!vr_subset(m->served, m->valid))
		spec_error(root, "servedVersions outside validVersions");
	m->top = load_struct(m, m->name, map_get(root, "fields"), NULL);
	/* Field versions inside validVersions. */
	for (int i = 0; i < m->nstructs; i++)
		for (int j = 0; j < m->structs[i]->nfields; j++) {
			struct field *f = &m->structs[i]->fields[j];

			if (!vr_empty(f->versions) && f->versions.hi != VMAX && f->versions.hi > m->valid.hi)
				fprintf(stderr, "%s: warning: %s.%s versions reach past validVersions\n",
				    f->where, m->name, f->name);
		}
	for (int i = 0; i < nmsgs; i++)
		if (strcmp(msgs[i]->name, m->name) == 0)
			spec_error(root, "message %s is defined twice (also in %s)", m->name, msgs[i]->file);
	msgs = xrealloc(msgs, sizeof(*msgs) * (size_t)(nmsgs + 1));
	msgs[nmsgs++] = m;
out_doc:
	yaml_document_delete(&doc);
out:
	yaml_parser_delete(&parser);
	fclose(fp);
}

/* ---- emission helpers ----------------------------------------------- */

static FILE *H, *C;

static const char *ctype(const struct field *f)
{
	if (f->kind == K_STRUCT)
		return xprintf("struct %s", f->sub->cname);
	for (size_t i = 0; i < sizeof(prims) / sizeof(prims[0]); i++)
		if (prims[i].kind == f->kind)
			return prims[i].ctype;
	return "?";
}

static int is_stringish(enum kind k)
{
	return k == K_STRING || k == K_BYTES || k == K_RECORDS;
}

/* The C expression of a field's default (scalars only). */
static char *default_expr(const struct field *f)
{
	const char *d = f->deflt;

	switch (f->kind) {
	case K_BOOL:
		return xstrdup(d && strcmp(d, "true") == 0 ? "1" : "0");
	case K_INT64:
		return xprintf("INT64_C(%s)", d ? d : "0");
	case K_UINT32:
		return xprintf("UINT32_C(%s)", d ? d : "0");
	case K_INT8: case K_INT16: case K_INT32: case K_UINT16:
		return xprintf("%s", d ? d : "0");
	case K_FLOAT64:
		return xprintf("%s", d ? d : "0.0");
	case K_STRING:
		if (d && strcmp(d, "null") == 0)
			return xstrdup("KSTR_NULL");
		return xprintf("((struct kstr){ \"%s\", %zu })", d ? d : "", d ? strlen(d) : 0);
	case K_BYTES: case K_RECORDS:
		if (d && strcmp(d, "null") == 0)
			return xstrdup("KBYTES_NULL");
		return xstrdup("((struct kbytes){ NULL, 0 })");
	default:
		return NULL;
	}
}

/* A C expression true when field f of object expression obj is not its default. */
static char *nondefault_expr(const struct field *f, const char *obj)
{
	const char *d = f->deflt;

	if (f->is_array) {
		if (d && strcmp(d, "null") == 0)
			return xprintf("(%s%s_n >= 0)", obj, f->snake);
		return xprintf("(%s%s_n != 0)", obj, f->snake);
	}
	switch (f->kind) {
	case K_STRING:
		if (d && strcmp(d, "null") == 0)
			return xprintf("(%s%s.len >= 0)", obj, f->snake);
		return xprintf("!kstr_eq(%s%s, \"%s\")", obj, f->snake, d ? d : "");
	case K_BYTES: case K_RECORDS:
		return xprintf("(%s%s.len > 0)", obj, f->snake);
	case K_UUID:
		return xprintf("!kuuid_is_zero(&%s%s)", obj, f->snake);
	case K_STRUCT:
		return xprintf("!%s_is_default(&%s%s)", f->sub->cname, obj, f->snake);
	default:
		return xprintf("(%s%s != %s)", obj, f->snake, default_expr(f));
	}
}

/* ---- header --------------------------------------------------------- */

static void emit_struct_decl(const struct sdef *s)
{
	fprintf(H, "struct %s {\n", s->cname);
	for (int i = 0; i < s->nfields; i++) {
		const struct field *f = &s->fields[i];
		char vbuf[64];

		if (f->versions.hi == VMAX)
			snprintf(vbuf, sizeof(vbuf), "v%d+", f->versions.lo);
		else
			snprintf(vbuf, sizeof(vbuf), "v%d-%d", f->versions.lo, f->versions.hi);
		if (f->is_array) {
			fprintf(H, "\t%s *%s;\n\tint32_t %s_n; /* %s%s%s; -1 = null */\n", ctype(f), f->snake,
			    f->snake, vbuf, f->tag >= 0 ? ", tagged" : "",
			    vr_empty(f->nullable) ? "" : xprintf(", nullable v%d+", f->nullable.lo));
		} else {
			fprintf(H, "\t%s %s; /* %s%s%s */\n", ctype(f), f->snake, vbuf,
			    f->tag >= 0 ? xprintf(", tag %d", f->tag) : "",
			    vr_empty(f->nullable) ? "" : xprintf(", nullable v%d+", f->nullable.lo));
		}
	}
	if (s->nfields == 0)
		fprintf(H, "\tchar unused_; /* no fields: only the tagged-field section */\n");
	fprintf(H, "};\n");
}

static void emit_header(void)
{
	fprintf(H, "/* Generated by proto/kpgen from the proto/ YAML specs: do not edit. */\n"
	    "#ifndef MIRRORD_KP_GEN_H\n#define MIRRORD_KP_GEN_H\n\n"
	    "#include <stddef.h>\n#include <stdint.h>\n\n#include \"kbuf.h\"\n\n");
	/* ApiKey X-macro: (key, CONST_NAME, "Name") */
	fprintf(H, "#define KP_API_KEYS(X) \\\n");
	for (int i = 0; i < nmsgs; i++) {
		const struct msg *m = msgs[i];

		if (!m->is_request)
			continue;
		char *api = xstrdup(m->name);

		api[strlen(api) - 7] = '\0';
		fprintf(H, "\tX(%d, %s, \"%s\") \\\n", m->api_key, upper(snake(api)), api);
	}
	fprintf(H, "\n\nenum kp_api_key {\n#define X(key, NAME, name) KP_API_##NAME = (key),\n"
	    "\tKP_API_KEYS(X)\n#undef X\n};\n\n");
	for (int i = 0; i < nmsgs; i++) {
		const struct msg *m = msgs[i];

		fprintf(H, "/* %s (ApiKey %d), versions %d-%d", m->name, m->api_key, m->valid.lo, m->valid.hi);
		if (vr_empty(m->flexible))
			fprintf(H, ", never flexible */\n");
		else
			fprintf(H, ", flexible %d+ */\n", m->flexible.lo);
		for (int j = 0; j < m->nstructs; j++)
			emit_struct_decl(m->structs[j]);
		for (int j = 0; j < m->nstructs - 1; j++)
			fprintf(H, "void %s_init(struct %s *m);\n", m->structs[j]->cname, m->structs[j]->cname);
		fprintf(H, "void kp_%s_init(struct kp_%s *m);\n", m->snake, m->snake);
		fprintf(H, "int kp_%s_decode(struct kr *r, struct karena *a, int16_t version, struct kp_%s *m);\n",
		    m->snake, m->snake);
		fprintf(H, "int kp_%s_encode(struct kw *w, int16_t version, const struct kp_%s *m);\n\n",
		    m->snake, m->snake);
	}
	fprintf(H,
	    "typedef void (*kp_init_fn)(void *m);\n"
	    "typedef int (*kp_decode_fn)(struct kr *r, struct karena *a, int16_t version, void *m);\n"
	    "typedef int (*kp_encode_fn)(struct kw *w, int16_t version, const void *m);\n\n"
	    "/* One row per ApiKey with a request and a response spec. */\n"
	    "struct kp_api {\n"
	    "\tint16_t api_key;\n"
	    "\tconst char *name;\n"
	    "\tint16_t min_version, max_version; /* validVersions */\n"
	    "\tint16_t first_flexible;          /* -1: never flexible */\n"
	    "\tint16_t served_min, served_max;  /* -1, -1: mirrord does not serve it */\n"
	    "\tsize_t request_size, response_size;\n"
	    "\tkp_init_fn request_init, response_init;\n"
	    "\tkp_decode_fn request_decode, response_decode;\n"
	    "\tkp_encode_fn request_encode, response_encode;\n"
	    "};\n\n"
	    "extern const struct kp_api kp_api_table[];\n"
	    "extern const size_t kp_api_count;\n"
	    "/* The row for an ApiKey, or NULL. */\n"
	    "const struct kp_api *kp_api_find(int16_t api_key);\n"
	    "/* \"Metadata\"; \"Unknown\" for keys not in the table. */\n"
	    "const char *kp_api_name(int16_t api_key);\n\n"
	    "#endif\n");
}

/* ---- source: init / is_default -------------------------------------- */

static void emit_init(const struct sdef *s)
{
	fprintf(C, "void %s_init(struct %s *m)\n{\n\tmemset(m, 0, sizeof(*m));\n",
	    s->cname, s->cname);
	for (int i = 0; i < s->nfields; i++) {
		const struct field *f = &s->fields[i];

		if (f->is_array) {
			if (f->deflt && strcmp(f->deflt, "null") == 0)
				fprintf(C, "\tm->%s_n = -1;\n", f->snake);
			continue;
		}
		if (f->kind == K_STRUCT) {
			fprintf(C, "\t%s_init(&m->%s);\n", f->sub->cname, f->snake);
			continue;
		}
		if (f->kind == K_UUID)
			continue;
		fprintf(C, "\tm->%s = %s;\n", f->snake, default_expr(f));
	}
	fprintf(C, "}\n\n");
}

static void emit_is_default(const struct sdef *s)
{
	fprintf(C, "static KP_UNUSED int %s_is_default(const struct %s *m)\n{\n\treturn 1", s->cname, s->cname);
	for (int i = 0; i < s->nfields; i++)
		fprintf(C, "\n\t    && !%s", nondefault_expr(&s->fields[i], "m->"));
	fprintf(C, ";\n}\n\n");
}

/* ---- source: read and write ----------------------------------------- */

/*
 * Conditions are folded at generation time: "1" and "0" (always / never in
 * this message's versions) produce no run-time test.
 */
static int is_one(const char *c)
{
	return strcmp(c, "1") == 0;
}

static int is_zero(const char *c)
{
	return strcmp(c, "0") == 0;
}

/* "if (cond) {" unless cond is always true; returns the body's indentation. */
static const char *open_if(const char *cond, const char *ind)
{
	if (is_one(cond))
		return ind;
	fprintf(C, "%sif (%s) {\n", ind, cond);
	return xprintf("%s\t", ind);
}

static void close_if(const char *cond, const char *ind)
{
	if (!is_one(cond))
		fprintf(C, "%s}\n", ind);
}

/* a when flex holds, else b; folded when flex is constant. */
static char *flexsel(const char *flex, const char *a, const char *b)
{
	if (is_one(flex))
		return xstrdup(a);
	if (is_zero(flex))
		return xstrdup(b);
	return xprintf("%s ? %s : %s", flex, a, b);
}

/*
 * Read one value of field f's element kind into lvalue lv with reader rd.
 * nullok: C condition under which a null string/bytes is allowed.
 */
static void emit_read_value(const struct msg *m, const struct field *f, const char *lv,
    const char *rd, const char *flex, const char *nullok, const char *ind)
{
	static const char *const fn[] = {
		[K_INT8] = "kr_i8", [K_INT16] = "kr_i16", [K_INT32] = "kr_i32",
		[K_INT64] = "kr_i64", [K_UINT16] = "kr_u16", [K_UINT32] = "kr_u32",
		[K_FLOAT64] = "kr_f64", [K_BOOL] = "kr_bool",
	};

	switch (f->kind) {
	case K_UUID:
		fprintf(C, "%skr_uuid(%s, &%s);\n", ind, rd, lv);
		break;
	case K_STRUCT:
		fprintf(C, "%s%s_read(%s, a, v, &%s);\n", ind, f->sub->cname, rd, lv);
		break;
	case K_STRING: case K_BYTES: case K_RECORDS: {
		const char *t = f->kind == K_STRING ? "str" : "bytes";
		char *call = flexsel(flex, xprintf("kr_c%s(%s)", t, rd), xprintf("kr_%s(%s)", t, rd));

		if (is_one(nullok)) {
			fprintf(C, "%s%s = %s;\n", ind, lv, call);
			break;
		}
		fprintf(C, "%s{\n%s\tsize_t voff = kr_off(%s);\n\n", ind, ind, rd);
		fprintf(C, "%s\t%s = %s;\n", ind, lv, call);
		if (is_zero(nullok))
			fprintf(C, "%s\tif (%s.len < 0)\n", ind, lv);
		else
			fprintf(C, "%s\tif (%s.len < 0 && !%s)\n", ind, lv, nullok);
		fprintf(C, "%s\t\tkr_fail_at(%s, voff, \"%s.%s: null in a non-nullable field\");\n",
		    ind, rd, m->name, f->name);
		fprintf(C, "%s}\n", ind);
		break;
	}
	default:
		fprintf(C, "%s%s = %s(%s);\n", ind, lv, fn[f->kind], rd);
		break;
	}
}

/* Read field f (array or scalar) of m-> with reader rd. */
static void emit_read_field(const struct msg *m, const struct field *f, const char *rd,
    const char *flex, const char *ind)
{
	char *nullok = vcond(f->nullable, m->valid);

	if (!f->is_array) {
		emit_read_value(m, f, xprintf("m->%s", f->snake), rd, flex, nullok, ind);
		return;
	}
	fprintf(C, "%s{\n", ind);
	fprintf(C, "%s\tsize_t aoff = kr_off(%s);\n", ind, rd);
	fprintf(C, "%s\tint32_t n = %s;\n\n", ind,
	    flexsel(flex, xprintf("kr_carray(%s)", rd), xprintf("kr_array(%s)", rd)));
	if (!is_one(nullok)) {
		if (is_zero(nullok))
			fprintf(C, "%s\tif (n < 0)\n", ind);
		else
			fprintf(C, "%s\tif (n < 0 && !%s)\n", ind, nullok);
		fprintf(C, "%s\t\tkr_fail_at(%s, aoff, \"%s.%s: null array in a non-nullable field\");\n",
		    ind, rd, m->name, f->name);
	}
	fprintf(C, "%s\tm->%s_n = %s->err ? 0 : n;\n", ind, f->snake, rd);
	fprintf(C, "%s\tif (m->%s_n > 0) {\n", ind, f->snake);
	fprintf(C, "%s\t\tm->%s = kp_alloc_array(a, m->%s_n, sizeof(*m->%s));\n", ind, f->snake,
	    f->snake, f->snake);
	fprintf(C, "%s\t\tif (m->%s == NULL) {\n", ind, f->snake);
	fprintf(C, "%s\t\t\tkr_fail_at(%s, aoff, \"%s.%s: array does not fit in the decode arena\");\n",
	    ind, rd, m->name, f->name);
	fprintf(C, "%s\t\t\tm->%s_n = 0;\n%s\t\t}\n", ind, f->snake, ind);
	fprintf(C, "%s\t\tfor (int32_t i = 0; i < m->%s_n && !%s->err; i++)%s\n", ind, f->snake, rd,
	    is_stringish(f->kind) ? " {" : "");
	emit_read_value(m, f, xprintf("m->%s[i]", f->snake), rd, flex, "0",
	    xprintf("%s\t\t\t", ind));
	if (is_stringish(f->kind))
		fprintf(C, "%s\t\t}\n", ind);
	fprintf(C, "%s\t}\n%s}\n", ind, ind);
}

static void emit_read_tags(const struct msg *m, const struct sdef *s, const char *flex)
{
	const char *ind;
	int ntagged = 0;

	if (is_zero(flex))
		return;
	for (int i = 0; i < s->nfields; i++)
		ntagged += s->fields[i].tag >= 0;
	ind = open_if(flex, "\t");
	if (ntagged == 0) {
		fprintf(C, "%skr_skip_tagged(r);\n", ind);
		close_if(flex, "\t");
		return;
	}
	fprintf(C, "%s{\n", ind);
	fprintf(C,
	    "%1$s\tsize_t off = kr_off(r);\n"
	    "%1$s\tuint32_t nt = kr_uvarint(r);\n\n"
	    "%1$s\tif (!r->err && nt > kr_left(r) / 2)\n"
	    "%1$s\t\tkr_fail_at(r, off, \"tagged field count larger than the bytes left\");\n"
	    "%1$s\tfor (uint32_t t = 0; t < nt && !r->err; t++) {\n"
	    "%1$s\t\tuint32_t tag = kr_uvarint(r);\n"
	    "%1$s\t\tsize_t soff = kr_off(r);\n"
	    "%1$s\t\tuint32_t size = kr_uvarint(r);\n"
	    "%1$s\t\tstruct kr sub;\n\n"
	    "%1$s\t\tif (r->err)\n%1$s\t\t\tbreak;\n"
	    "%1$s\t\tif (size > kr_left(r)) {\n"
	    "%1$s\t\t\tkr_fail_at(r, soff, \"tagged field size past the end of input\");\n"
	    "%1$s\t\t\tbreak;\n%1$s\t\t}\n"
	    "%1$s\t\t/* A known tag is read from a window of exactly its size. */\n"
	    "%1$s\t\tsub = *r;\n%1$s\t\tsub.end = r->p + size;\n"
	    "%1$s\t\tswitch (tag) {\n", ind);
	for (int i = 0; i < s->nfields; i++) {
		const struct field *f = &s->fields[i];
		const char *tc = vcond(f->tagged, m->valid), *bi;

		if (f->tag < 0 || is_zero(tc))
			continue;
		fprintf(C, "%s\t\tcase %d:\n", ind, f->tag);
		bi = open_if(tc, xprintf("%s\t\t\t", ind));
		emit_read_field(m, f, "(&sub)", flex, bi);
		fprintf(C, "%sif (!sub.err && kr_left(&sub) != 0)\n"
		    "%s\tkr_fail(&sub, \"%s.%s: tagged field longer than its value\");\n",
		    bi, bi, m->name, f->name);
		close_if(tc, xprintf("%s\t\t\t", ind));
		fprintf(C, "%s\t\t\tbreak;\n", ind);
	}
	fprintf(C,
	    "%1$s\t\tdefault:\n%1$s\t\t\tbreak; /* unknown tags are skipped */\n%1$s\t\t}\n"
	    "%1$s\t\tif (sub.err) {\n%1$s\t\t\tkr_fail_at(r, sub.err_off, sub.why);\n"
	    "%1$s\t\t\tbreak;\n%1$s\t\t}\n"
	    "%1$s\t\tr->p += size;\n%1$s\t}\n%1$s}\n", ind);
	close_if(flex, "\t");
}

static void emit_read(const struct msg *m, const struct sdef *s)
{
	const char *flex = vcond(m->flexible, m->valid);

	fprintf(C, "static void %s_read(struct kr *r, struct karena *a, int16_t v, struct %s *m)\n{\n",
	    s->cname, s->cname);
	fprintf(C, "\t(void)a;\n\t(void)v;\n\t%s_init(m);\n", s->cname);
	for (int i = 0; i < s->nfields; i++) {
		const struct field *f = &s->fields[i];
		const char *vc = vcond(f->versions, m->valid), *bi;

		if (f->tag >= 0 || is_zero(vc))
			continue;
		bi = open_if(vc, "\t");
		emit_read_field(m, f, "r", flex, bi);
		close_if(vc, "\t");
	}
	emit_read_tags(m, s, flex);
	fprintf(C, "}\n\n");
}

static void emit_write_value(const struct msg *m, const struct field *f, const char *lv,
    const char *wr, const char *flex, const char *nullok, const char *ind)
{
	static const char *const fn[] = {
		[K_INT8] = "kw_i8", [K_INT16] = "kw_i16", [K_INT32] = "kw_i32",
		[K_INT64] = "kw_i64", [K_UINT16] = "kw_u16", [K_UINT32] = "kw_u32",
		[K_FLOAT64] = "kw_f64", [K_BOOL] = "kw_bool",
	};

	switch (f->kind) {
	case K_UUID:
		fprintf(C, "%skw_uuid(%s, &%s);\n", ind, wr, lv);
		break;
	case K_STRUCT:
		fprintf(C, "%s%s_write(%s, v, &%s);\n", ind, f->sub->cname, wr, lv);
		break;
	case K_STRING: case K_BYTES: case K_RECORDS: {
		const char *t = f->kind == K_STRING ? "str" : "bytes";
		const char *sub = ind;

		if (!is_one(nullok)) {
			if (is_zero(nullok))
				fprintf(C, "%sif (%s.len < 0)\n", ind, lv);
			else
				fprintf(C, "%sif (%s.len < 0 && !%s)\n", ind, lv, nullok);
			fprintf(C, "%s\tkw_fail(%s, \"%s.%s: null in a non-nullable field\");\n%selse",
			    ind, wr, m->name, f->name, ind);
			sub = xprintf("%s\t", ind);
		}
		if (is_one(flex) || is_zero(flex)) {
			fprintf(C, "%s%skw_%s%s(%s, %s);\n", is_one(nullok) ? ind : "\n",
			    is_one(nullok) ? "" : sub, is_one(flex) ? "c" : "", t, wr, lv);
		} else {
			fprintf(C, "%sif (%s)\n%s\tkw_c%s(%s, %s);\n%selse\n%s\tkw_%s(%s, %s);\n",
			    is_one(nullok) ? ind : " ", flex, sub, t, wr, lv, sub, sub, t, wr, lv);
		}
		break;
	}
	default:
		fprintf(C, "%s%s(%s, %s);\n", ind, fn[f->kind], wr, lv);
		break;
	}
}

static void emit_write_field(const struct msg *m, const struct field *f, const char *wr,
    const char *flex, const char *ind)
{
	char *nullok = vcond(f->nullable, m->valid);
	char *count = flexsel(flex, "kw_carray", "kw_array");

	if (!f->is_array) {
		emit_write_value(m, f, xprintf("m->%s", f->snake), wr, flex, nullok, ind);
		return;
	}
	if (!is_one(nullok)) {
		if (is_zero(nullok))
			fprintf(C, "%sif (m->%s_n < 0)\n", ind, f->snake);
		else
			fprintf(C, "%sif (m->%s_n < 0 && !%s)\n", ind, f->snake, nullok);
		fprintf(C, "%s\tkw_fail(%s, \"%s.%s: null array in a non-nullable field\");\n%selse ",
		    ind, wr, m->name, f->name, ind);
	} else {
		fprintf(C, "%s", ind);
	}
	fprintf(C, "if (m->%s_n > 0 && m->%s == NULL)\n%s\tkw_fail(%s, \"%s.%s: array count set but no elements\");\n",
	    f->snake, f->snake, ind, wr, m->name, f->name);
	if (is_one(flex) || is_zero(flex))
		fprintf(C, "%selse\n%s\t%s(%s, m->%s_n);\n", ind, ind, count, wr, f->snake);
	else
		fprintf(C, "%selse if (%s)\n%s\tkw_carray(%s, m->%s_n);\n%selse\n%s\tkw_array(%s, m->%s_n);\n",
		    ind, flex, ind, wr, f->snake, ind, ind, wr, f->snake);
	fprintf(C, "%sfor (int32_t i = 0; i < m->%s_n && !%s->err; i++) {\n", ind, f->snake, wr);
	emit_write_value(m, f, xprintf("m->%s[i]", f->snake), wr, flex, "0", xprintf("%s\t", ind));
	fprintf(C, "%s}\n", ind);
}

static int cmp_tag(const void *a, const void *b)
{
	const struct field *x = *(const struct field *const *)a, *y = *(const struct field *const *)b;

	return (x->tag > y->tag) - (x->tag < y->tag);
}

/* "cond && nondefault", folded. */
static char *and_nondefault(const char *cond, const struct field *f)
{
	char *nd = nondefault_expr(f, "m->");

	return is_one(cond) ? nd : xprintf("%s && %s", cond, nd);
}

static void emit_write(const struct msg *m, const struct sdef *s)
{
	const char *flex = vcond(m->flexible, m->valid), *ind;
	const struct field **tagged = xcalloc((size_t)s->nfields, sizeof(*tagged));
	int ntagged = 0;

	fprintf(C, "static void %s_write(struct kw *w, int16_t v, const struct %s *m)\n{\n",
	    s->cname, s->cname);
	fprintf(C, "\t(void)v;\n\t(void)m;\n");
	for (int i = 0; i < s->nfields; i++) {
		const struct field *f = &s->fields[i];
		const char *present = vcond(f->tag >= 0 ? f->tagged : f->versions, m->valid);
		const char *vc = vcond(f->versions, m->valid), *bi;

		if (f->tag >= 0 && !is_zero(present))
			tagged[ntagged++] = f;
		/* A value the version cannot carry is an error unless ignorable. */
		if (!f->ignorable && !is_one(present))
			fprintf(C, "\tif (%s%s && %s)\n\t\tkw_fail(w, \"%s.%s: a non-default value cannot be encoded in this version\");\n",
			    is_zero(present) ? "" : "!", is_zero(present) ? "1" : present,
			    nondefault_expr(f, "m->"), m->name, f->name);
		if (f->tag >= 0 || is_zero(vc))
			continue;
		bi = open_if(vc, "\t");
		emit_write_field(m, f, "w", flex, bi);
		close_if(vc, "\t");
	}
	qsort(tagged, (size_t)ntagged, sizeof(*tagged), cmp_tag);
	if (is_zero(flex)) {
		fprintf(C, "}\n\n");
		return;
	}
	ind = open_if(flex, "\t");
	if (ntagged == 0) {
		fprintf(C, "%skw_tags_empty(w);\n", ind);
		close_if(flex, "\t");
		fprintf(C, "}\n\n");
		return;
	}
	fprintf(C, "%s{\n%s\tuint32_t nt = 0;\n\n", ind, ind);
	for (int i = 0; i < ntagged; i++)
		fprintf(C, "%s\tnt += %s;\n", ind, and_nondefault(vcond(tagged[i]->tagged, m->valid), tagged[i]));
	fprintf(C, "%s\tkw_uvarint(w, nt);\n", ind);
	for (int i = 0; i < ntagged; i++) {
		const struct field *f = tagged[i];

		fprintf(C, "%s\tif (%s) {\n", ind, and_nondefault(vcond(f->tagged, m->valid), f));
		fprintf(C, "%s\t\tstruct kw t;\n\n%s\t\tkw_init(&t, w->max);\n", ind, ind);
		emit_write_field(m, f, "(&t)", flex, xprintf("%s\t\t", ind));
		fprintf(C, "%s\t\tkp_put_tagged(w, %d, &t);\n%s\t}\n", ind, f->tag, ind);
	}
	fprintf(C, "%s}\n", ind);
	close_if(flex, "\t");
	fprintf(C, "}\n\n");
}

/* ---- source: top level ---------------------------------------------- */

static void emit_source(void)
{
	fprintf(C, "/* Generated by proto/kpgen from the proto/ YAML specs: do not edit. */\n"
	    "#include \"config.h\"\n\n#include <stdint.h>\n#include <string.h>\n\n"
	    "#include \"kbuf.h\"\n#include \"kp_gen.h\"\n\n"
	    "#if defined(__GNUC__)\n#define KP_UNUSED __attribute__((unused))\n#else\n#define KP_UNUSED\n#endif\n\n"
	    "/* n elements of size sz from the arena, or NULL (no arena, overflow, cap). */\n"
	    "static void *kp_alloc_array(struct karena *a, int32_t n, size_t sz)\n{\n"
	    "\tif (a == NULL || n <= 0 || (size_t)n > SIZE_MAX / sz)\n\t\treturn NULL;\n"
	    "\treturn karena_alloc(a, (size_t)n * sz);\n}\n\n"
	    "/* Append a tagged field whose value was encoded into t; frees t. */\n"
	    "static KP_UNUSED void kp_put_tagged(struct kw *w, uint32_t tag, struct kw *t)\n{\n"
	    "\tif (t->err) {\n\t\tkw_fail(w, t->why);\n\t} else {\n"
	    "\t\tkw_uvarint(w, tag);\n\t\tkw_uvarint(w, (uint32_t)t->len);\n"
	    "\t\tkw_raw(w, t->buf, t->len);\n\t}\n\tkw_fini(t);\n}\n\n");
	for (int i = 0; i < nmsgs; i++) {
		const struct msg *m = msgs[i];

		fprintf(C, "/* ---- %s ---- */\n\n", m->name);
		for (int j = 0; j < m->nstructs; j++) {
			const struct sdef *s = m->structs[j];

			emit_init(s);
			if (s->used_as_value)
				emit_is_default(s);
		}
		/* Readers and writers call nested ones, defined first (inner first). */
		for (int j = 0; j < m->nstructs; j++) {
			emit_read(m, m->structs[j]);
			emit_write(m, m->structs[j]);
		}
		fprintf(C, "int kp_%s_decode(struct kr *r, struct karena *a, int16_t version, struct kp_%s *m)\n{\n"
		    "\tint16_t v = version;\n\n"
		    "\tkp_%s_init(m);\n"
		    "\tif (v < %d || v > %d) {\n\t\tkr_fail(r, \"%s: unsupported version\");\n\t\treturn -1;\n\t}\n"
		    "\tkp_%s_read(r, a, v, m);\n\treturn r->err ? -1 : 0;\n}\n\n",
		    m->snake, m->snake, m->snake, m->valid.lo, m->valid.hi, m->name, m->snake);
		fprintf(C, "int kp_%s_encode(struct kw *w, int16_t version, const struct kp_%s *m)\n{\n"
		    "\tint16_t v = version;\n\n"
		    "\tif (v < %d || v > %d) {\n\t\tkw_fail(w, \"%s: unsupported version\");\n\t\treturn -1;\n\t}\n"
		    "\tkp_%s_write(w, v, m);\n\treturn w->err ? -1 : 0;\n}\n\n",
		    m->snake, m->snake, m->valid.lo, m->valid.hi, m->name, m->snake);
		/* void * adaptors for the ApiKey table. */
		fprintf(C, "static void kp_%s_init_any(void *m)\n{\n\tkp_%s_init(m);\n}\n\n", m->snake, m->snake);
		fprintf(C, "static int kp_%s_decode_any(struct kr *r, struct karena *a, int16_t v, void *m)\n{\n"
		    "\treturn kp_%s_decode(r, a, v, m);\n}\n\n", m->snake, m->snake);
		fprintf(C, "static int kp_%s_encode_any(struct kw *w, int16_t v, const void *m)\n{\n"
		    "\treturn kp_%s_encode(w, v, m);\n}\n\n", m->snake, m->snake);
	}
}

static int cmp_api(const void *a, const void *b)
{
	const struct msg *x = *(const struct msg *const *)a, *y = *(const struct msg *const *)b;

	if (x->api_key != y->api_key)
		return (x->api_key > y->api_key) - (x->api_key < y->api_key);
	return y->is_request - x->is_request; /* request first */
}

static void emit_table(void)
{
	int rows = 0;

	fprintf(C, "const struct kp_api kp_api_table[] = {\n");
	for (int i = 0; i < nmsgs; i++) {
		const struct msg *rq = msgs[i], *rs = i + 1 < nmsgs ? msgs[i + 1] : NULL;
		char *api;

		if (!rq->is_request)
			continue;
		cur_file = rq->file;
		if (rs == NULL || rs->is_request || rs->api_key != rq->api_key) {
			spec_error(NULL, "%s (ApiKey %d) has no response spec", rq->name, rq->api_key);
			continue;
		}
		if (rs->valid.lo != rq->valid.lo || rs->valid.hi != rq->valid.hi ||
		    rs->flexible.lo != rq->flexible.lo || rs->flexible.hi != rq->flexible.hi)
			spec_error(NULL, "%s and %s disagree on validVersions or flexibleVersions", rq->name, rs->name);
		api = xstrdup(rq->name);
		api[strlen(api) - 7] = '\0';
		fprintf(C, "\t{ %d, \"%s\", %d, %d, %d, %d, %d,\n", rq->api_key, api, rq->valid.lo,
		    rq->valid.hi, vr_empty(rq->flexible) ? -1 : rq->flexible.lo,
		    vr_empty(rq->served) ? -1 : rq->served.lo, vr_empty(rq->served) ? -1 : rq->served.hi);
		fprintf(C, "\t  sizeof(struct kp_%s), sizeof(struct kp_%s),\n", rq->snake, rs->snake);
		fprintf(C, "\t  kp_%s_init_any, kp_%s_init_any,\n", rq->snake, rs->snake);
		fprintf(C, "\t  kp_%s_decode_any, kp_%s_decode_any,\n", rq->snake, rs->snake);
		fprintf(C, "\t  kp_%s_encode_any, kp_%s_encode_any },\n", rq->snake, rs->snake);
		rows++;
	}
	for (int i = 0; i < nmsgs; i++)
		if (!msgs[i]->is_request && (i == 0 || !msgs[i - 1]->is_request ||
		    msgs[i - 1]->api_key != msgs[i]->api_key)) {
			cur_file = msgs[i]->file;
			spec_error(NULL, "%s (ApiKey %d) has no request spec", msgs[i]->name, msgs[i]->api_key);
		}
	fprintf(C, "};\n\nconst size_t kp_api_count = %d;\n\n", rows);
	fprintf(C,
	    "const struct kp_api *kp_api_find(int16_t api_key)\n{\n"
	    "\tsize_t lo = 0, hi = kp_api_count;\n\n"
	    "\t/* The table is sorted by ApiKey. */\n"
	    "\twhile (lo < hi) {\n\t\tsize_t mid = lo + (hi - lo) / 2;\n\n"
	    "\t\tif (kp_api_table[mid].api_key == api_key)\n\t\t\treturn &kp_api_table[mid];\n"
	    "\t\tif (kp_api_table[mid].api_key < api_key)\n\t\t\tlo = mid + 1;\n\t\telse\n\t\t\thi = mid;\n\t}\n"
	    "\treturn NULL;\n}\n\n"
	    "const char *kp_api_name(int16_t api_key)\n{\n"
	    "\tconst struct kp_api *api = kp_api_find(api_key);\n\n"
	    "\treturn api ? api->name : \"Unknown\";\n}\n");
}

/* ---- test helper: kp_gen_fill.c -------------------------------------- */

/*
 * For the codec tests: kp_<msg>_fill() sets every field present in a
 * version to a pseudo-random value that differs from its default, so a
 * round trip exercises every field of every version.
 */
static void emit_fill_value(const struct field *f, const char *lv, const char *nullok,
    const char *ind)
{
	switch (f->kind) {
	case K_INT8: case K_INT16: case K_INT32: case K_UINT16: case K_UINT32:
		fprintf(C, "%s%s = (%s)kp_rnd(s);\n", ind, lv, ctype(f));
		fprintf(C, "%sif (%s == %s)\n%s\t%s ^= 1;\n", ind, lv, default_expr(f), ind, lv);
		break;
	case K_INT64:
		fprintf(C, "%s%s = (int64_t)((uint64_t)kp_rnd(s) << 40 ^ kp_rnd(s));\n", ind, lv);
		fprintf(C, "%sif (%s == %s)\n%s\t%s ^= 1;\n", ind, lv, default_expr(f), ind, lv);
		break;
	case K_FLOAT64:
		fprintf(C, "%s%s = (double)kp_rnd(s) / 8.0 + 0.5;\n", ind, lv);
		break;
	case K_BOOL:
		fprintf(C, "%s%s = !%s;\n", ind, lv, default_expr(f));
		break;
	case K_UUID:
		fprintf(C, "%skp_fill_uuid(&%s, s);\n", ind, lv);
		break;
	case K_STRUCT:
		fprintf(C, "%s%s_fill(&%s, a, v, s);\n", ind, f->sub->cname, lv);
		break;
	case K_STRING:
		fprintf(C, "%s%s = %s && kp_rnd(s) %% 3 == 0 ? KSTR_NULL : kp_fill_str(a, s);\n",
		    ind, lv, nullok);
		break;
	case K_BYTES: case K_RECORDS:
		fprintf(C, "%s%s = %s && kp_rnd(s) %% 3 == 0 ? KBYTES_NULL : kp_fill_bytes(a, s);\n",
		    ind, lv, nullok);
		break;
	}
}

static void emit_fill(const struct msg *m, const struct sdef *s)
{
	fprintf(C, "static void %s_fill(struct %s *m, struct karena *a, int16_t v, uint32_t *s)\n{\n",
	    s->cname, s->cname);
	fprintf(C, "\t(void)a;\n\t(void)v;\n\t(void)s;\n\t%s_init(m);\n", s->cname);
	for (int i = 0; i < s->nfields; i++) {
		const struct field *f = &s->fields[i];
		const char *present = vcond(f->tag >= 0 ? f->tagged : f->versions, m->valid), *bi;
		char *nullok = vcond(f->nullable, m->valid);

		if (is_zero(present))
			continue;
		bi = open_if(present, "\t");
		if (f->is_array) {
			fprintf(C, "%sm->%s_n = %s && kp_rnd(s) %% 4 == 0 ? -1 : (int32_t)(1 + kp_rnd(s) %% 2);\n",
			    bi, f->snake, nullok);
			fprintf(C, "%sif (m->%s_n > 0) {\n%s\tm->%s = karena_alloc(a, sizeof(*m->%s) * (size_t)m->%s_n);\n",
			    bi, f->snake, bi, f->snake, f->snake, f->snake);
			fprintf(C, "%s\tfor (int32_t i = 0; i < m->%s_n; i++) {\n", bi, f->snake);
			emit_fill_value(f, xprintf("m->%s[i]", f->snake), "0", xprintf("%s\t\t", bi));
			fprintf(C, "%s\t}\n%s}\n", bi, bi);
		} else {
			emit_fill_value(f, xprintf("m->%s", f->snake), nullok, bi);
		}
		close_if(present, "\t");
	}
	fprintf(C, "}\n\n");
}


/*
 * kp_<msg>_tokens() print the non-tagged values present in a version in
 * wire order, one token each ("12", "null", "s:<hex>", "b:<hex>",
 * "u:<hex>", "n:<count>" before an array's elements), so a test can compare
 * a decode with another implementation's without mapping field names.
 */
static void emit_token_value(const struct field *f, const char *lv, const char *ind)
{
	switch (f->kind) {
	case K_INT8: case K_INT16: case K_INT32: case K_INT64: case K_UINT16: case K_UINT32:
		fprintf(C, "%sfprintf(o, \" %%lld\", (long long)%s);\n", ind, lv);
		break;
	case K_BOOL:
		fprintf(C, "%sfprintf(o, \" %%d\", %s ? 1 : 0);\n", ind, lv);
		break;
	case K_FLOAT64:
		fprintf(C, "%sfprintf(o, \" %%.17g\", %s);\n", ind, lv);
		break;
	case K_UUID:
		fprintf(C, "%skp_tok_hex(o, \"u:\", %s.b, 16);\n", ind, lv);
		break;
	case K_STRUCT:
		fprintf(C, "%s%s_tokens(o, v, &%s);\n", ind, f->sub->cname, lv);
		break;
	case K_STRING:
		fprintf(C, "%sif (%s.len < 0)\n%s\tfputs(\" null\", o);\n%selse\n%s\tkp_tok_hex(o, \"s:\", (const uint8_t *)%s.p, (size_t)%s.len);\n",
		    ind, lv, ind, ind, ind, lv, lv);
		break;
	case K_BYTES: case K_RECORDS:
		fprintf(C, "%sif (%s.len < 0)\n%s\tfputs(\" null\", o);\n%selse\n%s\tkp_tok_hex(o, \"b:\", %s.p, (size_t)%s.len);\n",
		    ind, lv, ind, ind, ind, lv, lv);
		break;
	}
}

static void emit_tokens(const struct msg *m, const struct sdef *s)
{
	fprintf(C, "static __attribute__((unused)) void %s_tokens(FILE *o, int16_t v, const struct %s *m)\n{\n",
	    s->cname, s->cname);
	fprintf(C, "\t(void)o;\n\t(void)v;\n\t(void)m;\n");
	for (int i = 0; i < s->nfields; i++) {
		const struct field *f = &s->fields[i];
		const char *vc = vcond(f->versions, m->valid), *bi;

		if (f->tag >= 0 || is_zero(vc))
			continue;
		bi = open_if(vc, "\t");
		if (f->is_array) {
			fprintf(C, "%sif (m->%s_n < 0)\n%s\tfputs(\" null\", o);\n%selse\n%s\tfprintf(o, \" n:%%d\", (int)m->%s_n);\n",
			    bi, f->snake, bi, bi, bi, f->snake);
			fprintf(C, "%sfor (int32_t i = 0; i < m->%s_n; i++) {\n", bi, f->snake);
			emit_token_value(f, xprintf("m->%s[i]", f->snake), xprintf("%s\t", bi));
			fprintf(C, "%s}\n", bi);
		} else {
			emit_token_value(f, xprintf("m->%s", f->snake), bi);
		}
		close_if(vc, "\t");
	}
	fprintf(C, "}\n\n");
}

static void emit_fill_file(void)
{
	fprintf(H, "/* Generated by proto/kpgen: test helpers, not part of libmirror. */\n"
	    "#ifndef MIRRORD_KP_GEN_FILL_H\n#define MIRRORD_KP_GEN_FILL_H\n\n#include <stdio.h>\n\n#include \"kp_gen.h\"\n\n"
	    "/* Fill a message with pseudo-random non-default values for a version. */\n"
	    "typedef void (*kp_fill_fn)(void *m, struct karena *a, int16_t version, uint32_t *seed);\n"
	    "/* Print a message's non-tagged values in wire order, one token each. */\n"
	    "typedef void (*kp_tokens_fn)(FILE *out, int16_t version, const void *m);\n\n"
	    "struct kp_fill {\n\tint16_t api_key;\n\tkp_fill_fn request, response;\n"
	    "\tkp_tokens_fn request_tokens, response_tokens;\n};\n\n"
	    "extern const struct kp_fill kp_fill_table[];\nextern const size_t kp_fill_count;\n\n#endif\n");
	fprintf(C, "/* Generated by proto/kpgen: test helpers, not part of libmirror. */\n"
	    "#include \"config.h\"\n\n#include <stdint.h>\n#include <stdio.h>\n#include <string.h>\n\n"
	    "#include \"kbuf.h\"\n#include \"kp_gen_fill.h\"\n\n"
	    "static uint32_t kp_rnd(uint32_t *s)\n{\n\t*s = *s * 1103515245u + 12345u;\n\treturn *s >> 4;\n}\n\n"
	    "static __attribute__((unused)) struct kstr kp_fill_str(struct karena *a, uint32_t *s)\n{\n"
	    "\tint32_t n = (int32_t)(1 + kp_rnd(s) %% 12);\n\tchar *p = karena_alloc(a, (size_t)n);\n\n"
	    "\tfor (int32_t i = 0; i < n; i++)\n\t\tp[i] = (char)('a' + kp_rnd(s) %% 26);\n"
	    "\treturn (struct kstr){ p, n };\n}\n\n"
	    "static __attribute__((unused)) struct kbytes kp_fill_bytes(struct karena *a, uint32_t *s)\n{\n"
	    "\tint32_t n = (int32_t)(1 + kp_rnd(s) %% 40);\n\tuint8_t *p = karena_alloc(a, (size_t)n);\n\n"
	    "\tfor (int32_t i = 0; i < n; i++)\n\t\tp[i] = (uint8_t)kp_rnd(s);\n"
	    "\treturn (struct kbytes){ p, n };\n}\n\n"
	    "static __attribute__((unused)) void kp_fill_uuid(struct kuuid *u, uint32_t *s)\n{\n"
	    "\tfor (size_t i = 0; i < sizeof(u->b); i++)\n\t\tu->b[i] = (uint8_t)kp_rnd(s);\n"
	    "\tu->b[0] |= 1; /* never the all-zero default */\n}\n\n"
	    "static __attribute__((unused)) void kp_tok_hex(FILE *o, const char *tag, const uint8_t *p, size_t n)\n{\n"
	    "\tfprintf(o, \" %%s\", tag);\n\tfor (size_t i = 0; i < n; i++)\n\t\tfprintf(o, \"%%02x\", p[i]);\n}\n\n");
	for (int i = 0; i < nmsgs; i++) {
		const struct msg *m = msgs[i];

		for (int j = 0; j < m->nstructs; j++) {
			emit_fill(m, m->structs[j]);
			emit_tokens(m, m->structs[j]);
		}
		fprintf(C, "static void kp_%s_fill_any(void *m, struct karena *a, int16_t v, uint32_t *s)\n{\n"
		    "\tkp_%s_fill(m, a, v, s);\n}\n\n", m->snake, m->snake);
		fprintf(C, "static void kp_%s_tokens_any(FILE *o, int16_t v, const void *m)\n{\n"
		    "\tkp_%s_tokens(o, v, m);\n}\n\n", m->snake, m->snake);
	}
	fprintf(C, "const struct kp_fill kp_fill_table[] = {\n");
	for (int i = 0; i + 1 < nmsgs; i++)
		if (msgs[i]->is_request && !msgs[i + 1]->is_request && msgs[i]->api_key == msgs[i + 1]->api_key)
			fprintf(C, "\t{ %d, kp_%s_fill_any, kp_%s_fill_any,\n\t  kp_%s_tokens_any, kp_%s_tokens_any },\n",
			    msgs[i]->api_key, msgs[i]->snake, msgs[i + 1]->snake, msgs[i]->snake,
			    msgs[i + 1]->snake);
	fprintf(C, "};\n\nconst size_t kp_fill_count = sizeof(kp_fill_table) / sizeof(kp_fill_table[0]);\n");
}

static FILE *open_out(const char *dir, const char *name, char **path)
{
	FILE *fp;

	*path = xprintf("%s/%s.tmp", dir, name);
	fp = fopen(*path, "w");
	if (fp == NULL) {
		fprintf(stderr, "kpgen: %s: %s\n", *path, strerror(errno));
		exit(2);
	}
	return fp;
}

static void close_out(FILE *fp, const char *tmp, const char *dir, const char *name)
{
	char *final = xprintf("%s/%s", dir, name);

	if (ferror(fp) || fclose(fp) != 0) {
		fprintf(stderr, "kpgen: writing %s failed\n", tmp);
		exit(2);
	}
	if (rename(tmp, final) != 0) {
		fprintf(stderr, "kpgen: rename %s -> %s: %s\n", tmp, final, strerror(errno));
		exit(2);
	}
}

int main(int argc, char **argv)
{
	const char *outdir = NULL;
	char *hpath, *cpath;
	int i = 1;

	if (argc > 2 && strcmp(argv[1], "-o") == 0) {
		outdir = argv[2];
		i = 3;
	}
	if (outdir == NULL || i >= argc) {
		fprintf(stderr, "usage: kpgen -o OUTDIR SPEC.yaml...\n");
		return 2;
	}
	for (; i < argc; i++)
		load_spec(argv[i]);
	if (nerrors)
		goto fail;
	qsort(msgs, (size_t)nmsgs, sizeof(*msgs), cmp_api);
	H = open_out(outdir, "kp_gen.h", &hpath);
	C = open_out(outdir, "kp_gen.c", &cpath);
	emit_header();
	emit_source();
	emit_table();
	if (nerrors) {
		fclose(H);
		fclose(C);
		remove(hpath);
		remove(cpath);
		goto fail;
	}
	close_out(H, hpath, outdir, "kp_gen.h");
	close_out(C, cpath, outdir, "kp_gen.c");
	H = open_out(outdir, "kp_gen_fill.h", &hpath);
	C = open_out(outdir, "kp_gen_fill.c", &cpath);
	emit_fill_file();
	close_out(H, hpath, outdir, "kp_gen_fill.h");
	close_out(C, cpath, outdir, "kp_gen_fill.c");
	return 0;
fail:
	fprintf(stderr, "kpgen: %d error%s in the specs\n", nerrors, nerrors == 1 ? "" : "s");
	return 1;
}
