/* kafka-mirrors: placeholder main until the CLI lands (issue 2). */
#include "config.h"

#include <stdio.h>

int main(void)
{
	fprintf(stderr, "kafka-mirrors %s: not built yet\n", PACKAGE_VERSION);
	return 1;
}
