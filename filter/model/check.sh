#!/bin/sh
# Checks the filter's Promela model exhaustively with spin (the 'model' suite).
#   check.sh ok|violation [spin -D options...]
# ok:        the search must be complete with no error of any kind (assertion
#            violation, invalid end state, search depth too small).
# violation: the model is a mutation; spin must report an assertion violation.
set -u
expect=$1
shift
here=$(cd "$(dirname "$0")" && pwd)
spin=${SPIN:-spin}
cc=${CC:-gcc}
command -v "$spin" >/dev/null 2>&1 || { echo "check.sh: spin not found (scripts/install-deps.sh installs it)"; exit 1; }
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cp "$here/filter.pml" "$work/" && cd "$work" || exit 1
echo "model: spin $* ($expect)"
"$spin" "$@" -a filter.pml > spin.log 2>&1 || { cat spin.log; echo "check.sh: spin -a failed"; exit 1; }
# SAFETY: assertions and invalid end states only; COLLAPSE: state compression.
"$cc" -O1 -DSAFETY -DCOLLAPSE -o pan pan.c > cc.log 2>&1 || { cat cc.log; echo "check.sh: compiling pan failed"; exit 1; }
./pan -m100000 > pan.out 2>&1
grep -E 'errors:|states, stored|assertion violated|invalid end state|max search depth|elapsed' pan.out
errors=$(sed -n 's/.*errors: \([0-9][0-9]*\).*/\1/p' pan.out)
[ -n "$errors" ] || { cat pan.out; echo "check.sh: no result from pan"; exit 1; }
case $expect in
  ok)
    if [ "$errors" -ne 0 ] || grep -q 'max search depth too small' pan.out; then
      [ -f filter.pml.trail ] && "$spin" -t -p filter.pml | tail -40
      echo "check.sh: the model has an error (above)"
      exit 1
    fi
    ;;
  violation)
    if [ "$errors" -eq 0 ] || ! grep -q 'assertion violated' pan.out; then
      echo "check.sh: the mutation was not caught: spin found no assertion violation"
      exit 1
    fi
    echo "check.sh: the mutation is caught, as it must be"
    ;;
  *) echo "check.sh: expect ok or violation"; exit 1 ;;
esac
exit 0
