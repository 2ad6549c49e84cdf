/*
 * tpattern.c: topic patterns on PCRE2 (see tpattern.h for the rules).
 */
#include "config.h"

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "compat.h"
#include "log.h"
#include "tpattern.h"

/*
 * Java's Pattern syntax on PCRE2: UTF patterns and names; no \C (it could
 * split a UTF-8 character, Java has none); the match anchored at both ends,
 * as Matcher.matches().  Options, not a "^(?:...)$" wrapper: a pattern
 * ending in an open \Q would quote the wrapper.  Not PCRE2_ALT_BSUX: it
 * would accept Java's \uhhhh but silently read Java's \x{h..} as x
 * repeated; without it \uhhhh is an error naming \u and \x{h..} works.
 */
#define TP_OPTIONS (PCRE2_UTF | PCRE2_NEVER_BACKSLASH_C | PCRE2_ANCHORED | \
	PCRE2_ENDANCHORED)

#define TP_NAME_MAX 249     /* Kafka's longest topic name */
#define TP_PROBE_SEEDS 8    /* distinct pattern characters used in probes */

struct tpattern {
	char *text;
	pcre2_code *code;
	pcre2_match_context *mctx;
	int warned;         /* a limit hit or a bad name was logged */
};

/* snprintf through a va_list: messages are cut to the caller's buffer by
 * design, which -Wformat-truncation would flag on each direct call. */
static void tp_fmt(char *buf, size_t len, const char *f, ...) PRINTF_LIKE(3, 4);
static void tp_fmt(char *buf, size_t len, const char *f, ...)
{
	va_list ap;

	if (buf == NULL || len == 0)
		return;
	va_start(ap, f);
	vsnprintf(buf, len, f, ap);
	va_end(ap);
}

static void tp_pcre_message(int code, char *buf, size_t len)
{
	PCRE2_UCHAR b[256];

	if (pcre2_get_error_message(code, b, sizeof(b)) < 0)
		tp_fmt((char *)b, sizeof(b), "PCRE2 error %d", code);
	tp_fmt(buf, len, "%s", (const char *)b);
}

struct tpattern *tpattern_new(const char *pattern, char *err, size_t errlen)
{
	pcre2_compile_context *cctx = NULL;
	struct tpattern *p = NULL;
	size_t len = strlen(pattern), size = 0;
	PCRE2_SIZE off = 0;
	int ec = 0;

	if (len == 0) {
		tp_fmt(err, errlen, "is empty");
		return NULL;
	}
	if (len > TPATTERN_MAX_LEN) {
		tp_fmt(err, errlen, "is refused: it is %zu bytes long, more than "
		    "the limit of %d", len, TPATTERN_MAX_LEN);
		return NULL;
	}
	p = calloc(1, sizeof(*p));
	cctx = pcre2_compile_context_create(NULL);
	if (p == NULL || cctx == NULL || (p->text = strdup(pattern)) == NULL ||
	    (p->mctx = pcre2_match_context_create(NULL)) == NULL)
		goto oom;
	if (pcre2_set_parens_nest_limit(cctx, TPATTERN_MAX_NEST) != 0 ||
	    pcre2_set_max_pattern_length(cctx, TPATTERN_MAX_LEN) != 0)
		goto oom;
	p->code = pcre2_compile((PCRE2_SPTR)pattern, len, TP_OPTIONS, &ec, &off,
	    cctx);
	if (p->code == NULL) {
		char m[256];

		tp_pcre_message(ec, m, sizeof(m));
		if (ec == PCRE2_ERROR_PARENTHESES_NEST_TOO_DEEP)
			tp_fmt(err, errlen, "is refused: %s (the limit is %d) at "
			    "offset %zu", m, TPATTERN_MAX_NEST, (size_t)off);
		else if (ec == PCRE2_ERROR_PATTERN_TOO_LARGE ||
		    ec == PCRE2_ERROR_HEAP_FAILED)
			tp_fmt(err, errlen, "is refused: %s", m);
		else
			tp_fmt(err, errlen, "is not a valid regular expression: "
			    "%s at offset %zu", m, (size_t)off);
		goto fail;
	}
	if (pcre2_pattern_info(p->code, PCRE2_INFO_SIZE, &size) != 0)
		size = SIZE_MAX;
	if (size > TPATTERN_MAX_COMPILED) {
		tp_fmt(err, errlen, "is refused: its compiled form is %zu bytes, "
		    "more than the limit of %d bytes", size, TPATTERN_MAX_COMPILED);
		goto fail;
	}
	if (pcre2_set_match_limit(p->mctx, TPATTERN_MATCH_LIMIT) != 0 ||
	    pcre2_set_depth_limit(p->mctx, TPATTERN_DEPTH_LIMIT) != 0 ||
	    pcre2_set_heap_limit(p->mctx, TPATTERN_HEAP_LIMIT_KIB) != 0)
		goto oom;
	pcre2_compile_context_free(cctx);
	return p;
oom:
	tp_fmt(err, errlen, "cannot be compiled: out of memory");
fail:
	pcre2_compile_context_free(cctx);
	tpattern_free(p);
	return NULL;
}

