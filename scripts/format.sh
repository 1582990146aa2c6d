#!/usr/bin/env bash
# clang-format over airlock's C and C++ sources with the project's
# .clang-format (bpf/ and tests/bpf/progs/ add C's pointer style to it).
#   scripts/format.sh          reformats them in place
#   scripts/format.sh --check  changes nothing; lists the files that are not
#                              formatted, one a line, and fails if any is not
# clang-format 14 (Debian 12's, scripts/deps.sh installs it): another
# version lays the same code out differently, so it is refused.
set -euo pipefail
cd "$(dirname "$0")/.."
case "${1:-}" in
  "") check=0 ;;
  --check) check=1 ;;
  *) echo "scripts/format.sh: '$1' is not an option (--check, or nothing to format in place)" >&2; exit 2 ;;
esac
fmt=${CLANG_FORMAT:-$(command -v clang-format-14 || command -v clang-format || true)}
if [[ -z $fmt ]] || ! "$fmt" --version | grep -q 'version 14\.'; then
  echo "scripts/format.sh: needs clang-format 14 (scripts/deps.sh installs it), found '${fmt:-none}'" >&2
  exit 2
fi
# The sources git knows or would (tracked, and new ones not ignored: a file
# about to be added is formatted and checked too), or in a tree that is not
# a git checkout the folders that hold them.
if git rev-parse --is-inside-work-tree >/dev/null 2>&1; then
  list() { git ls-files -z --cached --others --exclude-standard -- '*.c' '*.h' '*.cpp' '*.hpp'; }
else
  list() { find bench bpf include tests userspace vmtests -type f \
    \( -name '*.c' -o -name '*.h' -o -name '*.cpp' -o -name '*.hpp' \) -print0; }
fi
if ((check == 0)); then
  list | xargs -0 -r -P"$(nproc)" -n16 "$fmt" -i
  exit 0
fi
# One line a file whose formatted text differs from what is on disk.
unformatted=$(list | FMT=$fmt xargs -0 -r -P"$(nproc)" -n16 sh -c \
  'for f; do "$FMT" "$f" | cmp -s - "$f" || echo "$f"; done' sh | sort)
if [[ -n $unformatted ]]; then
  echo "$unformatted"
  echo "scripts/format.sh: $(wc -l <<<"$unformatted") files not formatted; scripts/format.sh formats them" >&2
  exit 1
fi
echo "clang-format: sources formatted"
