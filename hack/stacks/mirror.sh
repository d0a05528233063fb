#!/usr/bin/env bash
# mirror.sh: the Debian mirror apt already uses for this system's release (no
# host is named here). Sourced by build.sh; run by test/cluster/cmd/images,
# which prints it. Exits nonzero, with the reason on stderr, when there is none.

# mirror prints the mirror of this system's release from apt's package lists.
mirror() {
	local codename
	codename=$(. /etc/os-release && echo "$VERSION_CODENAME")
	apt-get indextargets --format '$(REPO_URI) $(RELEASE)' | awk -v c="$codename" '$2 == c { print $1; exit }'
}

# debian_mirror prints mirror, updating apt's package lists first when there
# are none yet: the mirror is known from them.
debian_mirror() {
	local url
	url=$(mirror) || return
	if [[ -z $url ]]; then
		apt-get update -qq >&2 || return
		url=$(mirror)
	fi
	[[ -n $url ]] || { echo "no Debian mirror for this release in apt's sources" >&2; return 1; }
	echo "$url"
}

if [[ ${BASH_SOURCE[0]} == "$0" ]]; then
	set -euo pipefail
	debian_mirror
fi
