#!/usr/bin/env bash
# Checks deploy/packages/ against what the built binaries actually link, so
# that a library added to the build cannot be forgotten in the image's lists
# again (issue 25: SLEEF, OpenBLAS, zlib and libpng joined the build, the
# Dockerfile's lists did not, and the image stopped building).
#
#   package_lists_test.sh PACKAGES_DIR BINARY...
#
# Runtime: every shared library a binary loads (ldd, transitive) belongs, by
# `dpkg -S`, to a package named in runtime.txt or in base.txt (what
# debian:bookworm-slim already has). runtime.txt names each such package
# itself, even one another package pulls in, so the list says what the
# binaries load.
# Build: every library a binary links directly (its DT_NEEDED entries) has
# its development link (libfoo.so beside libfoo.so.N) in a package that
# build.txt installs, directly or as a dependency (the installed packages'
# Depends); a base.txt library without such a link (libstdc++, libgcc_s: in
# GCC's own directory) comes with the compiler.
# Needs a Debian system with the build's packages installed (dpkg, ldd,
# objdump); exits 77 (skipped) without dpkg.
set -euo pipefail
packages_dir=$1
shift
command -v dpkg-query >/dev/null || { echo "SKIP: not a Debian system (no dpkg)"; exit 77; }

read_list() { sed 's/#.*//' "$@" | xargs -n1; }
declare -A runtime base build_closure
for p in $(read_list "$packages_dir/runtime.txt"); do runtime[$p]=1; done
for p in $(read_list "$packages_dir/base.txt"); do base[$p]=1; done

