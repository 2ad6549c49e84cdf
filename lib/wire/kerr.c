/* kerr.c: lookups over the KERR_TABLE X-macro (see kerr.h). */
#include "config.h"

#include <stddef.h>
#include <strings.h>

#include "compat.h"
#include "kerr.h"

struct kerr_row {
	int16_t code;
	int8_t retriable;
	const char *name, *msg;
};

static const struct kerr_row kerr_rows[] = {
#define X(code, name, retry, msg) { (code), (retry), #name, msg },
	KERR_TABLE(X)
#undef X
};

/* The table is contiguous from -1, so a code indexes its row directly. */
#define KERR_FIRST (-1)
_Static_assert(ARRAY_SIZE(kerr_rows) == 148, "KERR_TABLE must be contiguous from -1 to 146");

static const struct kerr_row *kerr_row(int16_t code)
{
	int idx = (int)code - KERR_FIRST;

	if (idx < 0 || (size_t)idx >= ARRAY_SIZE(kerr_rows))
		return NULL;
	return &kerr_rows[idx];
}

const char *kerr_name(int16_t code)
{
	const struct kerr_row *r = kerr_row(code);

	return r ? r->name : "UNKNOWN_CODE";
}

const char *kerr_message(int16_t code)
{
	const struct kerr_row *r = kerr_row(code);

	return r ? r->msg : "The error code is not known to this version of mirrord.";
}

int kerr_retriable(int16_t code)
{
	const struct kerr_row *r = kerr_row(code);

	return r ? r->retriable : 0;
}

int kerr_known(int16_t code)
{
	return kerr_row(code) != NULL;
}

int16_t kerr_from_name(const char *name)
{
	if (name == NULL)
		return -2;
	if (strncasecmp(name, "KERR_", 5) == 0)
		name += 5;
	for (size_t i = 0; i < ARRAY_SIZE(kerr_rows); i++)
		if (strcasecmp(kerr_rows[i].name, name) == 0)
			return kerr_rows[i].code;
	return -2;
}
