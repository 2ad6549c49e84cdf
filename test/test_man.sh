#!/bin/sh
# The manual pages: every page in man/ is clean under `mandoc -Tlint -W
# warning` and installed by man/man.am; mirrord(8) names every metric
# family of lib/ops/metrics_std.h; and once the programs have a real --help,
# every long option they print is documented in their page.
set -u

srcdir=${top_srcdir:-..}
builddir=${top_builddir:-.}
fail=0
bad() { echo "FAIL: $*" >&2; fail=1; }

if ! command -v mandoc >/dev/null 2>&1; then
	echo "SKIP: mandoc not found (Debian package mandoc)"
	exit 77
fi

pages=$(ls "$srcdir"/man/*.[1-9] 2>/dev/null)
[ -n "$pages" ] || { echo "FAIL: no pages in $srcdir/man" >&2; exit 1; }
for page in $pages; do
	name=${page##*/}
	out=$(mandoc -Tlint -W warning "$page" 2>&1)
	if [ $? -ne 0 ] || [ -n "$out" ]; then
		bad "mandoc -Tlint -W warning $name:"
		printf '%s\n' "$out" >&2
	else
		echo "ok: $name lints clean"
	fi
	grep -q "man/$name" "$srcdir/man/man.am" ||
		bad "$name is not listed in man/man.am, so it would not be installed"
done
for listed in $(sed -n 's|.*\(man/[A-Za-z0-9._-]*\.[1-9]\).*|\1|p' "$srcdir/man/man.am"); do
	[ -f "$srcdir/$listed" ] || bad "man/man.am lists $listed, which does not exist"
done

# mirrord(8) documents every exported metric family.
names=$(sed -n 's/.*"\(mirrord_[a-z0-9_]*\)".*/\1/p; s/.*"\(process_[a-z0-9_]*\)".*/\1/p' \
	"$srcdir/lib/ops/metrics_std.h")
[ -n "$names" ] || bad "no metric names found in lib/ops/metrics_std.h"
for n in $names; do
	grep -q "^\.It Sy $n\( \|\$\)" "$srcdir/man/mirrord.8" ||
		bad "metric $n is not documented in the METRICS section of mirrord.8"
done

# Long options printed by a program's --help must be in its page (mdoc
# writes "--opt" as "Fl \-opt": Fl adds the first dash).
check_help() { # program page
	prog=$builddir/daemon/$1
	page=$srcdir/man/$2
	if [ ! -x "$prog" ]; then
		echo "note: $prog not built; its options were not compared with $2"
		return
	fi
	help=$("$prog" --help 2>&1) || help=$("$prog" -h 2>&1) || {
		echo "note: $1 --help fails (not implemented yet?); options not compared with $2"
		return
	}
	for opt in $(printf '%s\n' "$help" | grep -o -- '--[a-z][a-z-]*' | sort -u); do
		esc=$(printf '%s' "${opt#-}" | sed 's/-/\\\\-/g')
		grep -q -- "Fl $esc\( \|\$\)" "$page" ||
			bad "$1 --help lists $opt, which $2 does not document"
	done
}
check_help kafka-mirrors kafka-mirrors.1
check_help mirrord mirrord.8

exit $fail
