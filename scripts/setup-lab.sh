#!/usr/bin/env bash
# Installs everything corral's test suite needs on a fresh Debian 12 (bookworm) machine:
# Python venv support, LXD, LXC, QEMU, busybox, tmux, SYSLINUX and mtools (the VM import
# tests build a bootable disk), libvirt (its daemon, and what the libvirt-python binding
# builds with) and OpenSSH (the lab's sshd in front of it), and Incus from bookworm-backports.
# Idempotent; run as root. Non-root users get a message saying what to install.
set -euo pipefail

need_pkgs=(python3-venv lxd lxd-client lxc qemu-system-x86 qemu-utils ovmf busybox-static cpio tmux librsvg2-bin uidmap openssl vttest dialog syslinux syslinux-common extlinux mtools
  libvirt-daemon-system libvirt-clients libvirt-dev pkg-config gcc openssh-server openssh-client)

if [ "$(id -u)" != 0 ]; then
  echo "setup-lab: not root; skipping Debian packages. Needed: ${need_pkgs[*]} incus (bookworm-backports)" >&2
  exit 0
fi

missing=()
for p in "${need_pkgs[@]}" incus incus-client; do
  dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p")
done
# The QEMU test guest's kernel (tests/qemu_guest.py) comes from the Debian cloud kernel
# package, fetched here into apt's archive cache so that no test downloads anything.
fetch_guest_kernel() {
  local pkg
  pkg=$(apt-cache depends linux-image-cloud-amd64 2>/dev/null \
        | awk '/Depends: linux-image-/ {print $2; exit}')
  if [ -z "$pkg" ]; then
    apt-get update -qq
    pkg=$(apt-cache depends linux-image-cloud-amd64 | awk '/Depends: linux-image-/ {print $2; exit}')
  fi
  if ! compgen -G "/var/cache/apt/archives/${pkg}_*.deb" >/dev/null; then
    (cd /var/cache/apt/archives && apt-get download -qq "$pkg" 2>/dev/null) \
      || { apt-get update -qq && (cd /var/cache/apt/archives && apt-get download -qq "$pkg"); }
    echo "setup-lab: fetched the guest kernel package $pkg"
  fi
}

if [ ${#missing[@]} -eq 0 ]; then
  echo "setup-lab: all Debian packages present"
  fetch_guest_kernel
  exit 0
fi

export DEBIAN_FRONTEND=noninteractive
codename=$(. /etc/os-release && echo "${VERSION_CODENAME:-}")
if [ "$codename" = bookworm ] && ! grep -rqs bookworm-backports /etc/apt/sources.list /etc/apt/sources.list.d/; then
  cat > /etc/apt/sources.list.d/corral-backports.sources <<SRC
Types: deb
URIs: http://deb.debian.org/debian
Suites: bookworm-backports
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg
SRC
fi
apt-get update -qq
apt-get install -y -qq --no-install-recommends "${need_pkgs[@]}" >/dev/null
if [ "$codename" = bookworm ]; then
  apt-get install -y -qq --no-install-recommends -t bookworm-backports incus incus-client >/dev/null
else
  apt-get install -y -qq --no-install-recommends incus incus-client >/dev/null
fi
echo "setup-lab: installed ${missing[*]}"
fetch_guest_kernel
