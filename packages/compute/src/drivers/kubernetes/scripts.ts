// The shell programs the driver runs inside sandbox pods through pods/exec.
// They need a POSIX sh plus coreutils (realpath -m, stat -c, tail, head -z,
// setsid) and GNU find (-printf), as in Debian/Ubuntu-based images.
// Arguments travel as argv (never interpolated into the script), so paths
// and env values need no quoting.

/** Per-exec state (pid, memory samples, CPU times) lives in the pod's /tmp. */
export const STATE_DIR = "/tmp/.platform-exec";
/** Tag of the usage record the RUN wrapper writes last on stderr. */
export const USAGE_TAG = "PLATFORM_EXEC_USAGE_";

/**
 * Runs one user command: `sh -c RUN sh <id> <workdir> <n> K=V... cmd args...`.
 * The command runs as the leader of its own session (setsid), so a later
 * exec can signal everything it started; it writes its pid to <id>.pid
 * before it runs the command (so before any output). A
 * background sampler records the command's VmHWM (peak RSS) every 100 ms;
 * after it ends, `times` gives the CPU time of the waited-for tree. The
 * wrapper's last output is one usage record on stderr, NUL-delimited and
 * tagged with the exec id (see usage-record.ts), which the driver strips
 * from the stream. The exit status is the command's (128+n for signal n).
 */
export const RUN = `set -u
d=${STATE_DIR}; id=$1; wd=$2; n=$3; shift 3
while [ "$n" -gt 0 ]; do export "$1"; shift; n=$((n-1)); done
mkdir -p "$d" 2>/dev/null
cd -- "$wd" || exit 1
oom() { sed -n 's/^oom_kill //p' /sys/fs/cgroup/memory.events 2>/dev/null || true; }
o1=$(oom)
# The command's own process writes the pid file before it becomes the command: a cancel that
# follows the first output always finds it (written by this shell after "&", it could come late).
pidfile='echo $$ > "$0"; exec "$@"'
if command -v setsid >/dev/null 2>&1; then setsid sh -c "$pidfile" "$d/$id.pid" "$@" & else sh -c "$pidfile" "$d/$id.pid" "$@" & fi
pid=$!
( while kill -0 "$pid" 2>/dev/null; do
    h=$(sed -n 's/^VmHWM:[^0-9]*\\([0-9]*\\).*/\\1/p' "/proc/$pid/status" 2>/dev/null)
    [ -n "$h" ] && echo "$h" >> "$d/$id.mem"
    sleep 0.1
  done ) </dev/null >/dev/null 2>&1 &
sampler=$!
wait "$pid"; code=$?
kill "$sampler" 2>/dev/null
o2=$(oom)
# Samples are appended (a sampler killed mid-write leaves at most one torn line); keep the largest.
mem=0; if [ -r "$d/$id.mem" ]; then while read -r v; do [ "$v" -gt "$mem" ] 2>/dev/null && mem=$v; done < "$d/$id.mem"; fi
times > "$d/$id.times"; { read -r _; read -r cpu; } < "$d/$id.times"
rm -f "$d/$id.pid" "$d/$id.mem" "$d/$id.times"
printf '\\000${USAGE_TAG}%s %s %s %s %s\\000' "$id" "\${mem:-0}" "\${o1:-0}" "\${o2:-0}" "\${cpu:-}" >&2
exit "$code"
`;

/**
 * Signals every process of an exec's session: `sh -c KILL sh <id> <TERM|KILL>`.
 * The process group first, in one kill(2), so a tree that is still forking
 * cannot outrun it; then a scan of /proc for the session's members that moved
 * to a group of their own (sessions survive re-parenting, so background and
 * double-forked children are found too). Only a process that calls setsid
 * itself escapes (it dies with the pod).
 */
export const KILL = `d=${STATE_DIR}; sig=$2
pid=$(cat "$d/$1.pid" 2>/dev/null) || exit 0
# No "--" before the group: dash, Debian's /bin/sh, refuses "kill -SIG -- -pgid" as an illegal number.
kill -"$sig" -"$pid" 2>/dev/null
for f in /proc/[0-9]*/stat; do
  line=$(cat "$f" 2>/dev/null) || continue
  rest=\${line##*) }
  set -- $rest
  if [ "\${4:-}" = "$pid" ]; then p=\${f#/proc/}; kill -"$sig" "\${p%/stat}" 2>/dev/null; fi
done
exit 0
`;

/**
 * File operations: `sh -c FILES sh <op> <mount> <rel> [args]`.
 * Path rule 2: the path is resolved inside the pod with realpath -m (every
 * symlink on the way, including the last) and must stay inside the mount;
 * the operation then uses the resolved path. Exit codes: 2 not found,
 * 13 outside the mount, 20 not a directory, 21 is a directory.
 */
export const FILES = `set -u
op=$1; m=$2; rel=$3; shift 3
p="$m\${rel:+/$rel}"
r=$(realpath -m -- "$p") || exit 1
case "$r" in "$m"|"$m"/*) ;; *) echo "outside" >&2; exit 13;; esac
case "$op" in
read)
  [ -e "$r" ] || exit 2
  [ -d "$r" ] && exit 21
  size=$(stat -c %s -- "$r") || exit 1
  printf '%s\\n' "$size"
  [ "$1" -lt "$size" ] || exit 0
  tail -c +"$(($1 + 1))" -- "$r" | head -c "$2"
  ;;
write)
  [ -d "$r" ] && exit 21
  mkdir -p -- "\${r%/*}" || exit 1
  if [ -e "$r" ]; then created=0; else created=1; fi
  if [ "$1" = 1 ]; then cat >> "$r" || exit 1; else cat > "$r" || exit 1; fi
  if [ "$created" = 1 ]; then chmod "$2" -- "$r" || exit 1; fi
  ;;
list)
  [ -e "$r" ] || exit 2
  [ -d "$r" ] || exit 20
  if [ "$1" = 1 ]; then
    find "$r" -mindepth 1 -printf '%P\\0%s\\0%y\\0%m\\0%T@\\0' | head -z -n "$((5 * ($2 + 1)))"
  else
    find "$r" -mindepth 1 -maxdepth 1 -printf '%P\\0%s\\0%y\\0%m\\0%T@\\0' | head -z -n "$((5 * ($2 + 1)))"
  fi
  ;;
*) exit 64;;
esac
`;

/**
 * The container's own cumulative counters, from its cgroup (v2 with a
 * private cgroup namespace, the containerd default; v1 paths as fallback):
 * sections "cpu", "mem", "io" separated by marker lines. Empty sections
 * when the cgroup files are not visible.
 */
export const CONTAINER_USAGE = `c=/sys/fs/cgroup
echo "#cpu"
if [ -r $c/cpu.stat ]; then sed -n 's/^usage_usec //p' $c/cpu.stat; elif [ -r $c/cpuacct/cpuacct.usage ]; then echo "$(( $(cat $c/cpuacct/cpuacct.usage) / 1000 ))"; fi
echo "#mem"
if [ -r $c/memory.peak ]; then cat $c/memory.peak; elif [ -r $c/memory/memory.max_usage_in_bytes ]; then cat $c/memory/memory.max_usage_in_bytes; fi
echo "#io"
if [ -r $c/io.stat ]; then cat $c/io.stat; fi
exit 0
`;
