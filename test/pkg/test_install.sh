#!/bin/sh
# make install DESTDIR=... lays out the programs, the example config, the
# systemd unit, the man pages and the documentation under the configured
# prefixes, the alert rules name where they are installed, and the
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
    "$prefix/share/man/man5/mirrord.yaml.5" \
    "$prefix/share/mirrord/prometheus/mirrord-alerts.yml" \
    "$prefix/share/mirrord/prometheus/mirrord-alerts.test.yml" \
    "$prefix/share/mirrord/grafana/mirrord-dashboard.json" \
    "$prefix/share/doc/mirrord/README.md" "$prefix/share/doc/mirrord/doc/design.md" \
    "$prefix/share/doc/mirrord/doc/operations.md"; do
	if [ ! -s "$dest$f" ]; then
		echo "FAIL: $f was not installed"; fail=1
	fi
done
[ "$fail" = 0 ] || exit 1
# The rules file says where it is: rule_files needs the path, which the
# Debian package (/usr) and make install's default prefix (/usr/local) put
# in different places.
for p in /usr /usr/local; do
	grep -qF "$p/share/mirrord/prometheus/mirrord-alerts.yml" \
	    "$dest$prefix/share/mirrord/prometheus/mirrord-alerts.yml" || {
		echo "FAIL: mirrord-alerts.yml does not name $p/share/mirrord/prometheus/mirrord-alerts.yml"
		fail=1; }
done
[ "$fail" = 0 ] || exit 1
"$dest$prefix/sbin/mirrord" --version | grep -q '^mirrord ' || {
	echo "FAIL: the installed mirrord does not run"; exit 1; }
"$dest$prefix/bin/kafka-mirrors" --version | grep -q '^kafka-mirrors ' || {
	echo "FAIL: the installed kafka-mirrors does not run"; exit 1; }
# kafka-mirrors.sh, the KIP's name, is the same program.
[ -L "$dest$prefix/bin/kafka-mirrors.sh" ] &&
    [ "$(readlink "$dest$prefix/bin/kafka-mirrors.sh")" = kafka-mirrors ] || {
	echo "FAIL: bin/kafka-mirrors.sh is not a link to kafka-mirrors"; exit 1; }
"$dest$prefix/bin/kafka-mirrors.sh" --version | grep -q '^kafka-mirrors ' || {
	echo "FAIL: the installed kafka-mirrors.sh does not run"; exit 1; }
"$dest$prefix/bin/kafka-mirrors.sh" --help | grep -q -- '--describe' || {
	echo "FAIL: kafka-mirrors.sh --help"; exit 1; }
[ "$(readlink "$dest$prefix/share/man/man1/kafka-mirrors.sh.1")" = kafka-mirrors.1 ] || {
	echo "FAIL: man1/kafka-mirrors.sh.1 is not a link to kafka-mirrors.1"; exit 1; }
# Bash completion where bash-completion looks, for both names.
comp="$dest$prefix/share/bash-completion/completions"
[ -s "$comp/kafka-mirrors" ] && [ -L "$comp/kafka-mirrors.sh" ] &&
    cmp -s "$comp/kafka-mirrors.sh" "$comp/kafka-mirrors" || {
	echo "FAIL: bash completion not installed as $comp/kafka-mirrors{,.sh}"
	ls -l "$comp" 2>&1; exit 1; }
# Completing "kafka-mirrors.sh --desc" offers --describe, with the file
# loaded by bash-completion's own loader from the installed data dir when
# bash-completion is there, else sourced directly.
got=$(XDG_DATA_DIRS="$dest$prefix/share" bash --norc --noprofile -c '
	if [ -r /usr/share/bash-completion/bash_completion ]; then
		. /usr/share/bash-completion/bash_completion
		__load_completion kafka-mirrors.sh || exit 3
	else
		. "$1/kafka-mirrors"
	fi
	complete -p kafka-mirrors.sh >/dev/null || exit 4
	COMP_LINE="kafka-mirrors.sh --bootstrap-server 127.0.0.1:1 --desc"
	COMP_POINT=${#COMP_LINE}
	COMP_WORDS=(kafka-mirrors.sh --bootstrap-server 127.0.0.1 : 1 --desc)
	COMP_CWORD=5
	_kafka_mirrors kafka-mirrors.sh --desc 1
	printf "%s\n" "${COMPREPLY[@]}"' sh "$comp") || {
	echo "FAIL: loading the installed completion (status $?)"; exit 1; }
[ "$got" = "--describe" ] || {
	echo "FAIL: completing 'kafka-mirrors.sh --desc' gave '$got'"; exit 1; }
grep -q "ExecStart=$prefix/sbin/mirrord -c $sysconfdir/mirrord/mirrord.yaml" \
    "$dest$prefix/lib/systemd/system/mirrord.service" || {
	echo "FAIL: the unit's ExecStart does not name the installed paths"; exit 1; }
echo "PASS: make install DESTDIR lays out every file"
