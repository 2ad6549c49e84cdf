/* mirrord: placeholder main until the daemon core lands (issue 2). */
#include "config.h"

#include <stdio.h>

int main(void)
{
	fprintf(stderr, "mirrord %s: daemon core not built yet\n", PACKAGE_VERSION);
	return 1;
}
