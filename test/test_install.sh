#!/bin/sh
# make install DESTDIR=... lays out the programs, the example config, the
# systemd unit and the man pages under the configured prefixes, and the
# installed programs run.
set -eu
: "${top_builddir:?}"
dest="$top_builddir/test/tmp/test_install"
rm -rf "$dest"
mkdir -p "$dest"
make -C "$top_builddir" install DESTDIR="$dest" >"$dest.log" 2>&1 || {
	echo "FAIL: make install failed:"; tail -20 "$dest.log"; exit 1; }
prefix=$(sed -n 's/^prefix = //p' "$top_builddir/Makefile")
sysconfdir=$(sed -n 's/^sysconfdir = //p' "$top_builddir/Makefile" | sed "s|\${prefix}|$prefix|")
fail=0
for f in "$prefix/sbin/mirrord" "$prefix/bin/kafka-mirrors" \
    "$sysconfdir/mirrord/mirrord.yaml" "$prefix/lib/systemd/system/mirrord.service" \
    "$prefix/share/man/man8/mirrord.8" "$prefix/share/man/man1/kafka-mirrors.1" \
    "$prefix/share/man/man5/mirrord.yaml.5"; do
	if [ ! -s "$dest$f" ]; then
		echo "FAIL: $f was not installed"; fail=1
	fi
done
[ "$fail" = 0 ] || exit 1
"$dest$prefix/sbin/mirrord" --version | grep -q '^mirrord ' || {
	echo "FAIL: the installed mirrord does not run"; exit 1; }
"$dest$prefix/bin/kafka-mirrors" --version | grep -q '^kafka-mirrors ' || {
	echo "FAIL: the installed kafka-mirrors does not run"; exit 1; }
grep -q "ExecStart=$prefix/sbin/mirrord -c $sysconfdir/mirrord/mirrord.yaml" \
    "$dest$prefix/lib/systemd/system/mirrord.service" || {
	echo "FAIL: the unit's ExecStart does not name the installed paths"; exit 1; }
echo "PASS: make install DESTDIR lays out every file"
