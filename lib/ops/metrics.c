/*
 * metrics.c: see metrics.h.  Loop thread only, no locks.
 *
 * Each series is one allocation: the struct, then the histogram bucket
 * counters, then the label value pointers, then the label value strings.
 * A family finds its series through a chained hash table (power-of-two
 * size, doubled past a load factor of 1) and renders them from a doubly
 * linked list in creation order.
 */
#include "config.h"

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <event2/buffer.h>

#include "compat.h"
#include "log.h"
#include "metrics.h"

struct metric_series {
	struct metric_family *fam;
	struct metric_series *hnext;         /* hash chain */
	struct metric_series *prev, *next;   /* creation order */
	uint64_t hash;
	double value;                        /* counter, gauge */
	metrics_value_fn fn;                 /* or this, at scrape time */
	void *fn_arg;
	double sum;                          /* histogram */
	uint64_t count;
	uint64_t *bucket;                    /* per bucket, not cumulative */
	const char **values;                 /* fam->nlabels label values */
};

struct metric_family {
	struct metrics *reg;
	struct metric_family *next;          /* registration order */
	char *name;
	char *help;
	enum metric_type type;
	bool enabled;
	size_t nlabels;
	char *labels[METRICS_MAX_LABELS];
	size_t nbuckets;
	double buckets[METRICS_MAX_BUCKETS];
	metrics_collect_fn collect;
	void *collect_arg;
	struct metric_series **table;
	size_t tsize;                        /* power of two, or 0 */
	size_t count;
	struct metric_series *head, *tail;
};

struct metrics {
	struct metric_family *head, *tail;
	size_t max_output;
};

static const char *const type_names[] = {
#define X(e, s) [METRIC_##e] = s,
	METRIC_TYPES(X)
#undef X
};
_Static_assert(ARRAY_SIZE(type_names) == METRIC_TYPE_COUNT, "type table");

#define INITIAL_TABLE 16

const char *metric_type_name(enum metric_type t)
{
	if ((unsigned)t >= METRIC_TYPE_COUNT)
		return "?";
	return type_names[t];
}

struct metrics *metrics_new(void)
{
	struct metrics *m = calloc(1, sizeof(*m));

	if (m != NULL)
		m->max_output = METRICS_DEFAULT_MAX_OUTPUT;
	return m;
}

void metrics_set_max_output(struct metrics *m, size_t max_bytes)
{
	m->max_output = max_bytes != 0 ? max_bytes : METRICS_DEFAULT_MAX_OUTPUT;
}

static void family_drop_series(struct metric_family *f)
{
	struct metric_series *s, *next;

	for (s = f->head; s != NULL; s = next) {
		next = s->next;
		free(s);
	}
	f->head = f->tail = NULL;
	f->count = 0;
	if (f->table != NULL)
		memset(f->table, 0, f->tsize * sizeof(*f->table));
}

static void family_free(struct metric_family *f)
{
	family_drop_series(f);
	free(f->table);
	for (size_t i = 0; i < f->nlabels; i++)
		free(f->labels[i]);
	free(f->name);
	free(f->help);
	free(f);
}

void metrics_free(struct metrics *m)
{
	struct metric_family *f, *next;

	if (m == NULL)
		return;
	for (f = m->head; f != NULL; f = next) {
		next = f->next;
		family_free(f);
	}
	free(m);
}

/* Prometheus data model: metric names may contain colons, label names not. */
static bool valid_name(const char *s, bool colon)
{
	if (s == NULL || *s == '\0')
		return false;
	for (const char *p = s; *p != '\0'; p++) {
		char c = *p;
		bool alpha = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
		    c == '_' || (colon && c == ':');

		if (!alpha && !(p != s && c >= '0' && c <= '9'))
			return false;
	}
	return true;
}

static bool ends_with(const char *s, const char *suffix)
{
	size_t ls = strlen(s), lx = strlen(suffix);

	return ls >= lx && strcmp(s + ls - lx, suffix) == 0;
}

