# gpu-audit's Slurm hooks, shared part: sourced by slurm-prolog.sh, slurm-epilog.sh and
# slurm-healthcheck.sh from the folder they are installed in (install it beside them, root's,
# 0644):
#   install -m 0644 examples/gpu-audit-hook-lib.sh /etc/slurm/gpu-audit-hook-lib.sh
#
# slurmd starts a hook with no PATH and, for a prolog or epilog, only SLURM_* variables: so the
# settings come from one file the admin edits, ${GPU_AUDIT_DEFAULTS:-/etc/default/gpu-audit}
# (see examples/gpu-audit.default), read as KEY=VALUE lines, never run as shell code. Run as
# root, the file and its folder must be root's and writable by no one else (gpu-audit's trust
# rule); otherwise the hook refuses it and handles that as gpu-audit not running. A variable
# already in the hook's environment wins over the file (NHC's `env GPU_AUDIT_DRAIN=0 ...`).
#
# Every outcome but OK is logged through syslog (`logger -t gpu-audit`, or standard error where
# logger cannot write) and printed for slurmd's log; nothing is silent:
#   exit 0      OK: nothing logged, the hook exits 0
#   exit 2      a node problem: drained with gpu-audit's one-line reason, the hook exits 1
#   exit 3      no verdict (bad input, a missing spool, a hostile SLURM_* value, a deadline):
#               GPU_AUDIT_ON_UNKNOWN decides (default log-only)
#   any other   gpu-audit did not run (not found, exit 126/127, killed, a crash, over
#               GPU_AUDIT_HOOK_TIMEOUT): GPU_AUDIT_ON_ERROR decides (default drain)
# The choices: drain (drain the node with the reason, exit 1), fail-job (exit 1 only: a prolog
# or epilog that fails makes Slurm requeue the job and drain the node as "Prolog error" /
# "Epilog error"; NHC reads a health check's 1), log-only (exit 0).

