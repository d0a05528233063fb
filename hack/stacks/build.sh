#!/usr/bin/env bash
# build.sh PIN OUT [ETCD]: lays out one OVN stack in OUT the same way for
# every stack, so that the tests only ever put OUT/bin first in PATH:
#   OUT/bin/            ovsdb-server, ovn-northd, ovs-vswitchd, ovn-nbctl, ... and etcd
#   OUT/share/ovn, OUT/share/openvswitch   the schemas those servers use
#   OUT/versions        what is installed (one "package version" a line)
# A pin with SUITE= builds a Debian root filesystem of that suite in OUT/root
# with debootstrap (nothing on the system is replaced) and copies its OVN and
# OVS commands with interpreter and library path pointed into OUT/root. A pin
# without SUITE= links the system's own packages. ETCD is the etcd binary to
# use (default: the system's). Everything is built in OUT.tmp and moved into
# place only when complete, so an interrupted build leaves no half stack.
set -euo pipefail

pin=$1 out=$2 etcd=${3:-}
SUITE="" PACKAGES="" EXPECT=""
# shellcheck disable=SC1090
source "$pin"
tmp=$out.tmp
# An interrupted earlier build may have left proc mounted in its root.
umount "$tmp/root/proc" 2>/dev/null || true
rm -rf --one-file-system "$tmp"
mkdir -p "$tmp/bin" "$tmp/share"

# No pipe here ends early: under pipefail, a reader that quits before the
# writer is done (head -1) fails the pipeline with SIGPIPE, now and then.
is_elf() { [[ $(LC_ALL=C head -c4 "$1") == $'\x7fELF' ]]; }
first_line() { sed -n 1p; }

# check_versions LISTER: every EXPECT pattern matches the installed version.
check_versions() {
	: >"$tmp/versions"
	for want in $EXPECT; do
		pkg=${want%%=*} pattern=${want#*=}
		have=$("$@" dpkg-query -W -f='${Version}' "$pkg" 2>/dev/null || true)
		# shellcheck disable=SC2053
		if [[ -z $have || ${have#*:} != $pattern ]]; then
			echo "stack $pin: $pkg is '${have:-not installed}', the pin wants $pattern" >&2
			exit 1
		fi
		echo "$pkg $have" >>"$tmp/versions"
	done
}

# debian_mirror: the mirror apt already uses for this system's release.
# shellcheck source=hack/stacks/mirror.sh
source "$(dirname "${BASH_SOURCE[0]}")/mirror.sh"

if [[ -n $SUITE ]]; then
	root=$tmp/root
	url=$(debian_mirror)
	command -v debootstrap >/dev/null && command -v patchelf >/dev/null || {
		echo "debootstrap and patchelf are needed: make deps-packages installs them" >&2; exit 1; }
	echo "stack $(basename "$out"): debootstrap $SUITE from $url (about 2 minutes)"
	debootstrap --variant=minbase "$SUITE" "$root" "$url" >"$tmp/debootstrap.log" 2>&1 ||
		{ tail -20 "$tmp/debootstrap.log" >&2; exit 1; }
	# No service starts inside the root; proc is mounted only for the install.
	printf '#!/bin/sh\nexit 101\n' >"$root/usr/sbin/policy-rc.d"
	chmod +x "$root/usr/sbin/policy-rc.d"
	mount -t proc proc "$root/proc"
	trap 'umount "$root/proc" 2>/dev/null || true' EXIT
	chroot "$root" /usr/bin/env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin DEBIAN_FRONTEND=noninteractive \
		sh -c "apt-get update -qq && apt-get install -y -qq --no-install-recommends $PACKAGES && apt-get clean" \
		>"$tmp/install.log" 2>&1 || { tail -20 "$tmp/install.log" >&2; exit 1; }
	umount "$root/proc"
	trap - EXIT
	check_versions chroot "$root"
	# The final root path is baked into the copies (their interpreter must be
	# absolute), so they are patched for $out, where the root will live.
	final=$(realpath -m "$out")/root
	for f in "$root"/usr/bin/ov* "$root"/usr/sbin/ov*; do
		# Resolved inside the root: some commands are absolute symlinks
		# (ovs-vswitchd -> /etc/alternatives/...), which outside it would
		# name the host's binary.
		src=$root$(chroot "$root" readlink -f "${f#"$root"}")
		is_elf "$src" || continue
		cp "$src" "$tmp/bin/$(basename "$f")"
		patchelf --set-interpreter "$final/lib64/ld-linux-x86-64.so.2" --force-rpath \
			--set-rpath "$final/lib/x86_64-linux-gnu:$final/usr/lib/x86_64-linux-gnu" "$tmp/bin/$(basename "$f")"
	done
	# Recorded so that a checkout moved elsewhere is told to rebuild the stack.
	echo "$final/lib64/ld-linux-x86-64.so.2" >"$tmp/interpreter"
	ln -s ../root/usr/share/ovn "$tmp/share/ovn"
	ln -s ../root/usr/share/openvswitch "$tmp/share/openvswitch"
else
	check_versions
	for f in /usr/bin/ov* /usr/sbin/ov*; do
		! is_elf "$f" || ln -s "$f" "$tmp/bin/"
	done
	ln -s /usr/share/ovn "$tmp/share/ovn"
	ln -s /usr/share/openvswitch "$tmp/share/openvswitch"
fi
ln -s "$(realpath "${etcd:-$(command -v etcd)}")" "$tmp/bin/etcd"
# A built etcd is no package: its version goes beside the packages'.
[[ -z $etcd ]] || echo "etcd $("$etcd" --version | awk 'NR == 1 { print $3 }')" >>"$tmp/versions"

rm -rf --one-file-system "$out"
mv "$tmp" "$out"
# The copies were patched for $out; each daemon must run from there and
# report the version its packages installed.
lister=()
[[ -d $out/root ]] && lister=(chroot "$out/root")
ovs=$("${lister[@]}" dpkg-query -W -f='${Version}' openvswitch-switch | sed 's/-.*//')
ovn=$("${lister[@]}" dpkg-query -W -f='${Version}' ovn-host | sed 's/-.*//')
for c in ovs-vswitchd:$ovs ovsdb-server:$ovs ovn-controller:$ovn ovn-northd:$ovn; do
	cmd=${c%%:*} want=${c#*:}
	got=$("$out/bin/$cmd" --version 2>&1 | first_line)
	case "$got" in
	*" $want"*) echo "$got" ;;
	*) echo "$cmd in $out reports '$got', not $want: the stack is broken; remove $out" >&2; exit 1 ;;
	esac
done
"$out/bin/etcd" --version | first_line
cp "$pin" "$out/pin"
