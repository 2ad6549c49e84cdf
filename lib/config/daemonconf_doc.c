/*
 * daemonconf_doc.c: everything daemonconf writes from its key table: single
 * values (config_format_value), the effective configuration
 * (config_dump, for --check-config), the annotated example
 * (etc/mirrord.yaml) and the key list of mirrord.yaml(5).
 */
#include "config.h"

#include <ctype.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "authz.h"
#include "compat.h"
#include "daemonconf.h"
#include "daemonconf_int.h"

/* ---- formatting -------------------------------------------------------- */

/* Writes s as a YAML scalar, quoted when plain style would change it. */
static void yaml_scalar(FILE *out, const char *s)
{
	int plain = *s != '\0' && strpbrk(s, ":#{}[],&*!|>'\"%@`\\\n\t") == NULL &&
	    strcmp(s, "~") != 0 && strcasecmp(s, "null") != 0 &&
	    !isspace((unsigned char)s[0]) && !isspace((unsigned char)s[strlen(s) - 1]) &&
	    s[0] != '-' && s[0] != '?';

	if (plain) {
		fputs(s, out);
		return;
	}
	fputc('"', out);
	for (; *s != '\0'; s++) {
		if (*s == '"' || *s == '\\')
			fprintf(out, "\\%c", *s);
		else if (*s == '\n')
			fputs("\\n", out);
		else if (*s == '\t')
			fputs("\\t", out);
		else if ((unsigned char)*s < 0x20)
			fprintf(out, "\\x%02x", (unsigned char)*s);
		else
			fputc(*s, out);
	}
	fputc('"', out);
}

static void hostport_text(const struct config_hostport *hp, char *buf, size_t len)
{
	if (hp->host == NULL)
		snprintf(buf, len, "%s", "");
	else if (strchr(hp->host, ':') != NULL)
		snprintf(buf, len, "[%s]:%u", hp->host, hp->port);
	else
		snprintf(buf, len, "%s:%u", hp->host, hp->port);
}

static const char *choice_name(const char *choices, int idx, char *buf, size_t len)
{
	const char *p = choices;

	for (int i = 0; i < idx && p != NULL; i++)
		if ((p = strchr(p, '|')) != NULL)
			p++;
	if (p == NULL)
		return "?";
	snprintf(buf, len, "%.*s", (int)strcspn(p, "|"), p);
	return buf;
}

/* YAML text of s as yaml_scalar() writes it, into buf. */
static size_t scalar_into(const char *s, char *buf, size_t len)
{
	char *text = NULL;
	size_t n = 0;
	FILE *f = open_memstream(&text, &n);

	if (f == NULL)
		return 0;
	yaml_scalar(f, s);
	if (fclose(f) != 0 || text == NULL) {
		free(text);
		return 0;
	}
	n = (size_t)snprintf(buf, len, "%s", text);
	free(text);
	return n;
}

/* Appends to buf (of len, used so far *used) without overrunning it. */
static void put(char *buf, size_t len, size_t *used, const char *s, int quote)
{
	if (*used >= len)
		return;
	if (quote)
		*used += scalar_into(s, buf + *used, len - *used);
	else
		*used += (size_t)snprintf(buf + *used, len - *used, "%s", s);
}

/* A flow list of YAML scalars: ["User:a", "User:b"]. */
static void format_strv(char *const *v, size_t n, char *buf, size_t len, size_t *used)
{
	put(buf, len, used, "[", 0);
	for (size_t i = 0; i < n; i++) {
		if (i > 0)
			put(buf, len, used, ", ", 0);
		put(buf, len, used, v[i], 1);
	}
	put(buf, len, used, "]", 0);
}

/* The operations of a rule as a flow list: [all], or each by name. */
static void format_ops(unsigned ops, char *buf, size_t len, size_t *used)
{
	int k = 0;

	if (ops == AUTHZ_OP_ALL) {
		put(buf, len, used, "[all]", 0);
		return;
	}
	put(buf, len, used, "[", 0);
	for (int op = 0; op < AUTHZ_OP_COUNT; op++) {
		if (!(ops & AUTHZ_OP_BIT(op)))
			continue;
		if (k++ > 0)
			put(buf, len, used, ", ", 0);
		put(buf, len, used, authz_op_name((enum authz_op)op), 0);
	}
	put(buf, len, used, "]", 0);
}

