#!/bin/sh
# The Debian package (issue 13): `dpkg-buildpackage -us -uc` builds mirrord
# from a clean copy of the source tree (never the developer's build/),
# lintian reports no error or warning that debian/ does not override with a
# reason, and the .deb holds what an operator needs: the programs, the unit
# enabled through deb-systemd-helper, /etc/mirrord/mirrord.yaml as a
# conffile, the manual pages, completion, alerting rules and dashboard.
# The package is unpacked into a scratch directory and its programs run
# there; nothing is installed on this machine.
#
# SKIP (77) without the packaging tools; the wrapper's `make check` installs
# them (DEB_DEPS in the top-level Makefile), so CI runs it.
set -eu
: "${top_srcdir:?}" "${top_builddir:?}"

missing=""
for t in dpkg-buildpackage:dpkg-dev dh:debhelper dh_autoreconf:dh-autoreconf \
    lintian:lintian; do
	command -v "${t%%:*}" >/dev/null 2>&1 || missing="$missing ${t#*:}"
done
dpkg-query -W -f='${Status}\n' build-essential 2>/dev/null |
    grep -q '^install ok installed' || missing="$missing build-essential"
if [ -n "$missing" ]; then
	echo "SKIP: the Debian packaging tools are missing: apt-get install$missing"
	exit 77
fi

work="$top_builddir/test/tmp/test_deb"
rm -rf "$work"
mkdir -p "$work"
work=$(cd "$work" && pwd)
version=$(dpkg-parsechangelog -l "$top_srcdir/debian/changelog" -S Version)

echo "building with debian/mkdeb.sh in $work (log: $work/build.log)"
sh "$top_srcdir/debian/mkdeb.sh" "$work" >"$work/build.log" 2>&1 || {
	echo "FAIL: dpkg-buildpackage -us -uc on a copy of the tree failed:"
	tail -40 "$work/build.log"; exit 1; }

arch=$(dpkg --print-architecture)
deb="$work/mirrord_${version}_$arch.deb"
changes="$work/mirrord_${version}_$arch.changes"
[ -s "$deb" ] && [ -s "$changes" ] && [ -s "$work/mirrord_$version.tar.xz" ] || {
	echo "FAIL: dpkg-buildpackage did not leave the .deb, .changes and source tarball:"
	ls -l "$work"; exit 1; }

# lintian on the source and binary packages: errors and warnings fail
# (debian/*lintian-overrides carries each accepted tag with its reason);
# informational tags are printed for the log.
lintian --fail-on error,warning --info --display-info --show-overrides \
    "$changes" >"$work/lintian.log" 2>&1 || {
	echo "FAIL: lintian $changes:"; cat "$work/lintian.log"; exit 1; }
echo "lintian: no error or warning (log: $work/lintian.log)"
cat "$work/lintian.log"

fail=0
dpkg-deb -c "$deb" >"$work/contents"
for f in ./usr/sbin/mirrord ./usr/bin/kafka-mirrors ./usr/bin/kafka-mirrors.sh \
    ./lib/systemd/system/mirrord.service ./etc/mirrord/mirrord.yaml \
    ./usr/share/man/man8/mirrord.8.gz ./usr/share/man/man5/mirrord.yaml.5.gz \
    ./usr/share/man/man1/kafka-mirrors.1.gz ./usr/share/man/man1/kafka-mirrors.sh.1.gz \
    ./usr/share/bash-completion/completions/kafka-mirrors \
    ./usr/share/bash-completion/completions/kafka-mirrors.sh \
    ./usr/share/mirrord/prometheus/mirrord-alerts.yml \
    ./usr/share/mirrord/prometheus/mirrord-alerts.test.yml \
    ./usr/share/mirrord/grafana/mirrord-dashboard.json \
    ./usr/share/doc/mirrord/copyright ./usr/share/doc/mirrord/changelog.gz; do
	awk '{print $6}' "$work/contents" | grep -qxF "$f" || {
		echo "FAIL: $f is not in $deb"; fail=1; }
done
[ "$fail" = 0 ] || { cat "$work/contents"; exit 1; }

# The package's metadata: the config is a conffile, the libraries it links
# are dependencies, the unit is enabled and started by the maintainer
# scripts dh_installsystemd writes.
ctl="$work/control"
rm -rf "$ctl" && dpkg-deb -e "$deb" "$ctl"
grep -qx /etc/mirrord/mirrord.yaml "$ctl/conffiles" || {
	echo "FAIL: /etc/mirrord/mirrord.yaml is not a conffile:"; cat "$ctl/conffiles" 2>&1; exit 1; }
depends=$(dpkg-deb -f "$deb" Depends)
for lib in librdkafka libevent libyaml libssl libpcre2-8 libc6; do
	echo "$depends" | grep -q "$lib" || {
		echo "FAIL: Depends lacks $lib: $depends"; exit 1; }