void tpattern_free(struct tpattern *p)
{
	if (p == NULL)
		return;
	pcre2_code_free(p->code);
	pcre2_match_context_free(p->mctx);
	free(p->text);
	free(p);
}

const char *tpattern_text(const struct tpattern *p)
{
	return p->text;
}

/* Names a limit the way an operator can look it up. */
static void tp_limit_message(int rc, char *buf, size_t len)
{
	switch (rc) {
	case PCRE2_ERROR_MATCHLIMIT:
		tp_fmt(buf, len, "the match limit (%d backtracking steps)",
		    TPATTERN_MATCH_LIMIT);
		break;
	case PCRE2_ERROR_DEPTHLIMIT:
		tp_fmt(buf, len, "the depth limit (%d nested backtracking "
		    "points)", TPATTERN_DEPTH_LIMIT);
		break;
	case PCRE2_ERROR_HEAPLIMIT:
		tp_fmt(buf, len, "the heap limit (%d KiB)",
		    TPATTERN_HEAP_LIMIT_KIB);
		break;
	default:
		tp_pcre_message(rc, buf, len);
		break;
	}
}

static int tp_is_limit(int rc)
{
	return rc == PCRE2_ERROR_MATCHLIMIT || rc == PCRE2_ERROR_DEPTHLIMIT ||
	    rc == PCRE2_ERROR_HEAPLIMIT;
}

/* pcre2_match() on a name of len bytes: >= 0 match, else a PCRE2 error. */
static int tp_exec(struct tpattern *p, const char *name, size_t len)
{
	/* Per call, not per pattern: since PCRE2 10.41 a match data block
	 * keeps the heap its largest match needed (up to the heap limit). */
	pcre2_match_data *md = pcre2_match_data_create(1, NULL);
	int rc;

	if (md == NULL)
		return PCRE2_ERROR_NOMEMORY;
	rc = pcre2_match(p->code, (PCRE2_SPTR)name, len, 0, 0, md, p->mctx);
	pcre2_match_data_free(md);
	return rc;
}

int tpattern_match_err(struct tpattern *p, const char *name, char *err,
    size_t errlen)
{
	int rc = tp_exec(p, name, strlen(name));
	char m[160];

	if (rc >= 0)
		return 1;
	if (rc == PCRE2_ERROR_NOMATCH)
		return 0;
	tp_limit_message(rc, m, sizeof(m));
	if (tp_is_limit(rc))
		tp_fmt(err, errlen, "matching it against '%.64s%s' hit %s", name,
		    strlen(name) > 64 ? "..." : "", m);
	else
		tp_fmt(err, errlen, "cannot be matched against '%.64s%s': %s",
		    name, strlen(name) > 64 ? "..." : "", m);
	return -1;
}

int tpattern_match(struct tpattern *p, const char *name)
{
	char err[384];
	int rc = tpattern_match_err(p, name, err, sizeof(err));

	if (rc >= 0)
		return rc;
	if (!p->warned) {
		p->warned = 1;
		log_warnx("topic pattern '%.200s' %s: counted as no match (logged "
		    "once per pattern)", p->text, err);
	}
	return 0;
}

