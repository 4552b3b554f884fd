# Airlock bash code context driver. The agent starts bash with a bootstrap
# that reads this source from fd 0 up to a NUL byte and evals it.
#
# Protocol (docs/AGENT_PROTOCOL.md, "Code contexts"): the control socket
# moves to fd 3. Each run is three NUL-terminated strings: shell code that
# applies the run's environment, the user's code, and shell code that
# restores the environment. The driver answers {"type":"ready"} once and
# {"type":"end","status":N} after each run; output goes to fds 1 and 2.
#
# The user's code is sourced, not evaluated in a function, so variables,
# functions, declare'd names and the working directory persist. SIGINT
# makes the sourced code return (the trap's `return`), ending the run but
# not the shell; the trap is set again before every run because bash does
# not always restore its SIGINT handling after a trap returned from a
# foreground wait. Between runs SIGINT is ignored.
exec 3<&0 0</dev/null
trap '' INT
unset __airlock_driver
printf '{"type":"ready","pid":%d}\n' "$$" >&3
while IFS= read -r -d '' __airlock_pre <&3 &&
	IFS= read -r -d '' __airlock_code <&3 &&
	IFS= read -r -d '' __airlock_post <&3; do
	eval "$__airlock_pre"
	trap 'return 130 2>/dev/null' INT
	. /dev/fd/4 4<<<"$__airlock_code" 3<&-
	__airlock_status=$?
	trap '' INT
	eval "$__airlock_post"
	printf '{"type":"end","status":%d}\n' "$__airlock_status" >&3
done
exit 0
