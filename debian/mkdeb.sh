#!/bin/sh
# mkdeb.sh OUTDIR: `dpkg-buildpackage -us -uc` on a clean copy of this tree
# in OUTDIR/mirrord-VERSION, leaving the .deb, .changes, .buildinfo and
# source tarball in OUTDIR (`make deb`, test/pkg/test_deb.sh).  The copy is the
# git checkout's tracked files plus new files git does not ignore (so
# uncommitted edits are built), or the tree minus build output outside git;
# the developer's build/ and working tree are never touched.
# DEB_BUILD_OPTIONS passes through (default parallel=2).
set -eu
[ $# = 1 ] || { echo "usage: $0 OUTDIR" >&2; exit 2; }
top=$(cd "$(dirname "$0")/.." && pwd)
mkdir -p "$1"
out=$(cd "$1" && pwd)
version=$(dpkg-parsechangelog -l "$top/debian/changelog" -S Version)
src="$out/mirrord-$version"
rm -rf "$src" "$out"/mirrord_"$version"[._]* "$out"/mirrord-dbgsym_"$version"_*
mkdir "$src"
if git -C "$top" rev-parse --is-inside-work-tree >/dev/null 2>&1; then
	(cd "$top" && git ls-files -z --cached --others --exclude-standard |
	    xargs -0 sh -c 'for f; do [ -e "$f" ] && printf "%s\0" "$f"; done; :' sh |
	    tar --null -T - -cf -) | tar -C "$src" -xf -
else
	(cd "$top" && tar --exclude=./.git --exclude=./build --exclude='./build-*' \
	    --exclude=./test/kafka/cache --exclude=./debian/build -cf - .) |
	    tar -C "$src" -xf -
fi
[ -x "$src/debian/rules" ] && [ -f "$src/configure.ac" ] || {
	echo "mkdeb: the copy in $src lacks debian/rules or configure.ac" >&2; exit 1; }
cd "$src"
# Run from make (make deb, make check), MAKEFLAGS would carry the caller's
# variables (TESTS=..., a jobserver) into debian/rules' own makes.
unset MAKEFLAGS MFLAGS MAKELEVEL
DEB_BUILD_OPTIONS="${DEB_BUILD_OPTIONS:-parallel=2}" dpkg-buildpackage -us -uc
echo "mkdeb: built in $out:"
ls "$out"/mirrord_"$version"*
