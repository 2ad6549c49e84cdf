/*
 * authz.c: see authz.h.  Linear over the rules: a mirrord has a handful of
 * rules, and the config caps them (AUTHZ_MAX_RULES).
 */
#include "config.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "authz.h"
#include "compat.h"
#include "daemonconf.h"

/* Longest mirror name (doc/protocol.md, error 135). */
#define AUTHZ_MAX_MIRROR_LEN 249

struct authz_rule {
	char *principal;      /* "User:alice", or "User:*" */
	size_t type_len;      /* length of "User:" including the colon */
	int wildcard;         /* name part is "*" */
	unsigned ops;         /* AUTHZ_OP_BIT()s as written */
	int deny;
	size_t npat;
	char **pat;           /* "name", "prefix*" or "*" */
	int index;            /* position in authorization.acls */
	int line;             /* in the config file, 0 if unknown */
};

struct authz {
	int enabled;
	int mode;             /* enum config_authz_mode, for authz_describe */
	int authn_on;
	char *path;           /* the config file, for reasons */
	size_t nrules;
	struct authz_rule *rules;
	size_t nsupers;
	char **supers;
};

static const char *const op_names[] = {
#define X(e, s) s,
	AUTHZ_OPS(X)
#undef X
};
_Static_assert(ARRAY_SIZE(op_names) == AUTHZ_OP_COUNT, "one name per op");

const char *authz_op_name(enum authz_op op)
{
	return (unsigned)op < AUTHZ_OP_COUNT ? op_names[op] : "?";
}

/* ---- validation --------------------------------------------------------- */

int authz_parse_op(const char *s, unsigned *mask)
{
	if (strcmp(s, "all") == 0) {
		*mask = AUTHZ_OP_ALL;
		return 0;
	}
	for (size_t i = 0; i < AUTHZ_OP_COUNT; i++) {
		if (strcmp(s, op_names[i]) == 0) {
			*mask = AUTHZ_OP_BIT(i);
			return 0;
		}
	}
	return -1;
}

int authz_check_principal(const char *s, int wildcard, char *why,
    size_t whylen)
{
	const char *colon = strchr(s, ':');
	size_t n = strlen(s);

	if (n > AUTHZ_MAX_PRINCIPAL_LEN) {
		snprintf(why, whylen, "principal longer than %d bytes",
		    AUTHZ_MAX_PRINCIPAL_LEN);
		return -1;
	}
	if (strcmp(s, "*") == 0) {
		snprintf(why, whylen, "'*' is not a principal; write User:* for "
		    "every user");
		return -1;
	}
	if (colon == NULL || colon == s || colon[1] == '\0') {
		snprintf(why, whylen, "'%.64s' is not a principal: expected "
		    "Type:name, such as User:alice%s", s,
		    wildcard ? " (User:* for every user)" : "");
		return -1;
	}
	for (const char *p = s; p < colon; p++) {
		if (!isalnum((unsigned char)*p) && *p != '_') {
			snprintf(why, whylen, "'%.64s': the principal type before "
			    "':' may hold only letters, digits and '_'", s);
			return -1;
		}
	}
	for (const char *p = s; *p != '\0'; p++) {
		if ((unsigned char)*p < 0x20 || *p == 0x7f) {
			snprintf(why, whylen, "the principal contains a control "
			    "character");
			return -1;
		}
	}
	if (strchr(colon + 1, '*') != NULL) {
		if (strcmp(colon + 1, "*") != 0) {
			snprintf(why, whylen, "'%.64s': '*' stands only for a whole "
			    "name (%.*s*), not part of one", s,
			    (int)(colon - s + 1), s);
			return -1;
		}
		if (!wildcard) {
			snprintf(why, whylen, "'%.64s': a wildcard cannot be a super "
			    "user; allow all on '*' in authorization.acls instead", s);
			return -1;
		}
	}
	return 0;
}

static int mirror_char(char c)
{
	return isalnum((unsigned char)c) || c == '.' || c == '_' || c == '-';
}

