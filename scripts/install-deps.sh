#!/usr/bin/env bash
# install-deps.sh: install what the tests need beyond Go, on Debian 12.
# Installs only what is missing; needs root for apt-get (without root it
# only says what is missing). Safe to run repeatedly.
set -euo pipefail
cd "$(dirname "$0")/.."

# command -> Debian package
declare -A need=(
  [mkfs.ext4]=e2fsprogs  # test images, mount tests
  [debugfs]=e2fsprogs
  [e2fsck]=e2fsprogs     # open/close tests: fsck after a killed server
  [fio]=fio              # scripts/bench-mount.sh
  [losetup]=mount        # scripts/bench-mount.sh: the unencrypted baseline
  [unshare]=util-linux   # open tests: hide /dev/fuse in a private mount namespace
  [qemu-system-x86_64]=qemu-system-x86 # scripts/test-dm-vm.sh: dm-crypt in a guest kernel
  [qemu-aarch64-static]=qemu-user-static # scripts/test.bash: the portable path's tests on arm64
  [cpio]=cpio
  [depmod]=kmod
  [cryptsetup]=cryptsetup-bin # luks tests: images made and read by the real cryptsetup
  [dmsetup]=dmsetup      # scripts/test-dm-vm.sh copies it into the guest
  [groff]=groff-base     # cmd/xtsctl discover.txtar: the manual pages read without warnings
  [fvdeinfo]=libfvde-utils  # fvault2 peer tests: libfvde reads the same FileVault 2 image
  [fvdemount]=libfvde-utils
  [xz]=xz-utils          # fvault2 and bitlk tests: the samples are .tar.xz
  [partx]=util-linux     # fvault2 tests: the GPT a test writes, read independently
  [blkid]=util-linux     # fvault2 and tcrypt tests: the decrypted samples' file system UUIDs; internal/fsblock: an independent reader of the same superblocks
  [tcplay]=tcplay        # tcrypt tests: TrueCrypt volumes made by another implementation
  [dislocker-file]=dislocker # bitlk tests: an independent BitLocker reader
  [bdemount]=libbde-utils    # bitlk tests: another one (libbde), and bdeinfo
  # inplace TestRecognise and internal/fsblock: the signatures and
  # superblocks of real filesystems and tables
  [mkfs.xfs]=xfsprogs
  [mkfs.btrfs]=btrfs-progs
  [mkfs.vfat]=dosfstools
  [mkfs.exfat]=exfatprogs
  [mkfs.ntfs]=ntfs-3g
  [mkswap]=util-linux
  [sfdisk]=fdisk
  [dislocker-fuse]=dislocker # open --mount tests: a whole NTFS written into BitLocker samples; bench-foreign.sh
  [ntfs-3g]=ntfs-3g          # open --mount of NTFS where the kernel has no ntfs3 (mount tests)
  [mkntfs]=ntfs-3g
  [mount.exfat-fuse]=exfat-fuse # ... of exFAT where it has no exfat
  [fusefat]=fusefat          # ... of FAT where it has no vfat
  [mcopy]=mtools             # tcrypt mount tests: files put into a FAT without mounting it
  [mksquashfs]=squashfs-tools
  [mkfs.erofs]=erofs-utils
  [bc]=bc                    # scripts/bench-foreign.sh
)
missing=()
for cmd in "${!need[@]}"; do
  command -v "$cmd" >/dev/null 2>&1 || missing+=("${need[$cmd]}")
done
# scripts/volume_ref.py (the independent volume-format implementation the
# tests compare xtsctl with) runs on Debian's python with these modules.
if ! /usr/bin/python3 -c 'import cryptography, argon2, nacl' >/dev/null 2>&1; then
  missing+=(python3-cryptography python3-argon2 python3-nacl)
fi
# cmd/xtsctl discover.txtar runs the bash completion script, which needs
# bash-completion's helpers.
[ -f /usr/share/bash-completion/bash_completion ] || missing+=(bash-completion)
if [ ${#missing[@]} -gt 0 ]; then
  mapfile -t missing < <(printf '%s\n' "${missing[@]}" | sort -u)
  if [ "$(id -u)" = 0 ]; then
    echo "install-deps: installing ${missing[*]}"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq
    apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
  else
    echo "install-deps: missing Debian packages: ${missing[*]} (run as root to install)" >&2
  fi
fi

# Go tools, pinned.
gobin=$(go env GOPATH)/bin
if [ ! -x "$gobin/staticcheck" ] || ! "$gobin/staticcheck" -version 2>/dev/null | grep -q '0.8.2'; then
  echo "install-deps: installing staticcheck v0.8.2"
  (cd / && GOFLAGS= go install honnef.co/go/tools/cmd/staticcheck@v0.8.2)
fi