/* One rule as a flow mapping. */
static void format_acl(const struct config_acl *a, char *buf, size_t len, size_t *used)
{
	put(buf, len, used, "{principal: ", 0);
	put(buf, len, used, a->principal, 1);
	put(buf, len, used, ", operations: ", 0);
	format_ops(a->ops, buf, len, used);
	put(buf, len, used, ", mirrors: ", 0);
	format_strv(a->mirrors, a->nmirrors, buf, len, used);
	put(buf, len, used, a->deny ? ", permission: deny}" : ", permission: allow}", 0);
}

static int format_field(const struct config *cfg, const struct ckey *k, char *buf, size_t len)
{
	const void *f = config_field(cfg, k);
	char tmp[64];

	switch (k->type) {
	case CT_STRING:
	case CT_HOSTLIST:
		snprintf(buf, len, "%s", *(char *const *)f ? *(char *const *)f : "");
		return 0;
	case CT_INT:
	case CT_DURATION:
		snprintf(buf, len, "%" PRId64, *(const int64_t *)f);
		return 0;
	case CT_SIZE:
		config_format_bound(k, *(const int64_t *)f, buf, len);
		return 0;
	case CT_BOOL:
		snprintf(buf, len, "%s", *(const int *)f ? "true" : "false");
		return 0;
	case CT_ENUM:
		snprintf(buf, len, "%s", choice_name(k->choices, *(const int *)f, tmp, sizeof(tmp)));
		return 0;
	case CT_HOSTPORT:
		hostport_text(f, buf, len);
		return 0;
	case CT_PATHLIST: {
		const struct config_list *l = f;
		size_t used = 0;

		buf[0] = '\0';
		for (size_t i = 0; i < l->n && used < len; i++)
			used += (size_t)snprintf(buf + used, len - used, "%s%s",
			    i ? "," : "", l->v[i]);
		return 0;
	}
	case CT_MAP: {
		const struct config_map *m = f;
		size_t used = 0;

		used += (size_t)snprintf(buf, len, "{");
		for (size_t i = 0; i < m->n && used < len; i++)
			used += (size_t)snprintf(buf + used, len - used, "%s%s: %s", i ? ", " : "",
			    m->names[i], config_redact(m->names[i], m->values[i]));
		if (used < len)
			snprintf(buf + used, len - used, "}");
		return 0;
	}
	case CT_PRINCIPALS: {
		const struct config_principals *p = f;
		size_t used = 0;

		buf[0] = '\0';
		format_strv(p->v, p->n, buf, len, &used);
		return 0;
	}
	case CT_ACLS: {
		const struct config_acls *l = f;
		size_t used = 0;

		buf[0] = '\0';
		put(buf, len, &used, "[", 0);
		for (size_t i = 0; i < l->n; i++) {
			if (i > 0)
				put(buf, len, &used, ", ", 0);
			format_acl(&l->v[i], buf, len, &used);
		}
		put(buf, len, &used, "]", 0);
		return 0;
	}
	}
	return -1;
}

int config_format_value(const struct config *cfg, const char *key, char *buf, size_t len)
{
	const struct ckey *k = config_key_find(key);

	if (k == NULL || len == 0)
		return -1;
	return format_field(cfg, k, buf, len);
}