static int check_family(const struct metrics *m, const char *name,
    const char *help, enum metric_type type, const char *const *labels,
    size_t nlabels, const double *buckets, size_t nbuckets, char *err,
    size_t errlen)
{
	if (!valid_name(name, true)) {
		seterr(err, errlen, "metric name \"%s\" is not of the form "
		    "[a-zA-Z_:][a-zA-Z0-9_:]*", name != NULL ? name : "(null)");
		return -1;
	}
	if ((unsigned)type >= METRIC_TYPE_COUNT) {
		seterr(err, errlen, "metric %s: unknown type %d", name, type);
		return -1;
	}
	if (help == NULL || *help == '\0') {
		seterr(err, errlen, "metric %s: help text is empty", name);
		return -1;
	}
	if (metrics_family_find(m, name) != NULL) {
		seterr(err, errlen, "metric %s is already registered", name);
		return -1;
	}
	if (type == METRIC_COUNTER && !ends_with(name, "_total")) {
		seterr(err, errlen, "counter %s: name must end in _total", name);
		return -1;
	}
	if (type != METRIC_COUNTER && ends_with(name, "_total")) {
		seterr(err, errlen, "%s %s: only counters end in _total",
		    metric_type_name(type), name);
		return -1;
	}
	if (nlabels > METRICS_MAX_LABELS) {
		seterr(err, errlen, "metric %s: %zu labels, at most %d", name,
		    nlabels, METRICS_MAX_LABELS);
		return -1;
	}
	for (size_t i = 0; i < nlabels; i++) {
		if (!valid_name(labels[i], false) ||
		    strncmp(labels[i], "__", 2) == 0) {
			seterr(err, errlen, "metric %s: label name \"%s\" is not "
			    "of the form [a-zA-Z_][a-zA-Z0-9_]* or starts with "
			    "__", name, labels[i] != NULL ? labels[i] : "(null)");
			return -1;
		}
		if (type == METRIC_HISTOGRAM && strcmp(labels[i], "le") == 0) {
			seterr(err, errlen, "histogram %s: the label \"le\" is "
			    "reserved for buckets", name);
			return -1;
		}
		for (size_t j = 0; j < i; j++)
			if (strcmp(labels[i], labels[j]) == 0) {
				seterr(err, errlen, "metric %s: label \"%s\" "
				    "appears twice", name, labels[i]);
				return -1;
			}
	}
	if (type != METRIC_HISTOGRAM) {
		if (nbuckets != 0) {
			seterr(err, errlen, "%s %s: buckets given but only "
			    "histograms have buckets", metric_type_name(type),
			    name);
			return -1;
		}
		return 0;
	}
	if (nbuckets == 0 || nbuckets > METRICS_MAX_BUCKETS) {
		seterr(err, errlen, "histogram %s: %zu buckets, need 1 to %d",
		    name, nbuckets, METRICS_MAX_BUCKETS);
		return -1;
	}
	for (size_t i = 0; i < nbuckets; i++) {
		if (!isfinite(buckets[i])) {
			seterr(err, errlen, "histogram %s: bucket %zu is not "
			    "finite (+Inf is implicit)", name, i);
			return -1;
		}
		if (i > 0 && !(buckets[i] > buckets[i - 1])) {
			seterr(err, errlen, "histogram %s: bucket %zu (%g) is "
			    "not above bucket %zu (%g)", name, i, buckets[i],
			    i - 1, buckets[i - 1]);
			return -1;
		}
	}
	return 0;
}

