#!/usr/bin/env bash
# test-dm-vm.sh: test our device-mapper code against a real kernel, in a VM.
#
# usage: scripts/test-dm-vm.sh [--payload DIR] [--timeout SECONDS] [--verbose]
#                              [--rebuild-guest]
#
# The kernels our machines run have no device-mapper, so this boots a stock
# Debian kernel under qemu (TCG: software emulation; KVM here cannot boot a
# stock kernel) from a small busybox initramfs, runs a payload in it, and
# prints PASS or FAIL. Exit status: 0 pass, 1 fail, 2 setup error.
#
# Default payload: the internal/devmapper tests, built static (CGO_ENABLED=0
# go test -c), run in the guest with XTSCTL_DM_GUEST set, on images that the
# same test binary encrypts on the host with our xts package.
#
# --payload DIR  copy DIR into the guest as /payload and run /payload/run
#                instead (as root, in /payload, busybox, cryptsetup and
#                dmsetup on PATH, /tmp a tmpfs, modules loaded: loop dm-mod
#                dm-crypt xts aesni-intel af_alg algif_skcipher; ext4 is
#                built in). Its exit status is the verdict. cmd/xtsctl's
#                TestDMBackendVM uses it for "xtsctl open --backend dm" (and
#                cryptsetup open of the LUKS2 image xtsctl wrote): a static
#                xtsctl, the images and a run script in DIR; luks's
#                TestKernelOpensOurImages for cryptsetup open of LUKS2
#                images the luks package wrote.
# --timeout S    give up on the guest after S seconds (default 300).
# --verbose      print the guest console as it was captured.
# --rebuild-guest  rebuild the cached kernel and initramfs.
#
# Environment: XTSCTL_DM_VM_CACHE (cache dir, default
# ${XDG_CACHE_HOME:-/var/cache}/xtsctl-dm-vm), XTSCTL_DM_VM_KERNEL (kernel
# package, default linux-image-cloud-amd64), XTSCTL_DM_VM_MEM (MiB, 1024).
# Run as root the first time: missing qemu-system-x86, cpio, kmod,
# cryptsetup-bin and dmsetup are installed with apt-get, and the kernel and
# busybox-static packages are downloaded (apt-get download, nothing
# installed) into the cache. The guest's cryptsetup and dmsetup are the
# host's, copied with the shared libraries ldd lists.
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
CACHE=${XTSCTL_DM_VM_CACHE:-${XDG_CACHE_HOME:-/var/cache}/xtsctl-dm-vm}
KERNEL_PKG=${XTSCTL_DM_VM_KERNEL:-linux-image-cloud-amd64}
MEM=${XTSCTL_DM_VM_MEM:-1024}
# Bump when the guest's layout, init or module list changes.
GUEST_FORMAT=2
# af_alg and algif_skcipher: cryptsetup decrypts keyslot areas through the
# kernel's crypto API (without them it would map each one with dm-crypt).
GUEST_MODULES="loop dm-mod dm-crypt xts aesni-intel af_alg algif_skcipher"
GUEST_TOOLS="cryptsetup dmsetup"

PAYLOAD='' TIMEOUT=300 VERBOSE=0 REBUILD=0
while [ $# -gt 0 ]; do
  case $1 in
    --payload) PAYLOAD=$2; shift 2;;
    --payload=*) PAYLOAD=${1#*=}; shift;;
    --timeout) TIMEOUT=$2; shift 2;;
    --timeout=*) TIMEOUT=${1#*=}; shift;;
    --verbose|-v) VERBOSE=1; shift;;
    --rebuild-guest) REBUILD=1; shift;;
    -h|--help) sed -n '2,/^set -e/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0;;
    *) echo "test-dm-vm: unknown argument $1" >&2; exit 2;;
  esac
done

die() { echo "test-dm-vm: $*" >&2; echo FAIL; exit 2; }
note() { echo "test-dm-vm: $*" >&2; }

[[ $TIMEOUT =~ ^[0-9]+$ ]] || die "--timeout wants seconds, not $TIMEOUT"
if [ -n "$PAYLOAD" ]; then
  [ -x "$PAYLOAD/run" ] || die "--payload $PAYLOAD has no executable run"
fi

