#!/bin/sh
# threads.sh PID NAME...: waits until process PID has a thread named the
# first NAME, then prints "NAME CPUS" for each thread of PID named one of
# the NAMEs, CPUS its allowed CPUs (Cpus_allowed_list); exits 1 if PID
# ends first. Shell builtins only: under emulation a fork costs
# milliseconds.
pid=$1
shift
while [ -d "/proc/$pid" ]; do
    found=""
    for name in "$@"; do
        for t in "/proc/$pid"/task/*; do
            read -r c 2>/dev/null <"$t/comm" || continue
            [ "$c" = "$name" ] || continue
            while read -r k v; do
                [ "$k" = Cpus_allowed_list: ] && found="$found$name $v
"
            done <"$t/status"
        done
    done
    case "$found" in "$1 "*)
        printf %s "$found"
        exit 0
        ;;
    esac
done
exit 1