char *tpattern_list_next(char *s, char **rest)
{
	int depth = 0, in_class = 0, quoted = 0;
	char *p;

	for (p = s; *p != '\0'; p++) {
		if (*p == '\\' && p[1] != '\0') {
			quoted = p[1] == 'Q' ? 1 : p[1] == 'E' ? 0 : quoted;
			p++;
		} else if (quoted) {
			continue;
		} else if (*p == '[') {
			in_class++;   /* nested: [[:alpha:]], Java's [a-z&&[^e]] */
		} else if (in_class > 0) {
			in_class -= *p == ']';
		} else if (*p == '(' || *p == '{') {
			depth++;
		} else if ((*p == ')' || *p == '}') && depth > 0) {
			depth--;
		} else if (*p == ',' && depth == 0) {
			*p = '\0';
			*rest = p + 1;
			return s;
		}
	}
	*rest = NULL;
	return s;
}

/* 1 if c may appear in a topic name. */
static int tp_name_char(unsigned char c)
{
	return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
	    (c >= '0' && c <= '9') || c == '.' || c == '_' || c == '-';
}

/*
 * Runs one probe; 0, or -1 with the reason in err.  The probe's name is
 * shown shortened: the first characters and its length.
 */
static int tp_probe(struct tpattern *p, const char *name, size_t len,
    char *err, size_t errlen)
{
	int rc = tp_exec(p, name, len);
	char m[160];

	if (rc >= 0 || rc == PCRE2_ERROR_NOMATCH)
		return 0;
	tp_limit_message(rc, m, sizeof(m));
	tp_fmt(err, errlen, "is refused: matching it against the %zu-character "
	    "name '%.12s...' hit %s; simplify it (nested or adjacent "
	    "quantifiers over the same characters backtrack without bound)",
	    len, name, m);
	return -1;
}

int tpattern_check(const char *pattern, const char *what, char *err,
    size_t errlen)
{
	char seeds[TP_PROBE_SEEDS + 3], lits[TP_PROBE_SEEDS + 1];
	char name[TP_NAME_MAX + 2], why[384];
	struct tpattern *p = tpattern_new(pattern, why, sizeof(why));
	size_t ns = 0, nl = 0;
	int rc = -1;

	if (p == NULL)
		goto out;
	/* Seeds: the name characters the pattern names, first come first,
	 * and a letter, a digit and a separator for its classes and dots. */
	for (const char *s = pattern; *s != '\0' && nl < TP_PROBE_SEEDS; s++)
		if (tp_name_char((unsigned char)*s) && memchr(lits, *s, nl) == NULL)
			lits[nl++] = *s;
	memcpy(seeds, lits, nl);
	ns = nl;
	for (const char *s = "a0-"; *s != '\0'; s++)
		if (memchr(seeds, *s, ns) == NULL)
			seeds[ns++] = *s;
	/*
	 * Per seed c: c repeated to the longest name; the same with a tail no
	 * name can match ('!'), which makes a greedy match backtrack through
	 * every split; and a run of c, then the pattern's characters in order,
	 * then the tail, which gets past a required-character shortcut.
	 */
	for (size_t i = 0; i < ns; i++) {
		size_t run = TP_NAME_MAX - 1 - nl;

		memset(name, seeds[i], TP_NAME_MAX);
		if (tp_probe(p, name, TP_NAME_MAX, why, sizeof(why)) != 0)
			goto out;
		name[TP_NAME_MAX - 1] = '!';
		if (tp_probe(p, name, TP_NAME_MAX, why, sizeof(why)) != 0)
			goto out;
		memcpy(name + run, lits, nl);
		name[run + nl] = '!';
		if (tp_probe(p, name, TP_NAME_MAX, why, sizeof(why)) != 0)
			goto out;
	}
	rc = 0;
out:
	if (rc != 0)
		tp_fmt(err, errlen, "%s%s'%.200s%s' %s", what != NULL ? what : "",
		    what != NULL ? " " : "", pattern,
		    strlen(pattern) > 200 ? "..." : "", why);
	tpattern_free(p);
	return rc;
}