struct metric_family *metrics_family_new(struct metrics *m, const char *name,
    const char *help, enum metric_type type, const char *const *labels,
    size_t nlabels, const double *buckets, size_t nbuckets, char *err,
    size_t errlen)
{
	struct metric_family *f = NULL;

	if (check_family(m, name, help, type, labels, nlabels, buckets,
	    nbuckets, err, errlen) == -1)
		return NULL;
	f = calloc(1, sizeof(*f));
	if (f == NULL)
		goto nomem;
	f->reg = m;
	f->type = type;
	f->enabled = true;
	f->name = strdup(name);
	f->help = strdup(help);
	if (f->name == NULL || f->help == NULL)
		goto nomem;
	for (size_t i = 0; i < nlabels; i++) {
		if ((f->labels[i] = strdup(labels[i])) == NULL)
			goto nomem;
		f->nlabels = i + 1;
	}
	f->nbuckets = nbuckets;
	if (nbuckets > 0)
		memcpy(f->buckets, buckets, nbuckets * sizeof(*buckets));
	/* An unlabelled family is one series: export it from the start. */
	if (nlabels == 0 && metrics_series(f, 0, NULL) == NULL)
		goto nomem;
	if (m->tail != NULL)
		m->tail->next = f;
	else
		m->head = f;
	m->tail = f;
	return f;
nomem:
	seterr(err, errlen, "metric %s: out of memory", name);
	if (f != NULL)
		family_free(f);
	return NULL;
}

struct metric_family *metrics_family_find(const struct metrics *m,
    const char *name)
{
	for (struct metric_family *f = m->head; f != NULL; f = f->next)
		if (strcmp(f->name, name) == 0)
			return f;
	return NULL;
}

const char *metrics_family_name(const struct metric_family *f)
{
	return f->name;
}

size_t metrics_family_series_count(const struct metric_family *f)
{
	return f->count;
}

void metrics_family_set_enabled(struct metric_family *f, bool enabled)
{
	if (f == NULL)
		return;
	if (!enabled)
		family_drop_series(f);
	f->enabled = enabled;
	if (enabled && f->nlabels == 0 && f->count == 0)
		(void)metrics_series(f, 0, NULL);
}

bool metrics_family_enabled(const struct metric_family *f)
{
	return f != NULL && f->enabled;
}

void metrics_family_on_collect(struct metric_family *f,
    metrics_collect_fn fn, void *arg)
{
	f->collect = fn;
	f->collect_arg = arg;
}

/* FNV-1a over the values, each terminated by its NUL. */
static uint64_t hash_values(size_t n, const char *const *values)
{
	uint64_t h = 0xcbf29ce484222325ull;

	for (size_t i = 0; i < n; i++) {
		const unsigned char *p = (const unsigned char *)values[i];

		do {
			h ^= *p;
			h *= 0x100000001b3ull;
		} while (*p++ != '\0');
	}
	return h;
}

static bool series_equal(const struct metric_series *s, uint64_t h, size_t n,
    const char *const *values)
{
	if (s->hash != h)
		return false;
	for (size_t i = 0; i < n; i++)
		if (strcmp(s->values[i], values[i]) != 0)
			return false;
	return true;
}

static bool check_values(const struct metric_family *f, size_t n,
    const char *const *values)
{
	if (n != f->nlabels) {
		log_warnx("metric %s: %zu label values given, the family has "
		    "%zu labels", f->name, n, f->nlabels);
		return false;
	}
	for (size_t i = 0; i < n; i++)
		if (values[i] == NULL) {
			log_warnx("metric %s: label %s has a NULL value",
			    f->name, f->labels[i]);
			return false;
		}
	return true;
}

struct metric_series *metrics_series_find(const struct metric_family *f,
    size_t n, const char *const *values)
{
	uint64_t h;

	if (f == NULL || !f->enabled || f->tsize == 0 ||
	    !check_values(f, n, values))
		return NULL;
	h = hash_values(n, values);
	for (struct metric_series *s = f->table[h & (f->tsize - 1)]; s != NULL;
	    s = s->hnext)
		if (series_equal(s, h, n, values))
			return s;
	return NULL;
}

static int table_grow(struct metric_family *f)
{
	size_t nsize = f->tsize != 0 ? f->tsize * 2 : INITIAL_TABLE;
	struct metric_series **nt = calloc(nsize, sizeof(*nt));

	if (nt == NULL)
		return -1;
	for (struct metric_series *s = f->head; s != NULL; s = s->next) {
		size_t b = s->hash & (nsize - 1);

		s->hnext = nt[b];
		nt[b] = s;
	}
	free(f->table);
	f->table = nt;
	f->tsize = nsize;
	return 0;
}

