#!/usr/bin/env bash
# Installs the Debian tools `make e2e` needs, only when they are missing:
#   chromium  - the headless browser the admin HTML tests drive (chromedp)
#   promtool  - `promtool check metrics`, shipped in Debian's prometheus package
#   h2spec    - the HTTP/2 conformance suite, built with `go install` (pinned)
#   iptables  - the REDIRECT rule of the ORIGINAL_DST test (in a network namespace it makes)
# Safe to run again: an installed tool is left alone. Needs root (or sudo)
# only when a Debian package has to be installed.
set -euo pipefail

# h2spec's newest release; its module has no go.mod, hence +incompatible.
h2spec_version=v2.2.1+incompatible
gobin="$(go env GOBIN)"
gobin="${gobin:-$(go env GOPATH)/bin}"
if command -v h2spec >/dev/null 2>&1 || [ -x "$gobin/h2spec" ]; then
	echo "install-e2e-deps: h2spec already installed"
else
	echo "install-e2e-deps: go install h2spec@$h2spec_version"
	go install "github.com/summerwind/h2spec/cmd/h2spec@$h2spec_version"
fi

missing=()
command -v chromium >/dev/null 2>&1 || missing+=(chromium)
command -v promtool >/dev/null 2>&1 || missing+=(prometheus)
PATH="$PATH:/usr/sbin:/sbin" command -v iptables >/dev/null 2>&1 || missing+=(iptables)

if [ "${#missing[@]}" -eq 0 ]; then
	echo "install-e2e-deps: chromium, promtool and iptables already installed"
	exit 0
fi

sudo=()
if [ "$(id -u)" -ne 0 ]; then
	command -v sudo >/dev/null 2>&1 || {
		echo "install-e2e-deps: need root to install ${missing[*]}" >&2
		exit 1
	}
	sudo=(sudo)
fi

# The prometheus package ships a service; keep apt from starting it by
# providing a policy-rc.d that denies service starts, unless one exists.
policy=/usr/sbin/policy-rc.d
added_policy=0
if [ ! -e "$policy" ]; then
	printf '#!/bin/sh\nexit 101\n' | "${sudo[@]}" tee "$policy" >/dev/null
	"${sudo[@]}" chmod 755 "$policy"
	added_policy=1
fi
cleanup() {
	if [ "$added_policy" -eq 1 ]; then
		"${sudo[@]}" rm -f "$policy"
	fi
}
trap cleanup EXIT

echo "install-e2e-deps: installing ${missing[*]}"
"${sudo[@]}" apt-get update -qq
"${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}"

command -v chromium >/dev/null 2>&1 || { echo "install-e2e-deps: chromium still missing" >&2; exit 1; }
command -v promtool >/dev/null 2>&1 || { echo "install-e2e-deps: promtool still missing" >&2; exit 1; }
echo "install-e2e-deps: done"