int authz_check_pattern(const char *s, char *why, size_t whylen)
{
	size_t n = strlen(s);

	if (n == 0) {
		snprintf(why, whylen, "empty mirror pattern; '*' means every "
		    "mirror");
		return -1;
	}
	if (n > AUTHZ_MAX_MIRROR_LEN + 1) {
		snprintf(why, whylen, "mirror pattern longer than %d characters",
		    AUTHZ_MAX_MIRROR_LEN + 1);
		return -1;
	}
	for (size_t i = 0; i < n; i++) {
		if (s[i] == '*' && i == n - 1)
			break;
		if (s[i] == '*') {
			snprintf(why, whylen, "'%.64s': '*' may only end a mirror "
			    "pattern (prod-* matches every mirror whose name "
			    "starts with prod-)", s);
			return -1;
		}
		if (!mirror_char(s[i])) {
			snprintf(why, whylen, "'%.64s': mirror names hold only "
			    "[a-zA-Z0-9._-], with an optional '*' at the end", s);
			return -1;
		}
	}
	return 0;
}

/* ---- building ------------------------------------------------------------ */

void authz_free(struct authz *az)
{
	if (az == NULL)
		return;
	for (size_t i = 0; i < az->nrules; i++) {
		struct authz_rule *r = &az->rules[i];

		free(r->principal);
		for (size_t j = 0; j < r->npat; j++)
			free(r->pat[j]);
		free(r->pat);
	}
	free(az->rules);
	for (size_t i = 0; i < az->nsupers; i++)
		free(az->supers[i]);
	free(az->supers);
	free(az->path);
	free(az);
}

struct authz *authz_new(const struct config *cfg, int authn_on, char *err,
    size_t errlen)
{
	const struct config_acls *acls = &cfg->authorization_acls;
	const struct config_principals *su = &cfg->authorization_super_users;
	struct authz *az = calloc(1, sizeof(*az));

	if (az == NULL)
		goto oom;
	az->mode = cfg->authorization_enabled;
	az->authn_on = authn_on;
	switch (cfg->authorization_enabled) {
	case CONFIG_AUTHZ_TRUE:
		az->enabled = 1;
		break;
	case CONFIG_AUTHZ_FALSE:
		az->enabled = 0;
		break;
	default:
		az->enabled = authn_on || acls->n > 0 || su->n > 0;
		break;
	}
	if ((az->path = strdup(cfg->path != NULL ? cfg->path : "")) == NULL)
		goto oom;
	if (acls->n > 0 &&
	    (az->rules = calloc(acls->n, sizeof(*az->rules))) == NULL)
		goto oom;
	for (size_t i = 0; i < acls->n; i++) {
		const struct config_acl *c = &acls->v[i];
		struct authz_rule *r = &az->rules[i];
		const char *colon = strchr(c->principal, ':');

		az->nrules++;
		r->index = (int)i;
		r->line = c->line;
		r->ops = c->ops;
		r->deny = c->deny;
		if ((r->principal = strdup(c->principal)) == NULL)
			goto oom;
		r->type_len = colon != NULL ? (size_t)(colon - c->principal) + 1 : 0;
		r->wildcard = colon != NULL && strcmp(colon + 1, "*") == 0;
		if (c->nmirrors > 0 &&
		    (r->pat = calloc(c->nmirrors, sizeof(*r->pat))) == NULL)
			goto oom;
		for (size_t j = 0; j < c->nmirrors; j++) {
			if ((r->pat[j] = strdup(c->mirrors[j])) == NULL)
				goto oom;
			r->npat++;
		}
	}
	if (su->n > 0 && (az->supers = calloc(su->n, sizeof(*az->supers))) == NULL)
		goto oom;
	for (size_t i = 0; i < su->n; i++) {
		if ((az->supers[i] = strdup(su->v[i])) == NULL)
			goto oom;
		az->nsupers++;
	}
	return az;
oom:
	snprintf(err, errlen, "out of memory building the authorization rules");
	authz_free(az);
	return NULL;
}

int authz_enabled(const struct authz *az)
{
	return az->enabled;
}

size_t authz_rule_count(const struct authz *az)
{
	return az->nrules;
}

size_t authz_super_user_count(const struct authz *az)
{
	return az->nsupers;
}

void authz_describe(const struct authz *az, char *buf, size_t len)
{
	if (az->enabled) {
		snprintf(buf, len, "on (%zu rule%s, %zu super user%s%s)",
		    az->nrules, az->nrules == 1 ? "" : "s", az->nsupers,
		    az->nsupers == 1 ? "" : "s",
		    az->nrules == 0 ? "; everyone else is denied" : "");
	} else if (az->mode == CONFIG_AUTHZ_FALSE) {
		snprintf(buf, len, "off (authorization.enabled is false%s): every "
		    "client may do everything", az->nrules + az->nsupers > 0 ?
		    "; the configured rules are ignored" : "");
	} else {
		snprintf(buf, len, "off (the admin listener does not "
		    "authenticate and no rules are configured): every client may "
		    "do everything");
	}
}