struct metric_series *metrics_series(struct metric_family *f, size_t n,
    const char *const *values)
{
	struct metric_series *s;
	size_t size, b, lens[METRICS_MAX_LABELS];
	uint64_t h;
	char *p;

	if (f == NULL || !f->enabled || !check_values(f, n, values))
		return NULL;
	if ((s = metrics_series_find(f, n, values)) != NULL)
		return s;
	if (f->count >= f->tsize && table_grow(f) == -1)
		goto nomem;
	size = sizeof(*s) + f->nbuckets * sizeof(uint64_t) +
	    n * sizeof(char *);
	for (size_t i = 0; i < n; i++) {
		lens[i] = strlen(values[i]) + 1;
		size += lens[i];
	}
	if ((s = calloc(1, size)) == NULL)
		goto nomem;
	s->fam = f;
	s->bucket = (uint64_t *)(void *)(s + 1);
	s->values = (const char **)(void *)(s->bucket + f->nbuckets);
	p = (char *)(s->values + n);
	for (size_t i = 0; i < n; i++) {
		memcpy(p, values[i], lens[i]);
		s->values[i] = p;
		p += lens[i];
	}
	h = hash_values(n, values);
	s->hash = h;
	b = h & (f->tsize - 1);
	s->hnext = f->table[b];
	f->table[b] = s;
	s->prev = f->tail;
	if (f->tail != NULL)
		f->tail->next = s;
	else
		f->head = s;
	f->tail = s;
	f->count++;
	return s;
nomem:
	log_warnx("metric %s: out of memory creating a series", f->name);
	return NULL;
}

void metrics_series_remove(struct metric_series *s)
{
	struct metric_family *f;
	struct metric_series **pp;

	if (s == NULL)
		return;
	f = s->fam;
	for (pp = &f->table[s->hash & (f->tsize - 1)]; *pp != s;
	    pp = &(*pp)->hnext)
		;
	*pp = s->hnext;
	if (s->prev != NULL)
		s->prev->next = s->next;
	else
		f->head = s->next;
	if (s->next != NULL)
		s->next->prev = s->prev;
	else
		f->tail = s->prev;
	f->count--;
	free(s);
}

size_t metrics_remove_matching(struct metrics *m, size_t n,
    const char *const *names, const char *const *values)
{
	size_t removed = 0, idx[METRICS_MAX_LABELS];

	if (n > METRICS_MAX_LABELS)
		return 0;
	for (struct metric_family *f = m->head; f != NULL; f = f->next) {
		struct metric_series *s, *next;
		size_t found = 0;

		for (size_t i = 0; i < n; i++)
			for (size_t j = 0; j < f->nlabels; j++)
				if (strcmp(names[i], f->labels[j]) == 0) {
					idx[found++] = j;
					break;
				}
		if (found != n || n == 0)
			continue;
		for (s = f->head; s != NULL; s = next) {
			bool match = true;

			next = s->next;
			for (size_t i = 0; i < n && match; i++)
				match = strcmp(s->values[idx[i]], values[i]) == 0;
			if (match) {
				metrics_series_remove(s);
				removed++;
			}
		}
	}
	return removed;
}

void metrics_counter_add(struct metric_series *s, double v)
{
	if (s != NULL && v > 0) /* also drops NaN */
		s->value += v;
}

void metrics_gauge_set(struct metric_series *s, double v)
{
	if (s != NULL)
		s->value = v;
}

void metrics_gauge_add(struct metric_series *s, double v)
{
	if (s != NULL)
		s->value += v;
}

void metrics_histogram_observe(struct metric_series *s, double v)
{
	struct metric_family *f;

	if (s == NULL || isnan(v))
		return;
	f = s->fam;
	if (f->type != METRIC_HISTOGRAM)
		return;
	/* Bucket i counts v <= bound i; above the last only +Inf counts it. */
	for (size_t i = 0; i < f->nbuckets; i++)
		if (v <= f->buckets[i]) {
			s->bucket[i]++;
			break;
		}
	s->count++;
	s->sum += v;
}

