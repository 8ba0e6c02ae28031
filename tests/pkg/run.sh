#!/usr/bin/env bash
# tests/pkg/run.sh - the Debian package and `make install`; run by
# tests/run.sh (make test), from the repository root. Needs dpkg-dev,
# lintian and systemd-analyze (scripts/setup.sh); takes about 20 s after
# the release build, which `make deb` makes first when it is missing.
#
# 1. make deb builds build/presenced_VERSION_ARCH.deb, and lintian
#    --fail-on error,warning passes on it.
# 2. Its contents (dpkg-deb -c): the binary, both units, the
#    configuration, the man page, copyright and changelog, every file of
#    www/ and the SDK's modules, owned by root; its control fields:
#    Depends from dpkg-shlibdeps (libc6, libsystemd0), the conffile; the
#    man page renders without a warning and lists every setting of --help.
# 3. systemd-analyze verify passes, without a word of output, on both
#    units as unpacked (dpkg-deb -x) with ExecStart pointed at the unpacked
#    binary and MANPATH at the unpacked man page (so Documentation= is
#    checked too); the template as instance presenced@node1. The units
#    carry the sandbox the package promises, and systemd-analyze security
#    rates presenced.service at most 2.0.
# 4. The unpacked binary runs with the packaged configuration, changed on
#    the command line only for port 0 and for the unpacked copy's root in
#    front of static-dir and sdk-dir, in a scratch working directory (as
#    the unit's StateDirectory): /healthz answers 200, / and /sdk/index.js
#    serve the packaged files, the settings store appears in the working
#    directory. With NOTIFY_SOCKET (notify-listen.py) and WATCHDOG_USEC
#    set it sends READY=1, a WATCHDOG=1 every half period, and on SIGTERM
#    STOPPING=1, then exits 0.
# 5. dpkg installs it into a scratch root (dpkg --root, the maintainer
#    scripts run chrootless under DPKG_ROOT): presenced.service enabled
#    there; a reinstall keeps an edited conffile; -r masks the service and
#    keeps the configuration; --purge removes the configuration, the
#    enablement and the state directory.
# 6. make install PREFIX=/usr/local DESTDIR=... writes the prefix's paths
#    into the units and the configuration; make uninstall removes all of
#    it but the configuration.
set -uo pipefail
cd "$(dirname "$0")/../.." || exit 1
root=$PWD
fails=0
ok() { echo "pkg: ok: $*"; }
bad() { echo "pkg: FAIL: $*"; fails=$((fails + 1)); }

for tool in dpkg-deb dpkg-shlibdeps lintian systemd-analyze python3 curl; do
  command -v $tool >/dev/null || { echo "pkg: $tool is missing: run make setup"; exit 1; }
done

tmp=$(mktemp -d /tmp/presenced-pkg.XXXXXX)
pid=
listener=
cleanup() {
  [ -n "$pid" ] && kill -9 "$pid" 2>/dev/null
  [ -n "$listener" ] && kill "$listener" 2>/dev/null
  rm -rf "$tmp"
}
trap cleanup EXIT

# ---- 1. build and lintian ----
version=$(sed -n 's/^#define CONFIG_VERSION *"\(.*\)"/\1/p' src/base/config.c)
deb=build/presenced_${version}_$(dpkg --print-architecture).deb
if make -s -j2 deb >"$tmp/deb.log" 2>&1; then
  ok "make deb: $deb"
else
  cat "$tmp/deb.log"
  bad "make deb failed"
  exit 1
fi
if lintian --fail-on error,warning "$deb" >"$tmp/lintian.log" 2>&1; then
  ok "lintian --fail-on error,warning: $(grep -c '^[EWIPX]:' "$tmp/lintian.log") tags"
else
  cat "$tmp/lintian.log"
  bad "lintian"
fi

# ---- 2. contents ----
dpkg-deb -c "$deb" >"$tmp/contents"
awk '{print $6}' "$tmp/contents" | sed 's|^\./|/|' >"$tmp/paths"
want=(/usr/sbin/presenced /lib/systemd/system/presenced.service /lib/systemd/system/presenced@.service
  /etc/presenced/presenced.conf /usr/share/man/man8/presenced.8.gz
  /usr/share/doc/presenced/copyright /usr/share/doc/presenced/changelog.gz
  /usr/share/lintian/overrides/presenced)