/* ---- deciding -------------------------------------------------------------- */

static int principal_matches(const struct authz_rule *r, const char *p)
{
	if (r->wildcard)
		return strncmp(r->principal, p, r->type_len) == 0;
	return strcmp(r->principal, p) == 0;
}

static int pattern_matches(const char *pat, const char *name)
{
	size_t n = strlen(pat);

	if (n > 0 && pat[n - 1] == '*')
		return strncmp(pat, name, n - 1) == 0;
	return strcmp(pat, name) == 0;
}

static int mirror_matches(const struct authz_rule *r, const char *mirror)
{
	for (size_t i = 0; i < r->npat; i++)
		if (pattern_matches(r->pat[i], mirror))
			return 1;
	return 0;
}

static void rule_reason(const struct authz *az, const struct authz_rule *r,
    const char *verb, char *why, size_t whylen)
{
	if (r->line > 0)
		snprintf(why, whylen, "%s by authorization.acls[%d] (%s:%d)", verb,
		    r->index, az->path, r->line);
	else
		snprintf(why, whylen, "%s by authorization.acls[%d]", verb,
		    r->index);
}

int authz_allowed(const struct authz *az, const char *principal,
    enum authz_op op, const char *mirror, char *why, size_t whylen)
{
	const struct authz_rule *allow = NULL;
	unsigned bit = AUTHZ_OP_BIT(op);

	if (!az->enabled) {
		if (why != NULL)
			snprintf(why, whylen, "authorization is off");
		return 1;
	}
	for (size_t i = 0; i < az->nsupers; i++) {
		if (strcmp(az->supers[i], principal) == 0) {
			if (why != NULL)
				snprintf(why, whylen, "super user");
			return 1;
		}
	}
	for (size_t i = 0; i < az->nrules; i++) {
		const struct authz_rule *r = &az->rules[i];
		unsigned ops = r->ops;

		/* Allowing alter implies describe, alter_configs implies
		 * describe_configs (Kafka's implications); a deny implies
		 * nothing. */
		if (!r->deny && (ops & AUTHZ_OP_BIT(AUTHZ_ALTER)))
			ops |= AUTHZ_OP_BIT(AUTHZ_DESCRIBE);
		if (!r->deny && (ops & AUTHZ_OP_BIT(AUTHZ_ALTER_CONFIGS)))
			ops |= AUTHZ_OP_BIT(AUTHZ_DESCRIBE_CONFIGS);
		if (!(ops & bit) || (r->deny ? 0 : allow != NULL) ||
		    !principal_matches(r, principal) || !mirror_matches(r, mirror))
			continue;
		if (r->deny) {
			if (why != NULL)
				rule_reason(az, r, "denied", why, whylen);
			return 0;
		}
		allow = r;
	}
	if (allow != NULL) {
		if (why != NULL)
			rule_reason(az, allow, "allowed", why, whylen);
		return 1;
	}
	if (why != NULL)
		snprintf(why, whylen, "no rule allows it");
	return 0;
}

int authz_may_alter_some(const struct authz *az, const char *principal)
{
	char probe[AUTHZ_MAX_MIRROR_LEN + 2];

	if (!az->enabled)
		return 1;
	for (size_t i = 0; i < az->nsupers; i++)
		if (strcmp(az->supers[i], principal) == 0)
			return 1;
	for (size_t i = 0; i < az->nrules; i++) {
		const struct authz_rule *r = &az->rules[i];

		if (r->deny || !(r->ops & (AUTHZ_OP_BIT(AUTHZ_ALTER) |
		    AUTHZ_OP_BIT(AUTHZ_ALTER_CONFIGS))) ||
		    !principal_matches(r, principal))
			continue;
		/* The name itself, or the bare prefix ("" for "*"). */
		for (size_t j = 0; j < r->npat; j++) {
			size_t n = strlen(r->pat[j]);

			if (n > 0 && r->pat[j][n - 1] == '*')
				n--;
			snprintf(probe, sizeof(probe), "%.*s", (int)n, r->pat[j]);
			if (authz_allowed(az, principal, AUTHZ_ALTER, probe, NULL, 0) ||
			    authz_allowed(az, principal, AUTHZ_ALTER_CONFIGS, probe,
			    NULL, 0))
				return 1;
		}
	}
	return 0;
}