# ------------------------------------------------------------ host tools
ensure_tools() {
  local need=()
  command -v qemu-system-x86_64 >/dev/null || need+=(qemu-system-x86)
  command -v cpio >/dev/null || need+=(cpio)
  command -v depmod >/dev/null || need+=(kmod)
  command -v cryptsetup >/dev/null || need+=(cryptsetup-bin)
  command -v dmsetup >/dev/null || need+=(dmsetup)
  [ ${#need[@]} -eq 0 ] && return
  [ "$(id -u)" = 0 ] || die "missing ${need[*]}: install them or run as root"
  note "installing ${need[*]}"
  export DEBIAN_FRONTEND=noninteractive
  apt-get install -y --no-install-recommends "${need[@]}" >&2 ||
    { apt-get update >&2 && apt-get install -y --no-install-recommends "${need[@]}" >&2; } ||
    die "apt-get install ${need[*]} failed"
}

# --------------------------------------------------------- guest (cached)
# The kernel package the metapackage points at now, e.g.
# linux-image-6.1.0-57-cloud-amd64 (empty if apt knows nothing).
kernel_image_pkg() {
  apt-cache depends "$KERNEL_PKG" 2>/dev/null | awk '/Depends: linux-image-/ {print $2; exit}'
}

# Copy a module into the initramfs tree, decompressed (busybox insmod
# cannot read compressed modules), and list it in load order.
add_module() { # src root
  local base
  base=$(basename "$1"); base=${base%.xz}; base=${base%.zst}; base=${base%.gz}
  case $1 in
    *.xz) xz -dc "$1" > "$2/lib/modules/$base";;
    *.zst) zstd -qdc "$1" > "$2/lib/modules/$base";;
    *.gz) gzip -dc "$1" > "$2/lib/modules/$base";;
    *) cp "$1" "$2/lib/modules/$base";;
  esac
  echo "$base" >> "$2/etc/xtsvm/modules"
}

# Copy the host's cryptsetup and dmsetup into the initramfs tree, with the
# shared libraries and the loader they need (ldd), and libgcc_s, which
# glibc loads when a thread exits (cryptsetup's Argon2 runs threads).
add_tools() { # root
  local t path lib
  for t in $GUEST_TOOLS; do
    path=$(command -v "$t") || die "$t is missing (install cryptsetup-bin and dmsetup)"
    cp -L "$path" "$1/sbin/$t"
    for lib in $(ldd "$path" | awk '/=> \// {print $3} /^[[:space:]]*\// {print $1}'); do
      mkdir -p "$1$(dirname "$lib")"
      cp -L "$lib" "$1$lib"
    done
  done
  for lib in /lib/x86_64-linux-gnu/libgcc_s.so.1 /usr/lib/x86_64-linux-gnu/libgcc_s.so.1; do
    [ -f "$lib" ] || continue
    mkdir -p "$1$(dirname "$lib")"
    cp -L "$lib" "$1$lib"
    break
  done
}

