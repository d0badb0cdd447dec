# timebox.sh: sourced by the device scripts (gpu2_check.sh, dp_scaling.sh, table_gpu_check.sh), which must end within
# one device call: BUDGET seconds in all, counted by bash's SECONDS, and a summary file S.
#   say TEXT...      prints TEXT and appends it to $S
#   left             the seconds left of BUDGET
#   t LIMIT CMD...   CMD under timeout min(LIMIT, time left - 5): 124 when it ran out, 125 (and a line saying so)
#                    when there was no time left to start it
say() { echo "$*" | tee -a "$S"; }
left() { echo $((BUDGET - SECONDS)); }
t() {
  local lim=$1; shift
  local l=$(($(left) - 5))
  [ "$lim" -gt "$l" ] && lim=$l
  [ "$lim" -lt 5 ] && { echo "(skipped: no time left for: $*)"; return 125; }
  timeout -k 5 "$lim" "$@"
}