done
grep -q "deb-systemd-helper enable 'mirrord.service'" "$ctl/postinst" &&
    grep -q "deb-systemd-invoke .* 'mirrord.service'" "$ctl/postinst" || {
	echo "FAIL: postinst does not enable and start mirrord.service:"; cat "$ctl/postinst"; exit 1; }
grep -q "deb-systemd-helper purge 'mirrord.service'" "$ctl/postrm" || {
	echo "FAIL: postrm does not purge the unit's state:"; cat "$ctl/postrm"; exit 1; }

# Unpacked into a scratch root, the programs run and the shipped config
# (the conffile) is valid; the unit names the packaged paths.
root="$work/root"
dpkg-deb -x "$deb" "$root"
"$root/usr/sbin/mirrord" --version | grep -q '^mirrord ' || {
	echo "FAIL: the packaged mirrord --version"; exit 1; }
"$root/usr/bin/kafka-mirrors.sh" --version | grep -q '^kafka-mirrors ' || {
	echo "FAIL: the packaged kafka-mirrors.sh --version"; exit 1; }
"$root/usr/sbin/mirrord" --check-config "$root/etc/mirrord/mirrord.yaml" \
    >"$work/check-config.log" 2>&1 || {
	echo "FAIL: mirrord --check-config on the packaged /etc/mirrord/mirrord.yaml:"
	cat "$work/check-config.log"; exit 1; }
grep -qx 'ExecStart=/usr/sbin/mirrord -c /etc/mirrord/mirrord.yaml' \
    "$root/lib/systemd/system/mirrord.service" || {
	echo "FAIL: the packaged unit's ExecStart:"
	grep ExecStart "$root/lib/systemd/system/mirrord.service"; exit 1; }
cmp -s "$root/etc/mirrord/mirrord.yaml" "$top_srcdir/etc/mirrord.yaml" || {
	echo "FAIL: the packaged mirrord.yaml differs from etc/mirrord.yaml"; exit 1; }

# The maintainer scripts as dpkg runs them at install, on the scratch root:
# DPKG_ROOT points deb-systemd-helper there (it records the enablement
# under $DPKG_ROOT/var/lib/systemd), and systemctl and deb-systemd-invoke
# are stand-ins that log their arguments, so no service of this machine is
# reloaded or started.  Only with a deb-systemd-helper that honours
# DPKG_ROOT (init-system-helpers 1.61 and later).
if grep -q DPKG_ROOT "$(command -v deb-systemd-helper)" 2>/dev/null; then
	stubs="$work/stubs"
	mkdir -p "$stubs"
	for s in systemctl deb-systemd-invoke; do
		printf '#!/bin/sh\necho "%s $*" >>"%s/calls.log"\n' "$s" "$work" >"$stubs/$s"
		chmod +x "$stubs/$s"
	done
	: >"$work/calls.log"
	maint() {
		env DPKG_ROOT="$root" DPKG_MAINTSCRIPT_PACKAGE=mirrord \
		    DPKG_MAINTSCRIPT_NAME="$1" PATH="$stubs:$PATH" \
		    sh -e "$ctl/$1" "$2" ${3+"$3"} >>"$work/maint.log" 2>&1 || {
			echo "FAIL: $1 $2 on the scratch root (status $?):"
			cat "$work/maint.log"; exit 1; }
	}
	wants="$root/etc/systemd/system/multi-user.target.wants/mirrord.service"
	maint postinst configure ""
	[ "$(readlink "$wants")" = /lib/systemd/system/mirrord.service ] || {
		echo "FAIL: postinst configure did not enable mirrord.service (WantedBy=multi-user.target):"
		ls -lR "$root/etc/systemd" 2>&1; cat "$work/maint.log"; exit 1; }
	if [ -d /run/systemd/system ]; then
		grep -qx "deb-systemd-invoke start mirrord.service" "$work/calls.log" || {
			echo "FAIL: postinst did not start mirrord.service:"; cat "$work/calls.log"; exit 1; }
	fi
	# An operator who disabled the unit keeps it disabled on upgrade.
	rm "$wants"
	maint postinst configure "$version"
	[ ! -e "$wants" ] && [ ! -L "$wants" ] || {
		echo "FAIL: an upgrade re-enabled the unit the operator had disabled"; exit 1; }
	maint prerm remove
	maint postrm remove
	maint postrm purge
	if [ -n "$(find "$root/etc/systemd" "$root/var/lib/systemd" -name 'mirrord*' 2>/dev/null)" ]; then
		echo "FAIL: postrm purge left the unit's enablement state:"
		find "$root/etc/systemd" "$root/var/lib/systemd" -name 'mirrord*'; exit 1
	fi
	echo "maintainer scripts on the scratch root: enabled at install, kept disabled on upgrade, state gone after purge"
	cat "$work/calls.log"
else
	echo "note: deb-systemd-helper does not honour DPKG_ROOT; maintainer scripts not run"
fi

echo "PASS: dpkg-buildpackage -us -uc builds $(basename "$deb"), lintian clean, contents and scripts as expected"