void config_dump(const struct config *cfg, FILE *out)
{
	char buf[4096];

	fprintf(out, "# effective configuration of %s\n", cfg->path);
	for (size_t i = 0; i < config_nkeys; i++) {
		const struct ckey *k = &config_keys[i];
		size_t sl = config_section_len(k->path);

		if (i == 0 || sl != config_section_len(config_keys[i - 1].path) ||
		    strncmp(k->path, config_keys[i - 1].path, sl) != 0)
			fprintf(out, "%.*s:\n", (int)sl, k->path);
		if (k->type == CT_MAP) {
			const struct config_map *m = config_field(cfg, k);

			fprintf(out, "  %s:%s\n", k->path + sl + 1, m->n ? "" : " {}");
			for (size_t j = 0; j < m->n; j++) {
				fprintf(out, "    %s: ", m->names[j]);
				yaml_scalar(out, config_redact(m->names[j], m->values[j]));
				fputc('\n', out);
			}
			continue;
		}
		if (k->type == CT_PRINCIPALS) {
			const struct config_principals *p = config_field(cfg, k);

			fprintf(out, "  %s:%s\n", k->path + sl + 1, p->n ? "" : " []");
			for (size_t j = 0; j < p->n; j++) {
				fputs("    - ", out);
				yaml_scalar(out, p->v[j]);
				fputc('\n', out);
			}
			continue;
		}
		if (k->type == CT_ACLS) {
			const struct config_acls *l = config_field(cfg, k);

			fprintf(out, "  %s:%s\n", k->path + sl + 1, l->n ? "" : " []");
			for (size_t j = 0; j < l->n; j++) {
				const struct config_acl *a = &l->v[j];
				char list[8192];
				size_t used = 0;

				fputs("    - principal: ", out);
				yaml_scalar(out, a->principal);
				list[0] = '\0';
				format_ops(a->ops, list, sizeof(list), &used);
				fprintf(out, "\n      operations: %s\n", list);
				used = 0;
				list[0] = '\0';
				format_strv(a->mirrors, a->nmirrors, list, sizeof(list), &used);
				/* A list too long for one flow line goes in block style. */
				if (used < sizeof(list) - 1) {
					fprintf(out, "      mirrors: %s\n", list);
				} else {
					fputs("      mirrors:\n", out);
					for (size_t m = 0; m < a->nmirrors; m++) {
						fputs("        - ", out);
						yaml_scalar(out, a->mirrors[m]);
						fputc('\n', out);
					}
				}
				fprintf(out, "      permission: %s\n", a->deny ? "deny" : "allow");
			}
			continue;
		}
		format_field(cfg, k, buf, sizeof(buf));
		fprintf(out, "  %s: ", k->path + sl + 1);
		/* server.ssl.key_password; only "password" keys: the path of
		 * server.sasl.credentials_file is no secret. */
		if (k->type == CT_STRING &&
		    *(char *const *)config_field(cfg, k) == NULL)
			fputs("~", out); /* unset: loads back as unset */
		else if (k->type == CT_STRING && buf[0] != '\0' &&
		    strstr(k->path, "password") != NULL)
			yaml_scalar(out, "(hidden)");
		else if (k->type == CT_STRING || k->type == CT_HOSTPORT || k->type == CT_HOSTLIST ||
		    k->type == CT_PATHLIST)
			yaml_scalar(out, buf);
		else
			fputs(buf, out);
		fputc('\n', out);
	}
}

/* Word-wraps text at width columns, each line starting with lead. */
static void wrap(FILE *out, const char *lead, const char *text, size_t width)
{
	const char *p = text;

	while (*p != '\0') {
		size_t room = width - strlen(lead), n = strlen(p);

		if (n > room) {
			n = room;
			while (n > 0 && p[n] != ' ')
				n--;
			if (n == 0)
				n = strcspn(p, " ");
		}
		fprintf(out, "%s%.*s\n", lead, (int)n, p);
		p += n;
		while (*p == ' ')
			p++;
	}
}

static void describe_type(const struct ckey *k, char *buf, size_t len)
{
	char r[96], tn[96];

	switch (k->type) {
	case CT_INT:
		config_range_text(k, r, sizeof(r));
		snprintf(buf, len, "integer %s", r);
		break;
	case CT_DURATION:
		config_range_text(k, r, sizeof(r));
		snprintf(buf, len, "duration %s (a plain number is milliseconds; ms, s, m, h suffixes work)", r);
		break;
	case CT_SIZE:
		config_range_text(k, r, sizeof(r));
		snprintf(buf, len, "size %s (a plain number is bytes; KiB, MiB, GiB suffixes work)", r);
		break;
	case CT_BOOL:
		snprintf(buf, len, "boolean (true or false)");
		break;
	case CT_HOSTPORT:
		snprintf(buf, len, "host:port%s", (k->flags & KF_PORT0) ? " (port 0: any free port)" : "");
		break;
	default:
		snprintf(buf, len, "%s", config_type_name(k, tn, sizeof(tn)));
		break;
	}
}

static const char *default_text(const struct ckey *k)
{
	if (k->flags & KF_REQUIRED)
		return "none, required";
	if (k->def == NULL || k->def[0] == '\0')
		return "empty";
	return k->def;
}

