#!/bin/bash
# neutralise.sh <incident-dir> <venv> <flink-home> <flink-lab> : what lib.sh's collect leaves of this machine's paths
# in a PyFlink run (the client logs the Python driver's whole environment): the virtualenv, the distribution reached
# through a symbolic link, the recorder's home and working folder.
dir=$1; venv=$2; fh=$3; lab=$4
args=(-e "s#$venv#/opt/pyflink-venv#g")
[ "$(readlink -f "$fh")" != "$fh" ] && args+=(-e "s#$(readlink -f "$fh")#/opt/flink#g")
[ "$(readlink -f "$lab")" != "$lab" ] && args+=(-e "s#$(readlink -f "$lab")#/opt#g")
args+=(-e "s#$PWD#/home/flink#g" -e "s#$HOME/#/home/flink/#g" -e "s#$HOME\b#/home/flink#g")
grep -rlE "$venv|$HOME|$PWD|$(readlink -f "$fh")|$(readlink -f "$lab")" "$dir" | xargs -r sed -i "${args[@]}"
