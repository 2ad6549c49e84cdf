/*
 * replay.c: the main() of every fuzz harness's replay program.
 *
 * Each harness (test/fuzz/fuzz_*.c) defines LLVMFuzzerTestOneInput() and
 * fuzz_corpus, the name of its corpus directory.  Built with clang and
 * -fsanitize=fuzzer it is a libFuzzer target; linked with this file it is a
 * plain program that feeds it every file of test/fuzz/corpus/<fuzz_corpus>
 * (or of the paths given), so `make check` replays the saved corpus under
 * the build's own sanitizers.  Each input is copied into an exact-size
 * buffer so that ASan catches a read past its end.  An optional
 * LLVMFuzzerInitialize() runs first, as libFuzzer would run it.
 */
#include "config.h"

#include <sys/stat.h>
#include <dirent.h>
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

extern const char fuzz_corpus[];
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerInitialize(int *argc, char ***argv) __attribute__((weak));

static int replay_file(const char *path)
{
	FILE *fp = fopen(path, "rb");
	uint8_t *buf = NULL, *exact;
	size_t len = 0, cap = 0, n;

	if (fp == NULL) {
		fprintf(stderr, "fuzz_%s: %s: %s\n", fuzz_corpus, path,
		    strerror(errno));
		return -1;
	}
	do {
		if (len == cap) {
			uint8_t *nb;

			cap = cap ? 2 * cap : 4096;
			nb = realloc(buf, cap);
			if (nb == NULL) {
				free(buf);
				fclose(fp);
				fprintf(stderr, "fuzz_%s: %s: out of memory\n",
				    fuzz_corpus, path);
				return -1;
			}
			buf = nb;
		}
		n = fread(buf + len, 1, cap - len, fp);
		len += n;
	} while (n > 0);
	fclose(fp);
	exact = malloc(len ? len : 1);
	if (exact == NULL) {
		free(buf);
		return -1;
	}
	if (len > 0)
		memcpy(exact, buf, len);
	free(buf);
	LLVMFuzzerTestOneInput(exact, len);
	free(exact);
	return 0;
}

/* Replays a file, or every file below a directory; counts them. */
static int replay(const char *path, int *count)
{
	struct stat st;
	struct dirent *de;
	DIR *d;
	int rc = 0;

	if (stat(path, &st) != 0) {
		fprintf(stderr, "fuzz_%s: %s: %s\n", fuzz_corpus, path,
		    strerror(errno));
		return -1;
	}
	if (!S_ISDIR(st.st_mode)) {
		(*count)++;
		return replay_file(path);
	}
	if ((d = opendir(path)) == NULL) {
		fprintf(stderr, "fuzz_%s: %s: %s\n", fuzz_corpus, path,
		    strerror(errno));
		return -1;
	}
	while ((de = readdir(d)) != NULL) {
		char sub[4096];

		if (de->d_name[0] == '.')
			continue;
		snprintf(sub, sizeof(sub), "%s/%s", path, de->d_name);
		if (replay(sub, count) < 0)
			rc = -1;
	}
	closedir(d);
	return rc;
}

int main(int argc, char **argv)
{
	const char *src = getenv("top_srcdir");
	char def[4096];
	int count = 0, rc = 0;

	if (LLVMFuzzerInitialize != NULL)
		LLVMFuzzerInitialize(&argc, &argv);
	if (argc < 2) {
		snprintf(def, sizeof(def), "%s/test/fuzz/corpus/%s",
		    src != NULL ? src : ".", fuzz_corpus);
		rc = replay(def, &count);
	}
	for (int i = 1; i < argc; i++)
		if (replay(argv[i], &count) < 0)
			rc = -1;
	if (rc == 0 && count == 0) {
		fprintf(stderr, "fuzz_%s: no corpus files found\n", fuzz_corpus);
		return 1;
	}
	printf("fuzz_%s: %d inputs replayed\n", fuzz_corpus, count);
	return rc == 0 ? 0 : 1;
}
