#!/bin/sh
# threads.sh PID NAME...: waits until process PID has a thread named the
# first NAME that has set its scheduling policy (which rtscope's measuring
# threads do right after pinning themselves: before that, a thread just
# started still has the affinity it inherited), then prints "NAME CPUS"
# for each thread of PID named one of the NAMEs, CPUS its allowed CPUs
# (Cpus_allowed_list); exits 1 if PID ends first. Shell builtins only:
# under emulation a fork costs milliseconds.
pid=$1
shift
# policy DIR: the thread's scheduling policy (stat's field 41) into $p.
policy() {
    p=0
    read -r l 2>/dev/null <"$1/stat" || return
    # shellcheck disable=SC2086 # the fields after the name, split
    set -- ${l##*) }
    shift 38
    p=$1
}
while [ -d "/proc/$pid" ]; do
    found=""
    for name in "$@"; do
        for t in "/proc/$pid"/task/*; do
            read -r c 2>/dev/null <"$t/comm" || continue
            [ "$c" = "$name" ] || continue
            if [ "$name" = "$1" ]; then
                policy "$t"
                [ "$p" != 0 ] || continue
            fi
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