while IFS= read -r f; do want+=("/usr/share/presenced/www/${f#www/}"); done < <(find www -type f | sort)
for f in clients/js/*.js clients/js/*.d.ts; do want+=("/usr/share/presenced/sdk/${f#clients/js/}"); done
missing=0
for f in "${want[@]}"; do
  grep -qxF "$f" "$tmp/paths" || { bad "the package lacks $f"; missing=1; }
done
[ $missing = 0 ] && ok "the package holds the ${#want[@]} expected files"
awk '$2 != "root/root" {print}' "$tmp/contents" | grep . && bad "files not owned by root"
grep -q '^-rwxr-xr-x root/root .* \./usr/sbin/presenced$' "$tmp/contents" ||
  bad "usr/sbin/presenced is not an executable 0755 file"
depends=$(dpkg-deb -f "$deb" Depends)
if grep -q 'libc6 (>=' <<<"$depends" && grep -q 'libsystemd0' <<<"$depends"; then
  ok "Depends: $depends"
else
  bad "Depends lacks libc6 or libsystemd0: $depends"
fi
mkdir -p "$tmp/control"
dpkg-deb -e "$deb" "$tmp/control"
[ "$(cat "$tmp/control/conffiles")" = /etc/presenced/presenced.conf ] &&
  ok "conffiles: /etc/presenced/presenced.conf" || bad "conffiles: $(cat "$tmp/control/conffiles")"
for s in postinst prerm postrm; do
  [ -x "$tmp/control/$s" ] && sh -n "$tmp/control/$s" || bad "$s: not an executable shell script"
done

dpkg-deb -x "$deb" "$tmp/root"
bin=$tmp/root/usr/sbin/presenced
man=$tmp/root/usr/share/man/man8/presenced.8.gz
if LC_ALL=C.UTF-8 MANWIDTH=80 man --warnings -l "$man" >"$tmp/man.txt" 2>"$tmp/man.err" && ! [ -s "$tmp/man.err" ]; then
  ok "presenced(8) renders without warnings ($(wc -l <"$tmp/man.txt") lines)"
else
  bad "presenced(8): $(head -5 "$tmp/man.err")"
fi
nflags=$("$bin" --help | sed -n '/^settings:/,/^[^ ]/p' | grep -c '^  --')
nman=$(zcat "$man" | grep -c '^\.BI \\-\\-[a-z]')
# --config is the one .BI entry outside SETTINGS.
[ "$nman" -eq $((nflags + 1)) ] && ok "presenced(8) lists the $nflags settings of --help" ||
  bad "presenced(8) lists $((nman - 1)) settings, --help $nflags"

# ---- 3. the units ----
units=$tmp/units
mkdir -p "$units"
sed "s|^ExecStart=/usr/sbin/presenced|ExecStart=$bin|" "$tmp/root/lib/systemd/system/presenced.service" >"$units/presenced.service"
sed "s|^ExecStart=/usr/sbin/presenced|ExecStart=$bin|" "$tmp/root/lib/systemd/system/presenced@.service" >"$units/presenced@node1.service"
for u in presenced.service presenced@node1.service; do
  if MANPATH=$tmp/root/usr/share/man systemd-analyze verify "$units/$u" >"$tmp/verify.log" 2>&1 &&
    ! [ -s "$tmp/verify.log" ]; then
    ok "systemd-analyze verify $u"
  else
    bad "systemd-analyze verify $u: $(cat "$tmp/verify.log")"
  fi
done
for u in presenced.service presenced@.service; do
  for d in Type=notify WatchdogSec= DynamicUser=yes ProtectSystem=strict NoNewPrivileges=yes \
    'RestrictAddressFamilies=AF_INET AF_INET6 AF_UNIX' PrivateTmp=yes ProtectHome=yes; do
    grep -q "^$d" "$tmp/root/lib/systemd/system/$u" || bad "$u lacks $d"
  done
done
grep -q '^StateDirectory=presenced$' "$tmp/root/lib/systemd/system/presenced.service" || bad "presenced.service: StateDirectory"
grep -q '^ExecStart=.* --config /etc/presenced/%i.conf --node-id %i$' "$tmp/root/lib/systemd/system/presenced@.service" ||
  bad "presenced@.service: ExecStart does not read %i.conf with node-id %i"
grep -q '^StateDirectory=presenced-%i$' "$tmp/root/lib/systemd/system/presenced@.service" || bad "presenced@.service: StateDirectory"
if systemd-analyze security --offline=yes --threshold=20 "$units/presenced.service" >"$tmp/security.log" 2>&1; then
  ok "systemd-analyze security: $(grep -o 'Overall exposure level.*' "$tmp/security.log")"
else
  bad "systemd-analyze security: $(grep 'Overall exposure' "$tmp/security.log")"
fi

# ---- 4. the unpacked binary with the packaged configuration ----
conf=$tmp/root/etc/presenced/presenced.conf
static=$(sed -n 's/^static-dir = //p' "$conf")
sdk=$(sed -n 's/^sdk-dir = //p' "$conf")
mkdir -p "$tmp/state"
: >"$tmp/out"
/usr/bin/python3 tests/pkg/notify-listen.py "$tmp/notify.sock" "$tmp/notify.log" 60 &
listener=$!
for _ in $(seq 50); do [ -S "$tmp/notify.sock" ] && break; sleep 0.1; done
(cd "$tmp/state" && NOTIFY_SOCKET=$tmp/notify.sock WATCHDOG_USEC=400000 exec "$bin" --config "$conf" \
  --port 0 --static-dir "$tmp/root$static" --sdk-dir "$tmp/root$sdk" --workers 2 \
  >"$tmp/out" 2>"$tmp/err") &
pid=$!
url=
for _ in $(seq 100); do
  url=$(sed -n 's|^presenced is running: \(http://[^/]*\)/.*|\1|p' "$tmp/out")
  [ -n "$url" ] && break
  kill -0 $pid 2>/dev/null || break
  sleep 0.1
done
if [ -z "$url" ]; then
  bad "the packaged binary did not start: $(tail -5 "$tmp/err")"
  exit 1
fi
ok "the packaged binary listens on $url (static-dir $static, sdk-dir $sdk under the unpacked root)"
body=$(curl -fsS "$url/healthz") && grep -q '"status":"ok"' <<<"$body" && ok "/healthz: $body" ||
  bad "/healthz: $body"
curl -fsS "$url/" -o "$tmp/index.html" && cmp -s "$tmp/index.html" "$tmp/root$static/index.html" &&
  ok "/ serves the packaged demo page" || bad "/ is not the packaged index.html"
curl -fsS "$url/sdk/index.js" -o "$tmp/index.js" && cmp -s "$tmp/index.js" "$tmp/root$sdk/index.js" &&
  ok "/sdk/index.js serves the packaged SDK" || bad "/sdk/index.js is not the packaged one"
[ -f "$tmp/state/presenced.db" ] && ok "the settings store is in the working directory" ||
  bad "no presenced.db in the working directory: $(ls "$tmp/state")"
sleep 1.2 # WATCHDOG_USEC=0.4 s: a ping every 0.2 s
grep -q ' READY=1$' "$tmp/notify.log" && ok "sd_notify: READY=1" || bad "no READY=1: $(cat "$tmp/notify.log")"
pings=$(grep -c ' WATCHDOG=1$' "$tmp/notify.log")
[ "$pings" -ge 4 ] && ok "sd_notify: $pings WATCHDOG=1 in about 1.2 s" || bad "$pings WATCHDOG=1 in 1.2 s"
kill -TERM $pid
rc=
for _ in $(seq 100); do
  kill -0 $pid 2>/dev/null || { wait $pid; rc=$?; break; }
  sleep 0.1
done
pid_was=$pid
pid=
if [ "$rc" = 0 ] && grep -q 'stopped' "$tmp/err"; then
  ok "SIGTERM: exit 0"
else
  bad "SIGTERM: exit ${rc:-none (still running after 10 s)}: $(tail -3 "$tmp/err")"
  [ -z "$rc" ] && kill -9 $pid_was 2>/dev/null
fi
wait $listener 2>/dev/null
listener=
grep -q ' STOPPING=1$' "$tmp/notify.log" && ok "sd_notify: STOPPING=1" || bad "no STOPPING=1"
grep -i 'error\|sanitizer' "$tmp/err" && bad "the server logged errors"

# ---- 5. dpkg into a scratch root: the maintainer scripts ----
# dpkg --root with chrootless scripts sets DPKG_ROOT, which the scripts and
# deb-systemd-helper honour, so the host's systemd and /etc stay untouched.
# Dependencies are forced: the scratch root has no libc6 registered.
sroot=$tmp/sroot
mkdir -p "$sroot/var/lib/dpkg/updates" "$sroot/var/lib/dpkg/info"
touch "$sroot/var/lib/dpkg/status" "$sroot/var/lib/dpkg/available"
sdpkg() { dpkg --root="$sroot" --log=/dev/null --force-script-chrootless --force-depends --force-not-root "$@" >>"$tmp/dpkg.log" 2>&1; }
wants=$sroot/etc/systemd/system/multi-user.target.wants/presenced.service
if sdpkg -i "$deb" && [ -x "$sroot/usr/sbin/presenced" ] && [ -L "$wants" ]; then
  ok "dpkg -i into a scratch root: installed, presenced.service enabled there"
else
  bad "dpkg -i into a scratch root: $(tail -5 "$tmp/dpkg.log")"
fi
"$sroot/usr/sbin/presenced" --config "$sroot/etc/presenced/presenced.conf" --version | grep -q "^presenced $version$" ||
  bad "the installed binary does not run"
echo "port = 7500" >>"$sroot/etc/presenced/presenced.conf"
mkdir -p "$sroot/var/lib/private/presenced" && touch "$sroot/var/lib/private/presenced/presenced.db"
ln -s private/presenced "$sroot/var/lib/presenced"
if sdpkg --force-confold -i "$deb" && grep -q '^port = 7500$' "$sroot/etc/presenced/presenced.conf"; then
  ok "reinstall: the edited conffile is kept"
else
  bad "reinstall lost the edited configuration"
fi
if sdpkg -r presenced && ! [ -e "$sroot/usr/sbin/presenced" ] && [ -f "$sroot/etc/presenced/presenced.conf" ] &&
  [ "$(readlink "$sroot/etc/systemd/system/presenced.service")" = /dev/null ]; then
  ok "dpkg -r: files gone, configuration kept, presenced.service masked"
else
  bad "dpkg -r: $(tail -5 "$tmp/dpkg.log")"
fi
if sdpkg --purge presenced && ! [ -e "$sroot/etc/presenced/presenced.conf" ] &&
  ! [ -e "$sroot/etc/systemd/system/presenced.service" ] && ! [ -e "$wants" ] &&
  ! [ -e "$sroot/var/lib/private/presenced" ] && ! [ -L "$sroot/var/lib/presenced" ]; then
  ok "dpkg --purge: configuration, enablement, mask and state directory gone"
else
  bad "dpkg --purge left: $(cd "$sroot" && find etc var/lib -path var/lib/dpkg -prune -o -print | head)"
fi

# ---- 6. make install / uninstall under another prefix ----
dest=$tmp/dest
if make -s install PREFIX=/usr/local DESTDIR="$dest" >"$tmp/install.log" 2>&1; then
  u=$dest/usr/local/lib/systemd/system/presenced.service
  c=$dest/usr/local/etc/presenced/presenced.conf
  if [ -x "$dest/usr/local/sbin/presenced" ] && grep -q '^ExecStart=/usr/local/sbin/presenced --config /usr/local/etc/presenced/presenced.conf$' "$u" &&
    grep -q '^static-dir = /usr/local/share/presenced/www$' "$c" &&
    [ -f "$dest/usr/local/share/man/man8/presenced.8" ]; then
    ok "make install PREFIX=/usr/local DESTDIR=: the prefix's paths in the unit and the configuration"
  else
    bad "make install PREFIX=/usr/local: $(cd "$dest" && find . -type f | head)"
  fi
  make -s uninstall PREFIX=/usr/local DESTDIR="$dest" >>"$tmp/install.log" 2>&1
  left=$(cd "$dest" && find . -type f)
  [ "$left" = ./usr/local/etc/presenced/presenced.conf ] && ok "make uninstall leaves only the configuration" ||
    bad "make uninstall left: $left"
else
  bad "make install: $(tail -5 "$tmp/install.log")"
fi

[ $fails = 0 ] && echo "pkg: ok" || echo "pkg: $fails failed"
[ $fails = 0 ]
