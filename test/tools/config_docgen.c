/*
 * config_docgen: writes the documents generated from the config key
 * tables, for test_config_docs.py and for regenerating them by hand:
 *   config_docgen example       > etc/mirrord.yaml
 *   config_docgen mdoc          (the key list inside man/mirrord.yaml.5)
 *   config_docgen mirror-mdoc   (mirror config reference for man pages)
 *   config_docgen mirror-example
 *   config_docgen check FILE    (loads FILE; prints errors or the dump)
 */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "daemonconf.h"
#include "mirrorconf.h"

int main(int argc, char **argv)
{
	if (argc == 2 && strcmp(argv[1], "example") == 0) {
		config_write_example(stdout);
	} else if (argc == 2 && strcmp(argv[1], "mdoc") == 0) {
		config_write_mdoc(stdout);
	} else if (argc == 2 && strcmp(argv[1], "mirror-mdoc") == 0) {
		mirrorconf_write_mdoc(stdout);
	} else if (argc == 2 && strcmp(argv[1], "mirror-example") == 0) {
		mirrorconf_write_example(stdout);
	} else if (argc == 3 && strcmp(argv[1], "check") == 0) {
		struct config_errors errs;
		struct config *cfg;
		int rc;

		config_errors_init(&errs);
		rc = config_load(argv[2], &cfg, &errs);
		if (rc < 0)
			config_errors_print(&errs, stderr);
		else
			config_dump(cfg, stdout);
		config_errors_fini(&errs);
		config_free(cfg);
		return rc < 0 ? 1 : 0;
	} else {
		fprintf(stderr, "usage: config_docgen example|mdoc|mirror-mdoc|mirror-example|check FILE\n");
		return 2;
	}
	return fflush(stdout) == 0 ? 0 : 1;
}