# Symbolic links are followed one step at a time (an update-alternatives link
# belongs to no package) and both spellings of a merged-/usr path are tried.
# Forks are few (dpkg-query -S reads every file list, seconds a call: all
# candidate paths go to one call), since CI machines are loaded.
declare -A chain_of owner_of
# make_chain PATH: chain_of[PATH] = the paths to look up, in order.
make_chain() {
  local path=$1 hops target list=""
  [[ -n ${chain_of[$1]:-} ]] && return
  for hops in 1 2 3 4 5 6; do
    list+=" $path /usr${path#/usr} ${path#/usr}"
    [[ -L $path ]] || break
    target=$(readlink "$path")
    [[ $target == /* ]] || target="${path%/*}/$target"
    path=$target
  done
  chain_of[$1]=$list
}
# owner PATH: sets package to the package that installed PATH, or empty.
owner() {
  local candidate
  package=""
  for candidate in ${chain_of[$1]}; do
    if [[ -n ${owner_of[$candidate]:-} ]]; then package=${owner_of[$candidate]}; return; fi
  done
}

# The installed dependency closure of build.txt (Depends and Pre-Depends,
# every alternative of an "a | b", versions and :any dropped).
declare -A depends_of
while IFS=$'\t' read -r name deps; do
  deps=${deps//|/ }
  depends_of[$name]=${deps//,/ }
done < <(dpkg-query -W -f='${Package}\t${Depends}, ${Pre-Depends}\n' | sed 's/([^)]*)//g; s/:any//g')
queue=($(read_list "$packages_dir/build.txt"))
while ((${#queue[@]} > 0)); do
  p=${queue[0]}
  queue=("${queue[@]:1}")
  [[ -n ${build_closure[$p]:-} ]] && continue
  build_closure[$p]=1
  for d in ${depends_of[$p]:-}; do
    [[ -z ${build_closure[$d]:-} ]] && queue+=("$d")
  done
done

# What each binary loads (ldd) and links directly (DT_NEEDED), and where the
# development link of each loaded library would be (libfoo.so.N -> libfoo.so).
declare -A loads needs
for binary in "$@"; do
  [[ -x $binary ]] || continue
  loads[$binary]=$(ldd "$binary" | awk '$2 == "=>" {print $1, $3}')
  needs[$binary]=$(objdump -p "$binary" | awk '$1 == "NEEDED" {print $2}')
  while read -r soname path; do
    [[ $path == /* ]] || continue
    make_chain "$path"
    make_chain "/usr/lib/x86_64-linux-gnu/${soname%%.so*}.so"
  done <<<"${loads[$binary]}"
done
while IFS= read -r line; do
  [[ $line == diversion* || $line != *": /"* ]] && continue
  name=${line%%: /*}
  name=${name%%,*}
  owner_of[/${line#*: /}]=${name%%:*}
done < <(printf '%s\n' ${chain_of[@]} | sort -u | xargs -r dpkg-query -S 2>/dev/null || true)

failures=0
declare -A reported
for binary in "$@"; do
  [[ -x $binary ]] || { echo "FAIL: $binary is not a built executable"; failures=$((failures + 1)); continue; }
  # Runtime: each library ldd resolves.
  while read -r soname path; do
    if [[ $path == "not" ]]; then
      echo "FAIL: $binary: $soname not found on this machine"; failures=$((failures + 1)); continue
    fi
    owner "$path"
    if [[ -z $package ]]; then
      echo "FAIL: $binary loads $path, which no Debian package owns: the image cannot install it"
      failures=$((failures + 1)); continue
    fi
    if [[ -z ${runtime[$package]:-} && -z ${base[$package]:-} && -z ${reported[$package]:-} ]]; then
      echo "FAIL: $binary loads $soname ($path) from package $package," \
        "which is missing from deploy/packages/runtime.txt"
      reported[$package]=1
      failures=$((failures + 1))
    fi
  done <<<"${loads[$binary]}"
  # Build: each library linked directly, through its development link.
  for soname in ${needs[$binary]}; do
    path=""
    while read -r loaded loaded_path; do
      [[ $loaded == "$soname" ]] && path=$loaded_path
    done <<<"${loads[$binary]}"
    [[ $path == /* ]] || continue  # reported above as not found
    owner "$path"
    runtime_package=$package
    dev_link="/usr/lib/x86_64-linux-gnu/${soname%%.so*}.so"
    owner "$dev_link"
    dev_package=$package
    # GCC's own libraries (libquadmath, for the exponential mechanism's
    # __float128 refinement) keep their development link in GCC's directory,
    # owned by libgcc-<version>-dev, which the compiler brings.
    if [[ -z $dev_package ]]; then
      for gcc_link in /usr/lib/gcc/x86_64-linux-gnu/*/"${soname%%.so*}.so"; do
        [[ -e $gcc_link ]] || continue
        # Not in the chains dpkg was asked about above: one query, rare.
        package=$(dpkg-query -S "$gcc_link" 2>/dev/null | head -n 1 | cut -d: -f1 || true)
        [[ -n $package ]] && dev_link=$gcc_link && dev_package=$package && break
      done
    fi
    # libstdc++ and libgcc_s keep their links in GCC's own directory: the
    # compiler (build-essential) brings them.
    if [[ -z $dev_package && -n ${base[$runtime_package]:-} ]]; then continue; fi
    if [[ -z $dev_package ]]; then
      echo "FAIL: $binary links $soname, but no installed package owns $dev_link"
      failures=$((failures + 1))
    elif [[ -z ${build_closure[$dev_package]:-} && -z ${reported[$dev_package]:-} ]]; then
      echo "FAIL: $binary links $soname, whose development files are in $dev_package," \
        "which deploy/packages/build.txt neither names nor pulls in"
      reported[$dev_package]=1
      failures=$((failures + 1))
    fi
  done
done

# Entries no binary needs are worth knowing about, not a failure (ca-certificates).
if ((failures > 0)); then
  echo "$failures problem(s): add the packages named above to deploy/packages/"
  exit 1
fi
echo "OK: runtime.txt + base.txt cover every library $# binaries load;" \
  "build.txt provides every library they link (${#build_closure[@]} packages with dependencies)"
