#!/bin/sh
# The manual pages: every page in man/ is clean under `mandoc -Tlint -W
# warning` and installed by man/man.am; no word of text is read as an mdoc
# macro (rendered, the text is whole); mirrord(8) names every metric
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

# A word of text that is also an mdoc macro name is read as that macro on
# a macro line: ".Dq No mirrors found" renders as "mirrors found", the No
# taken for mdoc's No.  Every macro line that holds such a word (unescaped:
# \&No is text) and no other callable macro must render with its text
# whole.  Compared without white space, so that line breaks do not matter;
# lines with quotes or other escapes are left out.
english_macros="Ad An At Do Em In No Ox So"
callable_macros="Ac Ad An Ao Ap Aq Ar At Bc Bo Bq Brc Bro Brq Bsx Bx Cd Cm Dc
	Do Dq Dv Dx Ec Em En Eo Er Es Ev Fa Fc Fl Fn Fo Fr Ft Fx Ic In Lb Li Lk Ms
	Mt Nm No Ns Nx Oc Oo Op Ox Pa Pc Pf Po Pq Qc Ql Qo Qq Sc Sm So Sq St Sx Sy
	Ta Tn Ux Va Vt Xc Xo Xr"
bs=$(printf '\b')
render() { mandoc -Tascii "$1" | sed "s/.$bs//g"; }
for page in $pages; do
	name=${page##*/}
	rendered=$(render "$page" | tr -d ' \t\n')
	texts=$(awk -v eng="$english_macros" -v mac="$callable_macros" '
		BEGIN {
			n = split(eng, e, " ")
			for (i = 1; i <= n; i++) E[e[i]] = 1
			n = split(mac, m, /[ \t\n]+/)
			for (i = 1; i <= n; i++) M[m[i]] = 1
		}
		/^\.[A-Z][a-z]/ && !/"/ {
			line = $0
			gsub(/\\&/, "", line)
			gsub(/\\e/, "\001", line)
			gsub(/\\-/, "-", line)
			if (line ~ /\\/)
				next
			gsub(/\001/, "\\", line)
			n = split(line, w, /[ \t]+/)
			suspect = other = 0
			for (i = 2; i <= n; i++) {
				if (w[i] in E)
					suspect = 1
				else if (w[i] in M)
					other = 1
			}
			if (!suspect || other)
				next
			first = 2
			last = n
			while (last >= first && w[last] ~ /^[.,;:?!)\]]+$/)
				last--
			while (first <= last && w[first] ~ /^[(\[]+$/)
				first++
			t = ""
			for (i = first; i <= last; i++)
				t = t w[i]
			if (t != "")
				printf "%d %s\n", FNR, t
		}' "$page")
	checked=0 pagefail=0
	if [ -n "$texts" ]; then
		checked=$(printf '%s\n' "$texts" | wc -l)
		printf '%s\n' "$texts" | {
			f=0
			while read -r lineno text; do
				case "$rendered" in
				*"$text"*) ;;
				*) echo "FAIL: $name:$lineno: a word of this line is read" \
				    "as an mdoc macro (write \\& before it):" \
				    "$(sed -n "${lineno}p" "$page")" >&2
				   f=1 ;;
				esac
			done
			exit $f
		} || { fail=1; pagefail=1; }
	fi
	[ "$pagefail" = 1 ] ||
		echo "ok: $name: $checked macro line(s) holding a word that is a macro name render whole"
done
# The CLI's own messages, in quotes, as it prints them.
rendered=$(render "$srcdir/man/kafka-mirrors.1" | tr -s ' \n' '  ')
for msg in "No mirrors found" "No mirror partitions found" "No FAILED partitions"; do
	case "$rendered" in
	*"\"$msg\""*) ;;
	*) bad "kafka-mirrors.1 does not render \"$msg\" (the CLI's message)" ;;
	esac
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