void metrics_series_set_fn(struct metric_series *s, metrics_value_fn fn,
    void *arg)
{
	if (s == NULL)
		return;
	s->fn = fn;
	s->fn_arg = arg;
}

double metrics_series_value(const struct metric_series *s)
{
	if (s == NULL)
		return 0;
	if (s->fam->type == METRIC_HISTOGRAM)
		return (double)s->count;
	return s->fn != NULL ? s->fn(s->fn_arg) : s->value;
}

double metrics_series_sum(const struct metric_series *s)
{
	return s != NULL && s->fam->type == METRIC_HISTOGRAM ? s->sum : 0;
}

int metrics_stateset(struct metric_family *f, size_t n,
    const char *const *values, const char *const *states, size_t nstates,
    size_t current)
{
	const char *v[METRICS_MAX_LABELS];

	if (f == NULL)
		return 0;
	if (n + 1 != f->nlabels || current >= nstates) {
		log_warnx("metric %s: state set needs %zu leading label values "
		    "and a state below %zu (got %zu values, state %zu)",
		    f->name, f->nlabels > 0 ? f->nlabels - 1 : 0, nstates, n,
		    current);
		return -1;
	}
	if (!f->enabled)
		return 0;
	memcpy(v, values, n * sizeof(*v));
	for (size_t i = 0; i < nstates; i++) {
		v[n] = states[i];
		metrics_gauge_set(metrics_series(f, n + 1, v),
		    i == current ? 1 : 0);
	}
	return 0;
}

void metrics_format_value(char *buf, size_t len, double v)
{
	if (isnan(v)) {
		snprintf(buf, len, "NaN");
	} else if (isinf(v)) {
		snprintf(buf, len, v > 0 ? "+Inf" : "-Inf");
	} else if (v == trunc(v) && fabs(v) < 1e15) {
		snprintf(buf, len, "%.0f", v);
	} else {
		/* The shortest %g precision that reads back as the same double. */
		for (int prec = 15; prec <= 17; prec++) {
			snprintf(buf, len, "%.*g", prec, v);
			if (strtod(buf, NULL) == v)
				break;
		}
	}
}

/* --- exposition ----------------------------------------------------- */

/* Output goes to either a growable string or an evbuffer; both are capped. */
struct mwriter {
	size_t total, cap;
	bool failed;
	struct evbuffer *eb;
	char *buf;
	size_t alloc;
};

static void put(struct mwriter *w, const char *p, size_t n)
{
	if (w->failed)
		return;
	if (n > w->cap - w->total) {
		w->failed = true;
		errno = EFBIG;
		return;
	}
	if (w->eb != NULL) {
		if (evbuffer_add(w->eb, p, n) == -1) {
			w->failed = true;
			errno = ENOMEM;
			return;
		}
	} else {
		if (w->total + n + 1 > w->alloc) {
			size_t na = w->alloc != 0 ? w->alloc : 4096;
			char *nb;

			while (na < w->total + n + 1)
				na *= 2;
			if ((nb = realloc(w->buf, na)) == NULL) {
				w->failed = true;
				errno = ENOMEM;
				return;
			}
			w->buf = nb;
			w->alloc = na;
		}
		memcpy(w->buf + w->total, p, n);
		w->buf[w->total + n] = '\0';
	}
	w->total += n;
}

static void puts_(struct mwriter *w, const char *s)
{
	put(w, s, strlen(s));
}

/* Label values escape \, " and newline; help text escapes \ and newline. */
static void put_escaped(struct mwriter *w, const char *s, bool quote)
{
	const char *run = s;

	for (; *s != '\0'; s++) {
		const char *esc = NULL;

		if (*s == '\\')
			esc = "\\\\";
		else if (*s == '\n')
			esc = "\\n";
		else if (*s == '"' && quote)
			esc = "\\\"";
		if (esc == NULL)
			continue;
		put(w, run, (size_t)(s - run));
		puts_(w, esc);
		run = s + 1;
	}
	put(w, run, (size_t)(s - run));
}

