#!/usr/bin/env bash
# Old hvdbench-cpu images in ch-image's storage, pruned without touching another checkout's: an image is deleted only
# where this checkout alone used it (its owners file, which scripts/container-image.sh adds each checkout to, names
# this checkout and no other), it is not the image just built, and no running process uses it (a command line naming
# it). Images another checkout used, or whose owner is unknown, are kept; `ch-image delete hvdbench-cpu:KEY` removes
# one by hand.
#
#   scripts/container-image-prune.sh STORAGE OWNERS CHECKOUT KEEP_IMAGE [CH_IMAGE...]
set -uo pipefail
storage=$1 owners=$2 checkout=$3 keep=$4
shift 4
ch_image=("$@")
((${#ch_image[@]})) || ch_image=(ch-image)
in_use() {  # a running process whose command line names the image's folder or its name
    local folder=$1 name=$2 cmdline
    for cmdline in /proc/[0-9]*/cmdline; do
        tr '\0' ' ' <"$cmdline" 2>/dev/null | grep -qF -e "$folder" -e "$name" && return 0
    done
    return 1
}
for old in "$storage"/img/hvdbench-cpu+*; do
    [[ -d "$old" ]] || continue
    key=${old##*+}
    [[ "$old" == "$storage/img/$keep" ]] && continue
    others=$(grep -vxF "$checkout" "$owners/$key" 2>/dev/null | head -n 1)
    if [[ ! -s "$owners/$key" || -n "$others" ]]; then
        echo "kept $old: used by ${others:-an unknown checkout}, not this one alone"
        continue
    fi
    if in_use "$old" "hvdbench-cpu:$key"; then
        echo "kept $old: a running process uses it"
        continue
    fi
    # its stamp of a finished build (scripts/container-image.sh) goes with it
    "${ch_image[@]}" delete "hvdbench-cpu:$key" && rm -f "$owners/$key" "${owners%/*}/built/${old##*/}" \
        && echo "deleted $old (this checkout's older image)"
done
exit 0