# The system's folders, after the caller's absolute ones (bash's own default PATH, used when
# none is given, ends in "." : a root hook never looks up a command in its working folder).
ga_path() {
  local dir out=() IFS=:
  for dir in ${PATH:-} /usr/local/sbin /usr/local/bin /usr/sbin /usr/bin /sbin /bin; do
    [[ "$dir" == /* && ":${out[*]}:" != *":$dir:"* ]] && out+=("$dir")
  done
  printf '%s' "${out[*]}"
}
PATH="$(ga_path)"
export PATH
ga_reason_limit=200  # scontrol's reason, shown by `sinfo -R`: one short line

# ga_say TEXT: the hook's own output (slurmd's log; standard output for a health check, which
# NHC reads).
ga_say() {
  if [ "${ga_kind:-}" = healthcheck ]; then printf '%s\n' "$1"; else printf '%s\n' "$1" >&2; fi
}

# ga_log PRIORITY TEXT: syslog (tag gpu-audit) when its socket is there and takes the line,
# else standard error; and the hook's own output.
ga_log() {
  local sock="${GPU_AUDIT_LOG_SOCKET:-/dev/log}"
  if ! { [ -S "$sock" ] && command -v logger > /dev/null 2>&1 \
         && logger --socket-errors=on -u "$sock" -t gpu-audit -p "user.$1" -- "$2" \
              2> /dev/null; }; then
    [ "${ga_kind:-}" = healthcheck ] && printf 'gpu-audit: %s\n' "$2" >&2
  fi
  ga_say "gpu-audit: $2"
}

# ga_fit TEXT: one printable line of at most ga_reason_limit characters, cut between words
# with an ellipsis, never inside a number.
ga_fit() {
  local text
  text="$(printf '%s' "$1" | tr -c '[:print:]' ' ' | tr -s ' ')"
  if [ "${#text}" -gt "$ga_reason_limit" ]; then
    text="${text:0:$((ga_reason_limit - 4))}"
    text="${text% *} ..."
  fi
  printf '%s' "$text"
}

# ga_drain REASON: drain this node (unless GPU_AUDIT_DRAIN=0: the caller drains, as NHC does).
ga_drain() {
  local reason
  reason="$(ga_fit "$1")"
  [ "${GPU_AUDIT_DRAIN:-1}" = 0 ] && return 0
  if ! scontrol update NodeName="$ga_node" State=DRAIN Reason="$reason" 2> /dev/null; then
    ga_log err "$ga_kind on $ga_node: could not drain the node (scontrol failed): $reason"
  fi
}

# ga_act CHOICE_VARIABLE REASON: do what the admin chose for this outcome; exits.
ga_act() {
  local choice="${!1:-}" default=log-only
  [ "$1" = GPU_AUDIT_ON_ERROR ] && default=drain
  choice="${choice:-$default}"
  case "$choice" in
    log-only) exit 0 ;;
    fail-job) exit 1 ;;
    drain) ga_drain "$2"; exit 1 ;;
    *) ga_log err "$ga_kind on $ga_node: $1=$choice is not drain, log-only or fail-job: draining"
       ga_drain "$2"; exit 1 ;;
  esac
}

# ga_trusted FILE: may root read its settings from FILE? (root's, or this user's, and neither
# it nor its folder writable by group or others); prints why not.
ga_trusted() {
  local path owner mode
  for path in "$1" "$(dirname -- "$1")"; do
    read -r owner mode < <(stat -L -c '%u %a' -- "$path" 2> /dev/null) || {
      echo "$path cannot be read"; return 1; }
    if [ "$owner" != 0 ] && [ "$owner" != "$EUID" ]; then
      echo "$path is owned by uid $owner, not root"; return 1
    fi
    if (( 8#$mode & 8#022 )); then
      echo "$path is writable by others (mode $mode)"; return 1
    fi
  done
}

# ga_settings: export the GPU_AUDIT* keys of the settings file (the environment wins).
ga_settings() {
  local file="${GPU_AUDIT_DEFAULTS:-/etc/default/gpu-audit}" why line key value
  if [ ! -e "$file" ]; then
    [ -z "${GPU_AUDIT_DEFAULTS:-}" ] && return 0  # no file: the defaults
    ga_refused="settings file $file does not exist"; return 1
  fi
  if ! why="$(ga_trusted "$file")"; then
    ga_refused="settings file refused: $why"; return 1
  fi
  while IFS= read -r line || [ -n "$line" ]; do
    [[ "$line" =~ ^[[:space:]]*(export[[:space:]]+)?(GPU_AUDIT[A-Z0-9_]*)=(.*)$ ]] || continue
    key="${BASH_REMATCH[2]}" value="${BASH_REMATCH[3]}"
    value="${value%"${value##*[![:space:]]}"}"
    if [[ "$value" =~ ^\"(.*)\"$ || "$value" =~ ^\'(.*)\'$ ]]; then value="${BASH_REMATCH[1]}"; fi
    [ -n "${!key+set}" ] || export "$key=$value"
  done < "$file"
}

# ga_hook KIND: run `gpu-audit check --slurm KIND` and act on its answer; exits.
ga_hook() {
  ga_kind="$1"
  ga_node="${SLURMD_NODENAME:-$(hostname -s)}"
  # slurmd starts a prolog in the job's working folder: a configuration file the user put
  # there (pyproject.toml, gpu-audit.toml) must not set the policy of root's hook.
  cd / || exit 1
  local job="${SLURM_JOB_ID:-none}" cmd out rc args=(check --slurm "$1")
  if ! ga_settings; then
    ga_log err "$ga_kind on $ga_node, job $job: $ga_refused"
    ga_act GPU_AUDIT_ON_ERROR "gpu-audit: $ga_kind not run: $ga_refused"
  fi
  cmd="${GPU_AUDIT:-gpu-audit}"
  if [ "$1" != healthcheck ] && [ -n "${GPU_AUDIT_SPOOL:-}" ]; then
    args+=(--spool "$GPU_AUDIT_SPOOL")
  fi
  [ -n "${GPU_AUDIT_POLICY:-}" ] && args+=(--policy "$GPU_AUDIT_POLICY")
  if ! command -v -- "$cmd" > /dev/null 2>&1; then
    out="$cmd: not found (set GPU_AUDIT in ${GPU_AUDIT_DEFAULTS:-/etc/default/gpu-audit})"
    rc=127
  else
    out="$(timeout -k 5 "${GPU_AUDIT_HOOK_TIMEOUT:-90}" "$cmd" "${args[@]}" 2>&1)"
    rc=$?
    out="$(printf '%s\n' "$out" | sed '/^[[:space:]]*$/d' | tail -n 1)"
  fi
  local where="$ga_kind on $ga_node, job $job"
  case "$rc" in
    0) exit 0 ;;
    2)
      ga_log warning "$where: draining: $out"
      ga_drain "$out"
      exit 1 ;;
    3)
      ga_log warning "$where: no verdict (exit 3), ${GPU_AUDIT_ON_UNKNOWN:-log-only}: $out"
      ga_act GPU_AUDIT_ON_UNKNOWN "gpu-audit: $ga_kind gave no verdict (exit 3): $out" ;;
    *)
      ga_log err "$where: gpu-audit did not run (exit $rc), ${GPU_AUDIT_ON_ERROR:-drain}: $out"
      ga_act GPU_AUDIT_ON_ERROR "gpu-audit: $ga_kind: gpu-audit did not run (exit $rc): $out" ;;
  esac
}