static void put_sample(struct mwriter *w, const struct metric_series *s,
    const char *suffix, const char *le, double v)
{
	const struct metric_family *f = s->fam;
	char num[32];

	puts_(w, f->name);
	puts_(w, suffix);
	if (f->nlabels > 0 || le != NULL) {
		put(w, "{", 1);
		for (size_t i = 0; i < f->nlabels; i++) {
			if (i > 0)
				put(w, ",", 1);
			puts_(w, f->labels[i]);
			put(w, "=\"", 2);
			put_escaped(w, s->values[i], true);
			put(w, "\"", 1);
		}
		if (le != NULL) {
			if (f->nlabels > 0)
				put(w, ",", 1);
			puts_(w, "le=\"");
			puts_(w, le);
			put(w, "\"", 1);
		}
		put(w, "}", 1);
	}
	put(w, " ", 1);
	metrics_format_value(num, sizeof(num), v);
	puts_(w, num);
	put(w, "\n", 1);
}

static void render_family(struct mwriter *w, struct metric_family *f)
{
	if (f->head == NULL)
		return;
	puts_(w, "# HELP ");
	puts_(w, f->name);
	put(w, " ", 1);
	put_escaped(w, f->help, false);
	puts_(w, "\n# TYPE ");
	puts_(w, f->name);
	put(w, " ", 1);
	puts_(w, metric_type_name(f->type));
	put(w, "\n", 1);
	for (const struct metric_series *s = f->head; s != NULL; s = s->next) {
		if (f->type != METRIC_HISTOGRAM) {
			put_sample(w, s, "", NULL, metrics_series_value(s));
			continue;
		}
		uint64_t cum = 0;
		char le[32];

		for (size_t i = 0; i < f->nbuckets; i++) {
			cum += s->bucket[i];
			metrics_format_value(le, sizeof(le), f->buckets[i]);
			put_sample(w, s, "_bucket", le, (double)cum);
		}
		put_sample(w, s, "_bucket", "+Inf", (double)s->count);
		put_sample(w, s, "_sum", NULL, s->sum);
		put_sample(w, s, "_count", NULL, (double)s->count);
	}
}

static int render(struct metrics *m, struct mwriter *w, char *err,
    size_t errlen)
{
	w->cap = m->max_output;
	/* Every collector first: one may set series of families rendered
	 * before its own (a scrape shows now, not the scrape before). */
	for (struct metric_family *f = m->head; f != NULL; f = f->next)
		if (f->collect != NULL && f->enabled)
			f->collect(f, f->collect_arg);
	for (struct metric_family *f = m->head; f != NULL && !w->failed;
	    f = f->next)
		render_family(w, f);
	if (!w->failed)
		return 0;
	if (errno == EFBIG)
		seterr(err, errlen, "metrics exposition is larger than its "
		    "cap of %zu bytes", w->cap);
	else
		seterr(err, errlen, "metrics exposition: out of memory after "
		    "%zu bytes", w->total);
	return -1;
}

int metrics_render_evbuffer(struct metrics *m, struct evbuffer *out,
    char *err, size_t errlen)
{
	struct mwriter w = { 0 };
	int rc = -1;

	if ((w.eb = evbuffer_new()) == NULL) {
		seterr(err, errlen, "metrics exposition: out of memory");
		return -1;
	}
	if (render(m, &w, err, errlen) == 0) {
		if (evbuffer_add_buffer(out, w.eb) == 0)
			rc = 0;
		else
			seterr(err, errlen, "metrics exposition: out of memory");
	}
	evbuffer_free(w.eb);
	return rc;
}

char *metrics_render_string(struct metrics *m, size_t *len, char *err,
    size_t errlen)
{
	struct mwriter w = { 0 };

	if (render(m, &w, err, errlen) == -1) {
		free(w.buf);
		return NULL;
	}
	if (w.buf == NULL && (w.buf = calloc(1, 1)) == NULL) {
		seterr(err, errlen, "metrics exposition: out of memory");
		return NULL;
	}
	if (len != NULL)
		*len = w.total;
	return w.buf;
}