void config_write_example(FILE *out)
{
	char t[256], line[512];

	fputs("# mirrord.yaml: configuration of mirrord, the KIP-1279 cluster mirroring\n"
	    "# daemon.  See mirrord.yaml(5).\n"
	    "#\n"
	    "# Every key is listed with its meaning, type and default.  Keys that are\n"
	    "# commented out show their default value.  \"Reload: yes\" keys take effect\n"
	    "# on SIGHUP; the others need a restart.  `mirrord --check-config FILE`\n"
	    "# checks a file and prints the effective configuration.\n"
	    "#\n"
	    "# This file is generated from the key table in lib/config/daemonconf.c\n"
	    "# (test/tools/config_docgen example); test/mock/test_config_docs.py keeps it in step.\n", out);
	for (size_t i = 0; i < config_nkeys; i++) {
		const struct ckey *k = &config_keys[i];
		size_t sl = config_section_len(k->path);
		const char *leaf = k->path + sl + 1;

		if (i == 0 || sl != config_section_len(config_keys[i - 1].path) ||
		    strncmp(k->path, config_keys[i - 1].path, sl) != 0)
			fprintf(out, "\n%.*s:\n", (int)sl, k->path);
		else
			fputc('\n', out);
		wrap(out, "  # ", k->desc, 78);
		describe_type(k, t, sizeof(t));
		snprintf(line, sizeof(line), "Type: %s.", t);
		wrap(out, "  # ", line, 78);
		snprintf(line, sizeof(line), "Default: %s. Reload: %s.", default_text(k),
		    (k->flags & KF_RELOAD) ? "yes (SIGHUP)" : "no, needs a restart");
		wrap(out, "  # ", line, 78);
		if (k->type == CT_MAP || k->type == CT_PRINCIPALS || k->type == CT_ACLS) {
			const char *p = k->example;

			fprintf(out, "  #%s:\n", leaf);
			while (p != NULL && *p != '\0') {
				size_t n = strcspn(p, "\n");

				fprintf(out, "  #  %.*s\n", (int)n, p);
				p += n;
				if (*p == '\n')
					p++;
			}
		} else if (k->flags & KF_REQUIRED) {
			fprintf(out, "  %s: %s\n", leaf, k->example);
		} else if ((k->def == NULL || k->def[0] == '\0') &&
		    k->example != NULL) {
			fprintf(out, "  #%s: %s\n", leaf, k->example);
		} else if (k->def == NULL || k->def[0] == '\0') {
			fprintf(out, "  #%s: \"\"\n", leaf);
		} else {
			fprintf(out, "  #%s: %s\n", leaf, k->def);
		}
	}
}

/* One mdoc text line; a leading '.' or '\'' would read as a macro. */
static void mdoc_put(FILE *out, const char *s, size_t n)
{
	if (n > 0 && (s[0] == '.' || s[0] == '\''))
		fputs("\\&", out);
	for (size_t i = 0; i < n; i++) {
		if (s[i] == '\\')
			fputs("\\e", out);
		else
			fputc(s[i], out);
	}
	fputc('\n', out);
}

void config_mdoc_text(FILE *out, const char *s)
{
	const size_t width = 78;

	while (*s != '\0') {
		size_t len = 0;

		/* A sentence ends at ". " before a capital: new sentence, new line. */
		while (s[len] != '\0' && !(len > 0 && s[len - 1] == '.' &&
		    s[len] == ' ' && isupper((unsigned char)s[len + 1])))
			len++;
		/* Wrap the sentence at the last space that fits. */
		while (len > 0) {
			size_t n = len;

			if (n > width) {
				n = width;
				while (n > 0 && s[n] != ' ')
					n--;
				if (n == 0) /* one word longer than the width */
					n = strcspn(s, " ") < len ? strcspn(s, " ") : len;
			}
			mdoc_put(out, s, n);
			while (n < len && s[n] == ' ')
				n++;
			s += n;
			len -= n;
		}
		while (*s == ' ')
			s++;
	}
}

void config_write_mdoc(FILE *out)
{
	char t[256], tn[96], line[512];

	fputs(".\\\" Generated from the key table in lib/config/daemonconf.c by\n"
	    ".\\\" test/tools/config_docgen mdoc; test/mock/test_config_docs.py checks it.\n"
	    ".Bl -tag -width Ds\n", out);
	for (size_t i = 0; i < config_nkeys; i++) {
		const struct ckey *k = &config_keys[i];

		fprintf(out, ".It Ic %s Pq \"%s\"\n", k->path, config_type_name(k, tn, sizeof(tn)));
		config_mdoc_text(out, k->desc);
		describe_type(k, t, sizeof(t));
		snprintf(line, sizeof(line), "Type: %s. Default: %s. Reload: %s.", t,
		    default_text(k), (k->flags & KF_RELOAD) ? "takes effect on SIGHUP" :
		    "needs a restart; on SIGHUP a changed value is logged and ignored");
		fputs(".Pp\n", out);
		config_mdoc_text(out, line);
	}
	fputs(".El\n", out);
}
