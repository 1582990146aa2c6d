#!/usr/bin/env bash
# clang-tidy over userspace/ with the project's .clang-tidy: any finding
# fails. Run after scripts/build.sh (it reads build/compile_commands.json).
#
# A file found clean is remembered: the key is the clang-tidy version, the
# .clang-tidy, the file's compile flags and its preprocessed text (every
# header it includes, as included; paths of the tree left out, so another
# clone of the same sources hits). A file whose key is remembered is not
# analysed again: what clang-tidy reads is the same, so is its verdict.
# The memory is ${AIRLOCK_TIDY_CACHE:-~/.cache/airlock-tidy}, one empty
# file per clean key, those unused for 30 days removed;
# AIRLOCK_TIDY_CACHE=off analyses everything.
set -euo pipefail
cd "$(dirname "$0")/.."
tidy=$(command -v clang-tidy-14 || command -v clang-tidy)
cache=${AIRLOCK_TIDY_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/airlock-tidy}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# "FILE<TAB>COMMAND" for each userspace source, the command preprocessing it.
python3 - "$PWD" >"$work/commands" <<'EOF'
import json, shlex, sys
root = sys.argv[1]
for e in json.load(open(root + "/build/compile_commands.json")):
    f = e["file"]
    if not f.startswith(root + "/userspace/") or not f.endswith(".cpp"):
        continue
    args = shlex.split(e["command"]) if "command" in e else e["arguments"]
    out, skip = [], False
    for a in args:
        if skip:
            skip = False
            continue
        if a in ("-o", "-c", "-MF", "-MT", "-MQ"):
            skip = True
            continue
        if a in ("-MD", "-MMD") or a == f:
            continue
        out.append(a)
    print(f + "\t" + shlex.join(out + ["-E", "-P", f]))
EOF

# Each file's key (in parallel: preprocessing is most of it).
key_base=$({ "$tidy" --version; cat .clang-tidy; } | sha256sum | cut -c1-32)
export key_base root="$PWD"
cut -f1 "$work/commands" | sort >"$work/files"
# A file that does not preprocess gets a key never remembered.
tr '\n' '\0' <"$work/files" | nice -n 19 xargs -0 -P"$(nproc)" -n1 bash -c '
  set -o pipefail
  line=$(grep -F "$1	" "'"$work"'/commands" | head -1)
  cmd=${line#*	}
  if text=$(cd "$root/build" && eval "$cmd" 2>/dev/null | sed "s|$root/||g"); then
    key=$({ echo "$key_base"; echo "${cmd//$root\//}"; echo "$text"; } | sha256sum | cut -c1-32)
  else
    key=unknown-$$-$RANDOM
  fi
  echo "$key $1"' _ >"$work/keys"

todo=()
while read -r key file; do
  if [[ $cache != off && -e $cache/$key ]]; then
    touch "$cache/$key"
  else
    todo+=("$key $file")
  fi
done <"$work/keys"
total=$(wc -l <"$work/keys")
echo "clang-tidy: ${#todo[@]} of $total files to analyse (the rest found clean before)"

# At the lowest priority: in the test suite it runs beside the kernel
# tests, whose timeouts matter more than its own. A file found clean is
# remembered as it finishes.
if ((${#todo[@]})); then
  [[ $cache != off ]] && mkdir -p "$cache"
  export tidy cache
  printf '%s\n' "${todo[@]}" | nice -n 19 xargs -d '\n' -P"$(nproc)" -n1 bash -c '
    key=${1%% *} file=${1#* }
    "$tidy" -p build --quiet "$file" 2>/dev/null || exit 255
    [[ $cache == off || $key == unknown-* ]] || : >"$cache/$key"' _
fi
[[ $cache != off && -d $cache ]] && find "$cache" -type f -mtime +30 -delete
echo "clang-tidy: userspace clean"