build_guest() {
  local kimg stamp=$CACHE/guest.stamp
  kimg=$(kernel_image_pkg)
  if [ -z "$kimg" ] && [ "$(id -u)" = 0 ]; then
    apt-get update >&2 || true
    kimg=$(kernel_image_pkg)
  fi
  if [ -z "$kimg" ]; then
    # No apt metadata: a cached guest still does.
    [ -f "$stamp" ] || die "cannot resolve $KERNEL_PKG (apt-get update as root first)"
    kimg=$(cut -d' ' -f2 "$stamp")
  fi
  local want="v$GUEST_FORMAT $kimg $GUEST_MODULES $(cryptsetup --version)"
  if [ "$REBUILD" = 0 ] && [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want" ] &&
     [ -f "$CACHE/vmlinuz" ] && [ -f "$CACHE/base.cpio.gz" ]; then
    return
  fi
  note "building the guest from $kimg in $CACHE (once)"
  rm -f "$stamp"
  local w=$CACHE/build
  rm -rf "$w"; mkdir -p "$w/deb"
  # The download dir is not the _apt user's: do not drop privileges for it.
  (cd "$w/deb" && apt-get -o APT::Sandbox::User=root download "$kimg" busybox-static >&2) ||
    die "apt-get download $kimg busybox-static failed"
  dpkg-deb -x "$w"/deb/linux-image-*.deb "$w/k"
  dpkg-deb -x "$w"/deb/busybox-static_*.deb "$w/bb"
  local kver
  kver=$(ls "$w/k/lib/modules")
  [ -f "$w/k/boot/vmlinuz-$kver" ] || die "no vmlinuz-$kver in $kimg"

  local r=$w/root
  mkdir -p "$r"/{bin,sbin,dev,proc,sys,tmp,etc/xtsvm,lib/modules,payload}
  cp "$w/bb/bin/busybox" "$r/bin/busybox" || die "no busybox in busybox-static"
  add_tools "$r"
  # Modules with their dependencies, in load order; built-in ones are
  # skipped (modprobe reports them as builtin).
  depmod -b "$w/k" "$kver"
  local m
  : > "$w/deps"
  for m in $GUEST_MODULES; do
    modprobe -d "$w/k" -S "$kver" --show-depends "$m" >> "$w/deps" ||
      die "module $m is in neither $kimg nor its kernel"
  done
  awk '$1 == "insmod" && !seen[$2]++ {print $2}' "$w/deps" > "$w/modules"
  grep -q '\.xz$' "$w/modules" && ! command -v xz >/dev/null && die "compressed modules: install xz-utils"
  grep -q '\.zst$' "$w/modules" && ! command -v zstd >/dev/null && die "compressed modules: install zstd"
  : > "$r/etc/xtsvm/modules"
  while read -r m; do
    add_module "$m" "$r"
  done < "$w/modules"
  echo "$kver" > "$r/etc/xtsvm/kver"
  write_init > "$r/init"
  chmod 755 "$r/init"
  (cd "$r" && find . | LC_ALL=C sort | cpio -o -H newc -R 0:0 --quiet) | gzip -1 > "$CACHE/base.cpio.gz"
  cp "$w/k/boot/vmlinuz-$kver" "$CACHE/vmlinuz"
  rm -rf "$w"
  echo "$want" > "$stamp"
}

# The guest's /init. Lines starting XTSVM- are for the host; the payload's
# output goes to the console between them.
write_init() {
  cat <<'EOF'
#!/bin/busybox sh
/bin/busybox --install -s /bin
export PATH=/bin:/sbin HOME=/tmp
mount -t proc proc /proc
mount -t sysfs sysfs /sys
mount -t devtmpfs devtmpfs /dev
mount -t tmpfs tmpfs /tmp
for m in $(cat /etc/xtsvm/modules); do
  insmod "/lib/modules/$m" || echo "XTSVM-NOTE insmod $m failed"
done
echo "XTSVM-KERNEL $(uname -r)"
rc=1
if [ -x /payload/run ]; then
  cd /payload && ./run
  rc=$?
else
  echo "XTSVM-NOTE no /payload/run"
fi
echo "XTSVM-EXIT $rc"
sync
poweroff -f
sleep 10
EOF
}

# -------------------------------------------------------------- payload
# The default payload: our devmapper test binary and its images.
build_test_payload() { # dir
  local p=$1
  (cd "$ROOT" && CGO_ENABLED=0 go test -c -o "$p/devmapper.test" ./internal/devmapper) ||
    die "go test -c ./internal/devmapper failed"
  XTSCTL_DM_PREPARE="$p/cases" "$p/devmapper.test" -test.run '^TestPrepareGuestImages$' -test.count=1 > "$TMP/prepare.log" 2>&1 ||
    { cat "$TMP/prepare.log" >&2; die "preparing the guest images failed"; }
  cat > "$p/run" <<'EOF'
#!/bin/sh
XTSCTL_DM_GUEST=/payload/cases ./devmapper.test -test.v -test.count=1 -test.timeout=4m
rc=$?
# The kernel's reasons for rejecting a table are only in its log.
[ $rc = 0 ] || dmesg | grep -iE 'device-mapper|crypt|loop' | tail -n 30
exit $rc
EOF
  chmod 755 "$p/run"
}

# ----------------------------------------------------------------- main
ensure_tools
mkdir -p "$CACHE"
exec 9>"$CACHE/.lock"
flock 9
build_guest
flock -u 9

TMP=$(mktemp -d -t xtsctl-dm-vm.XXXXXX)
trap 'rm -rf "$TMP"' EXIT
mkdir -p "$TMP/root/payload"
if [ -n "$PAYLOAD" ]; then
  cp -a "$PAYLOAD/." "$TMP/root/payload/"
else
  build_test_payload "$TMP/root/payload"
fi
# A second cpio appended to the cached one adds /payload.
(cd "$TMP/root" && find payload | LC_ALL=C sort | cpio -o -H newc -R 0:0 --quiet) | gzip -1 > "$TMP/payload.cpio.gz"
cat "$CACHE/base.cpio.gz" "$TMP/payload.cpio.gz" > "$TMP/initrd.gz"

start=$SECONDS
# -cpu max emulates AES-NI, so dm-crypt uses xts-aes-aesni as it would on
# real hardware. random.trust_cpu seeds the RNG from the emulated RDRAND.
set +e
timeout "$TIMEOUT" qemu-system-x86_64 \
  -accel tcg -cpu max -m "$MEM" -smp 1 \
  -nodefaults -no-user-config -display none -no-reboot \
  -serial stdio -monitor none \
  -kernel "$CACHE/vmlinuz" -initrd "$TMP/initrd.gz" \
  -append "console=ttyS0 panic=-1 quiet loglevel=3 random.trust_cpu=on" \
  < /dev/null > "$TMP/console.raw" 2>&1
qemu_status=$?
set -e
tr -d '\r' < "$TMP/console.raw" > "$TMP/console.txt"
elapsed=$((SECONDS - start))

[ "$VERBOSE" = 1 ] && sed 's/^/guest: /' "$TMP/console.txt" >&2
kernel=$(awk '/^XTSVM-KERNEL / {print $2; exit}' "$TMP/console.txt")
if grep -qx 'XTSVM-EXIT 0' "$TMP/console.txt"; then
  note "guest kernel $kernel, ${elapsed}s under TCG"
  echo PASS
  exit 0
fi
if [ "$qemu_status" = 124 ]; then
  note "the guest did not finish in ${TIMEOUT}s"
fi
note "guest kernel ${kernel:-?} failed after ${elapsed}s (qemu status $qemu_status); console:"
[ "$VERBOSE" = 1 ] || tail -n 60 "$TMP/console.txt" | sed 's/^/guest: /' >&2
echo FAIL
exit 1
