#!/bin/sh
# The Debian package: `dpkg-buildpackage -us -uc` builds mirrord
# from a clean copy of the source tree (never the developer's build/),
# lintian reports no error or warning that debian/ does not override with a
# reason, and the .deb holds what an operator needs: the programs, the unit
# enabled through deb-systemd-helper, /etc/mirrord/mirrord.yaml as a
# conffile, the manual pages, completion, alerting rules and dashboard, and
# the documentation.
# dpkg installs it into a scratch root (its own status database; the
# maintainer scripts run with DPKG_ROOT and stand-ins for systemctl and
# deb-systemd-invoke): enabled, conffile registered, edits kept on
# reinstall, purge clean.  Nothing is installed on this machine.
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
    ./lib/systemd/system/mirrord.service ./lib/systemd/system/mirrord@.service \
    ./etc/mirrord/mirrord.yaml \
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
# The documentation: README.md and doc/ (dh_compress may gzip them).
for f in README.md doc/design.md doc/ha.md doc/protocol.md doc/operations.md \
    doc/limits.md doc/benchmarks.md; do
	awk '{print $6}' "$work/contents" |
	    grep -qxE "\./usr/share/doc/mirrord/$f(\.gz)?" || {
		echo "FAIL: /usr/share/doc/mirrord/$f is not in $deb"; fail=1; }
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

# Installed by dpkg into a scratch root (--root: its own status database
# and file tree; --force-script-chrootless: the maintainer scripts run here
# with DPKG_ROOT set, which deb-systemd-helper honours; --force-depends: the
# scratch database has no libraries).  systemctl and deb-systemd-invoke
# are stand-ins that log their arguments, so no service of this machine is
# reloaded or started.  Guarded: only with a deb-systemd-helper that knows
# DPKG_ROOT (init-system-helpers 1.61 and later), else it would enable the
# unit on this machine.
if grep -q DPKG_ROOT "$(command -v deb-systemd-helper)" 2>/dev/null; then
	inst="$work/instroot"
	stubs="$work/stubs"
	mkdir -p "$inst/var/lib/dpkg/info" "$inst/var/lib/dpkg/updates" "$stubs"
	: >"$inst/var/lib/dpkg/status"
	for s in systemctl deb-systemd-invoke; do
		printf '#!/bin/sh\necho "%s $*" >>"%s/calls.log"\n' "$s" "$work" >"$stubs/$s"
		chmod +x "$stubs/$s"
	done
	: >"$work/calls.log"
	notroot=""
	[ "$(id -u)" = 0 ] || notroot=--force-not-root
	sdpkg() {
		PATH="$stubs:$PATH" dpkg --root="$inst" --force-script-chrootless \
		    --force-depends $notroot --log=/dev/null "$@" >>"$work/dpkg.log" 2>&1 || {
			echo "FAIL: dpkg --root=$inst $* (status $?):"; cat "$work/dpkg.log"; exit 1; }
	}
	status() {
		dpkg-query --admindir="$inst/var/lib/dpkg" -W -f='${db:Status-Abbrev}' mirrord 2>/dev/null || :
	}
	wants="$inst/etc/systemd/system/multi-user.target.wants/mirrord.service"
	conf="$inst/etc/mirrord/mirrord.yaml"

	sdpkg -i "$deb"
	[ "$(status)" = "ii " ] || { echo "FAIL: mirrord not installed: '$(status)'"; exit 1; }
	dpkg-query --admindir="$inst/var/lib/dpkg" -W -f='${Conffiles}\n' mirrord |
	    grep -q '^ /etc/mirrord/mirrord.yaml [0-9a-f]\{32\}$' || {
		echo "FAIL: dpkg did not register /etc/mirrord/mirrord.yaml as a conffile"; exit 1; }
	[ "$(readlink "$wants")" = /lib/systemd/system/mirrord.service ] || {
		echo "FAIL: installing did not enable mirrord.service (WantedBy=multi-user.target):"
		ls -lR "$inst/etc/systemd" 2>&1; cat "$work/dpkg.log"; exit 1; }
	if [ -d /run/systemd/system ]; then
		grep -qx "deb-systemd-invoke start mirrord.service" "$work/calls.log" || {
			echo "FAIL: installing did not start mirrord.service:"; cat "$work/calls.log"; exit 1; }
	fi
	"$inst/usr/sbin/mirrord" --check-config "$conf" >/dev/null 2>&1 || {
		echo "FAIL: mirrord --check-config on the installed $conf"; exit 1; }

	# The operator edits the config and disables the unit; a reinstall
	# (what an upgrade does to them) keeps both.
	echo "# edited by the operator" >>"$conf"
	rm "$wants"
	sdpkg -i "$deb"
	tail -n 1 "$conf" | grep -qx "# edited by the operator" || {
		echo "FAIL: reinstalling replaced the operator's edited $conf"; exit 1; }
	[ ! -e "$wants" ] && [ ! -L "$wants" ] || {
		echo "FAIL: reinstalling re-enabled the unit the operator had disabled"; exit 1; }

	# Removal keeps the conffile, purge removes it and the unit's state.
	sdpkg -r mirrord
	[ "$(status)" = "rc " ] && [ -f "$conf" ] && [ ! -e "$inst/usr/sbin/mirrord" ] || {
		echo "FAIL: after dpkg -r: status '$(status)', conffile kept? binary gone?"
		ls -lR "$inst/etc/mirrord" "$inst/usr/sbin" 2>&1; exit 1; }
	sdpkg -P mirrord
	[ -z "$(status)" ] || [ "$(status)" = "pn " ] || {
		echo "FAIL: after dpkg -P the status is '$(status)'"; exit 1; }
	left=$(find "$inst/etc" "$inst/var/lib/systemd" "$inst/lib" "$inst/usr" \
	    -name 'mirrord*' 2>/dev/null || :)
	[ -z "$left" ] || { echo "FAIL: dpkg -P left: $left"; exit 1; }
	echo "dpkg --root install: conffile registered, unit enabled, edits and a disabled unit kept on reinstall, purge leaves nothing"
	cat "$work/calls.log"
else
	echo "note: deb-systemd-helper does not honour DPKG_ROOT: no scratch-root dpkg install"
fi

echo "PASS: dpkg-buildpackage -us -uc builds $(basename "$deb"), lintian clean, contents and scripts as expected"
