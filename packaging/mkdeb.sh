#!/usr/bin/env bash
# mkdeb.sh - build/presenced_VERSION_ARCH.deb from a staged install; run by
# `make deb` after the release build.
#
# 1. make install DESTDIR=build/deb/root PREFIX=/usr: the binary, the
#    configuration, the units, the demo files and the man page.
# 2. The Debian parts around it: the binary stripped (the release build
#    keeps -g for debugging), the man page and changelog gzipped,
#    /usr/share/doc/presenced/copyright, and DEBIAN/ with control (from
#    debian/control.in: Depends from dpkg-shlibdeps on the binary,
#    Built-Using the llhttp compiled into it, Installed-Size), conffiles,
#    md5sums and the maintainer scripts.
# 3. dpkg-deb --build with root as the owner of every file.
# 4. lintian --fail-on error,warning, when lintian is installed (setup.sh
#    installs it; tests/pkg/run.sh requires it). A tag that cannot be fixed
#    goes in debian/lintian-overrides with the reason next to it.
#
# Environment: DEB_MAINTAINER overrides the Maintainer field, MAKE the make.
set -euo pipefail
cd "$(dirname "$0")/.."
MAKE=${MAKE:-make}
src=packaging/debian
out=build/deb
root=$out/root
die() { echo "mkdeb: $*" >&2; exit 1; }

version=$(sed -n 's/^#define CONFIG_VERSION *"\(.*\)"/\1/p' src/base/config.c)
[ -n "$version" ] || die "no CONFIG_VERSION in src/base/config.c"
clversion=$(sed -n '1s/^presenced (\([^)]*\)).*/\1/p' $src/changelog)
[ "$clversion" = "$version" ] ||
  die "$src/changelog starts at $clversion but the binary is $version: add an entry"
arch=$(dpkg --print-architecture)
maintainer=${DEB_MAINTAINER:-$(sed -n 's/^ -- \(.*>\)  .*/\1/p' $src/changelog | head -1)}
deb=build/presenced_${version}_${arch}.deb

rm -rf "$out"
mkdir -p "$root"
"$MAKE" -s BUILD=release install DESTDIR="$PWD/$root" PREFIX=/usr >/dev/null

strip --strip-unneeded --remove-section=.comment --remove-section=.note "$root/usr/sbin/presenced"
gzip -9n "$root/usr/share/man/man8/presenced.8"
doc=$root/usr/share/doc/presenced
install -d "$doc"
install -m 0644 $src/copyright "$doc/copyright"
gzip -9nc $src/changelog >"$doc/changelog.gz"
chmod 0644 "$doc/changelog.gz"
if [ -f $src/lintian-overrides ]; then
  install -d "$root/usr/share/lintian/overrides"
  install -m 0644 $src/lintian-overrides "$root/usr/share/lintian/overrides/presenced"
fi

# Depends: the shared libraries the binary links, as Debian packages.
# dpkg-shlibdeps wants a debian/control to read; give it a minimal one.
shl=$out/shlibdeps
mkdir -p "$shl/debian"
printf 'Source: presenced\n\nPackage: presenced\nArchitecture: any\n' >"$shl/debian/control"
depends=$(cd "$shl" && dpkg-shlibdeps -O "$PWD/../root/usr/sbin/presenced" 2>/dev/null |
  sed -n 's/^shlibs:Depends=//p')
[ -n "$depends" ] || die "dpkg-shlibdeps found no dependencies"
built_using=$(dpkg-query -W -f='${source:Package} (= ${source:Version})' node-llhttp)
size=$(du -sk --apparent-size "$root" | cut -f1)

install -d "$root/DEBIAN"
sed -e "s|@VERSION@|$version|" -e "s|@ARCH@|$arch|" -e "s|@MAINTAINER@|$maintainer|" \
  -e "s|@SIZE@|$size|" -e "s|@DEPENDS@|$depends|" -e "s|@BUILT_USING@|$built_using|" \
  $src/control.in >"$root/DEBIAN/control"
install -m 0644 $src/conffiles "$root/DEBIAN/conffiles"
install -m 0755 $src/postinst $src/prerm $src/postrm "$root/DEBIAN/"
(cd "$root" && find . -path ./DEBIAN -prune -o -type f -printf '%P\0' | LC_ALL=C sort -z |
  xargs -0 md5sum) >"$root/DEBIAN/md5sums"
chmod 0644 "$root/DEBIAN/md5sums"

dpkg-deb --root-owner-group -Zxz --build "$root" "$deb" >/dev/null
echo "mkdeb: $deb"
if command -v lintian >/dev/null; then
  lintian --fail-on error,warning --info "$deb" && echo "mkdeb: lintian: clean"
else
  echo "mkdeb: lintian is not installed (scripts/setup.sh installs it): not checked"
fi
